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

import type { Crc32cBackendMissingError, Crc32cBackendUnknownError } from './crc32c-pin.js';

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

/**
 * `x instanceof cls` where `cls` extends a family's base: the family itself (declared `extends errorFamily(key)`)
 * matches by brand; a subclass of the family by the ordinary prototype chain.
 */
function familyHasInstance(cls: unknown, base: unknown, key: symbol, x: unknown): boolean {
  if (Object.getPrototypeOf(cls) === base) return hasBrand(x, key);
  return Function.prototype[Symbol.hasInstance].call(cls, x);
}

/** The constructor of an error class, abstract or not. */
type ErrorClass<T> = abstract new (...args: never[]) => T;

/** The constructor of a class `codedError` makes: a message, and the `cause`. */
export type CodedErrorClass<T> = new (message: string, options?: { cause?: unknown }) => T;

/**
 * The base of a family of errors: `x instanceof Family` is true for every member, by brand (undici's
 * `Symbol.hasInstance`), so across package copies; `instanceof` a subclass of the family is the ordinary one.
 */
function errorFamily(key: symbol) {
  abstract class RddpErrorFamily extends RddpError {
    static override [Symbol.hasInstance](x: unknown): boolean {
      // biome-ignore lint/complexity/noThisInStatic: `this` is the class `instanceof` names, the family or a subclass
      return familyHasInstance(this, RddpErrorFamily, key, x);
    }
    /** Makes `member`'s instances (and its subclasses') `instanceof` the family; call in its `static {}` block. */
    static join<F>(this: ErrorClass<F>, member: ErrorClass<F>): void {
      brand(member, key);
    }
  }
  brand(RddpErrorFamily, key);
  return RddpErrorFamily;
}

/**
 * The caller's `AbortSignal` fired. Members: `LlpAbortError` (ERR_LLP_ABORTED), `DdpAbortError`
 * (ERR_DDP_ABORTED), `RdmapAbortError` (ERR_RDMAP_ABORTED).
 */
export abstract class RddpAbortError extends errorFamily(kAborted) {}

/**
 * A caller passed a value outside what the layer allows. Members: `InvalidArgumentError`
 * (ERR_LLP_INVALID_ARGUMENT), `DdpInvalidArgumentError`, `RdmapInvalidArgumentError`,
 * `InvalidWorkRequestError` (ERR_VERBS_INVALID_WR).
 */
export abstract class RddpInvalidArgumentError extends errorFamily(kInvalidArgument) {}

/**
 * A message longer than the layer can describe (2^32-1 octets: RFC 5040 §4.4, RFC 5041 MO). Members:
 * `RdmapMessageTooLongError` (ERR_RDMAP_MESSAGE_TOO_LONG), `MessageTooLongError` (ERR_VERBS_MESSAGE_TOO_LONG).
 */
export abstract class RddpMessageTooLongError extends errorFamily(kMessageTooLong) {
  abstract readonly length: number;
  abstract readonly max: number;
}

/**
 * The class of a condition told by its message and `code` alone, under a layer's base:
 * `class DigestError extends codedError(LlpError, 'ERR_LLP_DIGEST') {}`.
 */
export function codedError<T extends RddpError, C extends string>(
  Base: abstract new (message: string, options?: { cause?: unknown }) => T,
  code: C,
): CodedErrorClass<T & { readonly code: C }> {
  // `Base` is abstract only for lacking `code`, which this class gives.
  const Concrete = Base as unknown as CodedErrorClass<RddpError>;
  return class extends Concrete {
    readonly code = code;
  } as unknown as CodedErrorClass<T & { readonly code: C }>;
}

/** A coded error class whose type says nothing of its base but that it is an `RddpError`. */
type AnyCodedErrorClass = CodedErrorClass<RddpError & { readonly code: string }>;

/** A layer's member of `RddpAbortError`: `codedError`, and the message defaults to "The operation was aborted". */
export function abortErrorClass<T extends RddpError, C extends string>(
  Base: abstract new (message: string, options?: { cause?: unknown }) => T,
  code: C,
): new (
  message?: string,
  options?: { cause?: unknown },
) => T & { readonly code: C } {
  const Coded: AnyCodedErrorClass = codedError(Base, code);
  class Aborted extends Coded {
    constructor(message = 'The operation was aborted', options?: { cause?: unknown }) {
      super(message, options);
    }
  }
  RddpAbortError.join(Aborted);
  return Aborted as unknown as new (
    message?: string,
    options?: { cause?: unknown },
  ) => T & { readonly code: C };
}

/** A layer's member of `RddpInvalidArgumentError`: `codedError`, joined to the family. */
export function invalidArgumentErrorClass<T extends RddpError, C extends string>(
  Base: abstract new (message: string, options?: { cause?: unknown }) => T,
  code: C,
): CodedErrorClass<T & { readonly code: C }> {
  const Coded = codedError(Base, code);
  RddpInvalidArgumentError.join<RddpError>(Coded);
  return Coded;
}

