/**
 * @rddp/verbs — an RDMA verbs API in TypeScript idiom, after libibverbs: a device with protection
 * domains, memory regions (Uint8Array + access flags → STag), queue pairs over RDMAP (RFC 5040) with a
 * send queue (RDMA Write, RDMA Read, the four Sends, local invalidation; RFC 7306 atomics and Write/Send
 * with Immediate when the connection enabled them) and a receive queue, and completion queues as RxJS
 * observables of work completions.
 *
 * @example A Device, a protection domain and a QueuePair on each end: RDMA Write, then Send (RFC 5040 §5)
 * ```ts
 * import type { LlpConnection } from '@rddp/llp';
 * import { Access, Device } from '@rddp/verbs';
 *
 * // The two ends of any LLP connection — MPA/TCP, SCTP, the loopback LLP, your own.
 * export async function example(clientLink: LlpConnection, serverLink: LlpConnection): Promise<void> {
 *   const [client, server] = [new Device().allocPd(), new Device().allocPd()];
 *   const qp = client.createQp({ sendCq: client.device.createCq(), recvCq: client.device.createCq() });
 *   const peer = server.createQp({ sendCq: server.device.createCq(), recvCq: server.device.createCq() });
 *   qp.connect(clientLink); // the connection's role makes this end the initiator (RFC 5040 §6.1)
 *   peer.connect(serverLink);
 *   const target = server.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteWrite);
 *   const inbox = server.registerMr(new Uint8Array(64), Access.LocalWrite);
 *   const delivered = peer.recv(inbox.sge());
 *   const data = client.registerMr(new TextEncoder().encode('hello'), 0);
 *   await qp.write(data.sge(), target.remote()); // completes once handed to the LLP
 *   await qp.send(data.sge());
 *   console.log((await delivered).byteLen, new TextDecoder().decode(target.buffer.subarray(0, 5)));
 *   await qp.close();
 * }
 * ```
 * @packageDocumentation
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
