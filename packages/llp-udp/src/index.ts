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
/** The wire format (docs/UDP-LLP.md), for tools and tests that speak it from outside. */
export * from './wire.js';
