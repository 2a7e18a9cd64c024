/**
 * The receive buffers of one MPA/TCP socket.
 *
 * Node's default read path hands the receiver a fresh 64 KiB buffer for every socket read — external
 * memory that only garbage collection gives back. V8 counts that memory against its old generation's room,
 * so a fast receiver keeps starting Mark-Compacts, each stalling reads while TCP's window closes
 * (docs/PERFORMANCE.md, "Limits"). Here the socket reads, through Node's `onread`, into an arena of the
 * connection's own, and a part of the arena is read into again as soon as the FPDU reader holds no view of it: nothing
 * is allocated per read, and the one copy of each payload octet stays the copy from the read buffer
 * straight into the registered region (RFC 5041 §5: DDP places; MPA only frames).
 *
 * The arena is a ring. What the reader may hold is one partial FPDU (≤ 64 KiB + its framing), or, while the
 * ULP has stopped reception, what the last read brought (the socket is paused then): the next read goes
 * after the newest held octet, or wraps to the arena's start when the oldest held octet leaves room before
 * it; only when neither does is another arena taken (the old one lives on while its octets are held).
 * Arenas grow while reads fill them (a bulk receiver reads up to 256 KiB at a time; more FPDUs arrive
 * whole in one read and take the reader's fast path) and start small, so an idle connection holds 64 KiB.
 */
import net from 'node:net';
import type { MemoryReservation } from '@rddp/llp';

/** Receives one read's octets; the view is valid only during the call (the arena is read into again). */
export type ChunkHandler = (chunk: Buffer) => void;
/** The oldest octets the consumer still holds a view of, if any. */
export type HeldProbe = () => Uint8Array | undefined;

/** First arena: 64 KiB, reads of at most a quarter of it. */
export const ARENA_INITIAL = 64 * 1024;
/** Largest arena: 1 MiB (reads of up to 256 KiB). */
export const ARENA_MAX = 1024 * 1024;
/** Consecutive reads that fill their whole view before the next arena is twice the size. */
const GROW_AFTER = 4;
/** An arena with no read for this long (and nothing held) is given back; the next read takes a new one. */
export const IDLE_SHRINK_MS = 1000;
/** What an idle connection's next read goes into: 4 KiB (a Send or a few small FPDUs; more waits in TCP). */
export const IDLE_READ_BUFFER = 4096;

/**
 * Octets a receiver reserves from the process budget for an arena of `size`: the arena and one earlier
 * arena a partial FPDU may still pin (docs/SECURITY.md, "receive buffers per connection").
 */
export function arenaFootprint(size: number): number {
  return 2 * size;
}

/** Receivers with a bound socket, swept for idle grown arenas. */
const live = new Set<SocketReceiver>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweep(): void {
  for (const r of live) r.shrinkIfIdle();
}

function track(r: SocketReceiver): void {
  live.add(r);
  if (sweeper === undefined) {
    sweeper = setInterval(sweep, IDLE_SHRINK_MS);
    sweeper.unref();
  }
}

