/**
 * RDMAP transmit path (RFC 5040 §5, §5.5), as functions over the stream's one state (stream-state.ts):
 * `postSend` (the stream's, built here) checks the caller's work request where it enters (RFC 5040 §4,
 * §5; "TO + length wraps 2^64", RFC 5041 §7.1; the RFC 7306 extensions it needs; ORD), then the send
 * queue is handed to DDP strictly in submission order (rule 13), the Read fence and ORD
 * hold-backs, Read Responses to inbound Read Requests in the order the Requests were Delivered (rule 20),
 * and completions reported in submission order (rule 15) once DDP has sent the message (rule 14) or, for
 * a Read, once its Response is Delivered (rule 19). RFC 7306: Write and Send with Immediate (the message,
 * then Immediate Data), Atomic Requests (held by ORD with the Reads, complete on their Atomic Response)
 * and Atomic Responses, sent in Request order with the Read Responses. The queue's bookkeeping (what is
 * outstanding, completions, the flush) is in send-queue.ts.
 */
import { MAX_U64, stagHex, TWO_64, type UntaggedSend } from '@rddp/ddp';
import { ATOMIC_OPERAND_LENGTH, AtomicOpcode, encodeAtomicRequestOf } from './atomic.js';
import {
  LocalProtectionError,
  OrdExceededError,
  RdmapAbortError,
  type RdmapError,
  RdmapExtensionDisabledError,
  RdmapInvalidArgumentError,
  RdmapMessageTooLongError,
  RdmapStateError,
} from './errors.js';
import { encodeReadRequest, encodeUntaggedRsvdUlp } from './header.js';
import { encodeImmediateData } from './immediate.js';
import { ExtensionOpcode, type RdmapExtension, RdmapOpcode, RdmapQueue } from './opcode.js';
import { sendResponse } from './responses.js';
import { complete, requestsOutstanding } from './send-queue.js';
import { guard, type PendingResponse, type SqEntry, type StreamState } from './stream-state.js';
import { onLocalBufferError, onSendFailure } from './terminate-path.js';
import type { CompletionStatus, ImmediateData, RdmapWorkRequest } from './types.js';

// ----- the caller's work request, checked where it enters -----

/** The largest message RDMAP can describe: RDMA Read Message Size and DDP MO are 32 bits (§4.4). */
export const RDMAP_MAX_MESSAGE = 0xffff_ffff;
const ATOMIC_OPCODES: readonly unknown[] = Object.values(AtomicOpcode);
/** At or below 2^63 no message (< 2^32 octets) can wrap the TO space. */
const TO_NO_WRAP = 1n << 63n;

/** What `postSend` checks a work request against: the stream's extensions and ORD (§6.1). */
export interface PostLimits {
  readonly extensions: Readonly<Record<RdmapExtension, boolean>>;
  readonly ord: number;
  /** A Read beyond ORD: `queue` holds it until a Read completes; `error` throws. */
  readonly ordPolicy: 'queue' | 'error';
}

/**
 * The stream's `postSend`: throws typed caller errors; everything else is reported by the completion, in
 * submission order. The work request goes from the call straight into the send queue and, when nothing
 * holds it back, to DDP.
 */
export function postSendOf(st: StreamState, limits: PostLimits): (wr: RdmapWorkRequest) => void {
  return (wr) => {
    if (st.sm.current !== 'rts') throw new RdmapStateError(st.sm.current, 'post send-queue work');
    const length = checkWorkRequest(wr, limits.extensions);
    const t = wr.op.type;
    // ORD (RFC 5040 §6.1): a Read or Atomic Request needs a slot; with `ordPolicy: 'error'` none may wait.
    if (
      (t === 'read' || t === 'atomic') &&
      (limits.ord === 0 || (limits.ordPolicy === 'error' && requestsOutstanding(st) >= limits.ord))
    )
      throw new OrdExceededError(limits.ord, t === 'atomic' ? 'Atomic Request' : undefined);
    post(st, wr, length);
  };
}

