/**
 * @rddp/rdmap/testing — RDMAP internals that tests reach for: the §6 stream state machine, the §5.3
 * Read Request checks and ORD bookkeeping, and the RFC 7306 §5.2 atomic arithmetic. Not part of the
 * RDMAP API.
 */
export { applyAtomic, maskedAdd } from './atomic.js';
export { checkReadSource, type OutstandingRead, OutstandingReads } from './read.js';
export { canTransition, StreamStateMachine } from './state.js';
