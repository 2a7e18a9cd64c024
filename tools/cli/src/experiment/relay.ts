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
 * TUN (any IP traffic, packet by packet, like netem): one TUN device in each namespace, made beforehand
 * (`ip tuntap add dev NAME mode tun`, addressed point-to-point to the other side); the relay reads each IP
 * packet from one device and writes it to the other after delay + U(0, jitter) ms, so TCP and SCTP see the
 * delay in their own round trip. A direction keeps its order (a packet leaves no earlier than the one read
 * before it) except for the `reorder` share, held `reorderGapMs` longer apart from the rest, which later
 * packets overtake. Reading runs on the event loop (`watchTun` of @rddp/writev: a poll handle, no thread-
 * pool read), writing is one synchronous write(2) per packet; `LISTENING 0` once both devices are open.
 *
 * Bounds: at most `maxQueued` datagrams and `maxQueuedOctets` held, from arrival until the socket has
 * sent them (more are dropped and counted); at most `maxPeers` UDP sources, or TCP connections (more are
 * refused and counted). A TCP direction stops reading while `maxBufferedOctets` wait in it, held for
 * their delay or not yet taken by the receiving socket (a receiver that does not read holds the sender).
 * TUN: `maxQueued` packets and `maxQueuedOctets` held, both directions together; more are dropped, counted.
 */
import dgram from 'node:dgram';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { seededRandom } from './rng.js';

/** What every relay takes: the impairment and the bounds of what it holds. */
interface RelayTiming {
  readonly delayMs: number;
  readonly jitterMs: number;
  /** Probability (0..1) that a datagram (a packet, for TUN) is held back behind later ones (not TCP). */
  readonly reorder: number;
  readonly seed: number;
  /** UDP and TUN: most datagrams (packets) held at once. */
  readonly maxQueued?: number;
  /** UDP and TUN: most octets of datagrams (packets) held at once. */
  readonly maxQueuedOctets?: number;
}

/** A TUN device made beforehand (`ip -n NETNS tuntap add dev NAME mode tun`) in namespace `netns`. */
export interface TunEnd {
  /** The device's name, 1..15 octets. */
  readonly name: string;
  /** The network namespace's name (`ip netns`): the device is opened through `/run/netns/<netns>`. */
  readonly netns: string;
}

/** The packet relay between two TUN devices (one per namespace), both directions. */
export interface TunRelaySpec extends RelayTiming {
  readonly proto: 'tun';
  readonly tunA: TunEnd;
  readonly tunB: TunEnd;
}

export type RelaySpec = SocketRelaySpec | TunRelaySpec;

/** The socket relays: UDP datagrams, or TCP connections, from listen* to upstream*. */
export interface SocketRelaySpec extends RelayTiming {
  readonly proto: 'udp' | 'tcp';
  readonly listenHost: string;
  readonly listenPort: number;
  readonly upstreamHost: string;
  readonly upstreamPort: number;
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
  /** TUN: packets a device refused to take (write(2) failed), and the descriptors' read errors. */
  writeErrors?: number;
  readErrors?: number;
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
  /** The port listened on; 0 for TUN. */
  readonly port: number;
  readonly stats: RelayStats;
  close(): Promise<void>;
}

/** Extra hold of a reordered datagram beyond its delay. */
function reorderGapMs(spec: RelayTiming): number {
  return Math.max(1, spec.jitterMs, spec.delayMs / 2);
}

export async function startRelay(spec: RelaySpec): Promise<Relay> {
  if (spec.proto === 'tun') return tunRelay(spec);
  return spec.proto === 'udp' ? udpRelay(spec) : tcpRelay(spec);
}

