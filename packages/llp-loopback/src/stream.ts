import {
  assertFitsMulpdu,
  ConnectionAbortedError,
  type LlpCloseEvent,
  type LlpError,
  type LlpStream,
  type LlpStreamState,
  OnceSubject,
  type SendCallback,
  StreamClosedError,
  type UlpduHandler,
  withAbort,
} from '@rddp/llp';
import { BehaviorSubject, type Observable } from 'rxjs';
import { type LoopbackFaults, makeChunker, seededRandom } from './faults.js';

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
 * One direction-pair of the in-process LLP. ULPDUs sent here are queued on the peer and handed to the peer's
 * receiver asynchronously, as chunks that reference the sender's own bytes (the receiver's copy is the only one).
 */
export class LoopbackStream implements LlpStream {
  readonly id: number;
  peer!: LoopbackStream;
  /** Called when this stream has closed, so the connection can tell when all its streams are done. */
  onClosed: (() => void) | undefined;

  private readonly mulpduSubject: BehaviorSubject<number>;
  private readonly closedSubject = new OnceSubject<LlpCloseEvent>();
  private readonly inbound: InFlight[] = [];
  private receiver: UlpduHandler | null = null;
  private paused = false;
  private stalled = false;
  private scheduled = false;
  private delivered = 0;
  private readonly hwm: number;
  /** Octets this side has sent that the peer has not consumed yet. */
  private outstanding = 0;
  private drainWaiters: { resolve(): void; reject(e: unknown): void }[] = [];
  private _needsDrain = false;
  private _state: LlpStreamState = 'open';
  private closeWaiter: { resolve(): void; reject(e: unknown): void } | undefined;
  private readonly chunker: (length: number) => number[];
  private readonly rnd: () => number;
  private readonly faults: LoopbackFaults;

  constructor(options: LoopbackStreamOptions) {
    this.id = options.id;
    this.mulpduSubject = new BehaviorSubject(options.mulpdu);
    this.hwm = options.highWaterMark;
    this.faults = options.faults;
    this.chunker = makeChunker(options.faults.chunking);
    const seed = options.faults.reorder?.seed ?? options.faults.drop?.seed ?? options.faults.duplicate?.seed ?? 7;
    this.rnd = seededRandom(seed + options.id);
  }

  get mulpdu(): number {
    return this.mulpduSubject.value;
  }
  get mulpdu$(): Observable<number> {
    return this.mulpduSubject.asObservable();
  }
  get state(): LlpStreamState {
    return this._state;
  }
  get needsDrain(): boolean {
    return this._needsDrain;
  }
  get closed$(): Observable<LlpCloseEvent> {
    return this.closedSubject.observable;
  }

  /** Changes the MULPDU this side may send (e.g. to test DDP re-segmenting); emits on `mulpdu$`. */
  setMulpdu(mulpdu: number): void {
    this.mulpduSubject.next(mulpdu);
  }

  send(ulpdu: readonly Uint8Array[], done?: SendCallback): boolean {
    if (this._state !== 'open') throw new StreamClosedError(`loopback stream ${this.id} is ${this._state}`);
    const length = assertFitsMulpdu(ulpdu, this.mulpdu);
    const f = this.faults;
    if (f.drop && this.rnd() < f.drop.probability) {
      // Lost on the "wire": the sender's buffers are released at once.
      if (done) queueMicrotask(() => done());
      return !this._needsDrain;
    }
    this.outstanding += length;
    this.peer.enqueue({ parts: ulpdu, length, done });
    if (f.duplicate && this.rnd() < f.duplicate.probability) {
      this.outstanding += length;
      this.peer.enqueue({ parts: ulpdu, length, done: undefined });
    }
    if (this.outstanding > this.hwm) this._needsDrain = true;
    return !this._needsDrain;
  }

  waitForDrain(signal?: AbortSignal): Promise<void> {
    if (this._state === 'closed') return Promise.reject(new StreamClosedError());
    if (!this._needsDrain) return Promise.resolve();
    let waiter!: { resolve(): void; reject(e: unknown): void };
    const p = new Promise<void>((resolve, reject) => {
      waiter = { resolve, reject };
      this.drainWaiters.push(waiter);
    });
    return withAbort(p, signal, () => {
      this.drainWaiters = this.drainWaiters.filter((w) => w !== waiter);
    });
  }

