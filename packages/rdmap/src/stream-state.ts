/**
 * The one state of an RDMAP Stream (RFC 5040 §6), as Linux siw keeps everything on `struct siw_qp`: the
 * send queue and the Read Responses owed (tx.ts, send-queue.ts, responses.ts work on them), the posted
 * receives (rx.ts, receive-queue.ts), outstanding Reads and atomics (ORD/IRD, §6.1), the stream state
 * machine, what ended it (terminate-path.ts), and the subjects its events leave by. The transmit, receive
 * and terminate modules are plain functions over it.
 */
import { Access, type DdpSendSink, type DdpStreamApi, type MemoryRegion, type UlpAcceptTable } from '@rddp/ddp';
import { Fifo, type Ulpdu } from '@rddp/llp';
import { BehaviorSubject, type Observable, ReplaySubject, Subject } from 'rxjs';
import type { AtomicResponseHeader } from './atomic.js';
import { OutstandingAtomics } from './atomic.js';
import type { RdmapError } from './errors.js';
import { encodeControl, type ReadRequestHeader } from './header.js';
import { RDMAP_OPCODES, type RdmapExtension, type RdmapVersion } from './opcode.js';
import { OutstandingReads } from './read.js';
import { canTransition, type RdmapStreamState } from './state.js';
import type { TerminatedSegment } from './terminate.js';
import type {
  CompletionStatus,
  RdmapClosedEvent,
  RdmapCompletion,
  RdmapTerminateEvent,
  RdmapWorkRequest,
  ReceiveCompletion,
  SendCompletion,
} from './types.js';

/** The current state and its changes; refuses transitions the machine does not have. */
export class StreamStateMachine {
  private readonly subject = new BehaviorSubject<RdmapStreamState>('rts');
  /** The state now, as a field: the transmit and receive paths read it with no call. Changed by `to` only. */
  current: RdmapStreamState = 'rts';

  get state(): RdmapStreamState {
    return this.current;
  }
  /** Emits the current state on subscribe and every change; completes in `error` or `closed`. */
  get state$(): Observable<RdmapStreamState> {
    return this.subject.asObservable();
  }
  /** Moves to `to`; returns false (and stays) if the machine has no such transition. */
  to(to: RdmapStreamState): boolean {
    const from = this.subject.value;
    if (!canTransition(from, to)) return false;
    this.current = to;
    this.subject.next(to);
    if (to === 'error' || to === 'closed') this.subject.complete();
    return true;
  }
  /** True while new operations may be posted. */
  get accepting(): boolean {
    return this.current === 'rts';
  }
  /** True while messages may still be transmitted (RTS, or draining during a graceful close). */
  get transmitting(): boolean {
    const s = this.current;
    return s === 'rts' || s === 'closing';
  }
}

/** The STag table RDMAP needs: DDP's lookup, plus invalidation for Send with Invalidate (§5.3). */
export interface RdmapStagTable {
  lookup(stag: number): MemoryRegion | undefined;
  /** Invalidates `stag`; returning `false` or throwing means it could not be. */
  invalidate(stag: number): unknown;
}

/** One send-queue request and what became of it; DDP tells it how its Write or Send ended. */
export interface SqEntry extends DdpSendSink {
  readonly wr: RdmapWorkRequest;
  readonly byteLength: number;
  submitted: boolean;
  aborted: boolean;
  /** Queue and MSN of an untagged message once handed to DDP (to match a received Terminate, §4.8). */
  qn: number | undefined;
  msn: number | undefined;
  /** MSN of the Immediate Data message that follows a Send with Immediate (RFC 7306), also on QN 0. */
  immMsn: number | undefined;
  result: { status: CompletionStatus; error?: RdmapError; atomicResult?: bigint } | undefined;
  detachAbort: (() => void) | undefined;
}

/** One receive buffer posted on the Send queue (QN 0). */
export interface PostedReceive {
  readonly id: unknown;
  readonly buffer: Uint8Array;
}

/** An inbound RDMA Read Request or Atomic Request (RFC 7306) accepted and waiting for its Response. */
export type PendingResponse =
  | {
      readonly kind: 'read';
      readonly rr: ReadRequestHeader;
      /** The Read Request queue buffer it arrived in: posted again once the Response has left. */
      readonly buffer: Uint8Array;
      /** The Read Request's DDP header and segment, for a Terminate (§4.8, §7.1 case 3). */
      readonly segment: TerminatedSegment;
    }
  | {
      readonly kind: 'atomic';
      readonly response: AtomicResponseHeader;
      /** The QN 1 buffer the Request arrived in (one of the IRD buffers it shares with Read Requests). */
      readonly buffer: Uint8Array;
      readonly segment: TerminatedSegment;
    };

/** Which local operation a Terminate is about, and how it completes. */
export interface Culprit {
  readonly entry?: SqEntry;
  readonly status?: CompletionStatus;
  readonly error?: RdmapError;
  /** The oldest posted receive completes with this status (the Send it was receiving was bad). */
  readonly receive?: CompletionStatus;
}

/** What a stream's state keeps as it was given, for the stream's life. */
type StreamConstants = 'rv' | 'pdId' | 'stags' | 'extensions' | 'queueCount' | 'canRemoteInvalidate';

export interface StreamStateInit extends Pick<StreamState, StreamConstants> {
  readonly ord: number;
  /** RFC 5040 §6.1: a responder that holds its messages until the initiator's first one. */
  readonly held: boolean;
}

