/**
 * RDMAP transmit path (RFC 5040 §5, §5.5): the send queue handed to DDP strictly in submission order
 * (rule 13), the Read fence and ORD hold-backs, Read Responses to inbound Read Requests in the order the
 * Requests were Delivered (rule 20), and completions reported in submission order (rule 15) once DDP has
 * sent the message (rule 14) or, for a Read, once its Response is Delivered (rule 19). RFC 7306: Write
 * and Send with Immediate (the message, then Immediate Data), Atomic Requests (held by ORD with the Reads,
 * complete on their Atomic Response) and Atomic Responses, sent in Request order with the Read Responses.
 */
import { type DdpStreamApi, MAX_U64, type MemoryRegion, stagHex, type UntaggedSend } from '@rddp/ddp';
import { AtomicOpcode, encodeAtomicRequest, encodeAtomicResponse, type OutstandingAtomics } from './atomic.js';
import { FlushedError, LocalProtectionError, RdmapAbortError, type RdmapError } from './errors.js';
import { encodeControl, encodeReadRequest, encodeUntaggedRsvdUlp } from './header.js';
import { encodeImmediateData } from './immediate.js';
import { ATOMIC_RESPONSE_QUEUE, ExtensionOpcode, RdmapOpcode, RdmapQueue, type RdmapVersion } from './opcode.js';
import { checkReadSource, type OutstandingReads } from './read.js';
import type { PendingResponse } from './rx.js';
import type { StreamStateMachine } from './state.js';
import type { CompletionStatus, ImmediateData, RdmapWorkRequest, SendCompletion } from './types.js';

/** One send-queue request and what became of it. */
export interface SqEntry {
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

/** What the transmit path needs from its stream. */
export interface TxHost {
  readonly ddp: DdpStreamApi;
  readonly rv: RdmapVersion;
  readonly pdId: number;
  readonly state: StreamStateMachine;
  readonly reads: OutstandingReads<SqEntry>;
  /** RFC 7306: Atomic Requests awaiting their Response; they share ORD with the Reads. */
  readonly atomics: OutstandingAtomics<SqEntry>;
  lookup(stag: number): MemoryRegion | undefined;
  invalidate(stag: number): boolean;
  /** Whether transmission is held (RFC 5040 §6.1: the responder waits for the initiator's first message). */
  readonly held: boolean;
  /** A local buffer was invalid when its message was built (§7.1 case 1). */
  onLocalBufferError(error: LocalProtectionError): void;
  /** A Read Response's Data Source failed its checks when the Response was built (§7.1 case 3). */
  onResponseSourceError(p: PendingResponse, code: number): void;
  /** DDP could not send (the LLP failed under it). */
  onSendFailure(error: unknown): void;
  /** The Response to `p` was handed to DDP entirely: its Read Request buffer may be posted again. */
  onResponseSent(p: PendingResponse): void;
  /** A Response finished sending: a graceful close may be able to go on. */
  maybeIdle(): void;
  emitCompletion(c: SendCompletion): void;
}

/** Runs a DDP send; a synchronous throw becomes a rejected promise so every failure takes one path. */
function guard<T>(send: () => Promise<T>): Promise<T> {
  try {
    return send();
  } catch (err) {
    return Promise.reject(err);
  }
}

const MSN_MODULO = 0x1_0000_0000;
/**
 * Send-queue messages DDP may hold while its LLP pushes back; further requests wait here (in `pending`,
 * bounded by what the application posts), so DDP's transmit queue stays far below its `maxSendQueue`.
 */
const DDP_QUEUE_LIMIT = 64;

export class Transmitter {
  /** Posted, not handed to DDP yet (in order). */
  private readonly pending: SqEntry[] = [];
  /** Handed to DDP (or skipped), not reported yet (in order). */
  private readonly inflight: SqEntry[] = [];
  /** Accepted inbound Read Requests whose Response is not handed to DDP yet (in Delivery order). */
  private readonly responses: PendingResponse[] = [];
  /** Read Responses handed to DDP and not yet sent in full. */
  private responsesSending = 0;
  private pumping = false;
  private completing = false;
  /** The pump stopped because DDP's transmit queue is at `DDP_QUEUE_LIMIT`; a hand-off restarts it. */
  private waitingForDdp = false;
  /** The Request Identifier of the next Atomic Request (RFC 7306), 32 bits. */
  private nextRequestId = 1;

