import {
  BaseLlpStream,
  ConnectionAbortedError,
  type LlpCloseEvent,
  type LlpError,
  type SendCallback,
  StreamClosedError,
  seededRandom,
} from '@rddp/llp';
import { type LoopbackFaults, makeChunker } from './faults.js';

/** One ULPDU in flight towards the peer, or the graceful-close marker (FIN). */
interface InFlight {
  readonly parts: readonly Uint8Array[] | null; // null = FIN
  readonly length: number;
  readonly done: SendCallback | undefined;
}

export interface LoopbackStreamOptions {
  readonly id: number;
  readonly mulpdu: number;
  readonly highWaterMark: number;
  readonly faults: LoopbackFaults;
}

/**
 * One direction-pair of the in-process LLP, on `BaseLlpStream` (state, MULPDU, drain and close waiters,
 * receiver, pause/resume, `closed$`). ULPDUs sent here are queued on the peer and handed to the peer's
 * receiver asynchronously, as chunks that reference the sender's own bytes (the receiver's copy is the
 * only one). What remains here is the "wire": the peer queue, its FIN, and the fault injection.
 */
export class LoopbackStream extends BaseLlpStream {
  peer!: LoopbackStream;
  /** Called when this stream has closed, so the connection can tell when all its streams are done. */
  onClosed: ((event: LlpCloseEvent) => void) | undefined;

  private readonly inbound: InFlight[] = [];
  private paused = true;
  private stalled = false;
  private scheduled = false;
  private delivered = 0;
  private readonly hwm: number;
  /** Octets this side has sent that the peer has not consumed yet. */
  private outstanding = 0;
  /** An abort of ours still to be passed to the peer once this side has finished. */
  private abortReason: LlpError | undefined;
  private abortPending = false;
  private readonly chunker: (length: number) => number[];
  private readonly rnd: () => number;
  private readonly faults: LoopbackFaults;

  constructor(options: LoopbackStreamOptions) {
    super(options.id, options.mulpdu);
    this.hwm = options.highWaterMark;
    this.faults = options.faults;
    this.chunker = makeChunker(options.faults.chunking);
    const seed = options.faults.reorder?.seed ?? options.faults.drop?.seed ?? options.faults.duplicate?.seed ?? 7;
    this.rnd = seededRandom(seed + options.id);
  }

  /** Changes the MULPDU this side may send (e.g. to test DDP re-segmenting); emits on `mulpdu$`. */
  override setMulpdu(mulpdu: number): void {
    super.setMulpdu(mulpdu);
  }

  /** Fault injection: stop (true) or restart (false) the receiving side without the ULP knowing. */
  stall(on: boolean): void {
    this.stalled = on;
    this.schedule();
  }

  // ----- BaseLlpStream hooks -----

  protected transmit(ulpdu: readonly Uint8Array[], length: number, done?: SendCallback): boolean {
    const f = this.faults;
    if (f.drop && this.rnd() < f.drop.probability) {
      // Lost on the "wire": the sender's buffers are released at once.
      if (done) queueMicrotask(() => done());
      return !this.needsDrain;
    }
    this.outstanding += length;
    this.peer.enqueue({ parts: ulpdu, length, done });
    if (f.duplicate && this.rnd() < f.duplicate.probability) {
      this.outstanding += length;
      this.peer.enqueue({ parts: ulpdu, length, done: undefined });
    }
    return !this.needsDrain && this.outstanding <= this.hwm;
  }

  protected setReading(paused: boolean): void {
    this.paused = paused;
    if (!paused) this.schedule();
  }

  /** RFC 5041 §6.2: graceful teardown — the FIN travels behind every ULPDU already sent. */
  protected startClose(): void {
    this.peer.enqueue({ parts: null, length: 0, done: undefined });
  }

  protected startAbort(reason?: LlpError): void {
    this.abortReason = reason;
    this.abortPending = true;
  }

