/**
 * How an RDMAP Stream ends (RFC 5040 §5.4, §6.2, §7.1), as functions over its one state: RDMAP Abortive
 * Termination with at most one Terminate (the first error wins, §7.1 rule 4), a Terminate received, an
 * LLP failure, the LLP closing, and what each does to outstanding work.
 */
import { type DdpCloseEvent, type DdpErrorEvent, decodeHeader, UntaggedErrorCode } from '@rddp/ddp';
import {
  FlushedError,
  InvalidTerminateError,
  LlpFailedError,
  type LocalProtectionError,
  RdmapError,
  TerminatedError,
} from './errors.js';
import { controlOf, encodeControl, encodeUntaggedRsvdUlp, READ_REQUEST_HEADER_LENGTH } from './header.js';
import { ATOMIC_RESPONSE_QUEUE, opcodeRowOf, RdmapOpcode, RdmapQueue } from './opcode.js';
import { flushReceives } from './receive-queue.js';
import { findUntagged, flushAll, idle } from './send-queue.js';
import type { Culprit, PendingResponse, StreamState } from './stream-state.js';
import {
  decodeTerminate,
  encodeTerminate,
  type TerminateCause,
  type TerminateHeader,
  terminateFor,
} from './terminate.js';
import { DdpWireErrorType, describeTerminate, RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import type { CompletionStatus, RdmapClosedEvent } from './types.js';

export function onLocalBufferError(st: StreamState, err: LocalProtectionError): void {
  // §7.1 case 1: the Terminate is sent instead of the request, without Terminated headers.
  terminateWith(
    st,
    { layer: TerminateLayer.Rdma, errorType: RdmaErrorType.LocalCatastrophic, errorCode: 0 },
    undefined,
    err,
  );
}

export function onResponseSourceError(st: StreamState, p: PendingResponse, code: number): void {
  // §7.1 case 3 / §4.8: no octet of the Read was processed, so the original Read Request Header goes back.
  terminateWith(st, {
    layer: TerminateLayer.Rdma,
    errorType: RdmaErrorType.RemoteProtection,
    errorCode: code,
    segment: p.segment,
  });
}

export function onSendFailure(st: StreamState, err: unknown): void {
  // Sends that fail once the LLP is closing (graceful close, or after a Terminate) are settled by the close.
  if (st.closedEvent || st.terminated || st.llpClosing) return;
  const e = err instanceof RdmapError ? err : new LlpFailedError('send', err);
  fail(st, e);
  st.ddp.abort(e);
}

/** DDP refused a segment (RFC 5041 §7.2, or RDMAP's own `ulpCheck`, RFC 5040 §7.2): Terminate with it. */
export function onDdpError(st: StreamState, ev: DdpErrorEvent): void {
  if (st.terminated !== undefined || st.closedEvent) return;
  const h = ev.header;
  if (h !== undefined && !h.tagged && h.qn === RdmapQueue.Terminate) {
    // A malformed Terminate: the peer has terminated already; surface it, send none back (§5.4).
    onTerminateReceived(st, undefined, ev.message);
    return;
  }
  const hb = ev.headerBytes.byteLength === 14 || ev.headerBytes.byteLength === 18 ? ev.headerBytes : undefined;
  // What the bad segment was, by the opcode table: a Read Request's header goes into the Terminate (§4.8).
  const row = h !== undefined ? opcodeRowOf(controlOf(h)) : undefined;
  const isReadRequest = row?.receive === 'read-request' && ev.ulpHeaderBytes.byteLength === READ_REQUEST_HEADER_LENGTH;
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
  if (onSendQueue && st.receives.length > 0) {
    const tooLong = ev.layer === 'ddp' && ev.code === UntaggedErrorCode.MessageTooLong;
    culprit = { receive: tooLong ? 'local-length-error' : ev.layer === 'rdmap' ? 'remote-invalid-request' : 'fatal' };
  } else if (h?.tagged && row?.receive === 'read-response' && st.reads.receiving) {
    culprit = { entry: st.reads.receiving.token, status: 'remote-operation-error' };
  } else if (h !== undefined && !h.tagged && h.qn === ATOMIC_RESPONSE_QUEUE && st.atomics.oldest) {
    culprit = { entry: st.atomics.oldest.token, status: 'remote-operation-error' }; // RFC 7306
  }
  terminateWith(st, cause, culprit);
}

/**
 * RDMAP Abortive Termination (RFC 5040 §5.4, §6.2.1, §7.1): at most one Terminate per stream (the
 * first error is the one reported, §7.1 rule 4); nothing is placed or sent after it; outstanding work
 * is Completed in error; the LLP is closed gracefully once the Terminate is on its way.
 */
export function terminateWith(
  st: StreamState,
  cause: TerminateCause,
  culprit?: Culprit,
  localError?: RdmapError,
): void {
  if (st.terminated !== undefined || st.closedEvent) return;
  if (!st.sm.to('terminate')) return;
  st.terminated = 'sent';
  st.stopPlacing();
  const header = terminateFor(cause);
  const bytes = encodeTerminate(header);
  const error = new TerminatedError('sent', header);
  st.endError = localError ?? error;
  const ctrl = encodeControl(st.rv, RdmapOpcode.Terminate);
  let sent: Promise<unknown>;
  try {
    sent = st.ddp.sendUntagged(RdmapQueue.Terminate, [bytes], encodeUntaggedRsvdUlp(ctrl));
  } catch (err) {
    sent = Promise.reject(err);
  }
  const report = (notSent?: unknown) => {
    st.terminates.next({
      direction: notSent === undefined ? 'sent' : 'not-sent',
      ...(notSent !== undefined ? { notSentReason: notSent instanceof Error ? notSent.message : String(notSent) } : {}),
      header,
      bytes,
      description: describeTerminate(header),
      error,
    });
    st.terminates.complete();
  };
  flushEverything(st, error, culprit);
  // §6.2.1: "The peer SHOULD perform a graceful LLP teardown to ensure the Terminate Message is ... Delivered."
  sent.then(
    () => {
      report();
      closeLlpAfterTerminate(st);
    },
    (err: unknown) => {
      report(err ?? new Error('the LLP did not send it'));
      st.ddp.abort(error);
    },
  );
}

function closeLlpAfterTerminate(st: StreamState): void {
  if (st.llpClosing) return;
  st.llpClosing = true;
  st.ddp.close().catch(() => st.ddp.abort());
}

/** A Terminate arrived (§5.4): Delivered to the ULP, everything Completed in error, the LLP closed. */
export function onTerminateReceived(st: StreamState, bytes: Uint8Array | undefined, problem?: string): void {
  if (st.terminated !== undefined || st.closedEvent) return;
  if (!st.sm.to('terminate')) return;
  st.terminated = 'received';
  st.stopPlacing();
  let header: TerminateHeader | undefined;
  let error: RdmapError;
  const copy = bytes ? bytes.slice() : new Uint8Array(0);
  try {
    if (bytes === undefined) throw new InvalidTerminateError(problem ?? 'refused by DDP');
    header = decodeTerminate(copy);
    error = new TerminatedError('received', header);
  } catch (err) {
    error =
      err instanceof InvalidTerminateError ? err : new InvalidTerminateError((err as Error).message, { cause: err });
  }
  st.endError = error;
  st.terminates.next({
    direction: 'received',
    header,
    bytes: copy,
    description: header ? describeTerminate(header) : error.message,
    error,
  });
  st.terminates.complete();
  flushEverything(st, error, header ? matchTerminate(st, header, error) : undefined);
  closeLlpAfterTerminate(st);
}

/** The local operation a received Terminate reports on, when its Terminated DDP Header names one (§4.8). */
function matchTerminate(st: StreamState, t: TerminateHeader, error: RdmapError): Culprit | undefined {
  const d = t.ddpHeader === undefined ? undefined : decodeHeader(t.ddpHeader);
  if (d === undefined || d.tagged) return undefined;
  const entry = findUntagged(st, d.qn, d.msn);
  return entry ? { entry, status: terminateStatus(t), error } : undefined;
}

function flushEverything(st: StreamState, error: RdmapError, culprit?: Culprit): void {
  st.reads.drain();
  st.atomics.drain();
  flushAll(
    st,
    error,
    culprit?.entry !== undefined
      ? { entry: culprit.entry, status: culprit.status ?? 'fatal', error: culprit.error ?? error }
      : undefined,
  );
  st.ddp.flushReceives(RdmapQueue.Send);
  flushReceives(
    st,
    new FlushedError('the stream ended before a Send arrived', { cause: error }),
    culprit?.receive ? { status: culprit.receive, error } : undefined,
  );
}

/** The stream fails without a Terminate (LLP failure, §6.2). */
export function fail(st: StreamState, error: RdmapError): void {
  if (st.closedEvent) return;
  st.endError ??= error;
  if (st.sm.state !== 'terminate') st.sm.to('error');
  flushEverything(st, error);
}

export function onDdpClosed(st: StreamState, ev: DdpCloseEvent): void {
  if (st.closedEvent) return;
  if (st.sm.state === 'terminate') {
    st.sm.to('error');
    finish(st, { state: 'error', error: st.endError as RdmapError });
    return;
  }
  if (st.sm.state === 'error') {
    finish(st, { state: 'error', error: st.endError as RdmapError });
    return;
  }
  if (!ev.graceful || !idle(st)) {
    const err = ev.graceful
      ? new FlushedError('the LLP stream closed with work outstanding')
      : new LlpFailedError('stream', ev.error);
    fail(st, err);
    finish(st, { state: 'error', error: st.endError ?? err });
    return;
  }
  // Graceful (RFC 5040 §6.2): ours completed, or the peer closed; posted receives are flushed.
  st.reads.drain();
  st.atomics.drain();
  flushReceives(st, new FlushedError('the stream closed gracefully'));
  st.sm.to('closed');
  finish(st, { state: 'closed' });
}

function finish(st: StreamState, ev: RdmapClosedEvent): void {
  if (st.closedEvent) return;
  st.closedEvent = ev;
  st.stopPlacing();
  st.held.complete();
  st.terminates.complete();
  st.completions.complete();
  st.closed.next(ev);
  st.closed.complete();
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
