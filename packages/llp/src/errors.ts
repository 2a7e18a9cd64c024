/**
 * One error class per condition, each with a stable `code` (the undici way).
 * LLP plugins throw or surface these; the layers above match on `code`, never on text.
 */

/** Base class of every error the LLP contract defines. */
export abstract class LlpError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

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
