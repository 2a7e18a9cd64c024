/**
 * @rddp/rdmap — the Remote Direct Memory Access Protocol (RFC 5040) over @rddp/ddp: RDMA Write, RDMA Read
 * (ORD/IRD), the four Send types, Terminate, ordering and completions (§5.5), stream management (§6)
 * and error management (§7). IETF (RV=1) and RDMA Consortium (RV=0) profiles.
 */
export * from './errors.js';
export * from './header.js';
export { LlpTap } from './llp-tap.js';
export * from './opcode.js';
export { checkReadSource, type OutstandingRead, OutstandingReads } from './read.js';
export { canTransition, type RdmapStreamState, StreamStateMachine } from './state.js';
export {
  RDMAP_MAX_MESSAGE,
  type RdmapStagTable,
  RdmapStream,
  type RdmapStreamOptions,
  terminateStatus,
} from './stream.js';
export * from './terminate.js';
export * from './terminate-codes.js';
export * from './types.js';
