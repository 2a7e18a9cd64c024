/**
 * One RDMAP Stream over one DDP Stream (RFC 5040 §6): the operations of §5 through the transmit and
 * receive paths, stream initialization (§6.1), graceful teardown (§6.2), RDMAP Abortive Termination with
 * at most one Terminate per stream (§5.4, §6.2.1), and error surfacing on both sides (§7.1). The RFC 7306
 * extensions (atomics, Immediate Data) run only when the stream enables them (`extensions`).
 */
import {
  Access,
  type DdpCloseEvent,
  type DdpErrorEvent,
  type DdpProfile,
  DdpStream,
  type DdpStreamApi,
  type DdpStreamOptions,
  MAX_U64,
  type MemoryRegion,
  type StagTableApi,
  UntaggedErrorCode,
} from '@rddp/ddp';
import type { LlpSetupInfo, LlpStream } from '@rddp/llp';
import { BehaviorSubject, type Observable, ReplaySubject, Subject } from 'rxjs';
import {
  ACCESS_REMOTE_ATOMIC,
  ATOMIC_OPERAND_LENGTH,
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  AtomicOpcode,
  OutstandingAtomics,
} from './atomic.js';
import {
  FlushedError,
  InvalidTerminateError,
  LlpFailedError,
  type LocalProtectionError,
  OrdExceededError,
  RdmapError,
  RdmapExtensionDisabledError,
  RdmapInvalidArgumentError,
  RdmapMessageTooLongError,
  RdmapStateError,
  RdmapUnsuitableLlpError,
  TerminatedError,
} from './errors.js';
import { controlOf, encodeControl, encodeUntaggedRsvdUlp, READ_REQUEST_HEADER_LENGTH } from './header.js';
import {
  ATOMIC_RESPONSE_QUEUE,
  opcodeRowOf,
  RDMAP_EXTENDED_QUEUE_COUNT,
  RDMAP_QUEUE_COUNT,
  RDMAP_VERSION,
  type RdmapExtension,
  RdmapOpcode,
  RdmapQueue,
  type RdmapVersion,
} from './opcode.js';
import { OutstandingReads } from './read.js';
import { type PendingResponse, Receiver } from './rx.js';
import { type RdmapStreamState, StreamStateMachine } from './state.js';
import {
  decodeTerminate,
  encodeTerminate,
  TERMINATE_RECEIVE_BUFFER_LENGTH,
  type TerminateCause,
  type TerminateHeader,
  terminateFor,
} from './terminate.js';
import { DdpWireErrorType, describeTerminate, RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import { type SqEntry, Transmitter } from './tx.js';
import type {
  CompletionStatus,
  ImmediateData,
  RdmapClosedEvent,
  RdmapCompletion,
  RdmapTerminateEvent,
  RdmapWorkRequest,
  ReceiveCompletion,
  SendCompletion,
} from './types.js';

/** The STag table RDMAP needs: DDP's lookup, plus invalidation for Send with Invalidate (§5.3). */
export interface RdmapStagTable extends StagTableApi {
  /** Invalidates `stag`; returning `false` or throwing means it could not be. */
  invalidate(stag: number): unknown;
}

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
}

/**
 * RDMAP options an LLP connection's setup decides (RFC 6581): IRD/ORD as announced, and the MSNs its RTR
 * used. Spread them over the application's own: `{ ird: 8, ord: 8, ...rdmapOptionsFromSetup(c.setup) }`.
 */
export function rdmapOptionsFromSetup(
  setup: LlpSetupInfo,
): Pick<RdmapStreamOptions, 'ird' | 'ord' | 'startupMessages'> {
  return {
    ...(setup.readLimits ? { ird: setup.readLimits.ird, ord: setup.readLimits.ord } : {}),
    ...(setup.startupMessages ? { startupMessages: setup.startupMessages } : {}),
  };
}

/** Which RFC 7306 extensions a stream uses. */
export interface RdmapExtensions {
  /** Atomic Request/Response: FetchAdd, CmpSwap (QN 1 shared with Read Requests, QN 3 for Responses). */
  readonly atomics?: boolean;
  /** Immediate Data and Immediate Data with Solicited Event (QN 0), Write/Send with Immediate. */
  readonly immediate?: boolean;
}