  constructor(private readonly host: TxHost) {}

  /** Requests posted and not yet completed. */
  get outstanding(): number {
    return this.pending.length + this.inflight.length;
  }
  /** Reads posted and not completed (for an ORD check at post time). */
  get readsOutstanding(): number {
    return this.count((t) => t === 'read');
  }
  /** Reads and Atomic Requests posted and not completed: what ORD bounds (RFC 5040 §6.1, RFC 7306). */
  get requestsOutstanding(): number {
    return this.count((t) => t === 'read' || t === 'atomic');
  }
  private count(which: (type: string) => boolean): number {
    let n = 0;
    for (const e of this.pending) if (which(e.wr.op.type) && !e.aborted) n++;
    for (const e of this.inflight) if (which(e.wr.op.type) && e.result === undefined) n++;
    return n;
  }
  /** Reads and atomics handed to DDP and not completed. */
  private get requestsInFlight(): number {
    return this.host.reads.count + this.host.atomics.count;
  }
  /** Nothing posted is unfinished and every accepted Read Request has been answered. */
  get idle(): boolean {
    return this.outstanding === 0 && this.responses.length === 0 && this.responsesSending === 0;
  }

  post(wr: RdmapWorkRequest, byteLength: number): void {
    const e: SqEntry = {
      wr,
      byteLength,
      submitted: false,
      aborted: false,
      qn: undefined,
      msn: undefined,
      immMsn: undefined,
      result: undefined,
      detachAbort: undefined,
    };
    const signal = wr.signal;
    if (signal) {
      if (signal.aborted) e.aborted = true;
      else {
        const onAbort = () => {
          if (e.submitted || e.aborted) return;
          e.aborted = true;
          this.pump();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        e.detachAbort = () => signal.removeEventListener('abort', onAbort);
      }
    }
    this.pending.push(e);
    this.pump();
  }

  /** Queues the Response to an accepted Read Request (§5.5 rules 17, 20). */
  respond(p: PendingResponse): void {
    this.responses.push(p);
    this.pump();
  }

  /** Hands everything that may go to DDP, in order, until something must wait. */
  pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      const h = this.host;
      while (h.state.transmitting && !h.held) {
        // Read Responses are independent of the send queue (rule 2); the peer's Reads wait on them.
        const p = this.responses.shift();
        if (p !== undefined) {
          this.sendResponse(p);
          continue;
        }
        const e = this.pending[0];
        if (e === undefined) break;
        if (e.aborted) {
          this.pending.shift();
          this.finishEarly(e, 'aborted', new RdmapAbortError('withdrawn by its AbortSignal before it was sent'));
          continue;
        }
        if (e.wr.fence && this.requestsInFlight > 0) break; // Read fence (§5.5 rule 12, Appendix B footnote 2)
        const t = e.wr.op.type;
        if ((t === 'read' || t === 'atomic') && this.requestsInFlight >= h.reads.ord) break; // ORD (§6.1)
        if (h.ddp.sendQueueLength >= DDP_QUEUE_LIMIT) {
          this.waitingForDdp = true; // the LLP pushes back: hold requests here rather than in DDP
          break;
        }
        this.pending.shift();
        this.submit(e);
      }
    } finally {
      this.pumping = false;
    }
    this.complete();
  }

  /** A send-queue message went to the LLP: DDP's queue has room again. */
  private readonly handed = (): void => {
    if (!this.waitingForDdp) return;
    this.waitingForDdp = false;
    queueMicrotask(() => this.pump()); // after DDP has dropped the message from its queue
  };

