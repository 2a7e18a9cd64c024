/**
 * @rddp/rdmap — the Remote Direct Memory Access Protocol (RFC 5040) over @rddp/ddp: RDMA Write, RDMA Read
 * (ORD/IRD), the four Send types, Terminate, ordering and completions (§5.5), stream management (§6)
 * and error management (§7). IETF (RV=1) and RDMA Consortium (RV=0) profiles. The RFC 7306 extensions
 * (atomic operations, Immediate Data) when both ends enable them.
 */
export {
  ACCESS_REMOTE_ATOMIC,
  ATOMIC_OPERAND_LENGTH,
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  AtomicOpcode,
  type AtomicRequestHeader,
  type AtomicResponseHeader,
  applyAtomic,
  checkAtomicRequest,
  decodeAtomicRequest,
  decodeAtomicResponse,
  encodeAtomicRequest,
  encodeAtomicResponse,
  isAtomicOpcode,
  maskedAdd,
  type OutstandingAtomic,
  OutstandingAtomics,
} from './atomic.js';
export * from './errors.js';
export * from './header.js';
export * from './immediate.js';
export * from './opcode.js';
export { checkReadSource, type OutstandingRead, OutstandingReads } from './read.js';
export { canTransition, type RdmapStreamState, StreamStateMachine } from './state.js';
export {
  RDMAP_MAX_MESSAGE,
  type RdmapExtensions,
  type RdmapStagTable,
  RdmapStream,
  type RdmapStreamOptions,
  rdmapOptionsFromSetup,
  terminateStatus,
} from './stream.js';
export * from './terminate.js';
export * from './terminate-codes.js';
export * from './types.js';