async function udpRelay(spec: SocketRelaySpec): Promise<Relay> {
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

async function tcpRelay(spec: SocketRelaySpec): Promise<Relay> {
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

interface TunBinding {
  openTun(name: string, netnsPath?: string): number;
  watchTun(fd: number, onPacket: (packet: Buffer) => void, onError: (e: NodeJS.ErrnoException) => void): () => void;
}

function tunBinding(): TunBinding {
  try {
    return createRequire(import.meta.url)('@rddp/writev') as TunBinding;
  } catch (e) {
    throw new Error(`the TUN relay needs @rddp/writev's native build: ${(e as Error).message.split('\n')[0]}`);
  }
}

/** A packet held in a direction's queue, and when it may leave (performance.now() ms). */
interface Held {
  readonly packet: Buffer;
  readonly due: number;
}

async function tunRelay(spec: TunRelaySpec): Promise<Relay> {
  const tun = tunBinding();
  const random = seededRandom(spec.seed);
  const stats: RelayStats = { ...newStats(), writeErrors: 0, readErrors: 0 };
  const maxQueued = spec.maxQueued ?? RELAY_DEFAULTS.maxQueued;
  const maxQueuedOctets = spec.maxQueuedOctets ?? RELAY_DEFAULTS.maxQueuedOctets;
  const gap = reorderGapMs(spec);
  const fds: number[] = [];
  try {
    for (const end of [spec.tunA, spec.tunB]) fds.push(tun.openTun(end.name, `/run/netns/${end.netns}`));
  } catch (e) {
    for (const fd of fds) fs.closeSync(fd);
    throw e;
  }
  const [fdA, fdB] = fds as [number, number];
  let closed = false;
  let queued = 0;
  let queuedOctets = 0;
  const write = (fd: number, packet: Buffer) => {
    queued--;
    queuedOctets -= packet.length;
    try {
      fs.writeSync(fd, packet);
      stats.forwarded++;
    } catch {
      (stats.writeErrors as number)++;
    }
  };
  const lateTimers = new Set<NodeJS.Timeout>();
  /** One direction: packets read from `from`, written to `to` in the order read (but the reordered ones). */
  const direction = (to: number) => {
    // A FIFO of packets whose due times never decrease; `head` is the next to leave.
    let queue: Held[] = [];
    let head = 0;
    let lastDue = 0;
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      if (closed) return;
      const now = performance.now();
      while (head < queue.length) {
        const h = queue[head] as Held;
        if (h.due > now) break;
        queue[head++] = undefined as unknown as Held;
        write(to, h.packet);
      }
      if (head === queue.length) {
        queue = [];
        head = 0;
      } else {
        if (head >= 1024 && head * 2 >= queue.length) {
          queue = queue.slice(head);
          head = 0;
        }
        arm();
      }
    };
    // setTimeout counts whole ms from the loop's idea of now and may fire early: drain checks the time.
    const arm = () => {
      const h = queue[head] as Held;
      timer = setTimeout(drain, Math.max(1, Math.ceil(h.due - performance.now())));
    };
    return {
      /** The timer armed for the head of the queue, if any. */
      pending: () => timer,
      onPacket(packet: Buffer) {
        if (closed) return;
        if (queued >= maxQueued || queuedOctets + packet.length > maxQueuedOctets) {
          stats.overflow++;
          return;
        }
        queued++;
        queuedOctets += packet.length;
        if (queued > stats.peakQueued) stats.peakQueued = queued;
        if (queuedOctets > stats.peakQueuedOctets) stats.peakQueuedOctets = queuedOctets;
        const now = performance.now();
        const due = now + spec.delayMs + random() * spec.jitterMs;
        if (spec.reorder > 0 && random() < spec.reorder) {
          // Apart from the FIFO: what is read after it leaves before it.
          stats.reordered++;
          const t = setTimeout(
            () => {
              lateTimers.delete(t);
              if (!closed) write(to, packet);
            },
            Math.max(1, Math.ceil(due + gap - now)),
          );
          lateTimers.add(t);
          return;
        }
        lastDue = Math.max(lastDue, due);
        if (head === queue.length && lastDue <= now) {
          write(to, packet);
          return;
        }
        queue.push({ packet, due: lastDue });
        if (!timer) arm();
      },
    };
  };
  const aToB = direction(fdB);
  const bToA = direction(fdA);
  const onError = (e: NodeJS.ErrnoException) => {
    (stats.readErrors as number)++;
    if (!closed) console.error(`relay: reading a TUN device: ${e.message}`);
  };
  const stops: (() => void)[] = [];
  try {
    stops.push(tun.watchTun(fdA, aToB.onPacket, onError));
    stops.push(tun.watchTun(fdB, bToA.onPacket, onError));
  } catch (e) {
    for (const stop of stops) stop();
    for (const fd of fds) fs.closeSync(fd);
    throw e;
  }
  return {
    port: 0,
    stats,
    close: async () => {
      if (closed) return;
      closed = true;
      for (const stop of stops) stop();
      for (const d of [aToB, bToA]) clearTimeout(d.pending());
      for (const t of lateTimers) clearTimeout(t);
      for (const fd of fds) fs.closeSync(fd);
    },
  };
}
