/**
 * A queue pair (ibv_qp) over one RDMAP Stream: states after Linux siw (`init` → `rts` →
 * `closing`/`terminate` → `closed`/`error`), a send queue and a receive queue (work requests checked and
 * translated by `work-requests.ts`), and one completion path: RDMAP's `completions$` carries both the
 * send-queue and the receive completions (RFC 5040 §5.5), which become work completions on the CQs.
 */
import type { DdpErrorEvent, DdpProfile, PlacementEvent } from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import {
  ATOMIC_OPERAND_LENGTH,
  composeRdmapOptions,
  RDMAP_MAX_MESSAGE,
  type RdmapClosedEvent,
  type RdmapCompletion,
  RdmapStateError,
  RdmapStream,
  type RdmapStreamState,
  type RdmapTerminateEvent,
  type RdmapWorkRequest,
} from '@rddp/rdmap';
import { concat, defaultIfEmpty, defer, type Observable, of, ReplaySubject, switchMap } from 'rxjs';
import type { CompletionQueue } from './cq.js';
import type { ProtectionDomainRef } from './domain.js';
import { InvalidWorkRequestError, QpStateError, QueueFullError, WorkCompletionError } from './errors.js';
import type { Pending, QpConnectOptions, QpInit, Settle } from './qp-options.js';
import { QueuePairConveniences } from './qp-promises.js';
import type { RecvWorkRequest, SendWorkRequest, WcStatus, WorkCompletion } from './types.js';
import { count, positive, receiveBuffer, type TranslatedSend, translateSend, type WrLimits } from './work-requests.js';

/** `init` until connected, then the RDMAP Stream's state (RFC 5040 §6). */
export type QpState = 'init' | RdmapStreamState;

/** What a completion adds to its work request's id and opcode. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The token a work request carries through RDMAP (a send's `context`, a receive's `receiveId`, each echoed
 * in its completion). RDMAP and DDP events show it, so the record sits in private fields: only the queue
 * pair that posted the request reads it back, once. (A token per request in a WeakMap cost more.)
 */
class WrToken {
  readonly #owner: object;
  #pending: Pending | undefined;

  constructor(owner: object, pending: Pending) {
    this.#owner = owner;
    this.#pending = pending;
  }

