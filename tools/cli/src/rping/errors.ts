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

/**
 * A server whose bound on ping buffers a client's buffer would exceed: `bound` names it (`--max-memory`
 * by default; `--max-memory-per-source` and the process memory budget's share per source with the
 * `source` that holds `inUse`).
 */
export class RpingServerBusyError extends RpingError {
  readonly code = 'ERR_RPING_SERVER_BUSY';
  constructor(
    readonly size: number,
    readonly inUse: number,
    readonly max: number,
    readonly bound: string = '--max-memory',
    readonly source?: string,
  ) {
    super(
      source === undefined
        ? `busy: a buffer of ${size} octets asked, ${inUse} of ${bound} ${max} in use`
        : `busy: a buffer of ${size} octets asked, source ${source} holds ${inUse} of ${bound} ${max}`,
    );
  }
}

/** A client that did not take its next step (`step`: what the server waited for) within --step-timeout. */
export class RpingStepTimeoutError extends RpingError {
  readonly code = 'ERR_RPING_STEP_TIMEOUT';
  constructor(
    readonly step: string,
    readonly ms: number,
  ) {
    super(`timed out after --step-timeout ${ms} ms waiting for ${step}`);
  }
}
