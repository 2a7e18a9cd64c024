/** The terminal and JSON renderings of a dissect report. */
import { rejectCount } from './dissect.js';
import { type DissectReport, jsonSafe } from './model.js';

export interface FormatOptions {
  /** Also list notes (findings that are not errors). */
  readonly notes?: boolean;
}

const MARK = { reject: '!!', warn: ' !', note: ' ·' } as const;

export function formatDissectText(r: DissectReport, o: FormatOptions = {}): string {
  const lines: string[] = [];
  const conns = r.connections.length + (r.omitted?.connections ?? 0);
  lines.push(`${r.file ?? 'capture'}: ${r.format}, ${r.packets} packets, ${conns} iWARP connection(s)`);
  for (const e of r.events) {
    lines.push(`#${e.frame} [${e.connection}] ${e.direction}  ${e.summary}`);
    for (const v of e.violations)
      if (v.severity !== 'note' || o.notes)
        lines.push(`    ${MARK[v.severity]} ${v.severity} ${v.clause}: ${v.message} [${v.code}]`);
  }
  const cut = r.omitted;
  if (cut && cut.events > 0) lines.push(`… ${cut.events} more events not listed (--max-events ${r.events.length})`);
  if (cut && cut.findings > 0) {
    const s = cut.findingsBySeverity;
    lines.push(
      `… ${cut.findings} more findings not listed: ${s.reject} to reject, ${s.warn} warnings, ${s.note} notes`,
    );
  }
  lines.push('');
  for (const c of r.connections) {
    lines.push(`connection ${c.id} (${c.transport}): ${c.initiator} → ${c.responder}`);
    if (c.setup) lines.push(`  setup: ${c.setup}`);
    const ops = Object.entries(c.operations)
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ');
    lines.push(`  operations: ${ops || 'none'}`);
    for (const [d, n] of Object.entries(c.bytes)) lines.push(`  DDP payload ${d}: ${n} octets`);
    lines.push(`  DDP segments: ${c.segments}; CRC good ${c.crc.good}, bad ${c.crc.bad}, off ${c.crc.off}`);
    for (const t of c.terminates) lines.push(`  Terminate #${t.frame} ${t.direction}: ${t.name}`);
    if (c.terminatesOmitted) lines.push(`  … ${c.terminatesOmitted} more Terminates not listed`);
    lines.push(`  findings: ${c.findings.reject} to reject, ${c.findings.warn} warnings, ${c.findings.note} notes`);
  }
  if (cut && cut.connections > 0) lines.push(`… ${cut.connections} more connections not listed (--max-events)`);
  const rejects = rejectCount(r);
  lines.push(rejects > 0 ? `${rejects} finding(s) a receiver must reject` : 'no finding a receiver must reject');
  return `${lines.join('\n')}\n`;
}

export function formatDissectJson(r: DissectReport): string {
  return `${JSON.stringify(jsonSafe(r), null, 2)}\n`;
}