function untrack(r: SocketReceiver): void {
  live.delete(r);
  if (live.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/** Node's slot for a socket's current user read buffer (`onread`); looked up only when an arena is given back. */
function bufferSlot(socket: net.Socket): symbol | undefined {
  return Object.getOwnPropertySymbols(socket).find((k) => k.description === 'kBuffer');
}

interface UserBufferHandle {
  useUserBuffer?: (buf: Uint8Array) => void;
}

const nothingHeld: HeldProbe = () => undefined;
/** A handler that ignores what is read (between a failed startup and the socket's end). */
export const dropChunk: ChunkHandler = () => {};

/**
 * One socket's reads. `onChunk` gets every read (the handshake's collector first, then the stream's FPDU
 * reader); `held` says what the consumer still references, so that part of the arena is not read into.
 */
export class SocketReceiver {
  onChunk: ChunkHandler = dropChunk;
  held: HeldProbe = nothingHeld;
  /** Reads so far, and arenas taken (for tests and `--debug`). */
  reads = 0;
  arenas = 0;
  /** Grown arenas given back while idle (for tests and `--debug`). */
  shrinks = 0;
  /** Growth refused by the memory budget. */
  growthRefused = 0;
  /** Taken when Node first asks for a read buffer (a socket fed from `'data'` never takes one). */
  private arena: Buffer | undefined;
  /** Where the last read went in `arena`, and where it ended. */
  private viewStart = 0;
  private writeEnd = 0;
  private size: number;
  private fullReads = 0;
  /** The view Node reads into next. */
  private current: Buffer | undefined;
  private socket: net.Socket | undefined;
  private reservation: MemoryReservation | undefined;
  private readsAtSweep = -1;

  /** Node's `onread` option for a socket that reads through this receiver. */
  readonly onread: net.OnReadOpts = {
    buffer: () => this.next(),
    callback: (n: number, buf: Uint8Array) => this.read(n, buf as Buffer),
  };

  constructor(initial = ARENA_INITIAL) {
    this.size = initial;
  }

  /** Octets of the arena reads now go into (for tests). */
  get arenaSize(): number {
    return this.arena?.byteLength ?? 0;
  }

  /**
   * Ties the receiver to its socket and its share of the process budget: arenas grow only as far as
   * `reservation` can, a grown arena is given back while idle, and the reservation is released when the
   * socket closes.
   */
  bind(socket: net.Socket, reservation: MemoryReservation | undefined): void {
    this.socket = socket;
    this.reservation = reservation;
    track(this);
    socket.once('close', () => {
      untrack(this);
      this.reservation?.release();
      this.reservation = undefined;
      this.socket = undefined;
    });
  }

  /**
   * Called by the sweep every `IDLE_SHRINK_MS`: an arena that saw no read since the last sweep and holds
   * nothing the reader still needs is given back — Node's pending read buffer moves to a 4 KiB one, so
   * the arena becomes garbage, and an idle connection holds 4 KiB. Returns whether it shrank.
   */
  shrinkIfIdle(): boolean {
    const idle = this.reads === this.readsAtSweep;
    this.readsAtSweep = this.reads;
    if (!idle || this.arena === undefined || this.held() !== undefined) return false;
    const socket = this.socket;
    const handle = (socket as unknown as { _handle?: UserBufferHandle } | undefined)?._handle;
    const slot = socket ? bufferSlot(socket) : undefined;
    if (!socket || socket.destroyed || !handle?.useUserBuffer || slot === undefined) return false;
    // The next read goes into a small buffer of its own; the read after it takes a fresh first arena.
    this.size = ARENA_INITIAL;
    this.fullReads = 0;
    this.arena = undefined;
    const view = Buffer.allocUnsafeSlow(IDLE_READ_BUFFER);
    this.current = view;
    this.viewStart = this.writeEnd = 0;
    handle.useUserBuffer(view);
    (socket as unknown as Record<symbol, unknown>)[slot] = view;
    this.reservation?.resize(arenaFootprint(ARENA_INITIAL));
    this.shrinks++;
    return true;
  }

  private take(size: number): Buffer {
    this.arenas++;
    // Not from Node's shared pool: the arena is this connection's alone and lives as long as it does.
    return Buffer.allocUnsafeSlow(size);
  }

  private read(n: number, given: Buffer): boolean {
    // The view handed out last (after an idle shrink Node's own record of it is replaced too).
    const view = this.current ?? given;
    this.reads++;
    this.writeEnd = this.viewStart + n;
    if (n === view.byteLength && n === this.arenaSize >>> 2) {
      if (++this.fullReads >= GROW_AFTER && this.size < ARENA_MAX) {
        const next = Math.min(ARENA_MAX, this.size * 2);
        // Growth is an optimization: without room in the budget the arena stays as it is.
        if (this.reservation === undefined || this.reservation.resize(arenaFootprint(next))) this.size = next;
        else this.growthRefused++;
        this.fullReads = 0;
      }
    } else this.fullReads = 0;
    this.onChunk(view.subarray(0, n));
    return true;
  }

  /** The view the next read goes into: the ring's free part after what the consumer still holds. */
  private next(): Buffer {
    const v = this.place();
    this.current = v;
    return v;
  }

  private place(): Buffer {
    const oldest = this.held();
    let arena = this.arena;
    if (arena === undefined || arena.byteLength < this.size) {
      // Grown: the next read goes into a bigger arena; the old one lives on while views of it are held.
      arena = this.arena = this.take(this.size);
      this.viewStart = this.writeEnd = 0;
      return arena.subarray(0, arena.byteLength >>> 2);
    }
    const a = arena.byteLength;
    const r = a >>> 2;
    const minSpan = r >>> 2;
    let start = 0;
    let end = a;
    if (oldest !== undefined) {
      const inArena = oldest.buffer === arena.buffer;
      const at = inArena ? oldest.byteOffset - arena.byteOffset : -1;
      if (at >= 0 && at < this.writeEnd) {
        // Held: [at, writeEnd). Free: after it, or before it.
        if (a - this.writeEnd >= minSpan) start = this.writeEnd;
        else if (at >= minSpan) end = at;
        else start = -1;
      } else if (at >= this.writeEnd) {
        // Wrapped: held [at, a) and [0, writeEnd); free between.
        if (at - this.writeEnd >= minSpan) {
          start = this.writeEnd;
          end = at;
        } else start = -1;
      } else {
        // Held octets start in an earlier arena and run on to [0, writeEnd) of this one.
        if (a - this.writeEnd >= minSpan) start = this.writeEnd;
        else start = -1;
      }
      if (start < 0) {
        arena = this.arena = this.take(this.size);
        start = 0;
        end = arena.byteLength;
      }
    }
    this.viewStart = start;
    this.writeEnd = start;
    return arena.subarray(start, Math.min(end, start + r));
  }
}

interface HandleCarrier {
  _handle?: unknown;
}

/**
 * An accepted socket (from a server created with `pauseOnConnect: true`) re-made to read through `rx`:
 * Node offers `onread` only to sockets it creates, so the accepted socket's handle moves to a new socket
 * built with it. Falls back to the socket as it is, fed from `'data'`, where the handle is not reachable.
 */
export function adoptAccepted(socket: net.Socket, rx: SocketReceiver, allowHalfOpen: boolean): net.Socket {
  const carrier = socket as unknown as HandleCarrier;
  const handle = carrier._handle;
  if (handle === null || handle === undefined || typeof handle !== 'object') return feedFromData(socket, rx);
  carrier._handle = null;
  // The husk has no handle left: destroying it only settles the server's connection count.
  socket.destroy();
  return new net.Socket({
    handle,
    allowHalfOpen,
    readable: true,
    writable: true,
    onread: rx.onread,
  } as net.SocketConstructorOpts & { handle: unknown; onread: net.OnReadOpts });
}

/** A socket that cannot read into `rx`'s arena: its `'data'` chunks (fresh buffers) go to `rx.onChunk`. */
export function feedFromData(socket: net.Socket, rx: SocketReceiver): net.Socket {
  socket.on('data', (chunk: Buffer) => rx.onChunk(chunk));
  socket.resume();
  return socket;
}
