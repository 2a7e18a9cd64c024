/**
 * `rddp conformance`: the kit as one call. Parses the target or listen port, selects cases, runs them
 * (in one mode, or in every mode with --all) and writes the reports asked for. Exit status: 0 when no
 * case FAILed, 1 when any did, 2 on a usage error (ConformanceUsageError) or a target the kit cannot
 * test (ConformanceTargetError: nothing answers, it stopped answering, or it does not speak MPA or
 * the application protocol).
 */
import { writeFile } from 'node:fs/promises';
import { MPA_REPLY_KEY, MPA_REQUEST_KEY } from '../wire/constants.js';
import { writeCasePcap } from './capture.js';
import { CASES, honestRping } from './cases.js';
import { WireConn, WireListener } from './conn.js';
import {
  ConformanceError,
  ConformancePeerClosedError,
  ConformanceRejectedError,
  ConformanceTimeoutError,
  ConformanceUsageError,
} from './errors.js';
import { jsonReport, junitReport, markdownReport, tableReport } from './report.js';
import { runCases, selectCases, selectionTokens } from './runner.js';
import { KitSession } from './session.js';
import type { App, CaseContext, CaseOutcome, CaseResult, ConformanceCase, Mode, Role, RunSummary } from './types.js';

/**
 * The target cannot be tested: nothing answers (or it stopped answering mid-run), or it does not speak
 * MPA or the application protocol. One line, exit status 2, no report.
 */
export class ConformanceTargetError extends ConformanceError {
  readonly code = 'ERR_CONFORMANCE_TARGET';
  readonly exitCode = 2;
}

/** The modes --all runs: MPA Rev 1 and Rev 2 with CRCs, each also with Markers, and Rev 0 (RDMAC). */
export const ALL_MODES: readonly Mode[] = [
  { mpaRev: 1, crc: true, markers: false },
  { mpaRev: 2, crc: true, markers: false },
  { mpaRev: 1, crc: true, markers: true },
  { mpaRev: 2, crc: true, markers: true },
  { mpaRev: 0, crc: true, markers: true },
];

/** The longest --reconnect (seconds). */
export const MAX_RECONNECT_SECONDS = 3600;
/** How often a refused connect is tried again under --reconnect (milliseconds). */
const RECONNECT_POLL_MS = 50;

/** A run's summary; with --all, the modes' summaries one after another and the totals over them. */
export interface KitSummary extends RunSummary {
  readonly modes?: readonly RunSummary[];
}

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
  /**
   * Seconds a refused connect (ECONNREFUSED) is tried again before the target counts as unreachable:
   * a one-shot server (librdmacm `rping -s` without -P) restarted between cases. Default 0 (off).
   */
  readonly reconnect?: string;
  /** Every mode (ALL_MODES) for the role and app, one report; --mpa-rev/--crc/--markers must not be given. */
  readonly all?: boolean;
  /** Called with the listening port (server role) before the first case. */
  readonly onListening?: (port: number) => void;
  readonly onResult?: (r: CaseResult) => void;
  /** One-line notes on the run (a mode starting under --all, waiting for a target to come back; server role: a client refused because MAX_QUEUED_CLIENTS already wait). */
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

/** What the kit knows of the target across a run's cases (and modes). */
interface RunState {
  readonly role: Role;
  readonly app: App;
  readonly peer: string;
  readonly reconnectMs: number;
  /** Cases selected, over all modes. */
  readonly total: number;
  readonly onNote: ((line: string) => void) | undefined;
  /** Set when the run must stop: the target cannot be tested. */
  stop?: ConformanceTargetError;
  /** Whether a TCP connection to the target ever opened. */
  connected: boolean;
  /** Cases run so far (not skipped). */
  ran: number;
  /** Whether the first answer to an honest MPA Request was looked at. */
  mpaChecked: boolean;
  /** Whether the first honest application exchange was looked at. */
  appChecked: boolean;
  /** Whether the --reconnect note was written. */
  waitNoted: boolean;
}

