import { CapabilityError, codedError, LlpError } from '@rddp/llp';

/**
 * Raw IP encapsulation (SCTP as IP protocol 132) was asked for but cannot be had: the optional
 * `raw-socket` package is not installed or not built, or the process may not open raw sockets (root).
 * Keeps `ERR_LLP_CAPABILITY` so layers above match it with the other capability failures.
 */
export class RawSocketUnavailableError extends CapabilityError {}

/**
 * `RDDP_CRC32C` pins a CRC32c backend that does not load here, or names none: an error, not the next
 * backend in its place (as MPA's `ERR_MPA_CRC32C_BACKEND_MISSING`).
 */
export class SctpCrc32cBackendError extends codedError(LlpError, 'ERR_SCTP_CRC32C_BACKEND') {}
