/** `rddp perf`'s typed errors: one class per condition, each with a stable `code`. */

import { RddpError } from '@rddp/llp';

/** Base class of `rddp perf`'s errors; an `RddpError` like every rddp error. */
export abstract class PerfError extends RddpError {}

/** Server side: a client's HELLO asked for what this server does not serve (schema or limits). */
export class PerfHelloRefusedError extends PerfError {
  readonly code = 'ERR_PERF_HELLO_REFUSED';
  constructor(readonly reason: string) {
    super(`refused a client's HELLO: ${reason}`);
  }
}

/** Client side: the server answered HELLO with REFUSED. */
export class PerfServerRefusedError extends PerfError {
  readonly code = 'ERR_PERF_SERVER_REFUSED';
  constructor(readonly reason: string) {
    super(`server refused: ${reason}`);
  }
}

/**
 * The peer speaks another perf protocol version (PERF_PROTOCOL_VERSION); an rddp from before the
 * version was sent speaks 1. `peer`: which end the other one is.
 */
export class PerfVersionError extends PerfError {
  readonly code = 'ERR_PERF_VERSION';
  constructor(
    readonly peer: 'server' | 'client',
    readonly theirs: string,
    readonly ours: number,
  ) {
    super(`the perf ${peer} speaks perf protocol ${theirs}, this ${peer === 'server' ? 'client' : 'server'} ${ours}`);
  }
}

/** A control message (READY, RESULT) that is not what the protocol carries at that point. */
export class PerfBadMessageError extends PerfError {
  readonly code = 'ERR_PERF_BAD_MESSAGE';
}