/** A layer's member of `RddpMessageTooLongError`: built from the offending `length` and the layer's `max`. */
export function messageTooLongErrorClass<T extends RddpError, C extends string>(
  Base: abstract new (message: string, options?: { cause?: unknown }) => T,
  code: C,
): new (
  length: number,
  max: number,
) => T & { readonly code: C; readonly length: number; readonly max: number } {
  const Coded: AnyCodedErrorClass = codedError(Base, code);
  class TooLong extends Coded {
    constructor(
      readonly length: number,
      readonly max: number,
    ) {
      super(`message of ${length} octets exceeds the maximum of ${max} octets`);
    }
  }
  RddpMessageTooLongError.join(TooLong);
  return TooLong as unknown as new (
    length: number,
    max: number,
  ) => T & { readonly code: C; readonly length: number; readonly max: number };
}

/** Base class of every error the LLP contract defines. */
export abstract class LlpError extends RddpError {}

/** A ULPDU longer than the stream's MULPDU was offered to `send` (RFC 5041 §5.2: DDP must segment to MULPDU). */
export class UlpduTooLargeError extends codedError(LlpError, 'ERR_LLP_ULPDU_TOO_LARGE') {
  constructor(
    readonly length: number,
    readonly mulpdu: number,
  ) {
    super(`ULPDU of ${length} octets exceeds the stream's MULPDU of ${mulpdu} octets`);
  }
}

/** The stream or connection is closed (or closing) and cannot carry the operation. */
export class StreamClosedError extends codedError(LlpError, 'ERR_LLP_STREAM_CLOSED') {
  constructor(message = 'LLP stream is closed', options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The peer (or the network) tore the connection down abortively: reset, abort, lost association. */
export class ConnectionAbortedError extends codedError(LlpError, 'ERR_LLP_CONNECTION_ABORTED') {}

/** Nothing listens at the address (TCP RST to SYN, no listener registered). */
export class ConnectionRefusedError extends codedError(LlpError, 'ERR_LLP_CONNECTION_REFUSED') {}

/** The responder's ULP rejected the connection (MPA R=1, SCTP session reject); carries its private data. */
export class ConnectionRejectedError extends codedError(LlpError, 'ERR_LLP_CONNECTION_REJECTED') {
  constructor(
    message: string,
    readonly privateData: Uint8Array = new Uint8Array(0),
  ) {
    super(message);
  }
}

/** A timer of the LLP expired (handshake, graceful close, idle). */
export class LlpTimeoutError extends codedError(LlpError, 'ERR_LLP_TIMEOUT') {}

/** The caller's `AbortSignal` fired. */
export class LlpAbortError extends abortErrorClass(LlpError, 'ERR_LLP_ABORTED') {}

/** The LLP's digest (e.g. MPA's CRC32c) did not match: the ULPDU was discarded, never delivered. */
export class DigestError extends codedError(LlpError, 'ERR_LLP_DIGEST') {}

/** The peer broke the LLP's own framing or handshake rules (bad MPA key, bad length, bad revision, ...). */
export class LlpProtocolError extends codedError(LlpError, 'ERR_LLP_PROTOCOL') {}

/** A caller passed a value the contract does not allow (bad stream id, private data too long, ...). */
export class InvalidArgumentError extends invalidArgumentErrorClass(LlpError, 'ERR_LLP_INVALID_ARGUMENT') {}

/** The LLP lacks a capability the layer above requires (e.g. DDP over an LLP without a strong digest). */
export class CapabilityError extends codedError(LlpError, 'ERR_LLP_CAPABILITY') {}

/** The address is already taken by another listener. */
export class AddressInUseError extends codedError(LlpError, 'ERR_LLP_ADDRESS_IN_USE') {
  /** `address`: the address as the transport names it (`host:port`). */
  constructor(
    readonly address: string,
    options?: { cause?: unknown },
  ) {
    super(`${address} is already in use`, options);
  }
}

/** The host name could not be resolved to an address (DNS: no such name, or no answer). */
export class LlpAddressResolutionError extends codedError(LlpError, 'ERR_LLP_ADDRESS_RESOLUTION') {
  /** `reason`: the resolver's error code (`ENOTFOUND`, `EAI_AGAIN`, ...); the resolver's error is the `cause`. */
  constructor(
    readonly host: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot resolve ${host}: ${reason}`, options);
  }
}

/** A configured limit (connections, buffered octets, private data) would be exceeded. */
export class ResourceLimitError extends codedError(LlpError, 'ERR_LLP_RESOURCE_LIMIT') {
  /** `limit`: the limit reached, with its value (`16 connections`); `refused`: what was refused for it. */
  constructor(
    readonly limit: string,
    readonly refused: string,
  ) {
    super(`limit reached (${limit}): ${refused} refused`);
  }
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
  | ResourceLimitError['code']
  | Crc32cBackendUnknownError['code']
  | Crc32cBackendMissingError['code'];
