/** `rddp rping`'s typed errors: one class per condition, each with a stable `code`. */

import { RddpError } from '@rddp/llp';

/** Base class of `rddp rping`'s errors; an `RddpError` like every rddp error. */
export abstract class RpingError extends RddpError {}

/** A buffer advertisement that is not rping's 16-octet struct rping_rdma_info (rping.c: "bogus data"). */
export class RpingBogusDataError extends RpingError {
  readonly code = 'ERR_RPING_BOGUS_DATA';
  constructor(readonly byteLength: number) {
    super(`Received bogus data, size ${byteLength}`);
  }
}

/** An advertised buffer larger than this server follows a client to. */
export class RpingAdvertisementTooLargeError extends RpingError {
  readonly code = 'ERR_RPING_ADVERTISEMENT_TOO_LARGE';
  constructor(
    readonly size: number,
    readonly max: number,
  ) {
    super(`client advertised ${size} octets, over this server's ${max}`);
  }
}

/** A persistent server (`-P`) whose --max-memory its clients' buffers already hold. */
export class RpingServerBusyError extends RpingError {
  readonly code = 'ERR_RPING_SERVER_BUSY';
  constructor(
    readonly size: number,
    readonly inUse: number,
    readonly max: number,
  ) {
    super(`busy: a buffer of ${size} octets asked, ${inUse} of --max-memory ${max} in use`);
  }
}
