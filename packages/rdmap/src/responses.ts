/**
 * The Responses this end owes (RFC 5040 §5.2.2; RFC 7306 Atomic Responses), sent in the order of their
 * Requests (§5.5 rule 20) by the transmit pump. IRD counts a Request until its Response has left (§6.1).
 */
import { encodeAtomicResponse } from './atomic.js';
import { encodeControl, encodeUntaggedRsvdUlp } from './header.js';
import { ATOMIC_RESPONSE_QUEUE, ExtensionOpcode, RdmapOpcode, RdmapQueue } from './opcode.js';
import { checkReadSource } from './read.js';
import { maybeCloseLlp } from './send-queue.js';
import { guard, type PendingResponse, type StreamState } from './stream-state.js';
import { onResponseSourceError, onSendFailure } from './terminate-path.js';

/** The RDMA Read Response (§5.2.2), or an Atomic Response (RFC 7306), in the order of the Requests. */
export function sendResponse(st: StreamState, p: PendingResponse): void {
  if (p.kind === 'atomic') {
    // RFC 7306: the atomic ran when its Request was Delivered; the Response goes on the requester's QN 3.
    const rsvd = encodeUntaggedRsvdUlp(encodeControl(st.rv, ExtensionOpcode.AtomicResponse));
    track(
      st,
      guard(() =>
        st.ddp.sendUntagged(ATOMIC_RESPONSE_QUEUE, [encodeAtomicResponse(p.response)], rsvd, undefined, () =>
          responseLeft(st, p),
        ),
      ),
    );
    return;
  }
  const rr = p.rr;
  const ctrl = encodeControl(st.rv, RdmapOpcode.RdmaReadResponse);
  let payload: Uint8Array[] = [];
  if (rr.size > 0) {
    const region = st.lookup(rr.srcStag);
    const bad = checkReadSource(rr, region, st.pdId);
    if (bad !== undefined || region === undefined) {
      onResponseSourceError(st, p, bad?.code ?? 0);
      return;
    }
    const off = Number(rr.srcTo - region.baseTo);
    payload = [region.buffer.subarray(off, off + rr.size)];
  }
  track(
    st,
    guard(() => st.ddp.sendTagged(rr.sinkStag, rr.sinkTo, payload, ctrl, undefined, () => responseLeft(st, p))),
  );
}

/**
 * §5.2.2 / RFC 5041 §5.1.2: the Request's IRD buffer is posted again once the Response's last segment
 * went to the LLP — before it can reach the requester, whose next Request (its ORD slot freed by that
 * segment) must find a buffer — but after the receive batch in progress, so Requests that arrived
 * together beyond IRD still find none (as Linux siw, whose receive path runs before its transmit path).
 */
function responseLeft(st: StreamState, p: PendingResponse): void {
  queueMicrotask(() => onResponseSent(st, p));
}

function onResponseSent(st: StreamState, p: PendingResponse): void {
  // §5.2.2: the Read Request queue keeps IRD buffers; this one may take the next Request.
  if (st.terminated === undefined && st.closedEvent === undefined && st.ddp.state !== 'closed') {
    p.buffer.fill(0);
    st.ddp.postReceive(RdmapQueue.ReadRequest, p.buffer);
  }
  maybeCloseLlp(st);
}

/**
 * A Response given to DDP. §6.1: IRD counts its Request until the Response has left — its last segment
 * handed to the LLP (`responseLeft`) — so a requester that stops reading holds at most IRD Responses
 * here and its next Request finds no buffer. The close waits for the whole Response to be sent.
 */
function track(st: StreamState, sending: Promise<unknown>): void {
  st.responsesSending++;
  sending.then(
    () => {
      st.responsesSending--;
      maybeCloseLlp(st);
    },
    (err) => {
      st.responsesSending--;
      onSendFailure(st, err);
    },
  );
}