function errCode(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | undefined)?.code;
  return typeof c === 'string' ? c : undefined;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A connect that says nothing answers there: refused, no route, no such host, or no handshake in time. */
function unreachable(e: unknown): boolean {
  const code = errCode(e);
  return (
    code === 'ECONNREFUSED' ||
    code === 'EHOSTUNREACH' ||
    code === 'ENETUNREACH' ||
    code === 'ENOTFOUND' ||
    code === 'EADDRNOTAVAIL' ||
    (e instanceof ConformanceTimeoutError && e.message.startsWith('no TCP connection'))
  );
}

function deadTarget(st: RunState, e: unknown): ConformanceTargetError {
  const refused = errCode(e) === 'ECONNREFUSED';
  const why = `${messageOf(e)}${refused && st.reconnectMs > 0 ? `, still refused after --reconnect ${st.reconnectMs / 1000} s` : ''}`;
  if (!st.connected) return new ConformanceTargetError(`nothing answers at ${st.peer} (${why}); no case run`);
  const hint =
    refused && st.reconnectMs === 0
      ? ' (a server that serves one client per process, like rping -s without -P, needs a restart and --reconnect <seconds>)'
      : '';
  return new ConformanceTargetError(
    `the target ${st.peer} stopped answering after ${st.ran} of ${st.total} cases ran (${why}); the run stops${hint}`,
  );
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Connects through `open`; a refused connect is tried again for up to --reconnect; an unreachable target stops the run. */
async function reach(st: RunState, open: () => Promise<WireConn>, signal: AbortSignal): Promise<WireConn> {
  if (st.stop) throw st.stop;
  const deadline = Date.now() + st.reconnectMs;
  for (;;) {
    try {
      const c = await open();
      st.connected = true;
      return c;
    } catch (e) {
      if (errCode(e) === 'ECONNREFUSED' && Date.now() < deadline && !signal.aborted && !st.stop) {
        noteWait(st);
        await sleep(RECONNECT_POLL_MS);
        continue;
      }
      if (unreachable(e) && !signal.aborted) st.stop ??= deadTarget(st, e);
      throw e;
    }
  }
}

/** Up to 40 octets as printable text (others as '.'). */
function shown(b: Uint8Array): string {
  return JSON.stringify(
    Buffer.from(b)
      .toString('latin1')
      .replace(/[^\x20-\x7e]/g, '.'),
  );
}

/**
 * Whether the first octets of `conn` are an MPA Reply (client role, after the kit's honest Request) or
 * Request (server role): undefined when there is nothing to judge yet, else the verdict.
 */
function mpaAnswer(conn: WireConn, role: Role): { bad?: string } | undefined {
  if (role === 'client') {
    const tx = conn.records.find((r) => r.dir === 'tx');
    if (!tx || Buffer.from(tx.bytes.subarray(0, MPA_REQUEST_KEY.length)).toString('latin1') !== MPA_REQUEST_KEY)
      return undefined;
  }
  const n = conn.receivedOctets;
  if (n === 0) return undefined;
  const key = role === 'client' ? MPA_REPLY_KEY : MPA_REQUEST_KEY;
  if (key.startsWith(conn.received(0, Math.min(n, key.length)).toString('latin1'))) return {};
  return { bad: `${shown(conn.received(0, Math.min(n, 40)))}${n > 40 ? '…' : ''} (${n} octets)` };
}

function notMpa(st: RunState, bad: string): ConformanceTargetError {
  return new ConformanceTargetError(
    st.role === 'client'
      ? `the target ${st.peer} does not speak MPA: it answered the kit's MPA Request with ${bad}, not an MPA Reply ("${MPA_REPLY_KEY}"); no ${st.app} over iWARP there`
      : `the client under test does not speak MPA: it opened with ${bad}, not an MPA Request ("${MPA_REQUEST_KEY}")`,
  );
}

/** How the first step of the application exchange fails when the target runs another application. */
const OTHER_APP: Record<App, RegExp> = {
  // rping's server RDMA Reads the advertised buffer first: a Send of its own, or a receive too small
  // for the 16-octet advertisement, is another application (a perf server sends its HELLO answer).
  rping:
    /(opcode 0x3 [^;]*|a Terminate \(DDP: Untagged Buffer Error[^)]*\)) where the RDMA Read Request of the source buffer was due/,
  // perf's server answers HELLO with a JSON READY or REFUSED Send, naming its perf protocol version.
  perf: /answer to HELLO is (not JSON|neither READY nor REFUSED)|where READY or REFUSED was due|speaks perf protocol/,
};

