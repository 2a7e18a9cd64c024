/**
 * @rddp/verbs — an RDMA verbs API in TypeScript idiom, after libibverbs: a device with protection
 * domains, memory regions (Uint8Array + access flags → STag), queue pairs over RDMAP (RFC 5040) with a
 * send queue (RDMA Write, RDMA Read, the four Sends, local invalidation; RFC 7306 atomics and Write/Send
 * with Immediate when the connection enabled them) and a receive queue, and completion queues as RxJS
 * observables of work completions.
 */
export type { DdpErrorEvent, PlacementEvent } from '@rddp/ddp';
export type { RdmapExtensions } from '@rddp/rdmap';
export { Access, type AccessFlags, type DdpProfile } from './access.js';
export { CompletionQueue } from './cq.js';
export { Device, type DeviceOptions } from './device.js';
export * from './errors.js';
export { Mr } from './mr.js';
export { ProtectionDomain } from './pd.js';
export { type QpState, QueuePair } from './qp.js';
export type { QpConnectOptions, QpInit } from './qp-options.js';
export type { ConvenienceOptions } from './qp-promises.js';
export * from './types.js';