  private finishEarly(e: SqEntry, status: CompletionStatus, error: RdmapError): void {
    e.detachAbort?.();
    e.result = { status, error };
    this.inflight.push(e);
  }

  private submit(e: SqEntry): void {
    const h = this.host;
    e.detachAbort?.();
    e.submitted = true;
    // RFC 5040 §7.1 case 1: the message is built now; its local buffers must still be valid.
    for (const stag of e.wr.localStags ?? []) {
      const r = h.lookup(stag);
      if (r === undefined || !r.valid || r.pdId !== h.pdId) {
        const err = new LocalProtectionError(
          `local STag ${stagHex(stag)} is no longer valid in this protection domain (RFC 5040 §7.1)`,
        );
        e.result = { status: 'local-protection-error', error: err };
        this.inflight.push(e);
        h.onLocalBufferError(err);
        return;
      }
    }
    const op = e.wr.op;
    this.inflight.push(e);
    const fail = (err: unknown) => h.onSendFailure(err);
    switch (op.type) {
      case 'write': {
        const ctrl = encodeControl(h.rv, RdmapOpcode.RdmaWrite);
        const written = guard(() => h.ddp.sendTagged(op.sinkStag, op.sinkTo, op.payload, ctrl, undefined, this.handed));
        if (op.immediate === undefined) {
          written.then(() => this.sent(e), fail);
          return;
        }
        // RFC 7306 Write with Immediate: the Immediate Data message follows the Write on QN 0 (DDP keeps order).
        const imm = this.sendImmediate(op.immediate);
        e.qn = RdmapQueue.Send;
        e.msn = imm.msn;
        Promise.all([written, imm]).then(() => this.sent(e), fail);
        return;
      }
      case 'immediate': {
        const imm = this.sendImmediate(op);
        e.qn = RdmapQueue.Send;
        e.msn = imm.msn;
        imm.then(() => this.sent(e), fail);
        return;
      }
      case 'atomic': {
        const requestId = this.nextRequestId;
        this.nextRequestId = (requestId + 1) % MSN_MODULO;
        const isAdd = op.atomicOpcode === AtomicOpcode.FetchAdd;
        const isCmp = op.atomicOpcode === AtomicOpcode.CmpSwap;
        // Swap is CmpSwap with Compare Mask 0: the compare always succeeds (RFC 7306 defines no Swap).
        const header = encodeAtomicRequest({
          atomicOpcode: isAdd ? AtomicOpcode.FetchAdd : AtomicOpcode.CmpSwap,
          requestId,
          remoteStag: op.remoteStag,
          remoteTo: op.remoteTo,
          addOrSwapData: op.addOrSwapData,
          addOrSwapMask: op.addOrSwapMask ?? (isAdd ? 0n : MAX_U64),
          compareData: isCmp ? (op.compareData ?? 0n) : 0n,
          compareMask: isCmp ? (op.compareMask ?? MAX_U64) : 0n,
        });
        h.atomics.add({ token: e, requestId });
        const rsvd = encodeUntaggedRsvdUlp(encodeControl(h.rv, ExtensionOpcode.AtomicRequest));
        const req = h.ddp.sendUntagged(RdmapQueue.ReadRequest, [header], rsvd, undefined, this.handed);
        e.qn = RdmapQueue.ReadRequest; // RFC 7306: Atomic Requests share QN 1 (and IRD) with Read Requests
        e.msn = req.msn;
        req.catch(fail);
        return; // completes when its Atomic Response is Delivered
      }
      case 'send': {
        const opcode =
          op.invalidateStag !== undefined
            ? op.solicited
              ? RdmapOpcode.SendWithSolicitedEventAndInvalidate
              : RdmapOpcode.SendWithInvalidate
            : op.solicited
              ? RdmapOpcode.SendWithSolicitedEvent
              : RdmapOpcode.Send;
        const rsvd = encodeUntaggedRsvdUlp(encodeControl(h.rv, opcode), op.invalidateStag ?? 0);
        const sent = h.ddp.sendUntagged(RdmapQueue.Send, op.payload, rsvd, undefined, this.handed);
        e.qn = RdmapQueue.Send;
        e.msn = sent.msn;
        if (op.immediate === undefined) {
          sent.then(() => this.sent(e), fail);
          return;
        }
        // RFC 7306 Send with Immediate: the Send, then the Immediate Data message, both on QN 0.
        const imm = this.sendImmediate(op.immediate);
        e.immMsn = imm.msn;
        Promise.all([sent, imm]).then(() => this.sent(e), fail);
        return;
      }
      case 'read': {
        h.reads.add({
          token: e,
          sinkStag: op.sinkStag,
          sinkTo: op.sinkTo,
          size: op.size,
          srcStag: op.srcStag,
          srcTo: op.srcTo,
        });
        const rsvd = encodeUntaggedRsvdUlp(encodeControl(h.rv, RdmapOpcode.RdmaReadRequest));
        const req = h.ddp.sendUntagged(RdmapQueue.ReadRequest, [encodeReadRequest(op)], rsvd, undefined, this.handed);
        e.qn = RdmapQueue.ReadRequest;
        e.msn = req.msn;
        req.catch(fail);
        return; // completes when its Read Response is Delivered (§5.5 rule 19)
      }
      case 'local-invalidate': {
        const r = h.lookup(op.stag);
        if (r === undefined || r.pdId !== h.pdId || !h.invalidate(op.stag))
          e.result = {
            status: 'local-protection-error',
            error: new LocalProtectionError(
              `cannot invalidate STag ${stagHex(op.stag)}: not registered in this protection domain`,
            ),
          };
        else e.result = { status: 'success' };
        return;
      }
    }
  }

