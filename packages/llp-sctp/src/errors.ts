import { CapabilityError } from '@rddp/llp';

/**
 * Raw IP encapsulation (SCTP as IP protocol 132) was asked for but cannot be had: the optional
 * `raw-socket` package is not installed or not built, or the process may not open raw sockets (root).
 * Keeps `ERR_LLP_CAPABILITY` so layers above match it with the other capability failures.
 */
export class RawSocketUnavailableError extends CapabilityError {}
