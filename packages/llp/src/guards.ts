import type { LlpConnection, LlpTransport } from './connection.js';
import { LlpError, type LlpErrorCode } from './errors.js';
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
