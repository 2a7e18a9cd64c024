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
  decodeAtomicRequest,
  decodeAtomicResponse,
  encodeAtomicRequest,
  encodeAtomicResponse,
  isAtomicOpcode,
} from './atomic.js';
export * from './errors.js';
export * from './header.js';
export * from './immediate.js';
export {
  ATOMIC_RESPONSE_QUEUE,
  EXTENSION_OPCODES,
  ExtensionOpcode,
  type ExtensionOpcodeInfo,
  extensionOpcodeInfo,
  isSendOpcode,
  OPCODES,
  type OpcodeInfo,
  opcodeInfo,
  RDMAP_EXTENDED_QUEUE_COUNT,
  RDMAP_OPCODES,
  RDMAP_QUEUE_COUNT,
  RDMAP_VERSION,
  type RdmapExtension,
  RdmapOpcode,
  RdmapQueue,
  type RdmapVersion,
} from './opcode.js';
export { composeRdmapOptions, type RdmapConnectionFacts, rdmapOptionsFromSetup } from './options.js';
export type { RdmapStreamState } from './state.js';
export {
  RDMAP_MAX_MESSAGE,
  type RdmapExtensions,
  type RdmapStagTable,
  RdmapStream,
  type RdmapStreamOptions,
} from './stream.js';
export {
  decodeTerminate,
  encodeTerminate,
  MAX_TERMINATE_HEADER_LENGTH,
  TERMINATE_CONTROL_LENGTH,
  TERMINATE_RECEIVE_BUFFER_LENGTH,
  type TerminateCause,
  type TerminatedSegment,
  type TerminateHeader,
  terminateFor,
} from './terminate.js';
export * from './terminate-codes.js';
export * from './types.js';
