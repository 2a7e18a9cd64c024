/**
 * The transmit queue of a stream that sends straight to its socket's descriptor (`@rddp/writev`, a gathered
 * non-blocking sendmsg): FPDUs are queued as byte ranges — numbers in a Float64Array, no view made per
 * range — and each flush sends as many as the kernel takes in one native call. A payload part with Markers
 * is one range whose Markers the binding writes (RFC 5044 §4.3); through Node's stream API a 64 KiB FPDU
 * with Markers is ≈257 writes.
 *
 * Order on the wire stays the queue's: when the kernel takes only part, the piece at the head goes to Node's
 * socket (`socket.write`, which waits for the socket to be writable), and the queue waits for that write's
 * callback before it sends directly again. Everything else written to the socket (the MPA handshake before
 * the stream, the FIN after it) is ordered the same way: the queue sends directly only while Node's socket
 * holds nothing, and the FIN waits for the queue (`end`).
 */
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { getSystemErrorName } from 'node:util';
import { markersIn } from './crc.js';
import type { ChunkSink } from './fpdu.js';
import { MARKER_INTERVAL, MARKER_LENGTH, writeMarker } from './markers.js';

/** `@rddp/writev`'s entry point (a type only: the binding is loaded below, where it is built). */
export type WriteRanges = typeof import('@rddp/writev').writeRanges;

/** Numbers per queued range: buffer index, offset, length, Markers (-1: none), octets on the wire. */
const F = 5;
const AFTER_MARKER = MARKER_INTERVAL - MARKER_LENGTH;
/** Ranges past the head after which the queue moves its live part to the front (and forgets old buffers). */
const COMPACT_AT = 4096;
/** Most ranges one native call is given (IOV_MAX per sendmsg, a few sendmsg per call). */
const CALL_MAX = 4096;

export class DirectTx implements ChunkSink {
  /**
   * Ranges [head, n) still to send, `F` numbers each: buffer index, offset in the ArrayBuffer, length,
   * Markers (-1, or room * 65536 + the FPDUPTR a Marker at the range's first octet would carry: the binding
   * puts them in, RFC 5044 §4.3), wire octets.
   */
  private ranges = new Float64Array(F * 1024);
  private n = 0;
  private head = 0;
  /** Octets of the range at `head` already sent. */
  private skip = 0;
  /** The distinct ArrayBuffers the queued ranges name; reset whenever the queue empties or compacts. */
  private bufs: ArrayBufferLike[] = [];
  /** `bufs` as the binding takes them: a SharedArrayBuffer as a Uint8Array over all of it (N-API has no SAB accessor). */
  private given: (ArrayBufferLike | Uint8Array)[] = [];
  /** Indexes in `bufs` of the last two buffers ranges were queued from (0 while `bufs` is empty). */
  private lastBuf = 0;
  private prevBuf = 0;
  /** For each FPDU with a `done`, in order: the range index its last octet lies before. */
  private ends: number[] = [];
  private endHead = 0;
  /** Callbacks waiting for everything queued before them to be sent (copy slabs' reuse): range index, callback. */
  private flushedAt: number[] = [];
  private flushedCb: (() => void)[] = [];
  /** FPDUs sent whose `done` is not yet called (called once per turn, never from inside a flush). */
  private doneDue = 0;
  private doneScheduled = false;
  /** A piece handed to Node's socket is in flight: its callback restarts direct sends. */
  private waiting = false;
  /** While `waiting`: the range index FPDUs must end at or before to be written with that piece. */
  private probeEnd = 0;
  private ending = false;
  private dead = false;
  /** Octets queued and not yet sent (or handed to the socket). */
  octets = 0;
  /** Octets this queue sent straight to the descriptor (Node's `socket.bytesWritten` counts only its own). */
  sent = 0;

