/**
 * RDMAP receive path (RFC 5040 §5, §5.5), as functions over the stream's one state: what DDP Delivers
 * goes to the handler the opcode table names — Sends into posted receive buffers (§5.3, rules 10 and 16),
 * Read Responses completing Reads (rule 19), Read Requests validated (§7.2 4a–4e) and answered in order
 * (rules 17, 20), Terminates (§5.4); RFC 7306: Immediate Data into posted receives, Atomic Requests
 * executed in order and answered with the Read Responses, Atomic Responses completing atomics. The
 * checks before placement are in rx-check.ts.
 */
import { type DeliveryEvent, TWO_32 } from '@rddp/ddp';
import {
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  applyAtomic,
  checkAtomicRequest,
  decodeAtomicRequest,
  decodeAtomicResponse,
  readWord,
  writeWord,
} from './atomic.js';
import { decodeReadRequest, READ_REQUEST_HEADER_LENGTH } from './header.js';
import { decodeImmediateData } from './immediate.js';
import { ATOMIC_RESPONSE_QUEUE, type OpcodeInfo, RDMAP_OPCODES } from './opcode.js';
import { checkReadSource } from './read.js';
import { checkInvalidate } from './rx-check.js';
import type { PostedReceive, SqEntry, StreamState } from './stream-state.js';
import { segmentOf, type TerminateCause, type TerminatedSegment } from './terminate.js';
import { RdmaErrorCode, RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import { onTerminateReceived, terminateWith } from './terminate-path.js';
import { atomicCompleted, readCompleted, respond } from './tx.js';
import type { CompletionStatus, ReceiveCompletion } from './types.js';

/** An error found on a Delivered message (§7.1 cases 2, 3): Terminate, with the receive it failed. */
function deliveredError(st: StreamState, cause: TerminateCause, receive?: CompletionStatus): void {
  terminateWith(st, cause, receive ? { receive } : undefined);
}

/** The Atomic Response of `e` was Delivered: its QN 3 buffer is posted again, the atomic completes (RFC 7306). */
function atomicDelivered(st: StreamState, token: unknown, original: bigint, buffer: Uint8Array): void {
  buffer.fill(0);
  st.ddp.postReceive(ATOMIC_RESPONSE_QUEUE, buffer);
  atomicCompleted(st, token as SqEntry, original);
}

function currentSegment(st: StreamState): TerminatedSegment {
  return segmentOf(st.current);
}

/** DDP's direct consumer of Deliveries for `st` (`DdpStreamOptions.onDelivery`). */
export function deliveryTo(st: StreamState): (ev: DeliveryEvent) => void {
  return (ev) => onDelivery(st, ev);
}

/** A DDP Message was Delivered (RFC 5041 §5.4). */
function onDelivery(st: StreamState, ev: DeliveryEvent): void {
  if (st.terminated !== undefined || st.closedEvent !== undefined) return; // nothing more (RFC 5040 §5.4)
  st.current = ev.segment;
  // The RDMAP Control octet (RFC 5040 §4.1): all of a tagged RsvdULP, the first of an untagged one's five.
  const control = ev.tagged ? ev.rsvdUlp & 0xff : Math.floor(ev.rsvdUlp / TWO_32) & 0xff;
  // The opcode table names the handler (every segment was accepted before placement, so the row fits).
  const info = RDMAP_OPCODES[control & 0x0f];
  if (info === undefined) return;
  if (ev.tagged) {
    // RDMA Writes are placed, never Delivered to the ULP (§5.1); Read Responses complete Reads (rule 19).
    if (info.receive !== 'read-response') return;
    const r = st.reads.completeOldest();
    if (r !== undefined) readCompleted(st, r.token);
    return;
  }
  switch (info.receive) {
    case 'send':
      // The Invalidate STag: the untagged RsvdULP's last 32 bits (RFC 5040 §4.1).
      onSend(st, ev.receiveId as PostedReceive, ev.length, info, (ev.rsvdUlp % TWO_32) >>> 0);
      return;
    case 'immediate-data':
      onImmediate(st, ev.receiveId as PostedReceive, info);
      return;
    case 'read-request':
      onReadRequest(st, ev.buffer, ev.length);
      return;
    case 'atomic-request':
      onAtomicRequest(st, ev.buffer, ev.length);
      return;
    case 'terminate':
      onTerminateReceived(st, ev.buffer.subarray(0, ev.length));
      return;
    case 'atomic-response':
      onAtomicResponse(st, ev.buffer);
      return;
  }
}

/**
 * An Immediate Data (with SE) message Delivered (RFC 7306): it consumed the next posted receive, in MSN
 * order with the Sends; the completion carries its 64 bits (checked to be exactly 8 octets before placement).
 */
function onImmediate(st: StreamState, r: PostedReceive, info: OpcodeInfo): void {
  const idx = st.receives.indexOf(r);
  if (idx >= 0) st.receives.splice(idx, 1);
  st.emitReceive({
    kind: 'receive',
    id: r.id,
    buffer: r.buffer,
    status: 'success',
    byteLength: 0,
    solicited: info.solicitedEvent,
    immediateData: decodeImmediateData(r.buffer),
  });
}

/**
 * An Atomic Request Delivered on QN 1 (RFC 7306): checked (Atomic OpCode, STag, Remote Atomic right,
 * bounds, alignment), executed at once — after every earlier message of the stream, before any later
 * one — and answered in Request order with the Read Responses.
 */
function onAtomicRequest(st: StreamState, buffer: Uint8Array, length: number): void {
  const segment = currentSegment(st);
  const req = decodeAtomicRequest(buffer);
  const region = st.lookup(req.remoteStag);
  const bad =
    length !== ATOMIC_REQUEST_HEADER_LENGTH
      ? { type: RdmaErrorType.RemoteOperation, code: RdmaErrorCode.Unspecified }
      : checkAtomicRequest(req, region, st.pdId);
  if (bad !== undefined || region === undefined) {
    deliveredError(st, {
      layer: TerminateLayer.Rdma,
      errorType: bad?.type ?? RdmaErrorType.RemoteProtection,
      errorCode: bad?.code ?? RdmaErrorCode.InvalidStag,
      segment,
    });
    return;
  }
  const off = Number(req.remoteTo - region.baseTo);
  const original = readWord(region.buffer, off);
  const updated = applyAtomic(req, original);
  if (updated !== original) writeWord(region.buffer, off, updated);
  respond(st, {
    kind: 'atomic',
    response: { originalRequestId: req.requestId, originalRemoteData: original },
    buffer,
    segment,
  });
}

/** An Atomic Response Delivered on QN 3 (RFC 7306): it answers the oldest Atomic Request, or it is an error. */
function onAtomicResponse(st: StreamState, buffer: Uint8Array): void {
  const res = decodeAtomicResponse(buffer.subarray(0, ATOMIC_RESPONSE_HEADER_LENGTH));
  const a = st.atomics.completeOldest();
  if (a === undefined) return; // checked before placement
  if (a.requestId !== res.originalRequestId) {
    terminateWith(
      st,
      {
        layer: TerminateLayer.Rdma,
        errorType: RdmaErrorType.RemoteOperation,
        errorCode: RdmaErrorCode.Unspecified,
        segment: currentSegment(st),
      },
      { entry: a.token, status: 'remote-operation-error' },
    );
    return;
  }
  atomicDelivered(st, a.token, res.originalRemoteData, buffer);
}

/** A Send Message Type Delivered (§5.3): invalidate if asked, then Deliver to the ULP in order (rule 10). */
function onSend(st: StreamState, r: PostedReceive, length: number, info: OpcodeInfo, invalidateStag: number): void {
  const idx = st.receives.indexOf(r);
  if (idx >= 0) st.receives.splice(idx, 1);
  let invalidated: number | undefined;
  if (info.invalidateStag) {
    // Checked on every segment before placement; checked again as the STag is invalidated (§5.3).
    const bad = checkInvalidate(st, invalidateStag);
    if (bad !== undefined || !st.invalidate(invalidateStag)) {
      st.receives.unshift(r); // it completes in error, first, with the flush
      deliveredError(
        st,
        {
          layer: TerminateLayer.Rdma,
          errorType: bad?.type ?? RdmaErrorType.RemoteProtection,
          errorCode: bad?.code ?? RdmaErrorCode.StagCannotBeInvalidated,
          segment: currentSegment(st),
        },
        'remote-invalid-request',
      );
      return;
    }
    invalidated = invalidateStag;
  }
  const c: { -readonly [K in keyof ReceiveCompletion]: ReceiveCompletion[K] } = {
    kind: 'receive',
    id: r.id,
    buffer: r.buffer,
    status: 'success',
    byteLength: length,
    solicited: info.solicitedEvent,
  };
  if (invalidated !== undefined) c.invalidatedStag = invalidated; // no spread per Send
  // As `st.emitReceive`, written out: this is every Send's path.
  st.onCompletion?.(c);
  if (st.completions.observed) st.completions.next(c);
}

/** An RDMA Read Request Delivered (rule 17): validated (§7.2 4a–4e), then answered in order (rule 20). */
function onReadRequest(st: StreamState, buffer: Uint8Array, length: number): void {
  const segment = currentSegment(st);
  if (length !== READ_REQUEST_HEADER_LENGTH) {
    deliveredError(st, {
      layer: TerminateLayer.Rdma,
      errorType: RdmaErrorType.RemoteOperation,
      errorCode: RdmaErrorCode.Unspecified,
      segment,
    });
    return;
  }
  const rr = decodeReadRequest(buffer);
  // Before the first octet is read, a Terminate carries the original Read Request Header (§4.8).
  const original = buffer.slice(0, READ_REQUEST_HEADER_LENGTH);
  const bad = checkReadSource(rr, st.lookup(rr.srcStag), st.pdId);
  if (bad !== undefined) {
    deliveredError(st, {
      layer: TerminateLayer.Rdma,
      errorType: RdmaErrorType.RemoteProtection,
      errorCode: bad.code,
      segment: { ...segment, readRequest: original },
    });
    return;
  }
  respond(st, { kind: 'read', rr, buffer, segment: { ...segment, readRequest: original } });
}
