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
  type DdpStreamApi,
  type DdpStreamOptions,
  type DdpStreamState,
  type DeliveryEvent,
  type FlushedReceive,
  type PlacementEvent,
} from './api.js';
import { DdpInvalidArgumentError, DdpStreamClosedError } from './errors.js';
import { Receiver } from './rx.js';
import { type StreamLife, Transmitter } from './tx.js';

export class DdpStream implements DdpStreamApi {
  readonly profile: DdpProfile;
  /** The stream's one lifecycle state; the transmit half reads it too. */
  private readonly life: StreamLife = { state: 'open' };
  private readonly tx: Transmitter;
  private readonly rx: Receiver;
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
    const maxSendQueue = options.maxSendQueue ?? 1024;
    if (!Number.isInteger(maxSendQueue) || maxSendQueue < 1)
      throw new DdpInvalidArgumentError(`maxSendQueue must be a positive integer, got ${maxSendQueue}`);
    // §5.1.2: MSN starts at 1 on every queue...
    this.tx = new Transmitter(llp, dv, maxSendQueue, this.life, new Array<number>(queues).fill(1));
    for (const qn of options.startupMessages?.sent ?? []) this.tx.nextMsnFor(qn); // ...the LLP sent the first ones
    // The send calls are the transmit path's own (tx.ts): a ULP's message goes from its call straight there.
    this.sendTagged = this.tx.sendTagged;
    this.sendTaggedWith = this.tx.sendTaggedWith;
    this.sendUntagged = this.tx.sendUntagged;
    this.sendUntaggedWith = this.tx.sendUntaggedWith;
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
        ulpAccepts: options.ulpAccepts,
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
      this.llp.setReceiver(rx.receive);
      return;
    }
    // RFC 5040 §6.1: the first segment is signalled once, then segments go straight to the receive path.
    this.llp.setReceiver((u) => {
      const first = this.onFirstSegment;
      this.onFirstSegment = undefined;
      this.llp.setReceiver(rx.receive);
      first?.();
      rx.receive(u);
    });
  }

  get state(): DdpStreamState {
    return this.life.state;
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

  readonly sendTagged: DdpStreamApi['sendTagged'];
  readonly sendTaggedWith: DdpStreamApi['sendTaggedWith'];
  readonly sendUntagged: DdpStreamApi['sendUntagged'];
  readonly sendUntaggedWith: DdpStreamApi['sendUntaggedWith'];

  maxPayload(tagged: boolean): number {
    return Math.max(0, this.llp.mulpdu - (tagged ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH));
  }

  postReceive(qn: number, buffer: Uint8Array, receiveId?: unknown): void {
    if (this.life.state === 'closed') throw new DdpStreamClosedError('the DDP stream is closed');
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
    if (this.life.state === 'closed') return;
    if (this.life.state === 'open') this.life.state = 'closing';
    await this.llp.close(signal);
  }

  abort(reason?: Error): void {
    this.firstError ??= reason;
    this.llp.abort();
  }

  private onError(e: DdpErrorEvent): void {
    // §7.1 / §6.2.2: report, drop later segments, keep the outgoing half for one more message (the Terminate).
    if (this.life.state === 'open') this.life.state = 'error';
    this.firstError ??= new Error(`DDP: ${e.message}`);
    this.errors.next(e);
  }

  private onLlpClosed(e: LlpCloseEvent): void {
    this.life.state = 'closed';
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