/** The largest message RDMAP can describe: RDMA Read Message Size and DDP MO are 32 bits (§4.4). */
export const RDMAP_MAX_MESSAGE = 0xffff_ffff;
const ATOMIC_OPCODES: readonly unknown[] = Object.values(AtomicOpcode);

function totalLength(parts: readonly Uint8Array[]): number {
  let n = 0;
  for (const p of parts) n += p.byteLength;
  return n;
}

/** Which local operation a Terminate is about, and how it completes. */
interface Culprit {
  readonly entry?: SqEntry;
  readonly status?: CompletionStatus;
  readonly error?: RdmapError;
  /** The oldest posted receive completes with this status (the Send it was receiving was bad). */
  readonly receive?: CompletionStatus;
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

  private readonly reads: OutstandingReads<SqEntry>;
  private readonly atomics = new OutstandingAtomics<SqEntry>();
  private readonly sm = new StreamStateMachine();
  private readonly tx: Transmitter;
  private readonly rx: Receiver;
  private readonly stags: RdmapStagTable;
  private readonly ordPolicy: 'queue' | 'error';
  private readonly remoteInvalidateAllowed: (region: MemoryRegion) => boolean;
  private readonly completionSubject = new Subject<RdmapCompletion>();
  private readonly terminateSubject = new ReplaySubject<RdmapTerminateEvent>();
  private readonly closedSubject = new ReplaySubject<RdmapClosedEvent>(1);
  private readonly heldSubject: BehaviorSubject<boolean>;
  private closedEvent: RdmapClosedEvent | undefined;
  private terminated: 'sent' | 'received' | undefined;
  private endError: RdmapError | undefined;
  private llpClosing = false;