  /** Ends this side: fails what is still queued towards it, then the base's bookkeeping and `closed$`. */
  protected override finish(event: LlpCloseEvent): void {
    if (this.state === 'closed') return;
    for (const item of this.inbound.splice(0)) item.done?.(new StreamClosedError('dropped by abortive close'));
    super.finish(event);
    if (this.abortPending) {
      this.abortPending = false;
      this.peer.finishFromPeer({
        graceful: false,
        initiator: 'remote',
        error: new ConnectionAbortedError('loopback peer aborted the stream', { cause: this.abortReason }),
      });
    }
    this.onClosed?.(event);
  }

  /** The peer ended this side (its abort, or an injected fault). */
  finishFromPeer(event: LlpCloseEvent): void {
    this.finish(event);
  }

  // ----- receiving side -----

  /** Called by the peer: one more item for this side to deliver. */
  enqueue(item: InFlight): void {
    if (this.state === 'closed') {
      if (item.parts === null) return;
      item.done?.(new StreamClosedError('loopback peer stream is closed'));
      return;
    }
    const r = this.faults.reorder;
    if (r && item.parts !== null && this.inbound.length > 0) {
      // Insert at a random place within the last `window` items, never past a FIN.
      const w = Math.min(r.window ?? 4, this.inbound.length);
      let at = this.inbound.length - Math.floor(this.rnd() * (w + 1));
      while (at < this.inbound.length && this.inbound[at]?.parts === null) at++;
      this.inbound.splice(at, 0, item);
    } else this.inbound.push(item);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.inbound.length === 0 || this.state === 'closed') return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.drainInbound();
    };
    if (this.faults.delayMs) setTimeout(run, this.faults.delayMs);
    else setImmediate(run);
  }

  private drainInbound(): void {
    // Deliver a bounded batch per turn so other connections and timers get the event loop too.
    let budget = 64;
    while (budget-- > 0 && this.inbound.length > 0 && this.state !== 'closed') {
      const head = this.inbound[0] as InFlight;
      if (head.parts === null) {
        this.inbound.shift();
        this.onFin();
        return;
      }
      // Held in the queue (never copied) while no receiver is set, or reading is paused or stalled.
      if (!this.hasReceiver || this.paused || this.stalled) return;
      this.inbound.shift();
      this.deliver({ length: head.length, chunks: this.chunk(head.parts, head.length) });
      this.peer.released(head.length);
      head.done?.();
      this.delivered++;
      const limit = this.faults.abortAfterUlpdus;
      if (limit !== undefined && this.delivered >= limit) {
        this.peer.abort(new ConnectionAbortedError(`fault injection: abort after ${limit} ULPDUs`));
        return;
      }
    }
    this.schedule();
  }

  /** Re-cuts the sender's parts into the chunk lengths the chunking fault asks for, without copying. */
  private chunk(parts: readonly Uint8Array[], length: number): Uint8Array[] {
    if (this.faults.chunking === undefined) return parts as Uint8Array[];
    const sizes = this.chunker(length);
    const out: Uint8Array[] = [];
    let pi = 0;
    let po = 0;
    for (const size of sizes) {
      let need = size;
      if (need === 0) {
        out.push(new Uint8Array(0));
        continue;
      }
      while (need > 0) {
        const p = parts[pi] as Uint8Array;
        const n = Math.min(need, p.byteLength - po);
        if (n > 0) out.push(p.subarray(po, po + n));
        po += n;
        need -= n;
        if (po >= p.byteLength) {
          pi++;
          po = 0;
        }
      }
    }
    return out;
  }

  /** Called on the sending side when the peer consumed `length` octets. */
  private released(length: number): void {
    this.outstanding -= length;
    if (this.outstanding <= this.hwm / 2) this.drained();
  }

  private onFin(): void {
    if (this.state === 'closing') {
      // We closed first (or both did): the peer's FIN answers ours, so our close is complete.
      this.finish({ graceful: true, initiator: 'local' });
      return;
    }
    // The peer closed: everything it sent is delivered. Answer with our own FIN, which travels behind
    // whatever we sent before, so the peer's close completes only once that is delivered too.
    this.finish({ graceful: true, initiator: 'remote' });
    this.peer.enqueue({ parts: null, length: 0, done: undefined });
  }
}
