/**
 * Errors the verbs API throws at its caller: one class per condition, each with a stable `code`
 * (ERR_VERBS_*). Errors that happen on the wire are not thrown: they arrive as work completions.
 */
import { stagHex } from '@rddp/ddp';
import { codedError, invalidArgumentErrorClass, messageTooLongErrorClass, RddpError } from '@rddp/llp';
import type { WorkCompletion } from './types.js';

/** Base class of the verbs API's errors; an `RddpError` like every rddp error. */
export abstract class VerbsError extends RddpError {}

/** The queue pair is not in a state that allows the call (e.g. posting a send before it is connected, or after an error). */
export class QpStateError extends codedError(VerbsError, 'ERR_VERBS_QP_STATE') {
  constructor(
    readonly state: string,
    action: string,
  ) {
    super(`cannot ${action}: the queue pair is in state '${state}'`);
  }
}

/** A scatter/gather element names a memory region that is deregistered, invalidated, or of another protection domain. */
export class InvalidMrError extends codedError(VerbsError, 'ERR_VERBS_INVALID_MR') {
  constructor(
    /** The work request's element that named the region (`a gather element`, ...). */
    readonly element: string,
    readonly stag: number,
    /** Why the region cannot serve: `is deregistered`, `is invalidated`, or which protection domains differ. */
    readonly problem: string,
  ) {
    super(`${element}: memory region ${stagHex(stag)} ${problem}`);
  }
}

/** A memory region lacks the access right the operation needs (e.g. Local Write for a receive buffer). */
export class AccessError extends codedError(VerbsError, 'ERR_VERBS_ACCESS') {}

/**
 * A scatter/gather element's offset or length falls outside its memory region, or is not the exact
 * length the operation takes (an atomic's result element: 8 octets, RFC 7306).
 */
export class SgeRangeError extends codedError(VerbsError, 'ERR_VERBS_SGE_RANGE') {
  constructor(
    /** The work request's element (`a gather element`, ...). */
    readonly element: string,
    readonly offset: number,
    readonly length: number,
    /** What bounds it: its region (STag and length), or the exact length it must have. */
    readonly bound: { readonly stag: number; readonly regionLength: number } | { readonly exactLength: number },
  ) {
    super(
      'exactLength' in bound
        ? `${element} is ${length} octets; it must be ${bound.exactLength}`
        : `${element}: [${offset}, +${length}) is outside memory region ${stagHex(bound.stag)} of ${bound.regionLength} octets`,
    );
  }
}

/** A message longer than the queue pair allows (at most 2^32-1 octets: RFC 5040 §4.4, RFC 5041 MO). */
export class MessageTooLongError extends messageTooLongErrorClass(VerbsError, 'ERR_VERBS_MESSAGE_TOO_LONG') {}

/** The send or receive queue holds as many outstanding work requests as it was created for. */
export class QueueFullError extends codedError(VerbsError, 'ERR_VERBS_QUEUE_FULL') {}

/** A malformed work request: unknown opcode, STag or TO out of range, wrong number of elements. */
export class InvalidWorkRequestError extends invalidArgumentErrorClass(VerbsError, 'ERR_VERBS_INVALID_WR') {}

/**
 * An RFC 7306 operation (atomics, Immediate Data) on a queue pair whose connection did not enable that
 * extension (`QpConnectOptions.extensions`): both ends must agree first.
 */
export class ExtensionNotEnabledError extends codedError(VerbsError, 'ERR_VERBS_EXTENSION_DISABLED') {
  constructor(readonly extension: 'atomics' | 'immediate') {
    super(
      `RFC 7306 ${extension === 'atomics' ? 'atomic operations are' : 'Immediate Data is'} not enabled on this queue pair (connect with extensions.${extension})`,
    );
  }
}

/** A resource is still in use (a protection domain with memory regions or queue pairs). */
export class ResourceBusyError extends codedError(VerbsError, 'ERR_VERBS_BUSY') {}

/** A promise-returning operation completed with a status other than success; the completion is attached. */
export class WorkCompletionError extends codedError(VerbsError, 'ERR_VERBS_WORK_COMPLETION') {
  constructor(readonly completion: WorkCompletion) {
    super(
      `${completion.opcode} work request ${completion.wrId === undefined ? '(no wrId)' : String(completion.wrId)} completed with status '${completion.status}'${
        completion.error ? `: ${completion.error.message}` : ''
      }`,
      { cause: completion.error },
    );
  }
}

export type VerbsErrorCode =
  | QpStateError['code']
  | InvalidMrError['code']
  | AccessError['code']
  | SgeRangeError['code']
  | MessageTooLongError['code']
  | QueueFullError['code']
  | InvalidWorkRequestError['code']
  | ExtensionNotEnabledError['code']
  | ResourceBusyError['code']
  | WorkCompletionError['code'];

/** Whether `x` is a verbs error (with `code`, when given). Match on `code`, never on message text. */
export function isVerbsError(x: unknown, code?: VerbsErrorCode): x is VerbsError {
  return x instanceof VerbsError && (code === undefined || x.code === code);
}
