/**
 * RDMAP's typed errors: one class per condition, each with a stable `code`. Caller errors are thrown at
 * the call; stream errors complete operations in error and are surfaced (RFC 5040 §7.1).
 */
import { abortErrorClass, codedError, invalidArgumentErrorClass, messageTooLongErrorClass, RddpError } from '@rddp/llp';
import { describeTerminate, type TerminateErrorName } from './terminate-codes.js';

/** Base class of RDMAP's errors; an `RddpError` like every rddp error. */
export abstract class RdmapError extends RddpError {}

/** The stream is not in a state that accepts the call (e.g. posting after a Terminate). */
export class RdmapStateError extends codedError(RdmapError, 'ERR_RDMAP_STATE') {
  constructor(
    readonly state: string,
    action: string,
  ) {
    super(`cannot ${action}: the RDMAP stream is ${state}`);
  }
}

/** An argument outside what the wire format can carry (STag, TO, sizes) or a malformed request. */
export class RdmapInvalidArgumentError extends invalidArgumentErrorClass(RdmapError, 'ERR_RDMAP_INVALID_ARGUMENT') {}

/** An RDMA Read beyond the outbound RDMA Read Request limit negotiated for this stream (RFC 5040 §6.1). */
export class OrdExceededError extends codedError(RdmapError, 'ERR_RDMAP_ORD_EXCEEDED') {
  constructor(
    readonly ord: number,
    /** `RDMA Read`, or `Atomic Request` (RFC 7306: atomics count against ORD with the Reads). */
    what = 'RDMA Read',
  ) {
    super(
      ord === 0
        ? `${what} not allowed: the outbound RDMA Read Request limit (ORD) of this stream is 0 (RFC 5040 §6.1)`
        : `${what} would exceed the outbound RDMA Read Request limit (ORD) of ${ord} (RFC 5040 §6.1)`,
    );
  }
}

/**
 * An RFC 7306 operation (atomics, Immediate Data) posted on a stream that did not enable that extension:
 * both ends must agree before either uses it (RFC 7306 §1.1).
 */
export class RdmapExtensionDisabledError extends codedError(RdmapError, 'ERR_RDMAP_EXTENSION_DISABLED') {
  constructor(readonly extension: 'atomics' | 'immediate') {
    super(
      `RFC 7306 ${extension === 'atomics' ? 'atomic operations are' : 'Immediate Data is'} not enabled on this RDMAP stream (RdmapStreamOptions.extensions.${extension})`,
    );
  }
}

/** A message longer than RDMAP/DDP can describe (2^32-1 octets: RDMA Read Message Size, DDP MO). */
export class RdmapMessageTooLongError extends messageTooLongErrorClass(RdmapError, 'ERR_RDMAP_MESSAGE_TOO_LONG') {}

/**
 * The operation was completed in error because the stream was terminated (RFC 5040 §5.4, §6.2.1): by a
 * Terminate this side sent or the peer sent.
 */
export class TerminatedError extends codedError(RdmapError, 'ERR_RDMAP_TERMINATED') {
  constructor(
    readonly direction: 'sent' | 'received',
    readonly terminate: TerminateErrorName,
  ) {
    super(
      `RDMAP stream terminated (${direction === 'sent' ? 'Terminate sent' : 'Terminate received'}: ${describeTerminate(terminate)})`,
    );
  }
}

/** The operation never reached the peer: the stream ended first (RFC 5040 §5.4: Completed in error). */
export class FlushedError extends codedError(RdmapError, 'ERR_RDMAP_FLUSHED') {
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`operation flushed: ${reason}`, options);
  }
}

/** A local buffer named by the operation was no longer valid when RDMAP built the message (§7.1 case 1). */
export class LocalProtectionError extends codedError(RdmapError, 'ERR_RDMAP_LOCAL_PROTECTION') {}

/** Where RDMAP saw the LLP fail, in the words of `LlpFailedError`'s message. */
const LLP_FAILED_DURING = {
  send: 'DDP could not send: the LLP failed',
  receive: 'LLP receive error',
  stream: 'the LLP stream failed',
} as const;

/** The LLP failed under the stream (LLP Abortive Termination, RFC 5040 §6.2); the LLP's error is the `cause`. */
export class LlpFailedError extends codedError(RdmapError, 'ERR_RDMAP_LLP_FAILED') {
  constructor(
    /** Sending, receiving (the LLP reported a receive error), or the LLP stream ending abortively. */
    readonly during: keyof typeof LLP_FAILED_DURING,
    cause?: unknown,
  ) {
    super(`${LLP_FAILED_DURING[during]}${cause instanceof Error ? `: ${cause.message}` : ''}`, { cause });
  }
}

/** The caller's AbortSignal fired. */
export class RdmapAbortError extends abortErrorClass(RdmapError, 'ERR_RDMAP_ABORTED') {}

/** A received Terminate could not be decoded (RFC 5040 §5.4: "an error is surfaced"). */
export class InvalidTerminateError extends codedError(RdmapError, 'ERR_RDMAP_INVALID_TERMINATE') {
  constructor(
    /** What was wrong with it (DDP's refusal, or why its header did not decode). */
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`malformed Terminate: ${problem}`, options);
  }
}

/** Why a Terminate Header's octets could not be decoded (RFC 5040 §4.8): a field of Figure 7 is cut short. */
export class TerminateFormatError extends codedError(RdmapError, 'ERR_RDMAP_TERMINATE_FORMAT') {
  constructor(
    readonly field: 'Terminate Control' | 'DDP Segment Length' | 'Terminated DDP Header' | 'Terminated RDMA Header',
    /** The field's length in octets (at least 14 for a Terminated DDP Header whose first octet is missing). */
    readonly fieldLength: number,
    /** The octets left for it. */
    readonly available: number,
  ) {
    super(`Terminate Header's ${field}: ${available} octets remain, shorter than ${fieldLength} octets`);
  }
}

export type RdmapErrorCode =
  | RdmapStateError['code']
  | RdmapInvalidArgumentError['code']
  | OrdExceededError['code']
  | RdmapExtensionDisabledError['code']
  | RdmapMessageTooLongError['code']
  | TerminatedError['code']
  | FlushedError['code']
  | LocalProtectionError['code']
  | LlpFailedError['code']
  | RdmapAbortError['code']
  | InvalidTerminateError['code']
  | TerminateFormatError['code'];

/** Whether `x` is an RDMAP error (with `code`, when given). Match on `code`, never on message text. */
export function isRdmapError(x: unknown, code?: RdmapErrorCode): x is RdmapError {
  return x instanceof RdmapError && (code === undefined || x.code === code);
}

/** The LLP cannot carry RDMAP as asked: not reliable and ordered (RFC 5040 §3.1) without the reduced-semantics opt-in. */
export class RdmapUnsuitableLlpError extends codedError(RdmapError, 'ERR_RDMAP_UNSUITABLE_LLP') {}
