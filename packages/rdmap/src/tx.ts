/**
 * RDMAP transmit path (RFC 5040 §5, §5.5), as functions over the stream's one state (stream-state.ts):
 * the send queue handed to DDP strictly in submission order (rule 13), the Read fence and ORD
 * hold-backs, Read Responses to inbound Read Requests in the order the Requests were Delivered (rule 20),
 * and completions reported in submission order (rule 15) once DDP has sent the message (rule 14) or, for
 * a Read, once its Response is Delivered (rule 19). RFC 7306: Write and Send with Immediate (the message,
 * then Immediate Data), Atomic Requests (held by ORD with the Reads, complete on their Atomic Response)
 * and Atomic Responses, sent in Request order with the Read Responses. The queue's bookkeeping (what is
 * outstanding, completions, the flush) is in send-queue.ts.
 */
import { MAX_U64, stagHex, type UntaggedSend } from '@rddp/ddp';
import { AtomicOpcode, encodeAtomicRequest } from './atomic.js';
import { LocalProtectionError, RdmapAbortError, type RdmapError } from './errors.js';
import { encodeControl, encodeReadRequest, encodeUntaggedRsvdUlp } from './header.js';
import { encodeImmediateData } from './immediate.js';
import { ExtensionOpcode, RdmapOpcode, RdmapQueue } from './opcode.js';
import { sendResponse } from './responses.js';
import { complete } from './send-queue.js';
import { guard, type PendingResponse, type SqEntry, type StreamState } from './stream-state.js';
import { onLocalBufferError, onSendFailure } from './terminate-path.js';
import type { CompletionStatus, ImmediateData, RdmapWorkRequest } from './types.js';

const MSN_MODULO = 0x1_0000_0000;
/**
 * Send-queue messages DDP may hold while its LLP pushes back; further requests wait here (in `pending`,
 * bounded by what the application posts), so DDP's transmit queue stays far below its `maxSendQueue`.
 */
const DDP_QUEUE_LIMIT = 64;

/** Reads and atomics handed to DDP and not completed. */
function requestsInFlight(st: StreamState): number {
  return st.reads.count + st.atomics.count;
}

/**
 * A send-queue entry that is also its DDP message's sink: DDP tells it how the Write or Send ended, with
 * no promise or closure per message (§5.5 rule 14: it is then complete).
 */
class SqRequest implements SqEntry {
  submitted = false;
  aborted = false;
  qn: number | undefined = undefined;
  msn: number | undefined = undefined;
  immMsn: number | undefined = undefined;
  result: SqEntry['result'] = undefined;
  detachAbort: (() => void) | undefined = undefined;

  constructor(
    private readonly st: StreamState,
    readonly wr: RdmapWorkRequest,
    readonly byteLength: number,
  ) {}

  ddpSent(error: unknown): void {
    if (error === undefined) sentInFull(this.st, this);
    else failLater(this.st, error);
  }
}

/** A send that failed: handled after the current call returns, as every send failure is. */
function failLater(st: StreamState, err: unknown): void {
  queueMicrotask(() => onSendFailure(st, err));
}

