/**
 * @rddp/rdmap — the Remote Direct Memory Access Protocol (RFC 5040) over @rddp/ddp: RDMA Write, RDMA Read
 * (ORD/IRD), the four Send types, Terminate, ordering and completions (§5.5), stream management (§6)
 * and error management (§7). IETF (RV=1) and RDMA Consortium (RV=0) profiles. The RFC 7306 extensions
 * (atomic operations, Immediate Data) when both ends enable them. One {@link RdmapStream} per DDP Stream.
 *
 * @example An RDMA Write and a Send between two RdmapStreams (RFC 5040 §5.1, §5.3)
 * ```ts
 * import { Access, StagTable } from '@rddp/ddp';
 * import type { LlpConnection } from '@rddp/llp';
 * import { RdmapStream } from '@rddp/rdmap';
 * import { firstValueFrom } from 'rxjs';
 *
 * // `a` and `b`: the two ends of any LLP connection — MPA/TCP, SCTP, the loopback LLP, your own.
 * export async function example(a: LlpConnection, b: LlpConnection): Promise<void> {
 *   const [stagsA, stagsB] = [new StagTable(), new StagTable()]; // each host's STags (RFC 5040 §2.2)
 *   const rdmap = new RdmapStream(a.streams[0], { profile: 'ietf', pdId: 1, stags: stagsA, ird: 8, ord: 8, role: 'initiator' });
 *   const peer = new RdmapStream(b.streams[0], { profile: 'ietf', pdId: 1, stags: stagsB, ird: 8, ord: 8, role: 'responder' });
 *   const sink = stagsB.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.LocalWrite | Access.RemoteWrite });
 *   peer.postReceive(new Uint8Array(4096), 'rx-0'); // a QN 0 buffer for the Send
 *   const received = firstValueFrom(peer.completions$);
 *   const hello = new TextEncoder().encode('hello');
 *   rdmap.postSend({ op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [hello] } });
 *   rdmap.postSend({ op: { type: 'send', payload: [hello], solicited: true } });
 *   console.log(await received); // the Send's receive completion, after the Write was placed
 *   await rdmap.close();
 * }
 * ```
 * @packageDocumentation
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
