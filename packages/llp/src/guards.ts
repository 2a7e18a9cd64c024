import type { LlpConnection, LlpTransport } from './connection.js';
import { AddressInUseError, InvalidArgumentError, LlpError, type LlpErrorCode } from './errors.js';
import type { LlpStream } from './stream.js';

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null;
}

/** Structural check for an `LlpTransport` (a plugin object from another copy of this package still passes). */
export function isLlpTransport(x: unknown): x is LlpTransport {
  return (
    isObject(x) &&
    typeof x.name === 'string' &&
    isObject(x.capabilities) &&
    typeof x.connect === 'function' &&
    typeof x.listen === 'function'
  );
}

export function isLlpConnection(x: unknown): x is LlpConnection {
  return isObject(x) && Array.isArray(x.streams) && typeof x.abort === 'function' && isObject(x.closed$);
}

export function isLlpStream(x: unknown): x is LlpStream {
  return (
    isObject(x) &&
    typeof x.id === 'number' &&
    typeof x.mulpdu === 'number' &&
    typeof x.send === 'function' &&
    typeof x.setReceiver === 'function'
  );
}

/** True for any error of the contract, or for one with the given `code`. Matches on `code`, not class identity. */
export function isLlpError(x: unknown, code?: LlpErrorCode): x is LlpError {
  if (x instanceof LlpError) return code === undefined || x.code === code;
  if (!(x instanceof Error)) return false;
  const c = (x as { code?: unknown }).code;
  return typeof c === 'string' && c.startsWith('ERR_LLP_') && (code === undefined || c === code);
}

/** The private data of a connection request or answer (absent: none), at most `max` octets; else `InvalidArgumentError`. */
export function checkPrivateData(pd: Uint8Array | undefined, max: number): Uint8Array {
  const data = pd ?? new Uint8Array(0);
  if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('private data must be a Uint8Array');
  if (data.byteLength > max)
    throw new InvalidArgumentError(`private data of ${data.byteLength} octets exceeds the transport's limit of ${max}`);
  return data;
}

/** The LLP streams a `connect` asks for: an integer 1..`max` (no bound: any positive integer); else `InvalidArgumentError`. */
export function checkStreamCount(streams: number, max = Number.POSITIVE_INFINITY): number {
  if (!Number.isInteger(streams) || streams < 1 || streams > max)
    throw new InvalidArgumentError(
      `streams must be ${max === Number.POSITIVE_INFINITY ? 'a positive integer' : `an integer 1..${max}`}, got ${streams}`,
    );
  return streams;
}

/** The port a `connect` goes to: an integer 1..65535; else `InvalidArgumentError`. */
export function checkConnectPort(port: number | undefined): number {
  if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65_535)
    throw new InvalidArgumentError(`connect needs a port 1..65535, got ${String(port)}`);
  return port;
}

/** Why a socket could not be bound at `where`: `AddressInUseError` (EADDRINUSE), else `InvalidArgumentError`. */
export function bindError(e: Error & { readonly code?: string }, where: string): LlpError {
  if (e.code === 'EADDRINUSE') return new AddressInUseError(where, { cause: e });
  return new InvalidArgumentError(`cannot bind ${where}: ${e.message}`, { cause: e });
}
