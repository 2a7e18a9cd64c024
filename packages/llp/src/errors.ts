/**
 * One error class per condition, each with a stable `code` (the undici way).
 * LLP plugins throw or surface these; the layers above match on `code`, never on text.
 *
 * Every rddp error — of any layer, and of the tools — descends from `RddpError`. A condition that more
 * than one layer raises (an abort, an invalid argument, a message too long) keeps one class per layer,
 * each with its own `code`, and each joins one shared family: `RddpAbortError`, `RddpInvalidArgumentError`,
 * `RddpMessageTooLongError`. `instanceof` a family is true for all its members (undici's
 * `Symbol.hasInstance` brands), so one `catch` covers the condition at every layer.
 */

/** Brands are registered symbols: an error from another copy of this package is still recognised. */
const kRddpError = Symbol.for('rddp.error');
const kAborted = Symbol.for('rddp.error.aborted');
const kInvalidArgument = Symbol.for('rddp.error.invalid-argument');
const kMessageTooLong = Symbol.for('rddp.error.message-too-long');

/** Root of every rddp error: `name` is the class name, `code` is stable (`ERR_*`), `cause` is kept. */
export abstract class RddpError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
brand(RddpError, kRddpError);

/** True for any rddp error, or for one with the given `code`. Matches by brand, so across package copies. */
export function isRddpError(x: unknown, code?: string): x is RddpError {
  if (!(x instanceof RddpError || hasBrand(x, kRddpError))) return false;
  return code === undefined || (x as RddpError).code === code;
}

function brand(cls: abstract new (...args: never[]) => unknown, key: symbol): void {
  Object.defineProperty(cls.prototype, key, { value: true });
}

function hasBrand(x: unknown, key: symbol): boolean {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[key] === true;
}

/** `x instanceof family` by brand; `instanceof` a subclass of the family itself is the ordinary one. */
function familyHasInstance(cls: unknown, family: unknown, key: symbol, x: unknown): boolean {
  return cls === family ? hasBrand(x, key) : Function.prototype[Symbol.hasInstance].call(cls, x);
}

/**
 * The caller's `AbortSignal` fired. Members: `LlpAbortError` (ERR_LLP_ABORTED), `DdpAbortError`
 * (ERR_DDP_ABORTED), `RdmapAbortError` (ERR_RDMAP_ABORTED).
 */
export abstract class RddpAbortError extends RddpError {
  static override [Symbol.hasInstance](x: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass when `instanceof` names one
    return familyHasInstance(this, RddpAbortError, kAborted, x);
  }
  /** Makes `member`'s instances (and its subclasses') `instanceof RddpAbortError`; call in its `static {}` block. */
  static join(member: abstract new (...args: never[]) => RddpError): void {
    brand(member, kAborted);
  }
}
brand(RddpAbortError, kAborted);

/**
 * A caller passed a value outside what the layer allows. Members: `InvalidArgumentError`
 * (ERR_LLP_INVALID_ARGUMENT), `DdpInvalidArgumentError`, `RdmapInvalidArgumentError`,
 * `InvalidWorkRequestError` (ERR_VERBS_INVALID_WR).
 */
export abstract class RddpInvalidArgumentError extends RddpError {
  static override [Symbol.hasInstance](x: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass when `instanceof` names one
    return familyHasInstance(this, RddpInvalidArgumentError, kInvalidArgument, x);
  }
  /** Makes `member`'s instances `instanceof RddpInvalidArgumentError`; call in its `static {}` block. */
  static join(member: abstract new (...args: never[]) => RddpError): void {
    brand(member, kInvalidArgument);
  }
}
brand(RddpInvalidArgumentError, kInvalidArgument);

/**
 * A message longer than the layer can describe (2^32-1 octets: RFC 5040 §4.4, RFC 5041 MO). Members:
 * `RdmapMessageTooLongError` (ERR_RDMAP_MESSAGE_TOO_LONG), `MessageTooLongError` (ERR_VERBS_MESSAGE_TOO_LONG).
 */
export abstract class RddpMessageTooLongError extends RddpError {
  abstract readonly length: number;
  abstract readonly max: number;
  static override [Symbol.hasInstance](x: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass when `instanceof` names one
    return familyHasInstance(this, RddpMessageTooLongError, kMessageTooLong, x);
  }
  /** Makes `member`'s instances `instanceof RddpMessageTooLongError`; call in its `static {}` block. */
  static join(member: abstract new (...args: never[]) => RddpMessageTooLongError): void {
    brand(member, kMessageTooLong);
  }
}
brand(RddpMessageTooLongError, kMessageTooLong);