  constructor(llp: LlpStream, options: RdmapStreamOptions) {
    this.profile = options.profile ?? 'ietf';
    this.rv = RDMAP_VERSION[this.profile];
    if (this.rv === undefined) throw new RdmapInvalidArgumentError(`unknown profile '${String(options.profile)}'`);
    this.pdId = options.pdId;
    this.stags = options.stags;
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
    this.ordPolicy = options.ordPolicy ?? 'queue';
    this.role = options.role ?? 'initiator';
    this.extensions = Object.freeze({
      atomics: options.extensions?.atomics === true,
      immediate: options.extensions?.immediate === true,
    });
    if ((this.extensions.atomics || this.extensions.immediate) && this.rv !== 1)
      throw new RdmapInvalidArgumentError('the RFC 7306 extensions extend RDMAP Version 1: use the ietf profile');
    this.remoteInvalidateAllowed =
      options.canRemoteInvalidate ??
      ((r) => (r.access & (Access.RemoteRead | Access.RemoteWrite | ACCESS_REMOTE_ATOMIC)) !== 0);
    this.reads = new OutstandingReads<SqEntry>(this.ord);
    this.heldSubject = new BehaviorSubject((options.initiatorSendsFirst ?? false) && this.role === 'responder');

    this.llp = llp;
    const self = this;
    this.tx = new Transmitter({
      get ddp() {
        return self.ddp;
      },
      rv: this.rv,
      pdId: this.pdId,
      state: this.sm,
      reads: this.reads,
      atomics: this.atomics,
      lookup: (stag) => this.stags.lookup(stag),
      invalidate: (stag) => this.invalidate(stag),
      get held() {
        return self.heldSubject.value;
      },
      onLocalBufferError: (err) => this.onLocalBufferError(err),
      onResponseSourceError: (p, code) => this.onResponseSourceError(p, code),
      onSendFailure: (err) => this.onSendFailure(err),
      onResponseSent: (p) => this.onResponseSent(p),
      maybeIdle: () => this.maybeCloseLlp(),
      emitCompletion: (c) => this.emitSend(c),
    });
    const queues = this.extensions.atomics ? RDMAP_EXTENDED_QUEUE_COUNT : RDMAP_QUEUE_COUNT;
    this.rx = new Receiver({
      rv: this.rv,
      pdId: this.pdId,
      reads: this.reads,
      atomics: this.atomics,
      extensions: this.extensions,
      queueCount: queues,
      get rxBlocked() {
        return self.terminated !== undefined || self.closedEvent !== undefined;
      },
      lookup: (stag) => this.stags.lookup(stag),
      invalidate: (stag) => this.invalidate(stag),
      canRemoteInvalidate: (region) => this.remoteInvalidateAllowed(region),
      onReadCompleted: (token) => this.tx.readCompleted(token as SqEntry),
      onReadRequest: (p) => this.tx.respond(p),
      onAtomicCompleted: (token, original, buffer) => this.onAtomicCompleted(token as SqEntry, original, buffer),
      onAtomicResponseError: (token, cause) =>
        this.terminateWith(cause, { entry: token as SqEntry, status: 'remote-operation-error' }),
      onTerminateReceived: (bytes) => this.onTerminateReceived(bytes),
      onDeliveredError: (cause, receive) => this.terminateWith(cause, receive ? { receive } : undefined),
      emitReceive: (c) => this.emitReceive(c),
    });

    const ddpOptions: DdpStreamOptions = {
      profile: this.profile,
      pdId: this.pdId,
      stags: this.stags,
      queues, // RFC 7306 atomics add QN 3; DDP takes the count from its ULP
      ulpCheck: this.rx.ulpCheck,
      ulpTaggedFastCheck: this.rx.taggedFastCheck,
      ...(options.llpCapabilities ? { llpCapabilities: options.llpCapabilities } : {}),
      ...(options.startupMessages ? { startupMessages: options.startupMessages } : {}),
      // RFC 5040 §6.1: receives first (released by `start`), and the initiator's first message frees a
      // responder that holds its own.
      startPaused: true,
      onFirstSegment: () => {
        if (!this.heldSubject.value) return;
        this.heldSubject.next(false);
        this.tx.pump();
      },
    };
    this.ddp = options.createDdp ? options.createDdp(this.llp, ddpOptions) : new DdpStream(this.llp, ddpOptions);
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
    this.ddp.delivery$.subscribe((ev) => this.rx.onDelivery(ev));
    this.ddp.error$.subscribe((ev) => this.onDdpError(ev));
    this.ddp.closed$.subscribe((ev) => this.onDdpClosed(ev));
    // RFC 5040 §4.8 Figure 9, Layer LLP: an LLP receive error (MPA CRC, RFC 5044 §8) is answered with a
    // Terminate carrying the LLP's Error Type and Code and no copied headers (Figure 10), then a close.
    llp.receiveError$?.subscribe((e) =>
      this.terminateWith(
        { layer: TerminateLayer.Llp, errorType: e.errorType, errorCode: e.errorCode },
        undefined,
        new LlpFailedError(`LLP receive error: ${e.error.message}`, { cause: e.error }),
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
    return this.sm.state;
  }
  /** The state now and every change (RFC 5040 §6). */
  get state$(): Observable<RdmapStreamState> {
    return this.sm.state$;
  }
  /** Whether this side is holding its messages until the initiator's first one arrives (§6.1). */
  get held(): boolean {
    return this.heldSubject.value;
  }
  /** Every completion: send-queue work in submission order (rule 15), receives in Delivery order (rule 10). */
  get completions$(): Observable<RdmapCompletion> {
    return this.completionSubject.asObservable();
  }
  /** The Terminate sent or received, if any (RFC 5040 §7.1); replayed to late subscribers. */
  get terminate$(): Observable<RdmapTerminateEvent> {
    return this.terminateSubject.asObservable();
  }
  /** Emits once when the stream has ended (`closed` or `error`), then completes; replayed. */
  get closed$(): Observable<RdmapClosedEvent> {
    return this.closedSubject.asObservable();
  }
  /** The error that ended the stream, once it has. */
  get error(): RdmapError | undefined {
    return this.endError;
  }
  /** Send-queue requests posted and not completed. */
  get outstanding(): number {
    return this.tx.outstanding;
  }
  /** Receive buffers posted on QN 0 and not completed. */
  get postedReceives(): number {
    return this.rx.postedReceives;
  }
  /** RDMA Reads handed to DDP whose Response has not been Delivered. */
  get readsInFlight(): number {
    return this.reads.count;
  }
  /** Atomic Requests handed to DDP whose Atomic Response has not been Delivered (RFC 7306). */
  get atomicsInFlight(): number {
    return this.atomics.count;
  }

  /**
   * Posts send-queue work (RFC 5040 §5.1–5.3). Throws typed caller errors; everything else is reported
   * by the completion, in submission order.
   */
  postSend(wr: RdmapWorkRequest): void {
    if (!this.sm.accepting) throw new RdmapStateError(this.sm.state, 'post send-queue work');
    const op = wr.op;
    let byteLength = 0;
    switch (op.type) {
      case 'write':
        byteLength = totalLength(op.payload);
        if (op.immediate !== undefined) this.checkImmediate(op.immediate);
        checkStag(op.sinkStag, 'Data Sink STag');
        checkTo(op.sinkTo, 'Data Sink TO');
        if (byteLength > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(byteLength, RDMAP_MAX_MESSAGE);
        if (op.sinkTo + BigInt(byteLength) > MAX_U64 + 1n)
          throw new RdmapInvalidArgumentError('Data Sink TO + length wraps 2^64 (RFC 5041 §7.1)');
        break;
      case 'send':
        byteLength = totalLength(op.payload);
        if (byteLength > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(byteLength, RDMAP_MAX_MESSAGE);
        if (op.invalidateStag !== undefined) checkStag(op.invalidateStag, 'Invalidate STag');
        if (op.immediate !== undefined) this.checkImmediate(op.immediate);
        break;
      case 'immediate':
        this.checkImmediate(op);
        break;
      case 'atomic':
        if (!this.extensions.atomics) throw new RdmapExtensionDisabledError('atomics');
        byteLength = ATOMIC_OPERAND_LENGTH;
        if (!ATOMIC_OPCODES.includes(op.atomicOpcode))
          throw new RdmapInvalidArgumentError(
            `Atomic OpCode ${String(op.atomicOpcode)} is not FetchAdd or CmpSwap (RFC 7306: 0001b is Reserved), nor Swap`,
          );
        checkStag(op.remoteStag, 'Remote STag');
        checkTo(op.remoteTo, 'Remote Tagged Offset');
        checkTo(op.addOrSwapData, 'Add or Swap Data');
        if (op.addOrSwapMask !== undefined) checkTo(op.addOrSwapMask, 'Add or Swap Mask');
        if (op.compareData !== undefined) checkTo(op.compareData, 'Compare Data');
        if (op.compareMask !== undefined) checkTo(op.compareMask, 'Compare Mask');
        if (this.ord === 0 || (this.ordPolicy === 'error' && this.tx.requestsOutstanding >= this.ord))
          throw new OrdExceededError(this.ord, 'Atomic Request');
        break;
      case 'read':
        byteLength = op.size;
        if (!Number.isInteger(op.size) || op.size < 0)
          throw new RdmapInvalidArgumentError(`RDMA Read Message Size ${op.size} is not a length`);
        if (op.size > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(op.size, RDMAP_MAX_MESSAGE);
        checkStag(op.sinkStag, 'Data Sink STag');
        checkStag(op.srcStag, 'Data Source STag');
        checkTo(op.sinkTo, 'Data Sink TO');
        checkTo(op.srcTo, 'Data Source TO');
        if (this.ord === 0 || (this.ordPolicy === 'error' && this.tx.requestsOutstanding >= this.ord))
          throw new OrdExceededError(this.ord);
        break;
      case 'local-invalidate':
        checkStag(op.stag, 'STag');
        break;
      default:
        throw new RdmapInvalidArgumentError(`unknown operation ${String((op as { type: unknown }).type)}`);
    }
    this.tx.post(wr, byteLength);
  }

  /** Posts a receive buffer for incoming Sends (QN 0, RFC 5040 §5.3); they consume them in order. */
  postReceive(buffer: Uint8Array, id?: unknown): void {
    const s = this.sm.state;
    if (s !== 'rts' && s !== 'closing') throw new RdmapStateError(s, 'post a receive');
    const r = { id, buffer };
    this.ddp.postReceive(RdmapQueue.Send, buffer, r);
    this.rx.add(r);
  }

  /**
   * ULP Graceful Termination, then LLP graceful teardown (RFC 5040 §6.2): no new work is accepted, what
   * is posted completes and owed Read Responses go out, then the LLP stream closes. Resolves once
   * closed; rejects with the stream's error if it ended in error instead.
   */
  close(signal?: AbortSignal): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.closedSubject.subscribe((ev) => (ev.state === 'closed' ? resolve() : reject(ev.error)));
    });
    if (this.sm.state === 'rts') this.sm.to('closing');
    this.maybeCloseLlp();
    if (!signal) return done;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(new RdmapStateError(this.sm.state, 'wait for the close (aborted)'));
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
    this.terminateWith({ layer: TerminateLayer.Rdma, errorType: cause.errorType, errorCode: cause.errorCode });
  }

  /** LLP Abortive Termination (RFC 5040 §6.2): the LLP stream is reset, no Terminate is sent. */
  abort(reason?: Error): void {
    if (this.closedEvent) return;
    this.ddp.abort(reason);
  }

  // ----- internals -----

  /** Immediate Data needs the extension and a 64-bit value (RFC 7306). */
  private checkImmediate(imm: ImmediateData): void {
    if (!this.extensions.immediate) throw new RdmapExtensionDisabledError('immediate');
    checkTo(imm.data, 'Immediate Data');
  }

  /** The Atomic Response of `e` was Delivered: its QN 3 buffer is posted again, the atomic completes. */
  private onAtomicCompleted(e: SqEntry, original: bigint, buffer: Uint8Array): void {
    buffer.fill(0);
    this.ddp.postReceive(ATOMIC_RESPONSE_QUEUE, buffer);
    this.tx.atomicCompleted(e, original);
  }

  private invalidate(stag: number): boolean {
    try {
      return this.stags.invalidate(stag) !== false;
    } catch {
      return false;
    }
  }

  private emitSend(c: SendCompletion): void {
    c.request.onComplete?.(c);
    this.completionSubject.next(c);
    this.maybeCloseLlp();
  }

  private emitReceive(c: ReceiveCompletion): void {
    this.completionSubject.next(c);
  }

  private onResponseSent(p: PendingResponse): void {
    // §5.2.2: the Read Request queue keeps IRD buffers; this one may take the next Request.
    if (this.terminated === undefined && this.closedEvent === undefined && this.ddp.state !== 'closed') {
      p.buffer.fill(0);
      this.ddp.postReceive(RdmapQueue.ReadRequest, p.buffer);
    }
    this.maybeCloseLlp();
  }

  /** Graceful close: once everything posted completed and owed Read Responses went out, close the LLP. */
  private maybeCloseLlp(): void {
    if (this.sm.state !== 'closing' || this.llpClosing || !this.tx.idle) return;
    this.llpClosing = true;
    this.ddp.close().catch(() => this.ddp.abort());
  }

  private onLocalBufferError(err: LocalProtectionError): void {
    // §7.1 case 1: the Terminate is sent instead of the request, without Terminated headers.
    this.terminateWith(
      { layer: TerminateLayer.Rdma, errorType: RdmaErrorType.LocalCatastrophic, errorCode: 0 },
      undefined,
      err,
    );
  }

  private onResponseSourceError(p: PendingResponse, code: number): void {
    // §7.1 case 3 / §4.8: no octet of the Read was processed, so the original Read Request Header goes back.
    this.terminateWith({
      layer: TerminateLayer.Rdma,
      errorType: RdmaErrorType.RemoteProtection,
      errorCode: code,
      segment: p.segment,
    });
  }

  private onSendFailure(err: unknown): void {
    // Sends that fail once the LLP is closing (graceful close, or after a Terminate) are settled by the close.
    if (this.closedEvent || this.terminated || this.llpClosing) return;
    const e =
      err instanceof RdmapError ? err : new LlpFailedError('DDP could not send: the LLP failed', { cause: err });
    this.fail(e);
    this.ddp.abort(e);
  }

  /** DDP refused a segment (RFC 5041 §7.2, or RDMAP's own `ulpCheck`, RFC 5040 §7.2): Terminate with it. */
  private onDdpError(ev: DdpErrorEvent): void {
    if (this.terminated !== undefined || this.closedEvent) return;
    const h = ev.header;
    if (h !== undefined && !h.tagged && h.qn === RdmapQueue.Terminate) {
      // A malformed Terminate: the peer has terminated already; surface it, send none back (§5.4).
      this.onTerminateReceived(undefined, ev.message);
      return;
    }
    const hb = ev.headerBytes.byteLength === 14 || ev.headerBytes.byteLength === 18 ? ev.headerBytes : undefined;
    // What the bad segment was, by the opcode table: a Read Request's header goes into the Terminate (§4.8).
    const row = h !== undefined ? opcodeRowOf(controlOf(h)) : undefined;
    const isReadRequest =
      row?.receive === 'read-request' && ev.ulpHeaderBytes.byteLength === READ_REQUEST_HEADER_LENGTH;
    const cause: TerminateCause = {
      layer: ev.layer === 'ddp' ? TerminateLayer.Ddp : TerminateLayer.Rdma,
      errorType: ev.type,
      errorCode: ev.code,
      ...(hb
        ? {
            segment: {
              ddpHeader: hb,
              length: ev.segmentLength,
              ...(isReadRequest ? { readRequest: ev.ulpHeaderBytes.slice(0, READ_REQUEST_HEADER_LENGTH) } : {}),
            },
          }
        : {}),
    };
    // Which local operation the bad segment was for, when one is: a receive it was filling, the Read its
    // Response answered, or the atomic its Response answered (RFC 7306).
    let culprit: Culprit | undefined;
    const onSendQueue = h !== undefined && !h.tagged && h.qn === RdmapQueue.Send;
    if (onSendQueue && this.rx.postedReceives > 0) {
      const tooLong = ev.layer === 'ddp' && ev.code === UntaggedErrorCode.MessageTooLong;
      culprit = { receive: tooLong ? 'local-length-error' : ev.layer === 'rdmap' ? 'remote-invalid-request' : 'fatal' };
    } else if (h?.tagged && row?.receive === 'read-response' && this.reads.receiving) {
      culprit = { entry: this.reads.receiving.token, status: 'remote-operation-error' };
    } else if (h !== undefined && !h.tagged && h.qn === ATOMIC_RESPONSE_QUEUE && this.atomics.oldest) {
      culprit = { entry: this.atomics.oldest.token, status: 'remote-operation-error' }; // RFC 7306
    }
    this.terminateWith(cause, culprit);
  }

  /**
   * RDMAP Abortive Termination (RFC 5040 §5.4, §6.2.1, §7.1): at most one Terminate per stream (the
   * first error is the one reported, §7.1 rule 4); nothing is placed or sent after it; outstanding work
   * is Completed in error; the LLP is closed gracefully once the Terminate is on its way.
   */
  private terminateWith(cause: TerminateCause, culprit?: Culprit, localError?: RdmapError): void {
    if (this.terminated !== undefined || this.closedEvent) return;
    if (!this.sm.to('terminate')) return;
    this.terminated = 'sent';
    const header = terminateFor(cause);
    const bytes = encodeTerminate(header);
    const error = new TerminatedError('sent', header);
    this.endError = localError ?? error;
    const ctrl = encodeControl(this.rv, RdmapOpcode.Terminate);
    let sent: Promise<unknown>;
    try {
      sent = this.ddp.sendUntagged(RdmapQueue.Terminate, [bytes], encodeUntaggedRsvdUlp(ctrl));
    } catch (err) {
      sent = Promise.reject(err);
    }
    const report = (notSent?: unknown) => {
      this.terminateSubject.next({
        direction: notSent === undefined ? 'sent' : 'not-sent',
        ...(notSent !== undefined
          ? { notSentReason: notSent instanceof Error ? notSent.message : String(notSent) }
          : {}),
        header,
        bytes,
        description: describeTerminate(header),
        error,
      });
      this.terminateSubject.complete();
    };
    this.flushEverything(error, culprit);
    // §6.2.1: "The peer SHOULD perform a graceful LLP teardown to ensure the Terminate Message is ... Delivered."
    sent.then(
      () => {
        report();
        this.closeLlpAfterTerminate();
      },
      (err: unknown) => {
        report(err ?? new Error('the LLP did not send it'));
        this.ddp.abort(error);
      },
    );
  }

  private closeLlpAfterTerminate(): void {
    if (this.llpClosing) return;
    this.llpClosing = true;
    this.ddp.close().catch(() => this.ddp.abort());
  }

  /** A Terminate arrived (§5.4): Delivered to the ULP, everything Completed in error, the LLP closed. */
  private onTerminateReceived(bytes: Uint8Array | undefined, problem?: string): void {
    if (this.terminated !== undefined || this.closedEvent) return;
    if (!this.sm.to('terminate')) return;
    this.terminated = 'received';
    let header: TerminateHeader | undefined;
    let error: RdmapError;
    const copy = bytes ? bytes.slice() : new Uint8Array(0);
    try {
      if (bytes === undefined) throw new InvalidTerminateError(`malformed Terminate: ${problem ?? 'refused by DDP'}`);
      header = decodeTerminate(copy);
      error = new TerminatedError('received', header);
    } catch (err) {
      error =
        err instanceof InvalidTerminateError
          ? err
          : new InvalidTerminateError(`malformed Terminate: ${(err as Error).message}`, { cause: err });
    }
    this.endError = error;
    this.terminateSubject.next({
      direction: 'received',
      header,
      bytes: copy,
      description: header ? describeTerminate(header) : error.message,
      error,
    });
    this.terminateSubject.complete();
    this.flushEverything(error, header ? this.matchTerminate(header, error) : undefined);
    this.closeLlpAfterTerminate();
  }

  /** The local operation a received Terminate reports on, when its Terminated DDP Header names one (§4.8). */
  private matchTerminate(t: TerminateHeader, error: RdmapError): Culprit | undefined {
    const d = t.ddpHeader;
    if (d === undefined || d.byteLength !== 18 || ((d[0] as number) & 0x80) !== 0) return undefined;
    const v = new DataView(d.buffer, d.byteOffset, 18);
    const entry = this.tx.findUntagged(v.getUint32(6), v.getUint32(10));
    return entry ? { entry, status: terminateStatus(t), error } : undefined;
  }

  private flushEverything(error: RdmapError, culprit?: Culprit): void {
    this.reads.drain();
    this.atomics.drain();
    this.tx.flushAll(
      error,
      culprit?.entry !== undefined
        ? { entry: culprit.entry, status: culprit.status ?? 'fatal', error: culprit.error ?? error }
        : undefined,
    );
    this.ddp.flushReceives(RdmapQueue.Send);
    this.rx.flush(
      new FlushedError('the stream ended before a Send arrived', { cause: error }),
      culprit?.receive ? { status: culprit.receive, error } : undefined,
    );
  }

  /** The stream fails without a Terminate (LLP failure, §6.2). */
  private fail(error: RdmapError): void {
    if (this.closedEvent) return;
    this.endError ??= error;
    if (this.sm.state !== 'terminate') this.sm.to('error');
    this.flushEverything(error);
  }

  private onDdpClosed(ev: DdpCloseEvent): void {
    if (this.closedEvent) return;
    if (this.sm.state === 'terminate') {
      this.sm.to('error');
      this.finish({ state: 'error', error: this.endError as RdmapError });
      return;
    }
    if (this.sm.state === 'error') {
      this.finish({ state: 'error', error: this.endError as RdmapError });
      return;
    }
    if (!ev.graceful || !this.tx.idle) {
      const err = ev.graceful
        ? new FlushedError('the LLP stream closed with work outstanding')
        : new LlpFailedError(`the LLP stream failed${ev.error ? `: ${ev.error.message}` : ''}`, { cause: ev.error });
      this.fail(err);
      this.finish({ state: 'error', error: this.endError ?? err });
      return;
    }
    // Graceful (RFC 5040 §6.2): ours completed, or the peer closed; posted receives are flushed.
    this.reads.drain();
    this.atomics.drain();
    this.rx.flush(new FlushedError('the stream closed gracefully'));
    this.sm.to('closed');
    this.finish({ state: 'closed' });
  }

  private finish(ev: RdmapClosedEvent): void {
    if (this.closedEvent) return;
    this.closedEvent = ev;
    this.heldSubject.complete();
    this.terminateSubject.complete();
    this.completionSubject.complete();
    this.closedSubject.next(ev);
    this.closedSubject.complete();
  }
}

/** The completion status of a local operation a received Terminate names (RFC 5040 Figure 9). */
export function terminateStatus(t: Pick<TerminateHeader, 'layer' | 'errorType' | 'errorCode'>): CompletionStatus {
  if (t.layer === TerminateLayer.Rdma) {
    if (t.errorType === RdmaErrorType.RemoteProtection) return 'remote-access-error';
    if (t.errorType === RdmaErrorType.RemoteOperation) return 'remote-operation-error';
    return 'fatal';
  }
  if (t.layer === TerminateLayer.Ddp) {
    if (t.errorType === DdpWireErrorType.TaggedBuffer) return 'remote-access-error';
    if (t.errorType === DdpWireErrorType.UntaggedBuffer)
      return t.errorCode === UntaggedErrorCode.MessageTooLong ? 'remote-invalid-request' : 'remote-operation-error';
  }
  return 'fatal';
}

function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > 0xffff_ffff)
    throw new RdmapInvalidArgumentError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

function checkTo(to: bigint, what: string): void {
  if (typeof to !== 'bigint' || to < 0n || to > MAX_U64)
    throw new RdmapInvalidArgumentError(`${what} ${String(to)} is not a 64-bit unsigned integer`);
}
