/**
 * @rddp/ddp — Direct Data Placement (RFC 5041; RDMA Consortium DDP 1.0 as the `rdmac` profile) over the LLP contract.
 * One {@link DdpStream} per LLP stream.
 *
 * @example A DdpStream on each end: a tagged message placed into a registered buffer (§5.1), an untagged one delivered (§5.3)
 * ```ts
 * import { Access, DdpStream, StagTable } from '@rddp/ddp';
 * import type { LlpConnection } from '@rddp/llp';
 *
 * // `a` and `b`: the two ends of any LLP connection — MPA/TCP, SCTP, the loopback LLP, your own.
 * export async function example(a: LlpConnection, b: LlpConnection): Promise<void> {
 *   const stags = new StagTable(); // the data sink's STags (RFC 5040 §2.2)
 *   const sink = new DdpStream(b.streams[0], { pdId: 1, stags, queues: 3, profile: 'ietf' });
 *   const source = new DdpStream(a.streams[0], { pdId: 1, stags: new StagTable(), queues: 3, profile: 'ietf' });
 *   const region = stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.RemoteWrite });
 *   sink.delivery$.subscribe((d) => console.log(d.tagged ? 'tagged' : `QN ${d.qn} MSN ${d.msn}`, d.length));
 *   sink.postReceive(0, new Uint8Array(16)); // an untagged buffer on QN 0
 *   await source.sendTagged(region.stag, 8n, [new TextEncoder().encode('tagged')], 0); // STag, TO, payload, RsvdULP
 *   await source.sendUntagged(0, [new TextEncoder().encode('untagged')], 0); // QN 0, MSN 1
 *   a.abort();
 * }
 * ```
 * @packageDocumentation
 */
export * from './api.js';
export * from './errors.js';
export {
  decodeHeader,
  encodeHeader,
  encodeTaggedHeader,
  encodeUntaggedHeader,
  headerLength,
  MAX_U64,
  stagHex,
  TWO_32,
  TWO_64,
} from './header.js';
export { copyPayload } from './rx.js';
export { type RegisterOptions, StagTable } from './stag-table.js';
export { DdpStream } from './stream.js';