/** Base class of every error the LLP contract defines. */
export abstract class LlpError extends RddpError {}

/** A ULPDU longer than the stream's MULPDU was offered to `send` (RFC 5041 §5.2: DDP must segment to MULPDU). */
export class UlpduTooLargeError extends LlpError {
  readonly code = 'ERR_LLP_ULPDU_TOO_LARGE';
  constructor(
    readonly length: number,
    readonly mulpdu: number,
  ) {
    super(`ULPDU of ${length} octets exceeds the stream's MULPDU of ${mulpdu} octets`);
  }
}

/** The stream or connection is closed (or closing) and cannot carry the operation. */
export class StreamClosedError extends LlpError {
  readonly code = 'ERR_LLP_STREAM_CLOSED';
  constructor(message = 'LLP stream is closed', options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The peer (or the network) tore the connection down abortively: reset, abort, lost association. */
export class ConnectionAbortedError extends LlpError {
  readonly code = 'ERR_LLP_CONNECTION_ABORTED';
}

/** Nothing listens at the address (TCP RST to SYN, no listener registered). */
export class ConnectionRefusedError extends LlpError {
  readonly code = 'ERR_LLP_CONNECTION_REFUSED';
}

/** The responder's ULP rejected the connection (MPA R=1, SCTP session reject); carries its private data. */
export class ConnectionRejectedError extends LlpError {
  readonly code = 'ERR_LLP_CONNECTION_REJECTED';
  constructor(
    message: string,
    readonly privateData: Uint8Array = new Uint8Array(0),
  ) {
    super(message);
  }
}

/** A timer of the LLP expired (handshake, graceful close, idle). */
export class LlpTimeoutError extends LlpError {
  readonly code = 'ERR_LLP_TIMEOUT';
}

/** The caller's `AbortSignal` fired. */
export class LlpAbortError extends LlpError {
  readonly code = 'ERR_LLP_ABORTED';
  static {
    RddpAbortError.join(LlpAbortError);
  }
  constructor(message = 'The operation was aborted', options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The LLP's digest (e.g. MPA's CRC32c) did not match: the ULPDU was discarded, never delivered. */
export class DigestError extends LlpError {
  readonly code = 'ERR_LLP_DIGEST';
}

/** The peer broke the LLP's own framing or handshake rules (bad MPA key, bad length, bad revision, ...). */
export class LlpProtocolError extends LlpError {
  readonly code = 'ERR_LLP_PROTOCOL';
}

/** A caller passed a value the contract does not allow (bad stream id, private data too long, ...). */
export class InvalidArgumentError extends LlpError {
  readonly code = 'ERR_LLP_INVALID_ARGUMENT';
  static {
    RddpInvalidArgumentError.join(InvalidArgumentError);
  }
}

/** The LLP lacks a capability the layer above requires (e.g. DDP over an LLP without a strong digest). */
export class CapabilityError extends LlpError {
  readonly code = 'ERR_LLP_CAPABILITY';
}

/** The address is already taken by another listener. */
export class AddressInUseError extends LlpError {
  readonly code = 'ERR_LLP_ADDRESS_IN_USE';
}

/** The host name could not be resolved to an address (DNS: no such name, or no answer). */
export class LlpAddressResolutionError extends LlpError {
  readonly code = 'ERR_LLP_ADDRESS_RESOLUTION';
}

/** A configured limit (connections, buffered octets, private data) would be exceeded. */
export class ResourceLimitError extends LlpError {
  readonly code = 'ERR_LLP_RESOURCE_LIMIT';
}

/** Every `code` an LLP error can carry. */
export type LlpErrorCode =
  | UlpduTooLargeError['code']
  | StreamClosedError['code']
  | ConnectionAbortedError['code']
  | ConnectionRefusedError['code']
  | ConnectionRejectedError['code']
  | LlpTimeoutError['code']
  | LlpAbortError['code']
  | DigestError['code']
  | LlpProtocolError['code']
  | InvalidArgumentError['code']
  | CapabilityError['code']
  | AddressInUseError['code']
  | LlpAddressResolutionError['code']
  | ResourceLimitError['code'];
