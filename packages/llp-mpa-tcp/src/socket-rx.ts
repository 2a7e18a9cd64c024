/**
 * The receive buffers of one MPA/TCP socket.
 *
 * Node's default read path hands the receiver a fresh 64 KiB buffer for every socket read — external
 * memory that only garbage collection gives back. A receiver moving GB/s through it fell into back-to-back
 * Mark-Compacts (40–50 in 1.3 s of a 2 GiB transfer, each stalling reads while TCP's window closed;
 * docs/PERFORMANCE.md). Here the socket reads, through Node's `onread`, into an arena of the connection's
 * own, and a part of the arena is read into again as soon as the FPDU reader holds no view of it: nothing
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
  /** Taken when Node first asks for a read buffer (a socket fed from `'data'` never takes one). */
  private arena: Buffer | undefined;
  /** Where the last read went in `arena`, and where it ended. */
  private viewStart = 0;
  private writeEnd = 0;
  private size: number;
  private fullReads = 0;

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

  private take(size: number): Buffer {
    this.arenas++;
    // Not from Node's shared pool: the arena is this connection's alone and lives as long as it does.
    return Buffer.allocUnsafeSlow(size);
  }

  private read(n: number, view: Buffer): boolean {
    this.reads++;
    this.writeEnd = this.viewStart + n;
    if (n === view.byteLength && n === this.arenaSize >>> 2) {
      if (++this.fullReads >= GROW_AFTER && this.size < ARENA_MAX) {
        this.size = Math.min(ARENA_MAX, this.size * 2);
        this.fullReads = 0;
      }
    } else this.fullReads = 0;
    this.onChunk(view.subarray(0, n));
    return true;
  }

  /** The view the next read goes into: the ring's free part after what the consumer still holds. */
  private next(): Buffer {
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
