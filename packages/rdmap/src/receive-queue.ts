/**
 * The receive buffers posted on the Send queue, QN 0 (RFC 5040 §5.3): consumed in MSN order by the
 * Sends and Immediate Data the receive path (rx.ts) Delivers, completed in error when the stream ends
 * (§5.4, §6.2).
 */
import type { RdmapError } from './errors.js';
import type { PostedReceive, StreamState } from './stream-state.js';
import type { CompletionStatus } from './types.js';

/** Records a receive buffer posted on QN 0; consumed in MSN order by incoming Sends (§5.3). */
export function addReceive(st: StreamState, r: PostedReceive): void {
  st.receives.push(r);
}

/** Completes every posted receive in error: the oldest with `first` if given, the rest flushed. */
export function flushReceives(
  st: StreamState,
  error: RdmapError,
  first?: { status: CompletionStatus; error: RdmapError },
): void {
  let i = 0;
  for (const r of st.receives.splice(0)) {
    const f = i++ === 0 ? first : undefined;
    st.emitReceive({
      kind: 'receive',
      id: r.id,
      buffer: r.buffer,
      status: f?.status ?? 'flushed',
      byteLength: 0,
      solicited: false,
      error: f?.error ?? error,
    });
  }
}
