/**
 * One RDMAP Stream over one DDP Stream (RFC 5040 §6): the operations of §5 through the transmit and
 * receive paths, stream initialization (§6.1), graceful teardown (§6.2), RDMAP Abortive Termination with
 * at most one Terminate per stream (§5.4, §6.2.1), and error surfacing on both sides (§7.1). The RFC 7306
 * extensions (atomics, Immediate Data) run only when the stream enables them (`extensions`).
 */
import {
  Access,
  type DdpProfile,
  DdpStream,
  type DdpStreamApi,
  type DdpStreamOptions,
  type MemoryRegion,
} from '@rddp/ddp';
import type { LlpStream } from '@rddp/llp';
import type { Observable } from 'rxjs';
import { ACCESS_REMOTE_ATOMIC, ATOMIC_REQUEST_HEADER_LENGTH, ATOMIC_RESPONSE_HEADER_LENGTH } from './atomic.js';
import {
  LlpFailedError,
  type RdmapError,
  RdmapInvalidArgumentError,
  RdmapStateError,
  RdmapUnsuitableLlpError,
} from './errors.js';
import { READ_REQUEST_HEADER_LENGTH } from './header.js';
import {
  ATOMIC_RESPONSE_QUEUE,
  RDMAP_EXTENDED_QUEUE_COUNT,
  RDMAP_QUEUE_COUNT,
  RDMAP_VERSION,
  type RdmapExtension,
  RdmapQueue,
  type RdmapVersion,
} from './opcode.js';
import { addReceive } from './receive-queue.js';
import { deliveryTo } from './rx.js';
import { ulpCheckFor } from './rx-check.js';
import type { RdmapStreamState } from './state.js';
import { type RdmapStagTable, StreamState } from './stream-state.js';

export type { RdmapStagTable };

