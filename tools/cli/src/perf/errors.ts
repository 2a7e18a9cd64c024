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
 * version was sent speaks 1. `peer`: which end the other one is; both versions as the message words them
 * (a malformed one quoted). `refused`: the reason a server of that version gave, when it answered REFUSED.
 */
export class PerfVersionError extends PerfError {
  readonly code = 'ERR_PERF_VERSION';
  constructor(
    readonly peer: 'server' | 'client',
    readonly theirs: string,
    readonly ours: string,
    readonly refused?: string,
  ) {
    super(
      `the perf ${peer} speaks perf protocol ${theirs}, this ${peer === 'server' ? 'client' : 'server'} ${ours}${refused === undefined ? '' : `; it refused the run: ${refused}`}`,
    );
  }
}

/** A control message (READY, RESULT) that is not what the protocol carries at that point. */
export class PerfBadMessageError extends PerfError {
  readonly code = 'ERR_PERF_BAD_MESSAGE';
}

/** Server side: write_lat's Write back to the client failed (posting it or its completion); the run ends. */
export class PerfWriteBackError extends PerfError {
  readonly code = 'ERR_PERF_WRITE_BACK';
  constructor(cause: unknown) {
    super(`write_lat: a Write back to the client failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
  }
}

/**
 * A `-b` control step (the server's wait for START, the client's for GO) not taken within its bound: the
 * peer stayed connected and silent. The run ends and the connection is closed (the server's memory with it).
 */
export class PerfStepTimeoutError extends PerfError {
  readonly code = 'ERR_PERF_STEP_TIMEOUT';
  constructor(
    readonly step: string,
    readonly ms: number,
  ) {
    super(`timed out after ${ms} ms waiting for ${step}`);
  }
}
