/**
 * @rddp/llp-sctp — DDP over SCTP (RFC 5043) as an rddp LLP plugin, on the pure-JavaScript npm `sctp`
 * package (RFC 4960), UDP-encapsulated by default. See docs/SCTP.md.
 */
export { runSctpBenchmark, type SctpBenchmarkOptions, type SctpBenchmarkResult } from './bench.js';
export { SctpConnection } from './connection.js';
export { chooseSctpCrc32cBackend } from './crc32c.js';
export { RawSocketUnavailableError, SctpCrc32cBackendError } from './errors.js';
export { sctpModule } from './module.js';
export type { SctpTransportOptions } from './options.js';
export * as rfc5043 from './rfc5043.js';
export { SctpLlpStream } from './stream.js';
export { SctpTransport, sctp } from './transport.js';