import { maybeCloseLlp, outstanding } from './send-queue.js';
import { TERMINATE_RECEIVE_BUFFER_LENGTH } from './terminate.js';
import { RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import { onDdpClosed, onDdpError, terminateWith } from './terminate-path.js';
import { postSendOf, pump } from './tx.js';
import type { RdmapClosedEvent, RdmapCompletion, RdmapTerminateEvent, RdmapWorkRequest } from './types.js';

export interface RdmapStreamOptions {
  /** `ietf` (DDP DV=1, RDMAP RV=1) or `rdmac` (DV=0, RV=0). Default `ietf`. */
  readonly profile?: DdpProfile;
  /** Protection domain of the stream: only its STags are used here (RFC 5040 §8.1.1). */
  readonly pdId: number;
  readonly stags: RdmapStagTable;
  /** Inbound RDMA Read Requests outstanding at most (IRD, §6.1): the Read Request queue's buffers. Default 8. */
  readonly ird?: number;
  /** Outbound RDMA Read Requests outstanding at most (ORD, §6.1). Default 8. */
  readonly ord?: number;
  /** A Read beyond ORD: `queue` holds it (and what follows) until a Read completes; `error` throws. */
  readonly ordPolicy?: 'queue' | 'error';
  /** Which end of the LLP connection this is. Default `initiator`. */
  readonly role?: 'initiator' | 'responder';
  /**
   * RFC 5040 §6.1 over an LLP that needs the initiator to send first (MPA, RFC 5044 §7.1.2, when the LLP
   * does not hold it back itself): a responder sends nothing until it received the first message.
   */
  readonly initiatorSendsFirst?: boolean;
  /** Whether the peer may invalidate `region` (RFC 5040 §5.3). Default: when it grants remote access. */
  readonly canRemoteInvalidate?: (region: MemoryRegion) => boolean;
  /** What the LLP promises, passed to DDP (ordered LLPs get the strict MO check). */
  readonly llpCapabilities?: { readonly reliable: boolean; readonly ordered: boolean };
  /**
   * Opt into RDMAP over an LLP that is not reliable and ordered (RFC 5040 §3.1 assumes one) with the
   * reduced semantics of docs/UDP-LLP.md "RDMAP over this LLP". Without it such an LLP is refused.
   */
  readonly reducedSemantics?: boolean;
  /** Builds the DDP Stream (default `new DdpStream(llp, options)`). */
  readonly createDdp?: (llp: LlpStream, options: DdpStreamOptions) => DdpStreamApi;
  /**
   * RFC 7306 extensions, off by default. Set only what both ends agreed on (RFC 7306 §1.1: how they agree
   * is the ULP's business, e.g. its connection private data): a peer that did not enable one answers its
   * messages with a Terminate (Unexpected OpCode, RFC 5040 §7.2 2), and posting one here without it
   * throws `RdmapExtensionDisabledError`. IETF profile only (they extend RDMAP Version 1).
   */
  readonly extensions?: RdmapExtensions;
  /**
   * Receive buffers for QN 0 posted before the LLP releases its first ULPDU (the rdma_cm order: a queue
   * pair takes receives before it is connected). Receives posted synchronously right after the
   * constructor are in time too: the first ULPDU is released one microtask later.
   */
  readonly receives?: readonly { readonly buffer: Uint8Array; readonly receiveId?: unknown }[];
  /** Untagged messages the LLP exchanged at setup (`LlpSetupInfo.startupMessages`, RFC 6581 RTRs). */
  readonly startupMessages?: { readonly sent: readonly number[]; readonly received: readonly number[] };
  /**
   * Every completion, called synchronously before `completions$` emits it: the one consumer that must see
   * all of them (verbs' queue pair) takes them here, with no subscription in between.
   */
  readonly onCompletion?: (completion: RdmapCompletion) => void;
}

/** Which RFC 7306 extensions a stream uses. */
export interface RdmapExtensions {
  /** Atomic Request/Response: FetchAdd, CmpSwap (QN 1 shared with Read Requests, QN 3 for Responses). */
  readonly atomics?: boolean;
  /** Immediate Data and Immediate Data with Solicited Event (QN 0), Write/Send with Immediate. */
  readonly immediate?: boolean;
}

const LOCAL_CATASTROPHIC = { errorType: RdmaErrorType.LocalCatastrophic, errorCode: 0 } as const;

export class RdmapStream {
  readonly profile: DdpProfile;
  readonly rv: RdmapVersion;
  readonly pdId: number;
  readonly ird: number;
  readonly ord: number;
  readonly role: 'initiator' | 'responder';
  readonly ddp: DdpStreamApi;
  /** The LLP stream DDP runs on. */
  readonly llp: LlpStream;
  /** The RFC 7306 extensions this stream uses. */
  readonly extensions: Readonly<Record<RdmapExtension, boolean>>;

  /** The one state the transmit, receive and terminate paths work on (stream-state.ts). */
  private readonly st: StreamState;
  /**
   * Posts send-queue work (RFC 5040 §5.1–5.3). Throws typed caller errors; everything else is reported
   * by the completion, in submission order. The transmit path's own function (tx.ts `postSendOf`): a work
   * request goes from this call straight into the send queue.
   */
  readonly postSend: (wr: RdmapWorkRequest) => void;

  constructor(llp: LlpStream, options: RdmapStreamOptions) {
    this.profile = options.profile ?? 'ietf';
    this.rv = RDMAP_VERSION[this.profile];
    if (this.rv === undefined) throw new RdmapInvalidArgumentError(`unknown profile '${String(options.profile)}'`);
    this.pdId = options.pdId;
    this.ird = options.ird ?? 8;
    this.ord = options.ord ?? 8;
    if (!Number.isInteger(this.ird) || this.ird < 0)
      throw new RdmapInvalidArgumentError(`IRD ${this.ird} is not a count`);
    if (!Number.isInteger(this.ord) || this.ord < 0)
      throw new RdmapInvalidArgumentError(`ORD ${this.ord} is not a count`);
    const caps = options.llpCapabilities;
    if (caps && !(caps.reliable && caps.ordered) && options.reducedSemantics !== true)
      throw new RdmapUnsuitableLlpError(
        `RDMAP needs a reliable, ordered LLP (RFC 5040 §3.1); this one is ${caps.reliable ? 'reliable' : 'unreliable'} and ${caps.ordered ? 'ordered' : 'unordered'}. Pass reducedSemantics: true to run with the reduced semantics of docs/UDP-LLP.md`,
      );
    this.role = options.role ?? 'initiator';
    this.extensions = Object.freeze({
      atomics: options.extensions?.atomics === true,
      immediate: options.extensions?.immediate === true,
    });
    if ((this.extensions.atomics || this.extensions.immediate) && this.rv !== 1)
      throw new RdmapInvalidArgumentError('the RFC 7306 extensions extend RDMAP Version 1: use the ietf profile');
    const queues = this.extensions.atomics ? RDMAP_EXTENDED_QUEUE_COUNT : RDMAP_QUEUE_COUNT;
    const st = new StreamState({
      rv: this.rv,
      pdId: this.pdId,
      stags: options.stags,
      ord: this.ord,
      extensions: this.extensions,
      queueCount: queues,
      canRemoteInvalidate:
        options.canRemoteInvalidate ??
        ((r) => (r.access & (Access.RemoteRead | Access.RemoteWrite | ACCESS_REMOTE_ATOMIC)) !== 0),
      held: (options.initiatorSendsFirst ?? false) && this.role === 'responder',
    });
    this.st = st;
    this.llp = llp;
    this.postSend = postSendOf(st, {
      extensions: this.extensions,
      ord: this.ord,
      ordPolicy: options.ordPolicy ?? 'queue',
    });
    st.onCompletion = options.onCompletion;

    const ddpOptions: DdpStreamOptions = {
      profile: this.profile,
      pdId: this.pdId,
      stags: options.stags,
      queues, // RFC 7306 atomics add QN 3; DDP takes the count from its ULP
      ulpCheck: ulpCheckFor(st),
      ulpAccepts: st.accepts, // what DDP places without asking ulpCheck: the opcode table's plain Writes and Sends
      ...(options.llpCapabilities ? { llpCapabilities: options.llpCapabilities } : {}),
      ...(options.startupMessages ? { startupMessages: options.startupMessages } : {}),
      // RFC 5040 §6.1: receives first (released by `start`), and the initiator's first message frees a
      // responder that holds its own.
      startPaused: true,
      onDelivery: deliveryTo(st), // the hot path: a direct call, no subscription
      onFirstSegment: () => {
        if (!st.held.value) return;
        st.held.next(false);
        pump(st);
      },
    };
    this.ddp = options.createDdp ? options.createDdp(this.llp, ddpOptions) : new DdpStream(this.llp, ddpOptions);
    st.ddp = this.ddp;
    if (this.ddp.profile !== this.profile)
      throw new RdmapInvalidArgumentError(`the DDP stream runs profile ${this.ddp.profile}, RDMAP ${this.profile}`);
    // §5.2.2: IRD buffers on the Read Request queue (a Request beyond IRD finds none); §5.4: one Terminate buffer.
    // RFC 7306: Atomic Requests share those IRD buffers (sized for their 52-octet header), and ORD buffers on
    // QN 3 take the Atomic Responses (an atomic is issued only with an ORD slot, so one is always free).
    const requestBuffer = this.extensions.atomics ? ATOMIC_REQUEST_HEADER_LENGTH : READ_REQUEST_HEADER_LENGTH;
    for (let i = 0; i < this.ird; i++) this.ddp.postReceive(RdmapQueue.ReadRequest, new Uint8Array(requestBuffer));
    this.ddp.postReceive(RdmapQueue.Terminate, new Uint8Array(TERMINATE_RECEIVE_BUFFER_LENGTH));
    if (this.extensions.atomics)
      for (let i = 0; i < this.ord; i++)
        this.ddp.postReceive(ATOMIC_RESPONSE_QUEUE, new Uint8Array(ATOMIC_RESPONSE_HEADER_LENGTH));
    this.ddp.error$.subscribe((ev) => onDdpError(st, ev));
    this.ddp.closed$.subscribe((ev) => onDdpClosed(st, ev));
    // RFC 5040 §4.8 Figure 9, Layer LLP: an LLP receive error (MPA CRC, RFC 5044 §8) is answered with a
    // Terminate carrying the LLP's Error Type and Code and no copied headers (Figure 10), then a close.
    llp.receiveError$?.subscribe((e) =>
      terminateWith(
        st,
        { layer: TerminateLayer.Llp, errorType: e.errorType, errorCode: e.errorCode },
        undefined,
        new LlpFailedError('receive', e.error),
      ),
    );
    for (const r of options.receives ?? []) this.postReceive(r.buffer, r.receiveId);
    // The first ULPDU goes to DDP once the caller has had its turn to post receives (RFC 5040 §6.1).
    queueMicrotask(() => this.start());
  }

  /**
   * Lets the LLP's ULPDUs through to DDP now. Done by itself one microtask after the constructor; a
   * caller that feeds the LLP synchronously (a test harness) calls it once its receives are posted.
   */
  start(): void {
    this.ddp.start();
  }

  get state(): RdmapStreamState {
    return this.st.sm.state;
  }
  /** The state now and every change (RFC 5040 §6). */
  get state$(): Observable<RdmapStreamState> {
    return this.st.sm.state$;
  }
  /** Whether this side is holding its messages until the initiator's first one arrives (§6.1). */
  get held(): boolean {
    return this.st.held.value;
  }
  /** Every completion: send-queue work in submission order (rule 15), receives in Delivery order (rule 10). */
  get completions$(): Observable<RdmapCompletion> {
    return this.st.completions.asObservable();
  }
  /** The Terminate sent or received, if any (RFC 5040 §7.1); replayed to late subscribers. */
  get terminate$(): Observable<RdmapTerminateEvent> {
    return this.st.terminates.asObservable();
  }
  /** Emits once when the stream has ended (`closed` or `error`), then completes; replayed. */
  get closed$(): Observable<RdmapClosedEvent> {
    return this.st.closed.asObservable();
  }
  /** The error that ended the stream, once it has. */
  get error(): RdmapError | undefined {
    return this.st.endError;
  }
  /** Send-queue requests posted and not completed. */
  get outstanding(): number {
    return outstanding(this.st);
  }
  /** Receive buffers posted on QN 0 and not completed. */
  get postedReceives(): number {
    return this.st.receives.length;
  }
  /** RDMA Reads handed to DDP whose Response has not been Delivered. */
  get readsInFlight(): number {
    return this.st.reads.count;
  }
  /** Atomic Requests handed to DDP whose Atomic Response has not been Delivered (RFC 7306). */
  get atomicsInFlight(): number {
    return this.st.atomics.count;
  }

  /** Posts a receive buffer for incoming Sends (QN 0, RFC 5040 §5.3); they consume them in order. */
  postReceive(buffer: Uint8Array, id?: unknown): void {
    const s = this.st.sm.state;
    if (s !== 'rts' && s !== 'closing') throw new RdmapStateError(s, 'post a receive');
    const r = { id, buffer };
    this.ddp.postReceive(RdmapQueue.Send, buffer, r);
    addReceive(this.st, r);
  }

  /**
   * ULP Graceful Termination, then LLP graceful teardown (RFC 5040 §6.2): no new work is accepted, what
   * is posted completes and owed Read Responses go out, then the LLP stream closes. Resolves once
   * closed; rejects with the stream's error if it ended in error instead.
   */
  close(signal?: AbortSignal): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.st.closed.subscribe((ev) => (ev.state === 'closed' ? resolve() : reject(ev.error)));
    });
    if (this.st.sm.state === 'rts') this.st.sm.to('closing');
    maybeCloseLlp(this.st);
    if (!signal) return done;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(new RdmapStateError(this.st.sm.state, 'wait for the close (aborted)'));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      done.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /**
   * RDMAP Abortive Termination asked for by the ULP (RFC 5040 §6.2.1): a Terminate (RDMA layer, no copied
   * headers), outstanding work Completed in error, then the LLP closed. By default a Local Catastrophic
   * Error; a ULP that found its peer's message unacceptable says so with Remote Operation Error,
   * Unspecified Error (§7.2: `{ errorType: RdmaErrorType.RemoteOperation, errorCode: 0xff }`).
   */
  terminate(cause: { errorType: RdmaErrorType; errorCode: number } = LOCAL_CATASTROPHIC): void {
    if (
      !Object.values(RdmaErrorType).includes(cause.errorType) ||
      !Number.isInteger(cause.errorCode) ||
      cause.errorCode < 0 ||
      cause.errorCode > 0xff
    )
      throw new RdmapInvalidArgumentError(
        `Terminate cause ${cause.errorType}/${cause.errorCode} is not an RDMA-layer Error Type and 8-bit Error Code (RFC 5040 §4.8)`,
      );
    terminateWith(this.st, { layer: TerminateLayer.Rdma, errorType: cause.errorType, errorCode: cause.errorCode });
  }

  /** LLP Abortive Termination (RFC 5040 §6.2): the LLP stream is reset, no Terminate is sent. */
  abort(reason?: Error): void {
    if (this.st.closedEvent) return;
    this.ddp.abort(reason);
  }
}

export { terminateStatus } from './terminate-path.js';
export { RDMAP_MAX_MESSAGE } from './tx.js';