  /** An Immediate Data (with SE) message on QN 0 (RFC 7306): its 64 bits are the whole payload. */
  private sendImmediate(imm: ImmediateData): UntaggedSend {
    const h = this.host;
    const opcode = imm.solicited ? ExtensionOpcode.ImmediateDataWithSolicitedEvent : ExtensionOpcode.ImmediateData;
    const rsvd = encodeUntaggedRsvdUlp(encodeControl(h.rv, opcode));
    return h.ddp.sendUntagged(RdmapQueue.Send, [encodeImmediateData(imm.data)], rsvd, undefined, this.handed);
  }

  /** The RDMA Read Response (§5.2.2), or an Atomic Response (RFC 7306), in the order of the Requests. */
  private sendResponse(p: PendingResponse): void {
    const h = this.host;
    if (p.kind === 'atomic') {
      // RFC 7306: the atomic ran when its Request was Delivered; the Response goes on the requester's QN 3.
      const rsvd = encodeUntaggedRsvdUlp(encodeControl(h.rv, ExtensionOpcode.AtomicResponse));
      this.track(
        guard(() =>
          h.ddp.sendUntagged(ATOMIC_RESPONSE_QUEUE, [encodeAtomicResponse(p.response)], rsvd, undefined, () =>
            this.responseLeft(p),
          ),
        ),
      );
      return;
    }
    const rr = p.rr;
    const ctrl = encodeControl(h.rv, RdmapOpcode.RdmaReadResponse);
    let payload: Uint8Array[] = [];
    if (rr.size > 0) {
      const region = h.lookup(rr.srcStag);
      const bad = checkReadSource(rr, region, h.pdId);
      if (bad !== undefined || region === undefined) {
        h.onResponseSourceError(p, bad?.code ?? 0);
        return;
      }
      const off = Number(rr.srcTo - region.baseTo);
      payload = [region.buffer.subarray(off, off + rr.size)];
    }
    this.track(
      guard(() => h.ddp.sendTagged(rr.sinkStag, rr.sinkTo, payload, ctrl, undefined, () => this.responseLeft(p))),
    );
  }

