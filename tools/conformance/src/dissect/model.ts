/** What `rddp dissect` reports: events per frame, a summary per connection, and every finding. */
import type { Severity, Violation } from '../wire/violation.js';

export type Transport = 'mpa-tcp' | 'sctp' | 'sctp-udp' | 'udp-llp';

export type EventKind =
  | 'mpa-request'
  | 'mpa-reply'
  | 'fpdu'
  | 'segment'
  | 'message'
  | 'sctp-chunk'
  | 'session-control'
  | 'udp-llp'
  | 'stream';

export interface DissectEvent {
  readonly frame: number;
  readonly connection: string;
  /** "src → dst" of the octets (addresses and ports). */
  readonly direction: string;
  readonly kind: EventKind;
  readonly summary: string;
  /** Decoded fields (JSON-safe: 64-bit values as decimal strings). */
  readonly detail?: Record<string, unknown>;
  readonly violations: readonly Violation[];
}

export interface Finding extends Violation {
  readonly frame: number;
  readonly connection: string;
  readonly direction: string;
}

export interface ConnectionSummary {
  readonly id: string;
  readonly transport: Transport;
  /** The side that opened the connection (MPA Request, SCTP INIT, UDP LLP REQUEST). */
  readonly initiator: string;
  readonly responder: string;
  /** What the setup agreed, in words. */
  setup: string;
  /** Complete RDMAP messages by opcode name. */
  readonly operations: Record<string, number>;
  /** DDP payload octets per direction ("src → dst"). */
  readonly bytes: Record<string, number>;
  /** FPDUs (MPA), DATA user messages (SCTP) or DATA datagrams (UDP LLP) carrying DDP segments. */
  segments: number;
  readonly crc: { good: number; bad: number; off: number };
  readonly terminates: { frame: number; direction: string; name: string }[];
  /** Terminates beyond the first MAX_TERMINATES_LISTED (counted, not listed); absent when none. */
  terminatesOmitted?: number;
  readonly findings: Record<Severity, number>;
}

/** What a report counted and did not keep, past its bound (`maxEvents`) on each list. */
export interface Omitted {
  events: number;
  findings: number;
  readonly findingsBySeverity: Record<Severity, number>;
  connections: number;
}

export interface DissectReport {
  readonly file?: string;
  readonly format: 'pcap' | 'pcapng';
  readonly packets: number;
  readonly connections: ConnectionSummary[];
  readonly events: DissectEvent[];
  readonly findings: Finding[];
  /** Present only when the report was cut at its bound: the events, findings and connections left out. */
  readonly omitted?: Omitted;
}

/** Converts bigints (and nested values) to JSON-safe values. */
export function jsonSafe(v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(jsonSafe);
  if (v && typeof v === 'object') {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) o[k] = jsonSafe(x);
    return o;
  }
  return v;
}