/** Runs a DDP send; a synchronous throw becomes a rejected promise so every failure takes one path. */
export function guard<T>(send: () => Promise<T>): Promise<T> {
  try {
    return send();
  } catch (err) {
    return Promise.reject(err);
  }
}

export class StreamState {
  declare readonly rv: RdmapVersion;
  declare readonly pdId: number;
  declare readonly stags: RdmapStagTable;
  declare readonly extensions: Readonly<Record<RdmapExtension, boolean>>;
  /** Untagged queues of the stream: 3, or 4 with atomics (QN 3 for Atomic Responses). */
  declare readonly queueCount: number;
  declare readonly canRemoteInvalidate: (region: MemoryRegion) => boolean;
  /** Set once, right after construction: the DDP Stream is built with this state's receive checks. */
  ddp!: DdpStreamApi;
  readonly sm = new StreamStateMachine();
  /** Reads handed to DDP, in order (ORD, §6.1). */
  readonly reads: OutstandingReads<SqEntry>;
  /** RFC 7306: Atomic Requests awaiting their Response; they share ORD with the Reads. */
  readonly atomics = new OutstandingAtomics<SqEntry>();
  readonly held: BehaviorSubject<boolean>;

  // ----- send queue (tx.ts, send-queue.ts) -----
  /** Posted, not handed to DDP yet (in order). */
  readonly pending = new Fifo<SqEntry>();
  /** Handed to DDP (or skipped), not reported yet (in order). */
  readonly inflight = new Fifo<SqEntry>();
  /** Accepted inbound Read Requests whose Response is not given to DDP yet (in Delivery order). */
  readonly responses: PendingResponse[] = [];
  /** Read Responses given to DDP and not yet sent in full. */
  responsesSending = 0;
  pumping = false;
  completing = false;
  /** The pump stopped because DDP's transmit queue is full; a hand-off restarts it. */
  waitingForDdp = false;
  /** The Request Identifier of the next Atomic Request (RFC 7306), 32 bits. */
  nextRequestId = 1;
  /** Given to DDP with each send-queue message: restarts a pump that waits for room in DDP's queue. */
  onHanded: (() => void) | undefined;
  /** Send-queue messages handed to DDP whose last segment DDP has not yet handed to the LLP. */
  inDdp = 0;
  /** This stream's RDMAP Control octet for each opcode (RFC 5040 §4.1: RV, Rsv 0, OpCode): built once. */
  readonly control: Uint8Array;
  /**
   * What DDP may place without asking the receive checks (`DdpStreamOptions.ulpAccepts`), from the opcode
   * table: RDMA Writes into regions granting Remote Write, plain Sends on QN 0. Cleared by `stopPlacing`.
   */
  readonly accepts: UlpAcceptTable;

  // ----- receive (rx.ts, receive-queue.ts) -----
  /** Receive buffers posted on QN 0, in MSN order. */
  readonly receives: PostedReceive[] = [];
  /** The segment that completed the message being handled (for a Terminate's copied headers, §4.8). */
  current: Ulpdu | undefined;

  // ----- how it ended (terminate-path.ts) -----
  terminated: 'sent' | 'received' | undefined;
  endError: RdmapError | undefined;
  closedEvent: RdmapClosedEvent | undefined;
  llpClosing = false;

  readonly completions = new Subject<RdmapCompletion>();
  /** The direct consumer of completions (`RdmapStreamOptions.onCompletion`), before `completions`. */
  onCompletion: ((c: RdmapCompletion) => void) | undefined;
  readonly terminates = new ReplaySubject<RdmapTerminateEvent>();
  readonly closed = new ReplaySubject<RdmapClosedEvent>(1);

  constructor(init: StreamStateInit) {
    const { ord, held, ...constants } = init;
    Object.assign(this, constants);
    this.reads = new OutstandingReads<SqEntry>(ord);
    this.held = new BehaviorSubject(held);
    this.control = new Uint8Array(16);
    const tagged = new Uint8Array(256);
    const untagged = Array.from({ length: this.queueCount }, () => new Uint8Array(256));
    for (const row of RDMAP_OPCODES) {
      const c = encodeControl(this.rv, row.opcode);
      this.control[row.opcode] = c;
      // Exactly the segments the receive checks (rx-check.ts) accept with no state beyond the region.
      if (row.receive === 'write') tagged[c] = Access.RemoteWrite;
      if (row.receive === 'send' && !row.invalidateStag && row.qn !== undefined)
        (untagged[row.qn] as Uint8Array)[c] = 1;
    }
    this.accepts = { tagged, untagged };
  }

  /** Nothing more is placed without the receive checks, which refuse it (RFC 5040 §5.4). */
  stopPlacing(): void {
    this.accepts.tagged.fill(0);
    for (const t of this.accepts.untagged) t.fill(0);
  }

  /** True once the stream is terminating or ended: nothing more is placed (RFC 5040 §5.4). */
  get rxBlocked(): boolean {
    return this.terminated !== undefined || this.closedEvent !== undefined;
  }

  lookup(stag: number): MemoryRegion | undefined {
    return this.stags.lookup(stag);
  }

  invalidate(stag: number): boolean {
    try {
      return this.stags.invalidate(stag) !== false;
    } catch {
      return false;
    }
  }

  emitReceive(c: ReceiveCompletion): void {
    this.onCompletion?.(c);
    if (this.completions.observed) this.completions.next(c);
  }

  emitSend(c: SendCompletion): void {
    c.request.onComplete?.(c);
    this.onCompletion?.(c);
    if (this.completions.observed) this.completions.next(c);
  }
}
