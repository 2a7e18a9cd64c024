/**
 * A finding about bytes on the wire: what rule they break and the clause that states it.
 * `reject`: a receiver must refuse them (a Terminate or a closed connection); `warn`: a sender rule a
 * receiver does not check (reserved bits, pad contents); `note`: worth knowing, not an error.
 */
export type Severity = 'reject' | 'warn' | 'note';

export interface Violation {
  readonly severity: Severity;
  /** Stable identifier, e.g. 'mpa-crc', 'ddp-version'. */
  readonly code: string;
  /** Where the rule is written, e.g. 'RFC 5044 §4.4'. */
  readonly clause: string;
  readonly message: string;
}

export function reject(code: string, clause: string, message: string): Violation {
  return { severity: 'reject', code, clause, message };
}

export function warn(code: string, clause: string, message: string): Violation {
  return { severity: 'warn', code, clause, message };
}

export function note(code: string, clause: string, message: string): Violation {
  return { severity: 'note', code, clause, message };
}
