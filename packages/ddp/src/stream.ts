/**
 * One DDP Stream over one LLP stream (RFC 5041 §1.1, §6): the transmit path (tx.ts), the receive path
 * (rx.ts), untagged queues (queues.ts) and the stream's life: setup (§6.1), graceful and abortive teardown
 * (§6.2), and the error state of §7.1 (incoming segments dropped, sending still allowed).
 */
import type { LlpCloseEvent, LlpStream } from '@rddp/llp';
import { type Observable, ReplaySubject, Subject } from 'rxjs';
import {
  DDP_TAGGED_HEADER_LENGTH,
  DDP_UNTAGGED_HEADER_LENGTH,
  DDP_VERSION,
  type DdpCloseEvent,
  type DdpErrorEvent,
  type DdpProfile,
  type DdpSendSink,
  type DdpStreamApi,
  type DdpStreamOptions,
  type DdpStreamState,
  type DeliveryEvent,
  type FlushedReceive,
  type PlacementEvent,
  type UntaggedSend,
} from './api.js';
import { DdpInvalidArgumentError, DdpStreamClosedError } from './errors.js';
import { MAX_U64, MAX_UNTAGGED_RSVDULP, TWO_64 } from './header.js';
import { Receiver } from './rx.js';
import { Transmitter } from './tx.js';

/** At or below 2^63 no message (< 2^53 octets) can wrap the TO space: the exact check is skipped. */
const TO_NO_WRAP = 1n << 63n;

/** Caller input of a send: a 32-bit value (RFC 5041 §4.2 STag, §4.3 QN). */
function checkU32(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff)
    throw new DdpInvalidArgumentError(`${name} ${v} is not a 32-bit unsigned integer`);
}

/** Checks the payload parts and returns their total length (one pass: this runs on every send). */
function checkPayload(parts: readonly Uint8Array[]): number {
  let n = 0;
  for (const p of parts) {
    if (!(p instanceof Uint8Array)) throw new DdpInvalidArgumentError('payload parts must be Uint8Arrays');
    n += p.byteLength;
  }
  return n;
}

/** Caller input of a tagged send (RFC 5041 §4.2, §7.1), checked where it enters; returns the payload length. */
function checkTaggedSend(stag: number, to: bigint, rsvdUlp: number, payload: readonly Uint8Array[]): number {
  checkU32('STag', stag);
  if (typeof to !== 'bigint' || to < 0n || to > MAX_U64)
    throw new DdpInvalidArgumentError(`TO ${String(to)} is not a 64-bit unsigned bigint`);
  if (!Number.isInteger(rsvdUlp) || rsvdUlp < 0 || rsvdUlp > 0xff)
    throw new DdpInvalidArgumentError(`tagged RsvdULP ${rsvdUlp} is not 8 bits (RFC 5041 §4.2)`);
  const n = checkPayload(payload);
  if (to > TO_NO_WRAP && to + BigInt(n) > TWO_64)
    throw new DdpInvalidArgumentError(`TO 0x${to.toString(16)} + ${n} octets wraps 2^64 (RFC 5041 §7.1)`);
  return n;
}

/** Caller input of an untagged send (RFC 5041 §4.3): QN, RsvdULP, a message the 32-bit MO can address; returns its length. */
function checkUntaggedSend(qn: number, rsvdUlp: number, payload: readonly Uint8Array[]): number {
  checkU32('QN', qn);
  if (!Number.isInteger(rsvdUlp) || rsvdUlp < 0 || rsvdUlp > MAX_UNTAGGED_RSVDULP)
    throw new DdpInvalidArgumentError(`untagged RsvdULP ${rsvdUlp} is not 40 bits (RFC 5041 §4.3)`);
  const n = checkPayload(payload);
  if (n > 0xffff_ffff) throw new DdpInvalidArgumentError(`message of ${n} octets exceeds the 32-bit MO space`);
  return n;
}

