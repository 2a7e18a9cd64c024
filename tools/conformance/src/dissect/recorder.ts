/** Collects events, findings and connection summaries while the transports decode. */
import type { Violation } from '../wire/violation.js';
import type { ConnectionSummary, DissectEvent, EventKind, Finding, Transport } from './model.js';

export class Recorder {
  readonly events: DissectEvent[] = [];
  readonly findings: Finding[] = [];
  readonly connections: ConnectionSummary[] = [];

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
    this.connections.push(c);
    return c;
  }

  /** A finding about the capture as a whole (a limit of the dissector), under connection "capture". */
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
    this.events.push({
      frame,
      connection: conn.id,
      direction,
      kind,
      summary,
      violations,
      ...(detail ? { detail } : {}),
    });
    for (const v of violations) {
      conn.findings[v.severity]++;
      this.findings.push({ ...v, frame, connection: conn.id, direction });
    }
  }
}
