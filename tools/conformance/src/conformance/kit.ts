/**
 * `rddp conformance`: the kit as one call. Parses the target or listen port, selects cases, runs them
 * and writes the reports asked for. Exit status: 0 when every case passed or was skipped, 1 when any
 * failed, 2 on a usage error (ConformanceUsageError).
 */
import { writeFile } from 'node:fs/promises';
import { writeCasePcap } from './capture.js';
import { CASES, honestRping } from './cases.js';
import { WireListener } from './conn.js';
import { ConformanceUsageError } from './errors.js';
import { jsonReport, junitReport, markdownReport, tableReport } from './report.js';
import { runCases, selectCases, selectionTokens } from './runner.js';
import type { App, CaseResult, Mode, RunSummary } from './types.js';

export interface KitOptions {
  /** `HOST:PORT`: the kit is the client. */
  readonly target?: string;
  /** `PORT`: the kit is the server clients under test connect to. */
  readonly listen?: string;
  /** Address to listen on (default 127.0.0.1). */
  readonly listenHost?: string;
  readonly mpaRev?: string;
  readonly crc?: boolean;
  readonly markers?: boolean;
  readonly app?: string;
  readonly only?: string;
  readonly skip?: string;
  /** Milliseconds per case (default 15000) and per wait on the target (default 3000). */
  readonly caseTimeout?: string;
  readonly wait?: string;
  readonly junit?: string;
  readonly json?: string;
  readonly md?: string;
  readonly pcap?: string;
  /** Called with the listening port (server role) before the first case. */
  readonly onListening?: (port: number) => void;
  readonly onResult?: (r: CaseResult) => void;
  /** One-line notes on the run (server role: a client refused because MAX_QUEUED_CLIENTS already wait). */
  readonly onNote?: (line: string) => void;
}

function int(name: string, v: string | undefined, dflt: number, min: number, max: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < min || n > max)
    throw new ConformanceUsageError(`${name} must be an integer in ${min}..${max} (got ${v})`);
  return n;
}

export function kitMode(o: KitOptions): Mode {
  const rev = o.mpaRev === undefined ? 1 : Number(o.mpaRev);
  if (rev !== 0 && rev !== 1 && rev !== 2)
    throw new ConformanceUsageError(`--mpa-rev must be 0, 1 or 2 (got ${o.mpaRev})`);
  if (rev === 0) {
    // RFC 5044 Appendix C: the RDMAC MPA has Markers and CRCs on, with nothing to negotiate.
    if (o.crc === false || o.markers === false)
      throw new ConformanceUsageError(
        '--mpa-rev 0 (RDMAC MPA) always has CRCs and Markers: drop --no-crc/--no-markers',
      );
    return { mpaRev: 0, crc: true, markers: true };
  }
  return { mpaRev: rev, crc: o.crc ?? true, markers: o.markers ?? false };
}

/** Lists the cases (name, clause, roles, title). */
export function listCases(): string {
  const w = Math.max(...CASES.map((c) => c.name.length));
  const cw = Math.max(...CASES.map((c) => c.clause.length));
  return `${CASES.map((c) => `${c.name.padEnd(w)}  ${c.clause.padEnd(cw)}  ${[...c.roles].join('/').padEnd(13)}  ${c.title}`).join('\n')}\n`;
}

export async function runKit(o: KitOptions): Promise<RunSummary> {
  if ((o.target === undefined) === (o.listen === undefined))
    throw new ConformanceUsageError('give exactly one of --target HOST:PORT (kit is the client) or --listen PORT');
  const mode = kitMode(o);
  const app = (o.app ?? 'rping') as App;
  if (app !== 'rping' && app !== 'perf') throw new ConformanceUsageError(`--app must be rping or perf (got ${o.app})`);
  const cases = selectCases(CASES, selectionTokens(o.only), selectionTokens(o.skip));
  const caseTimeoutMs = int('--case-timeout', o.caseTimeout, 15_000, 100, 600_000);
  const waitMs = int('--wait', o.wait, 3000, 50, 120_000);
  let target: { host: string; port: number } | undefined;
  let listener: WireListener | undefined;
  if (o.target !== undefined) {
    const m = /^(.+):(\d+)$/.exec(o.target);
    if (!m) throw new ConformanceUsageError(`--target must be HOST:PORT (got ${o.target})`);
    target = { host: (m[1] as string).replace(/^\[(.*)\]$/, '$1'), port: int('--target port', m[2], 0, 1, 65535) };
  } else {
    const port = int('--listen', o.listen, 0, 0, 65535);
    listener = await WireListener.listen(port, o.listenHost ?? '127.0.0.1');
    listener.onNote = o.onNote;
    o.onListening?.(listener.port);
  }
  try {
    const pcapDir = o.pcap;
    const summary = await runCases(cases, {
      role: target ? 'client' : 'server',
      mode,
      app,
      ...(target ? { target } : {}),
      ...(listener ? { listener } : {}),
      caseTimeoutMs,
      waitMs,
      ...(app === 'rping' ? { liveness: honestRping } : {}),
      ...(pcapDir ? { capture: (name, conns) => writeCasePcap(pcapDir, name, conns) } : {}),
      ...(o.onResult ? { onResult: o.onResult } : {}),
    });
    if (o.junit) await writeFile(o.junit, junitReport(summary));
    if (o.json && o.json !== '-') await writeFile(o.json, jsonReport(summary));
    if (o.md && o.md !== '-') await writeFile(o.md, markdownReport(summary));
    return summary;
  } finally {
    await listener?.close();
  }
}

/** The text the command prints: the table, or JSON/Markdown when asked for on stdout (`-`). */
export function stdoutReport(o: KitOptions, s: RunSummary): string {
  if (o.json === '-') return jsonReport(s);
  if (o.md === '-') return markdownReport(s);
  return tableReport(s);
}

export function exitStatus(s: RunSummary): number {
  return s.failed > 0 ? 1 : 0;
}