export class DdpStream implements DdpStreamApi {
  readonly profile: DdpProfile;
  private _state: DdpStreamState = 'open';
  private readonly tx: Transmitter;
  private readonly rx: Receiver;
  private readonly nextMsn: number[];
  private readonly placements = new Subject<PlacementEvent>();
  private readonly deliveries = new Subject<DeliveryEvent>();
  private readonly errors = new Subject<DdpErrorEvent>();
  private readonly closed = new ReplaySubject<DdpCloseEvent>(1);
  readonly placement$: Observable<PlacementEvent> = this.placements.asObservable();
  readonly delivery$: Observable<DeliveryEvent> = this.deliveries.asObservable();
  readonly error$: Observable<DdpErrorEvent> = this.errors.asObservable();
  readonly closed$: Observable<DdpCloseEvent> = this.closed.asObservable();
  private firstError: Error | undefined;
  private started = false;
  private onFirstSegment: (() => void) | undefined;

  constructor(
    readonly llp: LlpStream,
    options: DdpStreamOptions,
  ) {
    this.profile = options.profile ?? 'ietf';
    const dv = DDP_VERSION[this.profile];
    if (dv === undefined) throw new DdpInvalidArgumentError(`unknown DDP profile '${String(options.profile)}'`);
    const queues = options.queues ?? 1;
    if (!Number.isInteger(queues) || queues < 1)
      throw new DdpInvalidArgumentError(`queues must be a positive integer, got ${queues}`);
    this.nextMsn = new Array<number>(queues).fill(1); // §5.1.2: MSN starts at 1 on every queue
    for (const qn of options.startupMessages?.sent ?? []) this.nextMsnFor(qn); // ...the LLP sent the first ones
    const maxSendQueue = options.maxSendQueue ?? 1024;
    if (!Number.isInteger(maxSendQueue) || maxSendQueue < 1)
      throw new DdpInvalidArgumentError(`maxSendQueue must be a positive integer, got ${maxSendQueue}`);
    this.tx = new Transmitter(llp, dv, maxSendQueue);
    const caps = options.llpCapabilities;
    this.rx = new Receiver(
      {
        dv,
        pdId: options.pdId,
        stags: options.stags,
        queues,
        ...(options.startupMessages ? { startupReceived: options.startupMessages.received } : {}),
        ordered: caps?.ordered ?? true,
        reliable: caps?.reliable ?? true,
        ulpCheck: options.ulpCheck,
        ulpTaggedFastCheck: options.ulpTaggedFastCheck,
      },
      {
        placements: this.placements,
        delivery: options.onDelivery,
        deliveries: this.deliveries,
        error: (e) => this.onError(e),
      },
    );
    // Reported one macrotask later: a send whose LLP `done` already ran in this turn (the SACK and the
    // peer's close in one packet) settles its promise chain first, and is not reported as flushed.
    llp.closed$.subscribe((e) => setImmediate(() => this.onLlpClosed(e)));
    this.onFirstSegment = options.onFirstSegment;
    if (!options.startPaused) this.start();
  }

  /** Lets the LLP's ULPDUs through (at construction unless `startPaused`). */
  start(): void {
    if (this.started) return;
    this.started = true;
    const rx = this.rx;
    if (this.onFirstSegment === undefined) {
      this.llp.setReceiver((u) => rx.receive(u));
      return;
    }
    // RFC 5040 §6.1: the first segment is signalled once, then segments go straight to the receive path.
    this.llp.setReceiver((u) => {
      const first = this.onFirstSegment;
      this.onFirstSegment = undefined;
      this.llp.setReceiver((v) => rx.receive(v));
      first?.();
      rx.receive(u);
    });
  }

  get state(): DdpStreamState {
    return this._state;
  }
  /** Counters: segments sent/received, segments dropped after an error, duplicates ignored (unreliable LLPs). */
  get stats(): { segmentsSent: number; segmentsReceived: number; dropped: number; duplicates: number } {
    return {
      segmentsSent: this.tx.segmentsSent,
      segmentsReceived: this.rx.segments,
      dropped: this.rx.dropped,
      duplicates: this.rx.duplicates,
    };
  }

  get sendQueueLength(): number {
    return this.tx.queued;
  }

  maxPayload(tagged: boolean): number {
    return Math.max(0, this.llp.mulpdu - (tagged ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH));
  }