  setReceiver(handler: UlpduHandler | null): void {
    this.receiver = handler;
    this.schedule();
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
    this.schedule();
  }
  /** Fault injection: stop (true) or restart (false) the receiving side without the ULP knowing. */
  stall(on: boolean): void {
    this.stalled = on;
    this.schedule();
  }

  close(signal?: AbortSignal): Promise<void> {
    if (this._state === 'closed') return Promise.resolve();
    if (this._state === 'closing' && this.closeWaiter) return this.waitClosed(signal);
    this._state = 'closing';
    // RFC 5041 §6.2: graceful teardown — the FIN travels behind every ULPDU already sent.
    this.peer.enqueue({ parts: null, length: 0, done: undefined });
    return this.waitClosed(signal);
  }

  private waitClosed(signal?: AbortSignal): Promise<void> {
    const p = new Promise<void>((resolve, reject) => {
      const prev = this.closeWaiter;
      this.closeWaiter = {
        resolve: () => {
          prev?.resolve();
          resolve();
        },
        reject: (e) => {
          prev?.reject(e);
          reject(e);
        },
      };
    });
    return withAbort(p, signal);
  }

  abort(reason?: LlpError): void {
    if (this._state === 'closed') return;
    this.finish({ graceful: false, initiator: 'local', ...(reason ? { error: reason } : {}) });
    this.peer.finish({
      graceful: false,
      initiator: 'remote',
      error: new ConnectionAbortedError('loopback peer aborted the stream', { cause: reason }),
    });
  }

  // ----- receiving side -----

  /** Called by the peer: one more item for this side to deliver. */
  enqueue(item: InFlight): void {
    if (this._state === 'closed') {
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
    if (this.scheduled || this.inbound.length === 0 || this._state === 'closed') return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.deliver();
    };
    if (this.faults.delayMs) setTimeout(run, this.faults.delayMs);
    else setImmediate(run);
  }

  private deliver(): void {
    // Deliver a bounded batch per turn so other connections and timers get the event loop too.
    let budget = 64;
    while (budget-- > 0 && this.inbound.length > 0 && this._state !== 'closed') {
      const head = this.inbound[0] as InFlight;
      if (head.parts === null) {
        this.inbound.shift();
        this.onFin();
        return;
      }
      if (this.receiver === null || this.paused || this.stalled) return;
      this.inbound.shift();
      const chunks = this.chunk(head.parts, head.length);
      this.receiver({ length: head.length, chunks });
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
    if (this._needsDrain && this.outstanding <= this.hwm / 2) {
      this._needsDrain = false;
      const ws = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of ws) w.resolve();
    }
  }

  private onFin(): void {
    if (this._state === 'closing') {
      // We closed first (or both did): the peer's FIN answers ours, so our close is complete.
      this.finish({ graceful: true, initiator: 'local' });
      return;
    }
    // The peer closed: everything it sent is delivered. Answer with our own FIN, which travels behind
    // whatever we sent before, so the peer's close completes only once that is delivered too.
    this.finish({ graceful: true, initiator: 'remote' });
    this.peer.enqueue({ parts: null, length: 0, done: undefined });
  }

  /** Ends this side: fails what is pending, fires `closed$`. */
  finish(event: LlpCloseEvent): void {
    if (this._state === 'closed') return;
    this._state = 'closed';
    const err = event.error ?? new StreamClosedError(`loopback stream ${this.id} closed`);
    for (const item of this.inbound.splice(0)) item.done?.(new StreamClosedError('dropped by abortive close'));
    const ws = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of ws) w.reject(new StreamClosedError('stream closed while waiting for drain', { cause: err }));
    this.closedSubject.fire(event);
    const cw = this.closeWaiter;
    this.closeWaiter = undefined;
    if (cw) {
      if (event.graceful) cw.resolve();
      else cw.reject(event.error ?? err);
    }
    this.onClosed?.();
  }
}
