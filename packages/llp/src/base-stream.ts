import { BehaviorSubject, type Observable } from 'rxjs';
import type { LlpError } from './errors.js';
import { StreamClosedError } from './errors.js';
import type { LlpCloseEvent, LlpStream, LlpStreamState, SendCallback, Ulpdu, UlpduHandler } from './stream.js';
import { assertFitsMulpdu, OnceSubject, withAbort } from './util.js';

/**
 * The bookkeeping every LLP stream needs, transport-free: state, MULPDU, the MULPDU check, the receiver
 * (holding ULPDUs until one is set), pause/resume, drain waiters, close waiters and `closed$`.
 * A plugin extends it and supplies the four transport hooks; see this package's PLUGINS.md.
 */
export abstract class BaseLlpStream implements LlpStream {
  private readonly mulpduSubject: BehaviorSubject<number>;
  /** The MULPDU as a plain field: read on every send. */
  private _mulpdu: number;
  private readonly closedSubject = new OnceSubject<LlpCloseEvent>();
  private receiver: UlpduHandler | null = null;
  private held: Ulpdu[] = [];
  private userPaused = false;
  private drainWaiters: { resolve(): void; reject(e: unknown): void }[] = [];
  private closeWaiters: { resolve(): void; reject(e: unknown): void }[] = [];
  private _needsDrain = false;
  private _state: LlpStreamState = 'open';

  constructor(
    readonly id: number,
    mulpdu: number,
  ) {
    this.mulpduSubject = new BehaviorSubject(mulpdu);
    this._mulpdu = mulpdu;
  }

  /** Write one ULPDU's parts to the wire, in order, without concatenating them. Return false above the high-water mark. */
  protected abstract transmit(parts: readonly Uint8Array[], length: number, done?: SendCallback): boolean;
  /** Stop (true) or restart (false) reading from the wire. */
  protected abstract setReading(paused: boolean): void;
  /** Start a graceful close: flush what was sent, then end (TCP FIN). Call `finish` when the peer has closed too. */
  protected abstract startClose(): void;
  /** Tear down at once (TCP RST). `finish` is called by the base right after. */
  protected abstract startAbort(reason?: LlpError): void;

  get mulpdu(): number {
    return this._mulpdu;
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

  /** For subclasses: whether a receiver is set (a transport that can hold ULPDUs itself waits for one). */
  protected get hasReceiver(): boolean {
    return this.receiver !== null;
  }

  /** For subclasses: a new MULPDU (e.g. after an MSS change). */
  protected setMulpdu(mulpdu: number): void {
    if (mulpdu === this._mulpdu) return;
    this._mulpdu = mulpdu;
    this.mulpduSubject.next(mulpdu);
  }

  send(ulpdu: readonly Uint8Array[], done?: SendCallback): boolean {
    if (this._state !== 'open') throw new StreamClosedError(`LLP stream ${this.id} is ${this._state}`);
    const length = assertFitsMulpdu(ulpdu, this._mulpdu);
    const ok = this.transmit(ulpdu, length, done);
    if (!ok) this._needsDrain = true;
    return ok;
  }

  /** For subclasses: the send buffer drained below its low-water mark. */
  protected drained(): void {
    if (!this._needsDrain) return;
    this._needsDrain = false;
    const ws = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of ws) w.resolve();
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

  /** For subclasses: one validated ULPDU from the wire. Held (copied) while no receiver is set. */
  protected deliver(ulpdu: Ulpdu): void {
    if (this._state === 'closed') return;
    if (this.receiver && this.held.length === 0) {
      this.receiver(ulpdu);
      return;
    }
    // Chunks are only valid during this call: keep a copy, and stop reading until a receiver takes them.
    const copy = new Uint8Array(ulpdu.length);
    let off = 0;
    for (const c of ulpdu.chunks) {
      copy.set(c, off);
      off += c.byteLength;
    }
    this.held.push({ length: ulpdu.length, chunks: [copy] });
    this.setReading(true);
  }

  setReceiver(handler: UlpduHandler | null): void {
    this.receiver = handler;
    while (this.receiver && this.held.length > 0) this.receiver(this.held.shift() as Ulpdu);
    if (this.receiver && !this.userPaused) this.setReading(false);
  }
  pause(): void {
    this.userPaused = true;
    this.setReading(true);
  }
  resume(): void {
    this.userPaused = false;
    if (this.receiver || this.held.length === 0) this.setReading(false);
  }

  close(signal?: AbortSignal): Promise<void> {
    if (this._state === 'closed') return Promise.resolve();
    const p = new Promise<void>((resolve, reject) => this.closeWaiters.push({ resolve, reject }));
    if (this._state === 'open') {
      this._state = 'closing';
      this.startClose();
    }
    return withAbort(p, signal);
  }

  abort(reason?: LlpError): void {
    if (this._state === 'closed') return;
    this.startAbort(reason);
    this.finish({ graceful: false, initiator: 'local', ...(reason ? { error: reason } : {}) });
  }

  /** For subclasses: the stream has ended; fails what is pending and fires `closed$` once. */
  protected finish(event: LlpCloseEvent): void {
    if (this._state === 'closed') return;
    this._state = 'closed';
    this.held = [];
    const err = event.error ?? new StreamClosedError(`LLP stream ${this.id} closed`);
    const ws = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of ws) w.reject(new StreamClosedError('stream closed while waiting for drain', { cause: err }));
    const cs = this.closeWaiters;
    this.closeWaiters = [];
    for (const c of cs) event.graceful ? c.resolve() : c.reject(err);
    this.closedSubject.fire(event);
  }
}
