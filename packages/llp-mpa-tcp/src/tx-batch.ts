/**
 * The FPDUs one event-loop turn writes, as few socket chunks as possible: pieces that lie next to each
 * other in memory (the FpduWriter's slab: small FPDUs framed inline, one FPDU's trailer and the next one's
 * header) are merged into one view, so the socket's writev sees one buffer per run instead of one per
 * piece. Nothing is copied; payload parts that are not adjacent stay chunks of their own.
 */
import type { Socket } from 'node:net';
import type { ChunkSink } from './fpdu.js';

export class TxBatch implements ChunkSink {
  /** Runs closed so far: views, and how many FPDUs each one ends. */
  private readonly runs: Uint8Array[] = [];
  private readonly ends: number[] = [];
  private n = 0;
  /** The open run: a piece of `buf` from `start` to `end`, ending `fpdus` FPDUs so far. */
  private buf: ArrayBufferLike | undefined;
  private first: Uint8Array | undefined;
  private start = 0;
  private end = 0;
  private fpdus = 0;
  /** Octets held, not yet given to the socket. */
  octets = 0;

  push(chunk: Uint8Array): void {
    this.add(chunk.buffer, chunk.byteOffset, chunk.byteLength, chunk);
  }

  /** `bytes[start, start + length)`, without a view made for it. */
  pushRange(bytes: Uint8Array, start: number, length: number): void {
    this.add(bytes.buffer, bytes.byteOffset + start, length, undefined);
  }

  /** Merges the piece at `off` of `buf` into the open run when it follows it in memory, else opens a run. */
  private add(buf: ArrayBufferLike, off: number, len: number, chunk: Uint8Array | undefined): void {
    if (len === 0) return;
    this.octets += len;
    if (buf === this.buf && off === this.end) {
      this.end += len;
      return;
    }
    this.close();
    this.buf = buf;
    this.first = chunk;
    this.start = off;
    this.end = off + len;
  }

  /** The FPDU whose chunks were pushed last has a `done`: it settles once the run holding its end is written. */
  endFpdu(): void {
    this.fpdus++;
  }

  get empty(): boolean {
    return this.n === 0 && this.buf === undefined;
  }

  private close(): void {
    const buf = this.buf;
    if (buf === undefined) return;
    const f = this.first;
    const whole = f !== undefined && this.start === f.byteOffset && this.end === f.byteOffset + f.byteLength;
    // A Buffer, as the socket takes it (a plain Uint8Array it would wrap once more).
    this.runs[this.n] = whole ? f : Buffer.from(buf as ArrayBuffer, this.start, this.end - this.start);
    this.ends[this.n++] = this.fpdus;
    this.fpdus = 0;
    this.first = undefined;
    this.buf = undefined;
  }

  /** Drops what is held (the socket is going); returns how many FPDUs with a `done` it held. */
  discard(): number {
    this.close();
    let k = 0;
    for (let i = 0; i < this.n; i++) {
      k += this.ends[i] as number;
      this.runs[i] = EMPTY;
    }
    this.n = 0;
    this.octets = 0;
    return k;
  }

  /**
   * Gives the runs to `socket` in one corked write (one writev; one run: one write). `onWritten(err, k)` is called, in order,
   * as each run that ends `k > 0` FPDUs with a `done` is written; `onFlushed` once all of them are (or the
   * socket failed them).
   */
  flush(
    socket: Socket,
    onWritten: (err: Error | null | undefined, fpdus: number) => void,
    onFlushed?: () => void,
  ): void {
    this.close();
    const n = this.n;
    if (n === 0) {
      onFlushed?.();
      return;
    }
    this.n = 0;
    this.octets = 0;
    // One run goes out as a plain write, without the cork and the socket's buffered-write queue around it.
    const corked = n > 1;
    if (corked) socket.cork();
    for (let i = 0; i < n; i++) {
      const run = this.runs[i] as Uint8Array;
      const k = this.ends[i] as number;
      this.runs[i] = EMPTY;
      if (onFlushed !== undefined && i === n - 1)
        socket.write(run, (err) => {
          if (k > 0) onWritten(outcome(socket, err), k);
          onFlushed();
        });
      else if (k > 0) socket.write(run, (err) => onWritten(outcome(socket, err), k));
      else socket.write(run);
    }
    if (corked) socket.uncork();
  }
}

const EMPTY = new Uint8Array(0);

/**
 * A write's outcome. Node calls the callback of a write still queued in libuv when the socket is destroyed
 * (a reset, an abort) with no error, though nothing of it was sent: that is an error here, as verbs flush
 * outstanding work with an error when the connection fails.
 */
function outcome(socket: Socket, err: Error | null | undefined): Error | null | undefined {
  return err ?? (socket.destroyed ? new Error('the socket was destroyed before the write completed') : undefined);
}
