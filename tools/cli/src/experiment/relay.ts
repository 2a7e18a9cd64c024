/**
 * The user-space impairment relay, for what this kernel cannot do (no netem): delay, jitter and
 * reordering, packet by packet, like netem. One TUN device in each namespace, made beforehand
 * (`ip tuntap add dev NAME mode tun`, addressed point-to-point to the other side); the relay reads each IP
 * packet from one device and writes it to the other after delay + U(0, jitter) ms, so TCP and SCTP see the
 * delay in their own round trip. A direction keeps its order (a packet leaves no earlier than the one read
 * before it) except for the `reorder` share, held `reorderGapMs` longer apart from the rest, which later
 * packets overtake. Reading runs on the event loop (`watchTun` of @rddp/writev: a poll handle, no thread-
 * pool read), writing is one synchronous write(2) per packet; `LISTENING 0` once both devices are open.
 *
 * Bounds: `maxQueued` packets and `maxQueuedOctets` held, both directions together; more are dropped and
 * counted (`overflow`).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { seededRandom } from './rng.js';

/** The impairment and the bounds of what the relay holds. */
interface RelayTiming {
  readonly delayMs: number;
  readonly jitterMs: number;
  /** Probability (0..1) that a packet is held back behind later ones. */
  readonly reorder: number;
  readonly seed: number;
  /** Most packets held at once. */
  readonly maxQueued?: number;
  /** Most octets of packets held at once. */
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

export type RelaySpec = TunRelaySpec;

export interface RelayStats {
  forwarded: number;
  reordered: number;
  /** Packets dropped because `maxQueued` packets or `maxQueuedOctets` were held already. */
  overflow: number;
  /** Most packets, and octets, held at once. */
  peakQueued: number;
  peakQueuedOctets: number;
  /** Packets a device refused to take (write(2) failed), and the descriptors' read errors. */
  writeErrors: number;
  readErrors: number;
}

export const RELAY_DEFAULTS = {
  maxQueued: 100_000,
  maxQueuedOctets: 64 << 20,
} as const;

const newStats = (): RelayStats => ({
  forwarded: 0,
  reordered: 0,
  overflow: 0,
  peakQueued: 0,
  peakQueuedOctets: 0,
  writeErrors: 0,
  readErrors: 0,
});

export interface Relay {
  /** 0: the relay listens on no port (the role prints `LISTENING 0`). */
  readonly port: number;
  readonly stats: RelayStats;
  close(): Promise<void>;
}

/** Extra hold of a reordered packet beyond its delay. */
function reorderGapMs(spec: RelayTiming): number {
  return Math.max(1, spec.jitterMs, spec.delayMs / 2);
}

export async function startRelay(spec: RelaySpec): Promise<Relay> {
  return tunRelay(spec);
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
