/**
 * RDMAP Stream state (RFC 5040 §6). The RFC names the events, not the states; these are the states
 * Linux siw and the RDMA verbs use for them:
 *
 *   rts ──close()──▶ closing ──(all done, LLP closed)──▶ closed
 *    │                  │
 *    ├──Terminate sent/received (§5.4, §6.2.1)──▶ terminate ──(LLP closed)──▶ error
 *    └──LLP failure (§6.2 LLP Abortive Termination) or abort()──────────────▶ error
 *
 * The table lives here; the machine that runs it (`StreamStateMachine`) is part of the stream's one state,
 * stream-state.ts, as siw keeps the QP state in `struct siw_qp`.
 */
export type RdmapStreamState = 'rts' | 'closing' | 'terminate' | 'error' | 'closed';

const ALLOWED: Readonly<Record<RdmapStreamState, readonly RdmapStreamState[]>> = {
  rts: ['closing', 'terminate', 'error', 'closed'],
  closing: ['closed', 'terminate', 'error'],
  terminate: ['error'],
  error: [],
  closed: [],
};

/** Whether the state machine allows `from → to`. */
export function canTransition(from: RdmapStreamState, to: RdmapStreamState): boolean {
  return ALLOWED[from].includes(to);
}