  /**
   * §5.2.2 / RFC 5041 §5.1.2: the Request's IRD buffer is posted again once the Response's last segment
   * went to the LLP — before it can reach the requester, whose next Request (its ORD slot freed by that
   * segment) must find a buffer — but after the receive batch in progress, so Requests that arrived
   * together beyond IRD still find none (as Linux siw, whose receive path runs before its transmit path).
   */
  private responseLeft(p: PendingResponse): void {
    queueMicrotask(() => this.host.onResponseSent(p));
  }

  /**
   * A Response given to DDP. §6.1: IRD counts its Request until the Response has left — its last segment
   * handed to the LLP (`responseLeft`) — so a requester that stops reading holds at most IRD Responses
   * here and its next Request finds no buffer. The close waits for the whole Response to be sent.
   */
  private track(sending: Promise<unknown>): void {
    const h = this.host;
    this.responsesSending++;
    sending.then(
      () => {
        this.responsesSending--;
        h.maybeIdle();
      },
      (err) => {
        this.responsesSending--;
        h.onSendFailure(err);
      },
    );
  }

  /** DDP sent a Write or Send in full (§5.5 rule 14). */
  private sent(e: SqEntry): void {
    if (e.result !== undefined) return;
    e.result = { status: 'success' };
    this.complete();
  }

  /** The Atomic Response of `e` was Delivered (RFC 7306): it completes with the Original Remote Data Value. */
  atomicCompleted(e: SqEntry, original: bigint): void {
    if (e.result === undefined) e.result = { status: 'success', atomicResult: original };
    this.complete();
    this.pump(); // ORD or a fence may have been waiting on it
  }

  /** The Read Response of `e` was Delivered (§5.5 rule 19). */
  readCompleted(e: SqEntry): void {
    if (e.result === undefined) e.result = { status: 'success' };
    this.complete(); // reported before anything it held back is built (its outcome is certain)
    this.pump(); // a fence or ORD may have been waiting on it
  }

  /** Reports finished requests from the head, in submission order (§5.5 rule 15). */
  complete(): void {
    if (this.completing) return;
    this.completing = true;
    try {
      while (this.inflight.length > 0) {
        const head = this.inflight[0] as SqEntry;
        if (head.result === undefined) break;
        this.inflight.shift();
        this.host.emitCompletion({
          kind: 'send',
          request: head.wr,
          status: head.result.status,
          byteLength: head.result.status === 'success' ? head.byteLength : 0,
          ...(head.result.atomicResult !== undefined ? { atomicResult: head.result.atomicResult } : {}),
          ...(head.result.error ? { error: head.result.error } : {}),
        });
      }
    } finally {
      this.completing = false;
    }
  }

  /** The submitted, unfinished request that sent the untagged message `qn`/`msn`, if any. */
  findUntagged(qn: number, msn: number): SqEntry | undefined {
    return this.inflight.find((e) => e.result === undefined && e.qn === qn && (e.msn === msn || e.immMsn === msn));
  }

  /**
   * Ends everything (RFC 5040 §5.4, §6.2.1): requests handed to DDP and not reported complete with
   * `submittedError` (the `culprit` with its own status), requests never handed to DDP are flushed,
   * pending Read Responses are dropped. Completions stay in submission order.
   */
  flushAll(
    submittedError: RdmapError,
    culprit?: { entry: SqEntry; status: CompletionStatus; error: RdmapError },
  ): void {
    for (const e of this.inflight) {
      // Sent but not reported yet (behind an unfinished Read): outstanding too, so Completed in error (§6.2.1).
      if (e.result !== undefined && e.result.status !== 'success') continue;
      e.result =
        culprit && e === culprit.entry
          ? { status: culprit.status, error: culprit.error }
          : { status: 'flushed', error: submittedError };
    }
    for (const e of this.pending.splice(0)) {
      e.detachAbort?.();
      e.result = e.aborted
        ? { status: 'aborted', error: new RdmapAbortError('withdrawn by its AbortSignal before it was sent') }
        : {
            status: 'flushed',
            error: new FlushedError('the stream left RTS before it was sent', { cause: submittedError }),
          };
      this.inflight.push(e);
    }
    this.responses.length = 0;
    this.complete();
  }
}