function checkPayload(parts: readonly Uint8Array[]): number {
  if (!Array.isArray(parts)) throw new RdmapInvalidArgumentError('the payload must be an array of Uint8Arrays');
  let n = 0;
  for (const p of parts) {
    if (!(p instanceof Uint8Array)) throw new RdmapInvalidArgumentError('payload parts must be Uint8Arrays');
    n += p.byteLength;
  }
  if (n > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(n, RDMAP_MAX_MESSAGE);
  return n;
}

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
    // RTS, or draining during a graceful close (read as a field: this runs for every message).
    while ((st.sm.current === 'rts' || st.sm.current === 'closing') && !st.held.value) {
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
      if (st.inDdp >= DDP_QUEUE_LIMIT) {
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

/**
 * Given to DDP with each send-queue message (counted in `inDdp` once DDP took it): its last segment went
 * to the LLP, so DDP's queue has room again.
 */
function handedFn(st: StreamState): () => void {
  return (st.onHanded ??= () => {
    st.inDdp--;
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
    const r = st.stags.lookup(stag);
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
      const ctrl = st.control[RdmapOpcode.RdmaWrite] as number;
      if (op.immediate === undefined) {
        try {
          st.ddp.sendTaggedWith(op.sinkStag, op.sinkTo, op.payload, ctrl, e, undefined, handedFn(st));
          st.inDdp++;
        } catch (err) {
          failLater(st, err);
        }
        return;
      }
      const written = guard(() =>
        counted(st, st.ddp.sendTagged(op.sinkStag, op.sinkTo, op.payload, ctrl, undefined, handedFn(st))),
      );
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
      const header = encodeAtomicRequestOf(op, requestId);
      st.atomics.add({ token: e, requestId });
      const rsvd = encodeUntaggedRsvdUlp(st.control[ExtensionOpcode.AtomicRequest] as number);
      const req = counted(st, st.ddp.sendUntagged(RdmapQueue.ReadRequest, [header], rsvd, undefined, handedFn(st)));
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
      const rsvd = encodeUntaggedRsvdUlp(st.control[opcode] as number, op.invalidateStag ?? 0);
      e.qn = RdmapQueue.Send;
      if (op.immediate === undefined) {
        try {
          e.msn = st.ddp.sendUntaggedWith(RdmapQueue.Send, op.payload, rsvd, e, undefined, handedFn(st));
          st.inDdp++;
        } catch (err) {
          e.msn = -1;
          failLater(st, err);
        }
        return;
      }
      const sent = counted(st, st.ddp.sendUntagged(RdmapQueue.Send, op.payload, rsvd, undefined, handedFn(st)));
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
      const rsvd = encodeUntaggedRsvdUlp(st.control[RdmapOpcode.RdmaReadRequest] as number);
      const req = counted(
        st,
        st.ddp.sendUntagged(RdmapQueue.ReadRequest, [encodeReadRequest(op)], rsvd, undefined, handedFn(st)),
      );
      e.qn = RdmapQueue.ReadRequest;
      e.msn = req.msn;
      req.catch(fail);
      return; // completes when its Read Response is Delivered (§5.5 rule 19)
    }
    case 'local-invalidate': {
      const r = st.stags.lookup(op.stag);
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

/** A send DDP took (it did not throw): counted in `inDdp` until its `onHanded`. */
function counted<T>(st: StreamState, sent: T): T {
  st.inDdp++;
  return sent;
}

/** An Immediate Data (with SE) message on QN 0 (RFC 7306): its 64 bits are the whole payload. */
function sendImmediate(st: StreamState, imm: ImmediateData): UntaggedSend {
  const opcode = imm.solicited ? ExtensionOpcode.ImmediateDataWithSolicitedEvent : ExtensionOpcode.ImmediateData;
  const rsvd = encodeUntaggedRsvdUlp(st.control[opcode] as number);
  return counted(
    st,
    st.ddp.sendUntagged(RdmapQueue.Send, [encodeImmediateData(imm.data)], rsvd, undefined, handedFn(st)),
  );
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

/**
 * Checks a work request where it enters RDMAP (`postSend`, whoever calls it); throws a typed error for bad
 * input. Returns the message's length in octets (what its completion reports).
 */
export function checkWorkRequest(wr: RdmapWorkRequest, extensions: Readonly<Record<RdmapExtension, boolean>>): number {
  const op = wr.op;
  switch (op.type) {
    case 'write': {
      const n = checkPayload(op.payload);
      if (op.immediate !== undefined) checkImmediate(extensions, op.immediate);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      // Below 2^63 no message can wrap: the bigint sum is made only for TOs near the top.
      if (op.sinkTo > TO_NO_WRAP && op.sinkTo + BigInt(n) > TWO_64)
        throw new RdmapInvalidArgumentError('Data Sink TO + length wraps 2^64 (RFC 5041 §7.1)');
      return n;
    }
    case 'send': {
      const n = checkPayload(op.payload);
      if (op.invalidateStag !== undefined) checkStag(op.invalidateStag, 'Invalidate STag');
      if (op.immediate !== undefined) checkImmediate(extensions, op.immediate);
      return n;
    }
    case 'immediate':
      checkImmediate(extensions, op);
      return 0;
    case 'atomic':
      if (!extensions.atomics) throw new RdmapExtensionDisabledError('atomics');
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
      return ATOMIC_OPERAND_LENGTH;
    case 'read':
      if (!Number.isInteger(op.size) || op.size < 0)
        throw new RdmapInvalidArgumentError(`RDMA Read Message Size ${op.size} is not a length`);
      if (op.size > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(op.size, RDMAP_MAX_MESSAGE);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkStag(op.srcStag, 'Data Source STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      checkTo(op.srcTo, 'Data Source TO');
      return op.size;
    case 'local-invalidate':
      checkStag(op.stag, 'STag');
      return 0;
    default:
      throw new RdmapInvalidArgumentError(`unknown operation ${String((op as { type: unknown }).type)}`);
  }
}

/** Immediate Data needs the extension and a 64-bit value (RFC 7306). */
function checkImmediate(extensions: Readonly<Record<RdmapExtension, boolean>>, imm: ImmediateData): void {
  if (!extensions.immediate) throw new RdmapExtensionDisabledError('immediate');
  checkTo(imm.data, 'Immediate Data');
}

export function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > 0xffff_ffff)
    throw new RdmapInvalidArgumentError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

export function checkTo(to: bigint, what: string): void {
  if (typeof to !== 'bigint' || to < 0n || to > MAX_U64)
    throw new RdmapInvalidArgumentError(`${what} ${String(to)} is not a 64-bit unsigned integer`);
}
