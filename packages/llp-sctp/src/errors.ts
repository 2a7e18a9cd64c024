import { CapabilityError, Crc32cBackendError } from '@rddp/llp';

/**
 * Raw IP encapsulation (SCTP as IP protocol 132) was asked for but cannot be had: the optional
 * `raw-socket` package is not installed or not built, or the process may not open raw sockets (root).
 * Keeps `ERR_LLP_CAPABILITY` so layers above match it with the other capability failures.
 */
export class RawSocketUnavailableError extends CapabilityError {}

/**
 * @deprecated `RDDP_CRC32C`'s errors are @rddp/llp's, shared with MPA/TCP: `Crc32cBackendUnknownError`
 * (ERR_LLP_CRC32C_BACKEND_UNKNOWN) and `Crc32cBackendMissingError` (ERR_LLP_CRC32C_BACKEND_MISSING).
 * This name is their base, `Crc32cBackendError`, so `instanceof` still catches both.
 */
export const SctpCrc32cBackendError = Crc32cBackendError;
/** @deprecated See the value `SctpCrc32cBackendError`. */
export type SctpCrc32cBackendError = Crc32cBackendError;
