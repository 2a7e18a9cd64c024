/**
 * MPA's own errors. They extend the contract's classes, so layers above match them by `code`
 * (`ERR_LLP_PROTOCOL`, `ERR_LLP_DIGEST`) and may read the MPA detail when they care.
 */
import { DigestError, type LlpError, LlpProtocolError, StreamClosedError } from '@rddp/llp';

/**
 * The MPA error codes a Terminate would carry (Layer 2 = LLP, Error Type 0 = MPA): RFC 5044 §8
 * codes 1–4, RFC 6581 codes 5–7 (Linux siw iwarp.h `enum llp_ecode` uses the same numbers).
 */
export const MpaErrorCode = {
  /** TCP connection closed, terminated or lost. */
  tcpStreamLost: 0x01,
  /** Received MPA CRC does not match the calculated value. */
  receivedCrc: 0x02,
  /** MPA Marker and ULPDU_Length disagree on the start of an FPDU. */
  fpduStart: 0x03,
  /** Invalid MPA Request or Reply frame. */
  invalidRequestReply: 0x04,
  /** Local catastrophic error (enhanced connection establishment). */
  localCatastrophic: 0x05,
  /** Insufficient IRD resources (enhanced connection establishment). */
  insufficientIrd: 0x06,
  /** No matching RTR type (enhanced connection establishment). */
  noMatchingRtr: 0x07,
} as const;
export type MpaErrorCode = (typeof MpaErrorCode)[keyof typeof MpaErrorCode];

/** Which MPA rule the peer broke. */
export type MpaViolation =
  | 'bad-key'
  | 'bad-revision'
  | 'pd-length'
  | 'malformed-frame'
  | 'early-data'
  | 'marker'
  | 'ulpdu-length'
  | 'stream-ended'
  | 'no-matching-rtr'
  | 'insufficient-ird';

/** The peer broke an MPA framing or startup rule. Still `ERR_LLP_PROTOCOL`; `violation` tells which. */
export class MpaProtocolError extends LlpProtocolError {
  constructor(
    readonly violation: MpaViolation,
    readonly mpaErrorCode: MpaErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** An FPDU's CRC did not match (RFC 5044 §8 code 2). The FPDU was discarded, never delivered. */
export class MpaCrcError extends DigestError {
  readonly mpaErrorCode = MpaErrorCode.receivedCrc;
  constructor(
    readonly received: number,
    readonly computed: number,
  ) {
    super(
      `MPA CRC mismatch: FPDU carries 0x${received.toString(16).padStart(8, '0')}, computed 0x${computed
        .toString(16)
        .padStart(8, '0')} (RFC 5044 §8 code 2)`,
    );
  }
}

/**
 * An FPDU handed to `send` was held and then discarded: it never reached the wire. A Responder holds what
 * it sends until the Initiator's first FPDU has arrived (RFC 5044 §7.1.2); if the connection ends first
 * (a bad first FPDU, a close, the peer's FIN or RST), the `done` callback of each held `send` gets this
 * error. Still `ERR_LLP_STREAM_CLOSED`; `notSent` (always true) and `heldBy` tell it apart from a write
 * that failed at the socket, and `cause` is why the connection ended.
 */
export class MpaFpduNotSentError extends StreamClosedError {
  readonly notSent = true;
  readonly heldBy = 'RFC 5044 §7.1.2';
  constructor(ended: LlpError) {
    super(
      `the FPDU was never sent: held until the initiator's first FPDU (RFC 5044 §7.1.2), then discarded (${ended.message})`,
      { cause: ended },
    );
  }
}