  constructor(
    private readonly socket: Socket,
    private readonly fd: number,
    private readonly writeRanges: WriteRanges,
    /** Settles the oldest `fpdus` FPDUs' `done`s. */
    private readonly onWritten: (err: Error | null | undefined, fpdus: number) => void,
    /** The queue has sent some of its backlog: the stream may tell a waiting sender it can go on. */
    private readonly onProgress: () => void,
  ) {}

  push(chunk: Uint8Array): void {
    this.pushBufferRange(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }

  pushRange(bytes: Uint8Array, start: number, length: number): void {
    this.pushBufferRange(bytes.buffer, bytes.byteOffset + start, length);
  }

  pushBufferRange(buf: ArrayBufferLike, off: number, len: number): void {
    if (len === 0) return;
    this.octets += len;
    const b = this.bufferIndex(buf);
    const r = this.ranges;
    const n = this.n;
    if (n > this.head) {
      // Follows the last range in memory: one range longer (a slab's trailer and the next header).
      const k = F * (n - 1);
      if (r[k] === b && r[k + 3] === -1 && (r[k + 1] as number) + (r[k + 2] as number) === off) {
        r[k + 2] = (r[k + 2] as number) + len;
        r[k + 4] = (r[k + 4] as number) + len;
        return;
      }
    }
    this.append(b, off, len, -1, len);
  }

  /**
   * `part` with the Markers that fall in it: the first once `room` octets have passed, FPDUPTR counting from
   * `ptr` at its first octet (RFC 5044 §4.3). The binding writes the Markers; returns how many.
   */
  pushMarked(part: Uint8Array, room: number, ptr: number): number {
    const length = part.byteLength;
    if (length === 0) return 0;
    const k = markersIn(length, room);
    const wire = length + MARKER_LENGTH * k;
    this.octets += wire;
    this.append(this.bufferIndex(part.buffer), part.byteOffset, length, room * 65536 + ptr, wire);
    return k;
  }

  private append(b: number, off: number, len: number, marks: number, wire: number): void {
    const n = this.n;
    if (F * n === this.ranges.length) this.grow();
    const k = F * n;
    const r = this.ranges;
    r[k] = b;
    r[k + 1] = off;
    r[k + 2] = len;
    r[k + 3] = marks;
    r[k + 4] = wire;
    this.n = n + 1;
  }

  /** `buf`'s index in `bufs` (added if new); header slab and payload alternate, so the last two are tried first. */
  private bufferIndex(buf: ArrayBufferLike): number {
    const bufs = this.bufs;
    const last = this.lastBuf;
    if (bufs[last] === buf) return last;
    const b = bufs[this.prevBuf] === buf ? this.prevBuf : this.indexOf(buf);
    this.prevBuf = last;
    this.lastBuf = b;
    return b;
  }

  private indexOf(buf: ArrayBufferLike): number {
    const bufs = this.bufs;
    const b = bufs.lastIndexOf(buf);
    if (b >= 0) return b;
    bufs.push(buf);
    this.given.push(buf instanceof ArrayBuffer ? buf : new Uint8Array(buf));
    return bufs.length - 1;
  }

  private grow(): void {
    const next = new Float64Array(this.ranges.length * 2);
    next.set(this.ranges);
    this.ranges = next;
  }

  endFpdu(): void {
    this.ends.push(this.n);
  }

  get empty(): boolean {
    return this.head === this.n;
  }

  /** Nothing queued, nothing in flight through the socket. */
  get idle(): boolean {
    return this.head === this.n && !this.waiting;
  }

  /** Sends what is queued (or as much as the socket takes now). `onFlushed` runs once all of it is sent. */
  flush(onFlushed?: () => void): void {
    if (onFlushed !== undefined) {
      this.flushedAt.push(this.n);
      this.flushedCb.push(onFlushed);
    }
    this.pump();
  }

  private pump(): void {
    if (this.waiting || this.dead) return;
    const s = this.socket;
    if (s.destroyed) return; // dropSocket discards the queue
    while (this.head < this.n) {
      // Anything in Node's socket (the MPA handshake) goes first: the queue waits behind it.
      if (s.writableLength > 0) {
        this.handOver();
        return;
      }
      const count = Math.min(this.n - this.head, CALL_MAX);
      const target = this.head + count;
      let w: number;
      try {
        w = this.writeRanges(this.fd, this.given, this.ranges, this.head, count, this.skip);
      } catch (e) {
        // A range the binding refused (a buffer detached since it was queued): nothing was sent.
        s.destroy(e as Error);
        return;
      }
      if (w < 0) {
        this.failed(w);
        return;
      }
      this.advance(w);
      this.settle(this.head);
      // Sending is activity for the socket's idle timer (`idleTimeoutMs`), as Node's own writes are.
      if (w > 0) (s as unknown as { _unrefTimer?: () => void })._unrefTimer?.();
      // The kernel's buffer is full: Node's socket waits for it to drain, with the next range.
      if (this.head < target) {
        this.handOver();
        break;
      }
    }
    if (!this.waiting) this.settle(this.head);
    if (this.head === this.n && !this.waiting) this.reset();
    else if (this.head >= COMPACT_AT && 2 * this.head >= this.n) this.compact();
    if (this.ending && this.idle) {
      this.ending = false;
      s.end();
    }
  }

  /** `w` more octets sent from the head. */
  private advance(w: number): void {
    this.sent += w;
    this.octets -= w;
    const r = this.ranges;
    let h = this.head;
    let skip = this.skip + w;
    while (h < this.n) {
      const len = r[F * h + 4] as number;
      if (skip < len) break;
      skip -= len;
      h++;
    }
    this.head = h;
    this.skip = h < this.n ? skip : 0;
  }

  /**
   * Hands the range at the head to Node's socket — of a range with Markers, the piece up to the next Marker
   * position, or that Marker — and direct sends resume once it is written.
   */
  private handOver(): void {
    const r = this.ranges;
    const k = F * this.head;
    const buf = this.bufs[r[k] as number] as ArrayBuffer;
    const off = r[k + 1] as number;
    const len = r[k + 2] as number;
    const marks = r[k + 3] as number;
    const s = this.skip;
    const chunk = marks === -1 ? Buffer.from(buf, off + s, len - s) : markedPiece(buf, off, len, marks, s);
    this.octets -= chunk.byteLength;
    this.skip += chunk.byteLength;
    if (this.skip === r[k + 4]) {
      this.head++;
      this.skip = 0;
    }
    this.probeEnd = this.head;
    this.waiting = true;
    this.socket.write(chunk, (err) => {
      this.waiting = false;
      if (err || this.dead) return; // the socket's 'error' / close ends the stream, discard() settles the rest
      this.settle(this.probeEnd);
      this.pump();
      this.onProgress();
    });
  }

  /** Every FPDU and flush callback whose octets lie before range `upTo` has been sent. */
  private settle(upTo: number): void {
    const ends = this.ends;
    let k = 0;
    while (this.endHead < ends.length && (ends[this.endHead] as number) <= upTo) {
      this.endHead++;
      k++;
    }
    if (k > 0) {
      this.doneDue += k;
      if (!this.doneScheduled) {
        this.doneScheduled = true;
        process.nextTick(this.deliverDone);
      }
    }
    while (this.flushedAt.length > 0 && (this.flushedAt[0] as number) <= upTo) {
      this.flushedAt.shift();
      (this.flushedCb.shift() as () => void)();
    }
  }

  private readonly deliverDone = (): void => {
    this.doneScheduled = false;
    const k = this.doneDue;
    this.doneDue = 0;
    if (k > 0) this.onWritten(null, k);
  };

  /** Everything was sent: start the arrays over (and let go of the buffers they named). */
  private reset(): void {
    this.n = 0;
    this.head = 0;
    this.skip = 0;
    this.bufs = [];
    this.given = [];
    this.lastBuf = 0;
    this.prevBuf = 0;
    this.ends = [];
    this.endHead = 0;
    this.flushedAt = [];
  }

  /** Moves the unsent ranges to the front; only the buffers they name are kept. */
  private compact(): void {
    const r = this.ranges;
    const h = this.head;
    const live = this.n - h;
    const bufs: ArrayBufferLike[] = [];
    const given: (ArrayBufferLike | Uint8Array)[] = [];
    const map = new Map<number, number>();
    for (let i = 0; i < live; i++) {
      const from = F * (h + i);
      const old = r[from] as number;
      let b = map.get(old);
      if (b === undefined) {
        b = bufs.length;
        bufs.push(this.bufs[old] as ArrayBufferLike);
        given.push(this.given[old] as ArrayBufferLike | Uint8Array);
        map.set(old, b);
      }
      r[F * i] = b;
      r.copyWithin(F * i + 1, from + 1, from + F);
    }
    this.bufs = bufs;
    this.given = given;
    this.lastBuf = 0;
    this.prevBuf = 0;
    this.n = live;
    this.head = 0;
    this.ends = this.ends.slice(this.endHead).map((e) => e - h);
    this.endHead = 0;
    this.flushedAt = this.flushedAt.map((e) => e - h);
    this.probeEnd -= h;
  }

  /** The descriptor failed (`errno` < 0: the peer reset, ...): the socket is destroyed with that error, as Node would. */
  private failed(errno: number): void {
    let code = 'EIO';
    try {
      code = getSystemErrorName(errno);
    } catch {}
    const e = Object.assign(new Error(`write ${code}`), { code, errno, syscall: 'write' });
    this.socket.destroy(e);
  }

  /** The FIN goes once everything queued is sent (RFC 5044 §7.2: queued FPDUs, then the close). */
  end(): void {
    if (this.idle) this.socket.end();
    else this.ending = true;
  }

  /** True between `end()` and the FIN it waits to send. */
  get endPending(): boolean {
    return this.ending;
  }

  /** The socket is going: what was sent is settled as sent; returns how many FPDUs with a `done` never were. */
  discard(): number {
    if (this.doneScheduled) this.deliverDone();
    this.dead = true;
    const unsent = this.ends.length - this.endHead;
    this.reset();
    this.octets = 0;
    this.ending = false;
    const cbs = this.flushedCb;
    this.flushedCb = [];
    for (const cb of cbs) cb();
    return unsent;
  }
}

/** `@rddp/writev`'s `writeRanges` where it is installed and built (POSIX); undefined otherwise. */
export const writeRanges: WriteRanges | undefined = (() => {
  if (process.platform === 'win32') return undefined;
  try {
    return (createRequire(import.meta.url)('@rddp/writev') as { writeRanges: WriteRanges }).writeRanges;
  } catch {
    return undefined;
  }
})();

/** The socket's descriptor (Node's TCP handle has one on POSIX), or -1. */
export function socketFd(socket: Socket): number {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
}

/**
 * The wire octets at `skip` of a range with Markers (`marks` = room * 65536 + FPDUPTR at its first octet):
 * the payload piece up to the next Marker position, as a view, or what is left of that Marker, framed.
 */
export function markedPiece(buf: ArrayBuffer, off: number, len: number, marks: number, skip: number): Buffer {
  const room = Math.floor(marks / 65536);
  const ptr = marks % 65536;
  if (skip < room) return Buffer.from(buf, off + skip, Math.min(room, len) - skip);
  const t = skip - room;
  const q = Math.floor(t / MARKER_INTERVAL);
  const w = t - q * MARKER_INTERVAL;
  if (w < MARKER_LENGTH) {
    const m = Buffer.alloc(MARKER_LENGTH);
    writeMarker(m, 0, ptr + room + q * MARKER_INTERVAL);
    return m.subarray(w);
  }
  const po = room + q * AFTER_MARKER + (w - MARKER_LENGTH);
  return Buffer.from(buf, off + po, Math.min(AFTER_MARKER - (w - MARKER_LENGTH), len - po));
}