/** After a case: the first honest MPA answer and the first application exchange tell whether the target can be tested. */
function inspect(
  st: RunState,
  c: Pick<ConformanceCase, 'name' | 'apps'>,
  conns: readonly WireConn[],
  out: CaseOutcome | undefined,
  err: unknown,
): void {
  if (st.stop) return;
  const first = conns[0];
  if (!st.mpaChecked && first) {
    const a = mpaAnswer(first, st.role);
    if (a) {
      st.mpaChecked = true;
      if (a.bad !== undefined) {
        st.stop = notMpa(st, a.bad);
        return;
      }
    }
  }
  const appCase = st.app === 'rping' ? c.name === 'liveness.rping' : (c.apps ?? []).includes('perf');
  if (st.role === 'client' && !st.appChecked && appCase && first) {
    st.appChecked = true;
    const why =
      err !== undefined ? messageOf(err) : out && out.verdict !== 'PASS' && out.verdict !== 'SKIP' ? out.evidence : '';
    if (OTHER_APP[st.app].test(why))
      st.stop = new ConformanceTargetError(
        `the target ${st.peer} does not speak ${st.app} (it speaks MPA): the first ${st.app} exchange failed with: ${why}`,
      );
  }
}

/** The runner's context with connect/accept that retry (--reconnect), stop the run on a dead target and record the connections. */
/**
 * Under --reconnect, a case whose first connection ended before the target sent an octet, and which
 * failed for it, tested nothing: a one-shot server that was still exiting took the connection into its
 * backlog. Such an attempt is made again (until --reconnect runs out), as a refused connect is.
 */
function unanswered(conns: readonly WireConn[], out: CaseOutcome | undefined, err: unknown): boolean {
  const first = conns[0];
  return (
    first !== undefined &&
    first.receivedOctets === 0 &&
    first.ended !== undefined &&
    (err !== undefined || out?.verdict === 'FAIL')
  );
}

function noteWait(st: RunState): void {
  if (st.waitNoted) return;
  st.waitNoted = true;
  st.onNote?.(
    `${st.peer} refused a connection: each refused connect is tried again for up to ${st.reconnectMs / 1000} s (--reconnect)`,
  );
}

/** The case run with connect/accept that retry (--reconnect), stop the run on a dead target and record the connections. */
function watchedRun(st: RunState, c: Pick<ConformanceCase, 'name' | 'apps' | 'run'>) {
  return async (ctx: CaseContext): Promise<CaseOutcome> => {
    const deadline = Date.now() + st.reconnectMs;
    for (;;) {
      if (st.stop) throw st.stop;
      const conns: WireConn[] = [];
      const connect = () =>
        reach(st, () => ctx.connect(), ctx.signal).then((conn) => {
          conns.push(conn);
          return conn;
        });
      const accept = () =>
        ctx.accept().then((conn) => {
          conns.push(conn);
          return conn;
        });
      const w: CaseContext = { ...ctx, connect, accept, open: ctx.role === 'client' ? connect : accept };
      let out: CaseOutcome | undefined;
      let err: unknown;
      try {
        out = await c.run(w);
      } catch (e) {
        err = e ?? new Error('the case failed');
      }
      if (ctx.signal.aborted) {
        if (err !== undefined) throw err;
        return out as CaseOutcome;
      }
      if (st.reconnectMs > 0 && !st.stop && Date.now() < deadline && unanswered(conns, out, err)) {
        for (const conn of conns) conn.destroy();
        noteWait(st);
        await sleep(RECONNECT_POLL_MS);
        continue;
      }
      inspect(st, c, conns, out, err);
      if (err !== undefined) throw err;
      return out as CaseOutcome;
    }
  };
}

