/**
 * Collects events, findings and connection summaries while the transports decode. Each list is
 * bounded (`maxEntries`, by default DEFAULT_MAX_REPORT_ENTRIES): beyond it entries are counted, not
 * kept, so a capture of any length yields a report of bounded size (the findings per connection and
 * the exit status still count every one).
 */
import type { Severity, Violation } from '../wire/violation.js';
import type { ConnectionSummary, DissectEvent, EventKind, Finding, Omitted, Transport } from './model.js';

/** Events, findings and connection summaries kept in a report, each (`--max-events`). */
export const DEFAULT_MAX_REPORT_ENTRIES = 10_000;
/** Terminates (and UDP LLP ABORTs) listed per connection summary; the rest are counted. */
export const MAX_TERMINATES_LISTED = 64;
/** Longest octet string kept in an event's detail (MPA Private Data is at most 512). */
export const MAX_DETAIL_OCTETS = 4096;

/** A copy of `v` holding no view of a captured packet (octet strings copied, at most MAX_DETAIL_OCTETS). */
function detached(v: unknown): unknown {
  if (v instanceof Uint8Array) return new Uint8Array(v.subarray(0, MAX_DETAIL_OCTETS));
  if (Array.isArray(v)) return v.map(detached);
  if (v && typeof v === 'object') {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) o[k] = detached(x);
    return o;
  }
  return v;
}

export class Recorder {
  readonly events: DissectEvent[] = [];
  readonly findings: Finding[] = [];
  readonly connections: ConnectionSummary[] = [];
  /** What was counted and not kept. */
  readonly omitted: Omitted = {
    events: 0,
    findings: 0,
    findingsBySeverity: { reject: 0, warn: 0, note: 0 },
    connections: 0,
  };

  constructor(readonly maxEntries = DEFAULT_MAX_REPORT_ENTRIES) {}

  connection(id: string, transport: Transport, initiator: string, responder: string): ConnectionSummary {
    const c: ConnectionSummary = {
      id,
      transport,
      initiator,
      responder,
      setup: '',
      operations: {},
      bytes: {},
      segments: 0,
      crc: { good: 0, bad: 0, off: 0 },
      terminates: [],
      findings: { reject: 0, warn: 0, note: 0 },
    };
    if (this.connections.length < this.maxEntries) this.connections.push(c);
    else this.omitted.connections++;
    return c;
  }

  /** A Terminate (or ABORT) in a connection's summary: the first MAX_TERMINATES_LISTED listed, the rest counted. */
  terminate(conn: ConnectionSummary, t: { frame: number; direction: string; name: string }): void {
    if (conn.terminates.length < MAX_TERMINATES_LISTED) conn.terminates.push(t);
    else conn.terminatesOmitted = (conn.terminatesOmitted ?? 0) + 1;
  }

  private finding(f: Finding): void {
    if (this.findings.length < this.maxEntries) this.findings.push(f);
    else {
      this.omitted.findings++;
      this.omitted.findingsBySeverity[f.severity]++;
    }
  }

  /** A finding about the capture as a whole (a limit of the dissector), under connection "capture": always kept. */
  captureEvent(frame: number, summary: string, violations: readonly Violation[]): void {
    this.events.push({ frame, connection: 'capture', direction: '', kind: 'stream', summary, violations });
    for (const v of violations) this.findings.push({ ...v, frame, connection: 'capture', direction: '' });
  }

  event(
    conn: ConnectionSummary,
    frame: number,
    direction: string,
    kind: EventKind,
    summary: string,
    violations: readonly Violation[] = [],
    detail?: Record<string, unknown>,
  ): void {
    if (this.events.length < this.maxEntries)
      this.events.push({
        frame,
        connection: conn.id,
        direction,
        kind,
        summary,
        violations,
        ...(detail ? { detail: detached(detail) as Record<string, unknown> } : {}),
      });
    else this.omitted.events++;
    for (const v of violations) {
      conn.findings[v.severity]++;
      this.finding({ ...v, frame, connection: conn.id, direction });
    }
  }

  /** Findings of each severity, kept or not. */
  get totals(): Record<Severity, number> {
    const t = { ...this.omitted.findingsBySeverity };
    for (const f of this.findings) t[f.severity]++;
    return t;
  }
}
