/**
 * The user-space impairment relay, for what this kernel cannot do (no netem): delay, jitter and
 * reordering. It runs in the responder's namespace between the veth and the responder.
 *
 * UDP (SCTP's UDP encapsulation, RFC 6951; the UDP LLP): every datagram is held for delay + U(0, jitter)
 * ms; with probability `reorder` it is held `reorderGapMs` longer, so later datagrams overtake it. Each
 * source (address, port) gets its own upstream socket, so N associations stay N flows of datagrams.
 *
 * TCP (MPA): a byte stream cannot be reordered; each chunk read is held for delay + U(0, jitter) ms but
 * never passes the chunk before it. TCP's own loss recovery runs on the veth leg, whose round trip does
 * not include this delay (docs/EXPERIMENTS.md "Limits").
 *
 * Bounds: at most `maxQueued` datagrams held (more are dropped and counted), at most `maxPeers` UDP
 * sources, and a TCP direction stops reading while `maxBufferedOctets` wait in it.
 */
import dgram from 'node:dgram';
import { once } from 'node:events';
import net from 'node:net';
import { seededRandom } from './rng.js';

export interface RelaySpec {
  readonly proto: 'udp' | 'tcp';
  readonly listenHost: string;
  readonly listenPort: number;
  readonly upstreamHost: string;
  readonly upstreamPort: number;
  readonly delayMs: number;
  readonly jitterMs: number;
  /** Probability (0..1) that a datagram is held back behind later ones (UDP only). */
  readonly reorder: number;
  readonly seed: number;
  readonly maxQueued?: number;
  readonly maxPeers?: number;
  readonly maxBufferedOctets?: number;
}

export interface RelayStats {
  forwarded: number;
  reordered: number;
  /** Datagrams dropped because `maxQueued` were held already. */
  overflow: number;
  /** UDP sources refused beyond `maxPeers`. */
  refusedPeers: number;
}

export const RELAY_DEFAULTS = { maxQueued: 100_000, maxPeers: 256, maxBufferedOctets: 16 << 20 } as const;

export interface Relay {
  readonly port: number;
  readonly stats: RelayStats;
  close(): Promise<void>;
}

/** Extra hold of a reordered datagram beyond its delay. */
function reorderGapMs(spec: RelaySpec): number {
  return Math.max(1, spec.jitterMs, spec.delayMs / 2);
}

export async function startRelay(spec: RelaySpec): Promise<Relay> {
  return spec.proto === 'udp' ? udpRelay(spec) : tcpRelay(spec);
}

async function udpRelay(spec: RelaySpec): Promise<Relay> {
  const random = seededRandom(spec.seed);
  const stats: RelayStats = { forwarded: 0, reordered: 0, overflow: 0, refusedPeers: 0 };
  const maxQueued = spec.maxQueued ?? RELAY_DEFAULTS.maxQueued;
  const maxPeers = spec.maxPeers ?? RELAY_DEFAULTS.maxPeers;
  let queued = 0;
  const timers = new Set<NodeJS.Timeout>();
  const hold = (send: () => void) => {
    if (queued >= maxQueued) {
      stats.overflow++;
      return;
    }
    let ms = spec.delayMs + random() * spec.jitterMs;
    if (spec.reorder > 0 && random() < spec.reorder) {
      ms += reorderGapMs(spec);
      stats.reordered++;
    }
    if (ms <= 0) {
      stats.forwarded++;
      send();
      return;
    }
    queued++;
    const t = setTimeout(() => {
      timers.delete(t);
      queued--;
      stats.forwarded++;
      send();
    }, ms);
    timers.add(t);
  };
  const front = dgram.createSocket('udp4');
  const peers = new Map<string, dgram.Socket>();
  front.on('message', (msg, from) => {
    const key = `${from.address}:${from.port}`;
    let up = peers.get(key);
    if (!up) {
      if (peers.size >= maxPeers) {
        stats.refusedPeers++;
        return;
      }
      const sock = dgram.createSocket('udp4');
      sock.on('message', (back) => hold(() => front.send(back, from.port, from.address)));
      sock.on('error', () => {});
      sock.bind(0, spec.upstreamHost);
      peers.set(key, sock);
      up = sock;
    }
    const u = up;
    hold(() => u.send(msg, spec.upstreamPort, spec.upstreamHost));
  });
  front.on('error', () => {});
  front.bind(spec.listenPort, spec.listenHost);
  await once(front, 'listening');
  return {
    port: front.address().port,
    stats,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of peers.values()) s.close();
      front.close();
    },
  };
}

async function tcpRelay(spec: RelaySpec): Promise<Relay> {
  const random = seededRandom(spec.seed);
  const stats: RelayStats = { forwarded: 0, reordered: 0, overflow: 0, refusedPeers: 0 };
  const limit = spec.maxBufferedOctets ?? RELAY_DEFAULTS.maxBufferedOctets;
  const sockets = new Set<net.Socket>();
  const pipe = (from: net.Socket, to: net.Socket) => {
    let last = 0;
    let buffered = 0;
    from.on('data', (chunk: Buffer) => {
      // Order kept: a chunk leaves no earlier than the one before it.
      const due = Math.max(last, Date.now() + spec.delayMs + random() * spec.jitterMs);
      last = due;
      buffered += chunk.length;
      if (buffered > limit) from.pause();
      setTimeout(
        () => {
          buffered -= chunk.length;
          if (buffered <= limit) from.resume();
          stats.forwarded++;
          if (!to.destroyed) to.write(chunk);
        },
        Math.max(0, due - Date.now()),
      );
    });
    from.on('end', () => setTimeout(() => to.end(), Math.max(0, last - Date.now())));
    from.on('error', () => to.destroy());
    from.on('close', () => setTimeout(() => to.destroy(), Math.max(0, last - Date.now()) + 10));
  };
  const server = net.createServer((down) => {
    down.setNoDelay(true);
    const up = net.connect({ host: spec.upstreamHost, port: spec.upstreamPort });
    up.setNoDelay(true);
    sockets.add(down).add(up);
    pipe(down, up);
    pipe(up, down);
  });
  server.listen(spec.listenPort, spec.listenHost);
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    stats,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