function watched(st: RunState, c: ConformanceCase): ConformanceCase {
  return {
    ...c,
    skipIn: (mode, role) => (st.stop ? 'the run stopped' : c.skipIn?.(mode, role)),
    run: watchedRun(st, c),
  };
}

function modeText(m: Mode): string {
  return `MPA rev ${m.mpaRev}, CRC ${m.crc ? 'on' : 'off'}, Markers ${m.markers ? 'on' : 'off'}`;
}

function modeTag(m: Mode): string {
  return m.mpaRev === 0 ? 'rev0' : `rev${m.mpaRev}${m.crc ? '-crc' : ''}${m.markers ? '-markers' : ''}`;
}

/**
 * --all, client role: one MPA startup in `mode` first. A Reply with R set or a close is the target
 * refusing the mode (the reason); anything else leaves the verdicts to the cases.
 */
async function modeRefused(
  st: RunState,
  target: { host: string; port: number },
  mode: Mode,
  waitMs: number,
  reconnectMs: number,
): Promise<string | undefined> {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), reconnectMs + waitMs * 2);
  let conn: WireConn | undefined;
  try {
    conn = await reach(st, () => WireConn.connect(target.host, target.port, waitMs), ac.signal);
    await KitSession.connect(conn, mode, waitMs);
    st.mpaChecked = true;
    return undefined;
  } catch (e) {
    if (st.stop) throw st.stop;
    const a = conn && mpaAnswer(conn, 'client');
    if (a?.bad !== undefined) throw (st.stop = notMpa(st, a.bad));
    if (e instanceof ConformanceRejectedError || e instanceof ConformancePeerClosedError)
      return `the target refused ${modeText(mode)} at MPA startup: ${e.message}`;
    return undefined;
  } finally {
    clearTimeout(t);
    conn?.destroy();
  }
}

export async function runKit(o: KitOptions): Promise<KitSummary> {
  if ((o.target === undefined) === (o.listen === undefined))
    throw new ConformanceUsageError('give exactly one of --target HOST:PORT (kit is the client) or --listen PORT');
  if (o.all && (o.mpaRev !== undefined || o.crc !== undefined || o.markers !== undefined))
    throw new ConformanceUsageError(
      `--all runs every mode (${ALL_MODES.map(modeTag).join(', ')}): drop --mpa-rev, --crc/--no-crc and --markers`,
    );
  const modes = o.all ? ALL_MODES : [kitMode(o)];
  const app = (o.app ?? 'rping') as App;
  if (app !== 'rping' && app !== 'perf') throw new ConformanceUsageError(`--app must be rping or perf (got ${o.app})`);
  const cases = selectCases(CASES, selectionTokens(o.only), selectionTokens(o.skip));
  const caseTimeoutMs = int('--case-timeout', o.caseTimeout, 15_000, 100, 600_000);
  const waitMs = int('--wait', o.wait, 3000, 50, 120_000);
  const reconnectMs = int('--reconnect', o.reconnect, 0, 0, MAX_RECONNECT_SECONDS) * 1000;
  if (reconnectMs > 0 && o.target === undefined)
    throw new ConformanceUsageError('--reconnect is for --target (the kit connects); clients under test reconnect');
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
  const role: Role = target ? 'client' : 'server';
  const st: RunState = {
    role,
    app,
    peer: target ? `${target.host}:${target.port}` : `:${listener?.port}`,
    reconnectMs,
    total: cases.length * modes.length,
    onNote: o.onNote,
    connected: false,
    ran: 0,
    mpaChecked: false,
    appChecked: false,
    waitNoted: false,
  };
  const liveness = watchedRun(st, { name: 'liveness.rping', run: honestRping });
  try {
    const pcapDir = o.pcap;
    const summaries: RunSummary[] = [];
    for (const mode of modes) {
      if (o.all) o.onNote?.(`mode ${modeText(mode)}`);
      const refused = o.all && target ? await modeRefused(st, target, mode, waitMs, reconnectMs) : undefined;
      if (refused) o.onNote?.(refused);
      const run = refused ? cases.map((c) => ({ ...c, skipIn: () => refused })) : cases.map((c) => watched(st, c));
      const summary = await runCases(run, {
        role,
        mode,
        app,
        ...(target ? { target } : {}),
        ...(listener ? { listener } : {}),
        // A case and its liveness check may each wait out --reconnect for the target to come back.
        caseTimeoutMs: caseTimeoutMs + 2 * reconnectMs,
        waitMs,
        ...(app === 'rping' ? { liveness } : {}),
        ...(pcapDir
          ? {
              capture: (name, conns) => writeCasePcap(pcapDir, o.all ? `${modeTag(mode)}.${name}` : name, conns),
            }
          : {}),
        onResult: (r) => {
          if (st.stop) return;
          if (r.verdict !== 'SKIP') st.ran++;
          o.onResult?.(r);
        },
      });
      if (st.stop) throw st.stop;
      summaries.push(summary);
    }
    const summary = o.all ? combined(summaries) : (summaries[0] as RunSummary);
    if (o.junit) await writeFile(o.junit, junitText(summary));
    if (o.json && o.json !== '-') await writeFile(o.json, jsonText(summary));
    if (o.md && o.md !== '-') await writeFile(o.md, markdownText(summary));
    return summary;
  } finally {
    await listener?.close();
  }
}

