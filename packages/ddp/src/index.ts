/** @rddp/ddp — Direct Data Placement (RFC 5041; RDMA Consortium DDP 1.0 as the `rdmac` profile) over the LLP contract. */
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
