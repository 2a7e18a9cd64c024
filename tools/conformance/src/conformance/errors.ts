/** The conformance kit's errors, one class per condition with a stable `code`. */

export abstract class ConformanceError extends Error {
  abstract readonly code: string;
  override get name(): string {
    return this.constructor.name;
  }
}

/** A bad flag or flag combination: exit status 2. */
export class ConformanceUsageError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_USAGE';
  readonly exitCode = 2;
}

/** The target did not send what the case waits for within the wait bound. */
export class ConformanceTimeoutError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_TIMEOUT';
}

/** The kit's own listener closed while a case waited for a client (`WireListener.close`). */
export class ConformanceListenerClosedError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_LISTENER_CLOSED';
}

/** The target closed or reset the connection while the case waited for more. */
export class ConformancePeerClosedError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_PEER_CLOSED';
  constructor(
    message: string,
    readonly reset: boolean,
  ) {
    super(message);
  }
}

/** The target sent more than the kit keeps for one connection (the kit's own bound). */
export class ConformanceOverflowError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_OVERFLOW';
}

/** The target sent something the kit could not take apart where the protocol needs it to. */
export class ConformanceProtocolError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_PROTOCOL';
}

/** The target refused the kit's MPA Request with a Reply whose R bit is set (RFC 5044 §7.1). */
export class ConformanceRejectedError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_REJECTED';
}