/** --all: the modes' summaries one after another; every count (and the time) summed over them. */
function combined(modes: readonly RunSummary[]): KitSummary {
  const first = modes[0] as RunSummary;
  const out: Record<string, unknown> = { ...first, results: modes.flatMap((m) => m.results), modes };
  for (const [k, v] of Object.entries(first))
    if (typeof v === 'number')
      out[k] = modes.reduce((a, m) => a + ((m as unknown as Record<string, number>)[k] ?? 0), 0);
  return out as unknown as KitSummary;
}

/** A report without its last line (the totals). */
function withoutTotals(text: string): string {
  const lines = text.replace(/\n+$/, '').split('\n');
  lines.pop();
  return lines.join('\n').replace(/\n+$/, '');
}

/** The totals line a report writes for `s`. */
function totalsOf(s: RunSummary, report: (s: RunSummary) => string): string {
  return (
    report({ ...s, results: [] })
      .replace(/\n+$/, '')
      .split('\n')
      .pop() ?? ''
  );
}

function allText(s: KitSummary, report: (s: RunSummary) => string): string {
  const modes = s.modes ?? [s];
  return `${modes.map((m) => withoutTotals(report(m))).join('\n\n')}\n\n${modes.length} modes: ${totalsOf(s, report)}\n`;
}

function junitText(s: KitSummary): string {
  if (!s.modes) return junitReport(s);
  const suites = s.modes.map((m) => /^ {2}<testsuite [\s\S]*?^ {2}<\/testsuite>$/m.exec(junitReport(m))?.[0] ?? '');
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="rddp conformance" tests="${s.results.length}" failures="${s.failed}" skipped="${s.skipped}" time="${(s.ms / 1000).toFixed(3)}">`,
    ...suites,
    '</testsuites>',
    '',
  ].join('\n');
}

function jsonText(s: KitSummary): string {
  if (!s.modes) return jsonReport(s);
  const { results: _all, ...rest } = s;
  return `${JSON.stringify(rest, null, 2)}\n`;
}

function markdownText(s: KitSummary): string {
  return s.modes ? allText(s, markdownReport) : markdownReport(s);
}

/** The text the command prints: the table, or JSON/Markdown when asked for on stdout (`-`). */
export function stdoutReport(o: KitOptions, s: KitSummary): string {
  if (o.json === '-') return jsonText(s);
  if (o.md === '-') return markdownText(s);
  return s.modes ? allText(s, (m) => tableReport(m)) : tableReport(s);
}

/** 0 when no case FAILed (WARN, INFO and SKIP included), else 1. */
export function exitStatus(s: RunSummary): number {
  return s.failed > 0 ? 1 : 0;
}
