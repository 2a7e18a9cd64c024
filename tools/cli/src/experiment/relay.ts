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
 * Bounds: at most `maxQueued` datagrams and `maxQueuedOctets` held, from arrival until the socket has
 * sent them (more are dropped and counted); at most `maxPeers` UDP sources, or TCP connections (more are
 * refused and counted). A TCP direction stops reading while `maxBufferedOctets` wait in it, held for
 * their delay or not yet taken by the receiving socket (a receiver that does not read holds the sender).
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
  /** UDP: most datagrams held at once. */
  readonly maxQueued?: number;
  /** UDP: most octets of datagrams held at once. */
  readonly maxQueuedOctets?: number;
  /** UDP sources, or TCP connections, relayed at once. */
  readonly maxPeers?: number;
  /** TCP: most octets waiting per direction before it stops reading. */
  readonly maxBufferedOctets?: number;
}

export interface RelayStats {
  forwarded: number;
  reordered: number;
  /** Datagrams dropped because `maxQueued` datagrams or `maxQueuedOctets` were held already. */
  overflow: number;
  /** UDP sources or TCP connections refused beyond `maxPeers`. */
  refusedPeers: number;
  /** UDP: most datagrams, and octets, held at once. */
  peakQueued: number;
  peakQueuedOctets: number;
  /** TCP: times a direction stopped reading at `maxBufferedOctets`, and the most octets one held. */
  paused: number;
  peakBufferedOctets: number;
}

export const RELAY_DEFAULTS = {
  maxQueued: 100_000,
  maxQueuedOctets: 64 << 20,
  maxPeers: 256,
  maxBufferedOctets: 16 << 20,
} as const;

const newStats = (): RelayStats => ({
  forwarded: 0,
  reordered: 0,
  overflow: 0,
  refusedPeers: 0,
  peakQueued: 0,
  peakQueuedOctets: 0,
  paused: 0,
  peakBufferedOctets: 0,
});

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
  const stats = newStats();
  const maxQueued = spec.maxQueued ?? RELAY_DEFAULTS.maxQueued;
  const maxQueuedOctets = spec.maxQueuedOctets ?? RELAY_DEFAULTS.maxQueuedOctets;
  const maxPeers = spec.maxPeers ?? RELAY_DEFAULTS.maxPeers;
  let queued = 0;
  let queuedOctets = 0;
  const timers = new Set<NodeJS.Timeout>();
  /** Holds `msg` for its delay, then `send`s it; counted as held until the socket reports it sent. */
  const hold = (msg: Buffer, send: (m: Buffer, done: () => void) => void) => {
    if (queued >= maxQueued || queuedOctets + msg.length > maxQueuedOctets) {
      stats.overflow++;
      return;
    }
    queued++;
    queuedOctets += msg.length;
    stats.peakQueued = Math.max(stats.peakQueued, queued);
    stats.peakQueuedOctets = Math.max(stats.peakQueuedOctets, queuedOctets);
    const out = () => {
      stats.forwarded++;
      send(msg, () => {
        queued--;
        queuedOctets -= msg.length;
      });
    };
    let ms = spec.delayMs + random() * spec.jitterMs;
    if (spec.reorder > 0 && random() < spec.reorder) {
      ms += reorderGapMs(spec);
      stats.reordered++;
    }
    if (ms <= 0) {
      out();
      return;
    }
    const t = setTimeout(() => {
      timers.delete(t);
      out();
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
      sock.on('message', (back) => hold(back, (m, done) => front.send(m, from.port, from.address, done)));
      sock.on('error', () => {});
      sock.bind(0, spec.upstreamHost);
      peers.set(key, sock);
      up = sock;
    }
    const u = up;
    hold(msg, (m, done) => u.send(m, spec.upstreamPort, spec.upstreamHost, done));
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
  const stats = newStats();
  const limit = spec.maxBufferedOctets ?? RELAY_DEFAULTS.maxBufferedOctets;
  const maxPeers = spec.maxPeers ?? RELAY_DEFAULTS.maxPeers;
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const pipe = (from: net.Socket, to: net.Socket) => {
    let last = 0;
    // Octets read from `from` and not yet handed to the kernel by `to`: held for their delay, then in
    // `to`'s write queue while its receiver does not read.
    let buffered = 0;
    from.on('data', (chunk: Buffer) => {
      // Order kept: a chunk leaves no earlier than the one before it.
      const due = Math.max(last, Date.now() + spec.delayMs + random() * spec.jitterMs);
      last = due;
      buffered += chunk.length;
      stats.peakBufferedOctets = Math.max(stats.peakBufferedOctets, buffered);
      if (buffered > limit && !from.isPaused()) {
        from.pause();
        stats.paused++;
      }
      setTimeout(
        () => {
          const flushed = () => {
            buffered -= chunk.length;
            if (buffered <= limit && from.isPaused()) from.resume();
          };
          stats.forwarded++;
          if (to.destroyed) flushed();
          else to.write(chunk, flushed);
        },
        Math.max(0, due - Date.now()),
      );
    });
    from.on('end', () => setTimeout(() => to.end(), Math.max(0, last - Date.now())));
    from.on('error', () => to.destroy());
    from.on('close', () => setTimeout(() => to.destroy(), Math.max(0, last - Date.now()) + 10));
  };
  const server = net.createServer((down) => {
    if (connections >= maxPeers) {
      stats.refusedPeers++;
      down.destroy();
      return;
    }
    // A connection is two sockets, down (accepted) and up (to the upstream); its place frees when both close.
    connections++;
    let open = 2;
    down.setNoDelay(true);
    const up = net.connect({ host: spec.upstreamHost, port: spec.upstreamPort });
    up.setNoDelay(true);
    for (const s of [down, up]) {
      sockets.add(s);
      s.once('close', () => {
        sockets.delete(s);
        if (--open === 0) connections--;
      });
    }
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
