/**
 * @rddp/llp-udp — an unreliable, unordered datagram LLP over UDP (the DDPP core draft's §3.4 class) for
 * experiments, and a worked example of an LLP plugin. One ULPDU per datagram. See docs/UDP-LLP.md.
 */
export { UdpConnection, type UdpConnectionStats } from './connection.js';
export type { SocketStats } from './endpoint.js';
export { udpModule } from './module.js';
export {
  mulpduFor,
  UDP_DEFAULT_DATAGRAM_SIZE,
  UDP_MAX_PRIVATE_DATA,
  type UdpFaults,
  type UdpOptions,
} from './options.js';
export { UdpStream, type UdpStreamStats } from './stream.js';
export { type UdpListener, type UdpListenerStats, udp, udpCapabilities } from './transport.js';
export {
  AbortCode,
  ALL_STREAMS,
  COOKIE_LENGTH,
  CRC_LENGTH,
  type DatagramHeader,
  DatagramType,
  datagramParts,
  decodeAbortBody,
  decodeCookieEchoBody,
  decodeSetupBody,
  encodeAbortBody,
  encodeCookieEchoBody,
  encodeSetupBody,
  HEADER_LENGTH,
  type ParsedDatagram,
  parseDatagram,
  type SetupBody,
  UDP_LLP_VERSION,
} from './wire.js';