export function post(st: StreamState, wr: RdmapWorkRequest, byteLength: number): void {
  const e = new SqRequest(st, wr, byteLength);
  const signal = wr.signal;
  if (signal) {
    if (signal.aborted) e.aborted = true;
    else {
      const onAbort = () => {
        if (e.submitted || e.aborted) return;
        e.aborted = true;
        pump(st);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      e.detachAbort = () => signal.removeEventListener('abort', onAbort);
    }
  }
  st.pending.push(e);
  pump(st);
}

/** Queues the Response to an accepted Read Request (§5.5 rules 17, 20). */
export function respond(st: StreamState, p: PendingResponse): void {
  st.responses.push(p);
  pump(st);
}

/** Hands everything that may go to DDP, in order, until something must wait. */
export function pump(st: StreamState): void {
  if (st.pumping) return;
  st.pumping = true;
  try {
    while (st.sm.transmitting && !st.held.value) {
      // Read Responses are independent of the send queue (rule 2); the peer's Reads wait on them.
      const p = st.responses.shift();
      if (p !== undefined) {
        sendResponse(st, p);
        continue;
      }
      const e = st.pending.peek();
      if (e === undefined) break;
      if (e.aborted) {
        st.pending.shift();
        finishEarly(st, e, 'aborted', new RdmapAbortError('withdrawn by its AbortSignal before it was sent'));
        continue;
      }
      if (e.wr.fence && requestsInFlight(st) > 0) break; // Read fence (§5.5 rule 12, Appendix B footnote 2)
      const t = e.wr.op.type;
      if ((t === 'read' || t === 'atomic') && requestsInFlight(st) >= st.reads.ord) break; // ORD (§6.1)
      if (st.ddp.sendQueueLength >= DDP_QUEUE_LIMIT) {
        st.waitingForDdp = true; // the LLP pushes back: hold requests here rather than in DDP
        break;
      }
      st.pending.shift();
      submit(st, e);
    }
  } finally {
    st.pumping = false;
  }
  complete(st);
}

/** A send-queue message went to the LLP: DDP's queue has room again. */
function handedFn(st: StreamState): () => void {
  return (st.onHanded ??= () => {
    if (!st.waitingForDdp) return;
    st.waitingForDdp = false;
    queueMicrotask(() => pump(st)); // after DDP has dropped the message from its queue
  });
}

function finishEarly(st: StreamState, e: SqEntry, status: CompletionStatus, error: RdmapError): void {
  e.detachAbort?.();
  e.result = { status, error };
  st.inflight.push(e);
}

function submit(st: StreamState, e: SqEntry): void {
  e.detachAbort?.();
  e.submitted = true;
  // RFC 5040 §7.1 case 1: the message is built now; its local buffers must still be valid.
  for (const stag of e.wr.localStags ?? []) {
    const r = st.lookup(stag);
    if (r === undefined || !r.valid || r.pdId !== st.pdId) {
      const err = new LocalProtectionError(
        `local STag ${stagHex(stag)} is no longer valid in this protection domain (RFC 5040 §7.1)`,
      );
      e.result = { status: 'local-protection-error', error: err };
      st.inflight.push(e);
      onLocalBufferError(st, err);
      return;
    }
  }
  const op = e.wr.op;
  st.inflight.push(e);
  const fail = (err: unknown) => onSendFailure(st, err);
  switch (op.type) {
    case 'write': {
      const ctrl = encodeControl(st.rv, RdmapOpcode.RdmaWrite);
      if (op.immediate === undefined) {
        try {
          st.ddp.sendTaggedWith(op.sinkStag, op.sinkTo, op.payload, ctrl, e, undefined, handedFn(st));
        } catch (err) {
          failLater(st, err);
        }
        return;
      }
      const written = guard(() => st.ddp.sendTagged(op.sinkStag, op.sinkTo, op.payload, ctrl, undefined, handedFn(st)));
      // RFC 7306 Write with Immediate: the Immediate Data message follows the Write on QN 0 (DDP keeps order).
      const imm = sendImmediate(st, op.immediate);
      e.qn = RdmapQueue.Send;
      e.msn = imm.msn;
      Promise.all([written, imm]).then(() => sentInFull(st, e), fail);
      return;
    }
    case 'immediate': {
      const imm = sendImmediate(st, op);
      e.qn = RdmapQueue.Send;
      e.msn = imm.msn;
      imm.then(() => sentInFull(st, e), fail);
      return;
    }
    case 'atomic': {
      const requestId = st.nextRequestId;
      st.nextRequestId = (requestId + 1) % MSN_MODULO;
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
      st.atomics.add({ token: e, requestId });
      const rsvd = encodeUntaggedRsvdUlp(encodeControl(st.rv, ExtensionOpcode.AtomicRequest));
      const req = st.ddp.sendUntagged(RdmapQueue.ReadRequest, [header], rsvd, undefined, handedFn(st));
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
      const rsvd = encodeUntaggedRsvdUlp(encodeControl(st.rv, opcode), op.invalidateStag ?? 0);
      e.qn = RdmapQueue.Send;
      if (op.immediate === undefined) {
        try {
          e.msn = st.ddp.sendUntaggedWith(RdmapQueue.Send, op.payload, rsvd, e, undefined, handedFn(st));
        } catch (err) {
          e.msn = -1;
          failLater(st, err);
        }
        return;
      }
      const sent = st.ddp.sendUntagged(RdmapQueue.Send, op.payload, rsvd, undefined, handedFn(st));
      e.msn = sent.msn;
      // RFC 7306 Send with Immediate: the Send, then the Immediate Data message, both on QN 0.
      const imm = sendImmediate(st, op.immediate);
      e.immMsn = imm.msn;
      Promise.all([sent, imm]).then(() => sentInFull(st, e), fail);
      return;
    }
    case 'read': {
      st.reads.add({
        token: e,
        sinkStag: op.sinkStag,
        sinkTo: op.sinkTo,
        size: op.size,
        srcStag: op.srcStag,
        srcTo: op.srcTo,
      });
      const rsvd = encodeUntaggedRsvdUlp(encodeControl(st.rv, RdmapOpcode.RdmaReadRequest));
      const req = st.ddp.sendUntagged(RdmapQueue.ReadRequest, [encodeReadRequest(op)], rsvd, undefined, handedFn(st));
      e.qn = RdmapQueue.ReadRequest;
      e.msn = req.msn;
      req.catch(fail);
      return; // completes when its Read Response is Delivered (§5.5 rule 19)
    }
    case 'local-invalidate': {
      const r = st.lookup(op.stag);
      if (r === undefined || r.pdId !== st.pdId || !st.invalidate(op.stag))
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
function sendImmediate(st: StreamState, imm: ImmediateData): UntaggedSend {
  const opcode = imm.solicited ? ExtensionOpcode.ImmediateDataWithSolicitedEvent : ExtensionOpcode.ImmediateData;
  const rsvd = encodeUntaggedRsvdUlp(encodeControl(st.rv, opcode));
  return st.ddp.sendUntagged(RdmapQueue.Send, [encodeImmediateData(imm.data)], rsvd, undefined, handedFn(st));
}

/** DDP sent a Write or Send in full (§5.5 rule 14). */
function sentInFull(st: StreamState, e: SqEntry): void {
  if (e.result !== undefined) return;
  e.result = SUCCESS;
  complete(st);
}

/** The result of every request that succeeded without a value (shared: nothing writes to a result). */
const SUCCESS: SqEntry['result'] = Object.freeze({ status: 'success' });

/** The Atomic Response of `e` was Delivered (RFC 7306): it completes with the Original Remote Data Value. */
export function atomicCompleted(st: StreamState, e: SqEntry, original: bigint): void {
  if (e.result === undefined) e.result = { status: 'success', atomicResult: original };
  complete(st);
  pump(st); // ORD or a fence may have been waiting on it
}

/** The Read Response of `e` was Delivered (§5.5 rule 19). */
export function readCompleted(st: StreamState, e: SqEntry): void {
  if (e.result === undefined) e.result = SUCCESS;
  complete(st); // reported before anything it held back is built (its outcome is certain)
  pump(st); // a fence or ORD may have been waiting on it
}
