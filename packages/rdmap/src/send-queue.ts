/**
 * The send queue's bookkeeping (RFC 5040 §5.5), as functions over the stream's one state: what is
 * outstanding, completions reported in submission order (rule 15), the request a Terminate names (§4.8),
 * the flush when the stream ends (§5.4, §6.2.1), and the graceful close (§6.2) once nothing is owed.
 * The transmit path (tx.ts) fills the queue; the terminate path (terminate-path.ts) empties it.
 */
import { FlushedError, RdmapAbortError, type RdmapError } from './errors.js';
import type { SqEntry, StreamState } from './stream-state.js';
import type { CompletionStatus, SendCompletion } from './types.js';

/** Requests posted and not yet completed. */
export function outstanding(st: StreamState): number {
  return st.pending.length + st.inflight.length;
}
/** Reads posted and not completed (for an ORD check at post time). */
export function readsOutstanding(st: StreamState): number {
  return count(st, (t) => t === 'read');
}
/** Reads and Atomic Requests posted and not completed: what ORD bounds (RFC 5040 §6.1, RFC 7306). */
export function requestsOutstanding(st: StreamState): number {
  return count(st, (t) => t === 'read' || t === 'atomic');
}
function count(st: StreamState, which: (type: string) => boolean): number {
  let n = 0;
  for (const e of st.pending) if (which(e.wr.op.type) && !e.aborted) n++;
  for (const e of st.inflight) if (which(e.wr.op.type) && e.result === undefined) n++;
  return n;
}
/** Nothing posted is unfinished and every accepted Read Request has been answered. */
export function idle(st: StreamState): boolean {
  return outstanding(st) === 0 && st.responses.length === 0 && st.responsesSending === 0;
}

/** Graceful close (§6.2): once everything posted completed and owed Read Responses went out, close the LLP. */
export function maybeCloseLlp(st: StreamState): void {
  if (st.sm.state !== 'closing' || st.llpClosing || !idle(st)) return;
  st.llpClosing = true;
  st.ddp.close().catch(() => st.ddp.abort());
}

/** Reports finished requests from the head, in submission order (§5.5 rule 15). */
export function complete(st: StreamState): void {
  if (st.completing) return;
  st.completing = true;
  try {
    for (let head = st.inflight.peek(); head !== undefined; head = st.inflight.peek()) {
      if (head.result === undefined) break;
      st.inflight.shift();
      const r = head.result;
      // One object per completion, shaped alike for every request (no spread per completion).
      const c: { -readonly [K in keyof SendCompletion]: SendCompletion[K] } = {
        kind: 'send',
        request: head.wr,
        status: r.status,
        byteLength: r.status === 'success' ? head.byteLength : 0,
      };
      if (r.atomicResult !== undefined) c.atomicResult = r.atomicResult;
      if (r.error !== undefined) c.error = r.error;
      st.emitSend(c);
      maybeCloseLlp(st); // a graceful close may go on once the last completion is out
    }
  } finally {
    st.completing = false;
  }
}

/** The submitted, unfinished request that sent the untagged message `qn`/`msn`, if any. */
export function findUntagged(st: StreamState, qn: number, msn: number): SqEntry | undefined {
  return st.inflight.find((e) => e.result === undefined && e.qn === qn && (e.msn === msn || e.immMsn === msn));
}

/**
 * Ends everything (RFC 5040 §5.4, §6.2.1): requests handed to DDP and not reported complete with
 * `submittedError` (the `culprit` with its own status), requests never handed to DDP are flushed,
 * pending Read Responses are dropped. Completions stay in submission order.
 */
export function flushAll(
  st: StreamState,
  submittedError: RdmapError,
  culprit?: { entry: SqEntry; status: CompletionStatus; error: RdmapError },
): void {
  for (const e of st.inflight) {
    // Sent but not reported yet (behind an unfinished Read): outstanding too, so Completed in error (§6.2.1).
    if (e.result !== undefined && e.result.status !== 'success') continue;
    e.result =
      culprit && e === culprit.entry
        ? { status: culprit.status, error: culprit.error }
        : { status: 'flushed', error: submittedError };
  }
  for (const e of st.pending.drain()) {
    e.detachAbort?.();
    e.result = e.aborted
      ? { status: 'aborted', error: new RdmapAbortError('withdrawn by its AbortSignal before it was sent') }
      : {
          status: 'flushed',
          error: new FlushedError('the stream left RTS before it was sent', { cause: submittedError }),
        };
    st.inflight.push(e);
  }
  st.responses.length = 0;
  complete(st);
}