  /** The record of `id` if `owner` posted it and it has not completed yet; marks it completed. */
  static take(owner: object, id: unknown): Pending | undefined {
    if (typeof id !== 'object' || id === null || !(#pending in id)) return undefined;
    const t = id as WrToken;
    if (t.#owner !== owner) return undefined;
    const p = t.#pending;
    t.#pending = undefined;
    return p;
  }
}

export class QueuePair extends QueuePairConveniences {
  readonly sendCq: CompletionQueue;
  readonly recvCq: CompletionQueue;
  readonly maxSendWr: number;
  readonly maxRecvWr: number;
  readonly maxSge: number;
  readonly maxMessageSize: number;
  readonly ord: number;
  readonly ird: number;
  readonly sqSigAll: boolean;
  readonly profile: DdpProfile;
  private stream: RdmapStream | undefined;
  private readonly connected = new ReplaySubject<RdmapStream>(1);
  /** The state before an RDMAP Stream exists: `init`, or `closed` if the queue pair ended unconnected. */
  private unconnected: 'init' | 'closed' = 'init';
  private readonly closedSubject = new ReplaySubject<RdmapClosedEvent>(1);
  private readonly terminateSubject = new ReplaySubject<RdmapTerminateEvent>(1);
  private sqOutstanding = 0;
  /** What work requests are checked against (fixed once connected). */
  private limits: WrLimits | undefined;
  private rqOutstanding = 0;
  /** Receives posted before `connect` (ibverbs allows posting receives in INIT). */
  private readonly early: { readonly token: WrToken; readonly buffer: Uint8Array }[] = [];

  /** @internal Made by `ProtectionDomain.createQp`. */
  constructor(
    readonly pd: ProtectionDomainRef,
    readonly qpNum: number,
    init: QpInit,
    private readonly onDestroy: (qp: QueuePair) => void,
  ) {
    super();
    this.sendCq = init.sendCq;
    this.recvCq = init.recvCq;
    this.maxSendWr = positive(init.maxSendWr ?? 256, 'maxSendWr');
    this.maxRecvWr = positive(init.maxRecvWr ?? 256, 'maxRecvWr');
    this.maxSge = positive(init.maxSge ?? 16, 'maxSge');
    this.maxMessageSize = Math.min(
      positive(init.maxMessageSize ?? RDMAP_MAX_MESSAGE, 'maxMessageSize'),
      RDMAP_MAX_MESSAGE,
    );
    this.ord = count(init.ord ?? 8, 'ord');
    this.ird = count(init.ird ?? 8, 'ird');
    this.sqSigAll = init.sqSigAll ?? true;
    this.profile = init.profile ?? 'ietf';
  }

  /** `init`, then the RDMAP Stream's own state (read from it, never copied: one lifecycle per queue pair). */
  get state(): QpState {
    return this.stream?.state ?? this.unconnected;
  }
  /** The state now and every change; completes when the RDMAP Stream reaches `error` or `closed`. */
  get state$(): Observable<QpState> {
    return defer(() => {
      if (this.stream) return this.stream.state$;
      if (this.unconnected === 'closed') return of<QpState>('closed');
      return concat(
        of<QpState>('init'),
        this.connected.pipe(
          switchMap((s) => s.state$),
          defaultIfEmpty<QpState, QpState>('closed'),
        ),
      );
    });
  }
  /** The Terminate this queue pair sent or received, if any (RFC 5040 §7.1: both ULPs learn of an error). */
  get terminate$(): Observable<RdmapTerminateEvent> {
    return this.terminateSubject.asObservable();
  }
  /** Emits once when the queue pair's stream has ended (`closed` or `error`). */
  get closed$(): Observable<RdmapClosedEvent> {
    return this.closedSubject.asObservable();
  }
  /**
   * Each tagged DDP segment placed into this side's registered memory (RFC 5041 §5.1.1): the peer's RDMA
   * Writes and the Read Responses to this side's RDMA Reads, reported once the bytes are written (STag,
   * TO, length, and `last` for the segment that ends the message). May be subscribed to at once; events
   * come from `connect` on; completes with none if the queue pair ends unconnected.
   */
  get placement$(): Observable<PlacementEvent> {
    return this.connected.pipe(switchMap((s) => s.ddp.placement$));
  }
  /**
   * Each error DDP found on an incoming segment (RFC 5041 §7.1, §7.2; `layer: 'rdmap'` for what RDMAP's
   * checks refused): nothing of that segment was placed, and RDMAP answers with a Terminate (`terminate$`).
   * From `connect` on, as `placement$`.
   */
  get ddpErrors$(): Observable<DdpErrorEvent> {
    return this.connected.pipe(switchMap((s) => s.ddp.error$));
  }
  /** The RDMAP Stream, once connected. */
  get rdmap(): RdmapStream | undefined {
    return this.stream;
  }
  /** Send and receive work requests posted and not completed. */
  get outstanding(): { send: number; recv: number } {
    return { send: this.sqOutstanding, recv: this.rqOutstanding };
  }

  /**
   * Moves the queue pair to RTS over `llp` (RFC 5040 §6.1): an LLP stream, or a connection (its first
   * stream, its role and its LLP's promises). Receives posted before are handed over in order.
   */
  connect(llp: LlpStream | LlpConnection, options: QpConnectOptions = {}): void {
    if (this.state !== 'init') throw new QpStateError(this.state, 'connect');
    const isConnection = 'streams' in llp;
    const index = options.stream ?? 0;
    const stream = isConnection ? llp.streams[index] : llp;
    if (stream === undefined)
      throw new InvalidWorkRequestError(
        `the LLP connection has no stream ${index} (it has ${isConnection ? llp.streams.length : 1})`,
      );
    // The rdma_cm order: receives posted in INIT, and IRD/ORD as the LLP announced them (RFC 6581), are in
    // place before the first ULPDU reaches DDP.
    const early = this.early.splice(0);
    const rdmap = (options.rdmapFactory ?? ((s, o) => new RdmapStream(s, o)))(
      stream,
      composeRdmapOptions(
        {
          profile: this.profile,
          pdId: this.pd.id,
          stags: this.pd.device.stags,
          ord: this.ord,
          ird: this.ird,
          receives: early.map((r) => ({ buffer: r.buffer, receiveId: r.token })),
          onCompletion: (c) => this.onCompletion(c),
        },
        isConnection ? llp : undefined,
        { role: options.role, initiatorSendsFirst: options.initiatorSendsFirst, extensions: options.extensions },
      ),
    );
    this.stream = rdmap;
    rdmap.terminate$.subscribe((t) => this.terminateSubject.next(t));
    rdmap.closed$.subscribe((ev) => this.end(ev));
    this.connected.next(rdmap);
    this.connected.complete();
  }

  /**
   * Posts send work requests (ibv_post_send): validated all first (typed errors, nothing posted if one
   * is bad), then handed to RDMAP in order (RFC 5040 §5.5 rule 13). Completions come on `sendCq`.
   */
  postSend(wrs: SendWorkRequest | readonly SendWorkRequest[]): void {
    this.post(Array.isArray(wrs) ? (wrs as readonly SendWorkRequest[]) : [wrs as SendWorkRequest]);
  }

  /** Posts receive work requests (ibv_post_recv) for incoming Sends (RFC 5040 §5.3), consumed in order. */
  postRecv(wrs: RecvWorkRequest | readonly RecvWorkRequest[]): void {
    if (!Array.isArray(wrs)) {
      // One work request (the common case, a receive posted again): no lists built around it.
      const wr = wrs as RecvWorkRequest;
      this.recvOne(wr, this.checkRecv(wr));
      return;
    }
    const list = wrs as readonly RecvWorkRequest[];
    const buffers = list.map((wr, i) => this.checkRecv(wr, i));
    for (let i = 0; i < list.length; i++) this.recvOne(list[i] as RecvWorkRequest, buffers[i] as Uint8Array);
  }

  /** Graceful teardown (RFC 5040 §6.2): what is posted completes, then the LLP stream closes. */
  async close(signal?: AbortSignal): Promise<void> {
    await this.endingStream()?.close(signal);
  }

  /** RDMAP Abortive Termination (RFC 5040 §6.2.1): a Terminate to the peer, everything Completed in error. */
  terminate(): void {
    this.endingStream()?.terminate();
  }

  /** LLP Abortive Termination (RFC 5040 §6.2): the LLP stream is reset without a Terminate. */
  abort(reason?: Error): void {
    this.endingStream()?.abort(reason);
  }

  /** The RDMAP Stream to end; none before `connect`, and a queue pair still in `init` ends unconnected. */
  private endingStream(): RdmapStream | undefined {
    if (this.stream === undefined && this.state === 'init') this.endUnconnected();
    return this.stream;
  }

  // ----- internals -----

  protected postSettled(wr: SendWorkRequest): Promise<WorkCompletion> {
    return new Promise<WorkCompletion>((resolve, reject) => this.post([wr], { resolve, reject }));
  }

  protected recvSettled(wr: RecvWorkRequest): Promise<WorkCompletion> {
    return new Promise<WorkCompletion>((resolve, reject) => this.recvOne(wr, this.checkRecv(wr), { resolve, reject }));
  }

  /** Checks every work request of `list`, then hands them to RDMAP in order. */
  private post(list: readonly SendWorkRequest[], settle?: Settle): void {
    const stream = this.stream;
    // Unconnected here; a connected queue pair's state is RDMAP's, which its postSend checks (see submit).
    if (stream === undefined) throw new QpStateError(this.unconnected, 'post a send work request');
    if (this.sqOutstanding + list.length > this.maxSendWr)
      throw new QueueFullError(
        `the send queue holds ${this.sqOutstanding} of ${this.maxSendWr} work requests${settle ? '' : `; ${list.length} more do not fit`}`,
      );
    const limits = (this.limits ??= {
      pd: this.pd,
      maxSge: this.maxSge,
      maxMessageSize: this.maxMessageSize,
      extensions: stream.extensions,
    });
    if (list.length === 1) {
      // One work request (the common case): no lists built around it.
      const wr = list[0] as SendWorkRequest;
      this.submit(stream, wr, translateSend(wr, limits, 0), settle);
      return;
    }
    const built = list.map((wr, i) => translateSend(wr, limits, i));
    for (let i = 0; i < list.length; i++)
      this.submit(stream, list[i] as SendWorkRequest, built[i] as TranslatedSend, settle);
  }

  private submit(stream: RdmapStream, wr: SendWorkRequest, t: TranslatedSend, settle?: Settle): void {
    // The record rides in the request's token: RDMAP's send queue is the queue pair's only one.
    const context = new WrToken(this, {
      wrId: wr.wrId,
      opcode: t.opcode,
      signaled: wr.signaled ?? this.sqSigAll,
      settle,
      result: t.result,
    });
    const plain: RdmapWorkRequest = { op: t.op, localStags: t.localStags, context };
    const request = wr.fence || wr.signal ? { ...plain, fence: wr.fence === true, signal: wr.signal } : plain;
    this.sqOutstanding++;
    try {
      stream.postSend(request);
    } catch (e) {
      this.sqOutstanding--; // refused by RDMAP: it holds no place
      if (e instanceof RdmapStateError) throw new QpStateError(e.state, 'post a send work request');
      throw e;
    }
  }

  /** Checks a receive work request, the `ahead`-th of those posted together (each takes a place in the queue). */
  private checkRecv(wr: RecvWorkRequest, ahead = 0): Uint8Array {
    if (this.state !== 'init' && this.state !== 'rts')
      throw new QpStateError(this.state, 'post a receive work request');
    const buffer = receiveBuffer(wr, this.pd, ahead);
    if (this.rqOutstanding + ahead + 1 > this.maxRecvWr)
      throw new QueueFullError(`the receive queue holds ${this.rqOutstanding} of ${this.maxRecvWr} work requests`);
    return buffer;
  }

  private recvOne(wr: RecvWorkRequest, buffer: Uint8Array, settle?: Settle): void {
    // The record rides in the token itself (private fields): RDMAP and DDP events never expose it.
    const token = new WrToken(this, { wrId: wr.wrId, opcode: 'recv', signaled: true, settle });
    if (this.stream === undefined) this.early.push({ token, buffer });
    else this.stream.postReceive(buffer, token);
    this.rqOutstanding++;
  }

  /** The one completion path: RDMAP's send-queue and receive completions, in the order RDMAP reports them. */
  private onCompletion(c: RdmapCompletion): void {
    if (c.kind === 'receive') {
      const p = WrToken.take(this, c.id);
      if (p === undefined) return; // a receive posted on the RDMAP Stream directly, not through this queue pair
      const wc = this.wc(p, c.status, c.byteLength, c.solicited);
      if (c.invalidatedStag !== undefined) wc.invalidatedStag = c.invalidatedStag;
      if (c.immediateData !== undefined) wc.immData = c.immediateData;
      if (c.error) wc.error = c.error;
      this.complete(p, wc);
      return;
    }
    const p = WrToken.take(this, c.request.context);
    if (p === undefined) return; // work posted on the RDMAP Stream directly, not through this queue pair
    if (c.status === 'success' && !p.signaled && p.settle === undefined && p.result === undefined) {
      this.sqOutstanding--; // an unsignaled success reports nothing (ibv_post_send without IBV_SEND_SIGNALED)
      return;
    }
    // RFC 7306: the Original Remote Data Value goes into the atomic's local element, in wire (big-endian) order.
    if (c.atomicResult !== undefined && p.result !== undefined)
      new DataView(p.result.buffer, p.result.byteOffset, ATOMIC_OPERAND_LENGTH).setBigUint64(0, c.atomicResult);
    const wc = this.wc(p, c.status, c.byteLength, false);
    if (c.atomicResult !== undefined) wc.atomicResult = c.atomicResult;
    if (c.error) wc.error = c.error;
    this.complete(p, wc);
  }

  /** A work completion's fixed fields, one object shape for all (optional ones are set by the caller). */
  private wc(p: Pending, status: WcStatus, byteLen: number, solicited: boolean): Mutable<WorkCompletion> {
    return { wrId: p.wrId, status, opcode: p.opcode, byteLen, qpNum: this.qpNum, solicited };
  }

  /** Reports a work completion on its CQ (a send's success only if signaled) and settles its promise. */
  private complete(p: Pending, wc: WorkCompletion): void {
    const status = wc.status;
    if (p.opcode === 'recv') {
      this.rqOutstanding--;
      this.recvCq.push(wc);
    } else {
      this.sqOutstanding--;
      if (p.signaled || status !== 'success') this.sendCq.push(wc);
    }
    if (!p.settle) return;
    if (status === 'success') p.settle.resolve(wc);
    else p.settle.reject(new WorkCompletionError(wc));
  }

  /** A queue pair closed before it was connected: its receives are flushed. */
  private endUnconnected(): void {
    for (const { token } of this.early.splice(0)) {
      const p = WrToken.take(this, token);
      if (p) this.complete(p, this.wc(p, 'flushed', 0, false));
    }
    this.unconnected = 'closed';
    this.connected.complete();
    this.end({ state: 'closed' });
  }

  private end(ev: RdmapClosedEvent): void {
    this.onDestroy(this);
    this.terminateSubject.complete();
    this.closedSubject.next(ev);
    this.closedSubject.complete();
  }
}
