/** Errors DDP raises to its caller, one class per condition with a stable `code` (errors from the peer are events: `error$`). */
import { abortErrorClass, codedError, invalidArgumentErrorClass, RddpError } from '@rddp/llp';
import { stagHex } from './header.js';

/** Base class of DDP's errors; an `RddpError` like every rddp error. */
export abstract class DdpError extends RddpError {}

/** A caller passed a value outside its field's range (QN, STag, RsvdULP, TO, buffer). */
export class DdpInvalidArgumentError extends invalidArgumentErrorClass(DdpError, 'ERR_DDP_INVALID_ARGUMENT') {}

/** The DDP Stream is closed (or its LLP stream ended) and cannot carry the operation. */
export class DdpStreamClosedError extends codedError(DdpError, 'ERR_DDP_STREAM_CLOSED') {}

/** The LLP cannot carry DDP as configured (RFC 5041 §3), e.g. its MULPDU is smaller than a DDP header. */
export class DdpLlpUnsuitableError extends codedError(DdpError, 'ERR_DDP_LLP_UNSUITABLE') {}

/** An STag given to the STag table does not name a registered region. */
export class UnknownStagError extends codedError(DdpError, 'ERR_DDP_UNKNOWN_STAG') {
  constructor(readonly stag: number) {
    super(`STag ${stagHex(stag)} is not registered`);
  }
}

/**
 * The STag table is at a limit: its configured `maxRegions` or `maxRegisteredBytes`, or the 24-bit STag
 * index space (live and quarantined indices, RFC 5040 §8).
 */
export class StagTableFullError extends codedError(DdpError, 'ERR_DDP_STAG_TABLE_FULL') {
  constructor(
    /** Which limit: what `max` and `inUse` count. */
    readonly limit: 'regions' | 'registered octets' | 'STag indices',
    readonly max: number,
    readonly inUse: number,
    /** What the refused registration needed of it. */
    readonly asked: number,
  ) {
    super(`the STag table holds ${inUse} of its limit of ${max} ${limit}; a registration needs ${asked} more`);
  }
}

/** The DDP transmit queue holds `maxSendQueue` messages not yet handed to the LLP: the caller must wait. */
export class DdpSendQueueFullError extends codedError(DdpError, 'ERR_DDP_SEND_QUEUE_FULL') {}

/** A send was aborted by its AbortSignal before all of its segments were handed to the LLP. */
export class DdpAbortError extends abortErrorClass(DdpError, 'ERR_DDP_ABORTED') {}

export type DdpErrorCode =
  | DdpInvalidArgumentError['code']
  | DdpStreamClosedError['code']
  | DdpLlpUnsuitableError['code']
  | UnknownStagError['code']
  | StagTableFullError['code']
  | DdpAbortError['code']
  | DdpSendQueueFullError['code'];

export function isDdpError(x: unknown, code?: DdpErrorCode): x is DdpError {
  return x instanceof DdpError && (code === undefined || x.code === code);
}