  sendTagged(
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const sink: DdpSendSink = { ddpSent: (e) => (e === undefined ? resolve() : reject(e)) };
      this.sendTaggedWith(stag, to, payload, rsvdUlp, sink, signal, onHanded);
    });
  }

  sendTaggedWith(
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): void {
    this.assertCanSend();
    const n = checkTaggedSend(stag, to, rsvdUlp, payload);
    this.tx.checkRoom();
    this.tx.enqueue(true, stag, to, 0, -1, rsvdUlp, payload, n, sink, signal, onHanded);
  }

  sendUntagged(
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): UntaggedSend {
    let msn = -1;
    // Settles with the MSN itself: no extra promise per message; the MSN rides on the promise.
    const sent = new Promise<number>((resolve, reject) => {
      const sink: DdpSendSink = { ddpSent: (e, m) => (e === undefined ? resolve(m) : reject(e)) };
      msn = this.sendUntaggedWith(qn, payload, rsvdUlp, sink, signal, onHanded);
    }) as Promise<number> & { msn: number };
    sent.msn = msn;
    return sent;
  }

  sendUntaggedWith(
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): number {
    this.assertCanSend();
    const n = checkUntaggedSend(qn, rsvdUlp, payload);
    // The peer's queues are the peer's business; MSNs are kept for any QN this side sends on.
    this.tx.checkRoom();
    const msn = this.nextMsnFor(qn);
    this.tx.enqueue(false, 0, 0n, qn, msn, rsvdUlp, payload, n, sink, signal, onHanded);
    return msn;
  }

  postReceive(qn: number, buffer: Uint8Array, receiveId?: unknown): void {
    if (this._state === 'closed') throw new DdpStreamClosedError('the DDP stream is closed');
    const q = this.rx.queues[qn];
    if (!q)
      throw new DdpInvalidArgumentError(`QN ${qn} is not a queue of this stream (0..${this.rx.queues.length - 1})`);
    if (!(buffer instanceof Uint8Array)) throw new DdpInvalidArgumentError('receive buffer must be a Uint8Array');
    q.post(buffer, receiveId);
  }

  postedReceives(qn: number): number {
    const q = this.rx.queues[qn];
    if (!q) throw new DdpInvalidArgumentError(`QN ${qn} is not a queue of this stream`);
    return q.posted;
  }

  flushReceives(qn?: number): FlushedReceive[] {
    if (qn === undefined) return this.rx.queues.flatMap((q) => q.flush());
    const q = this.rx.queues[qn];
    if (!q) throw new DdpInvalidArgumentError(`QN ${qn} is not a queue of this stream`);
    return q.flush();
  }

  async close(signal?: AbortSignal): Promise<void> {
    if (this._state === 'closed') return;
    if (this._state === 'open') this._state = 'closing';
    await this.llp.close(signal);
  }

  abort(reason?: Error): void {
    this.firstError ??= reason;
    this.llp.abort();
  }

  private nextMsnFor(qn: number): number {
    const msn = this.nextMsn[qn] ?? 1;
    this.nextMsn[qn] = msn === 0xffff_ffff ? 0 : msn + 1; // MSN is modulo 2^32 (RFC 5041 §4.3)
    return msn;
  }

  private assertCanSend(): void {
    if (this._state === 'closed' || this._state === 'closing' || this.llp.state !== 'open')
      throw new DdpStreamClosedError(
        `the DDP stream is ${this._state === 'open' ? `on an LLP stream that is ${this.llp.state}` : this._state}`,
      );
  }

  private onError(e: DdpErrorEvent): void {
    // §7.1 / §6.2.2: report, drop later segments, keep the outgoing half for one more message (the Terminate).
    if (this._state === 'open') this._state = 'error';
    this.firstError ??= new Error(`DDP: ${e.message}`);
    this.errors.next(e);
  }

  private onLlpClosed(e: LlpCloseEvent): void {
    this._state = 'closed';
    const error = e.error ?? this.firstError;
    this.tx.fail(
      new DdpStreamClosedError(`the LLP stream ended${e.error ? `: ${e.error.message}` : ''}`, { cause: e.error }),
    );
    const flushed = this.rx.queues.flatMap((q) => q.flush());
    this.closed.next({ graceful: e.graceful && !this.firstError, ...(error ? { error } : {}), flushed });
    this.closed.complete();
    this.placements.complete();
    this.deliveries.complete();
    this.errors.complete();
  }
}
