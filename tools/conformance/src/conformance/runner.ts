/**
 * Runs the selected cases one after another against one target: each case bounded in time, its
 * connections torn down afterwards, and after every error case a liveness check (can an honest peer
 * still be served?).
 */
import type { WireConn, WireListener } from './conn.js';
import { WireConn as Conn } from './conn.js';
import { ConformanceUsageError } from './errors.js';
import type {
  App,
  CaseContext,
  CaseOutcome,
  CaseResult,
  ConformanceCase,
  Mode,
  Role,
  RunSummary,
  Verdict,
} from './types.js';
import { grade } from './types.js';

export interface RunOptions {
  readonly role: Role;
  readonly mode: Mode;
  readonly app: App;
  /** Client role: the target. */
  readonly target?: { host: string; port: number };
  /** Server role: where clients under test connect. */
  readonly listener?: WireListener;
  /** Milliseconds one case may take in all. */
  readonly caseTimeoutMs: number;
  /** Milliseconds one wait on the target may take. */
  readonly waitMs: number;
  /** The honest exchange run after every error case (client role), and as the `liveness` case. */
  readonly liveness?: (ctx: CaseContext) => Promise<CaseOutcome>;
  /** Writes a case's capture; returns the file written. */
  readonly capture?: (caseName: string, conns: readonly WireConn[]) => Promise<string | undefined>;
  /** Called after each case (progress on the terminal). */
  readonly onResult?: (r: CaseResult) => void;
}

/** Whether `token` (from --only/--skip) names `c`: its name, a name prefix up to a dot, or part of its clause. */
export function caseMatches(c: ConformanceCase, token: string): boolean {
  const t = token.trim().toLowerCase();
  if (t === '') return false;
  const name = c.name.toLowerCase();
  return name === t || name.startsWith(t.endsWith('.') ? t : `${t}.`) || c.clause.toLowerCase().includes(t);
}

/** Splits an --only/--skip list: commas separate entries (clauses hold spaces, so not those). */
export function selectionTokens(list: string | undefined): string[] {
  return list === undefined
    ? []
    : list
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
}

/** The cases --only/--skip select; a token that names no case is a usage error. */
export function selectCases(all: readonly ConformanceCase[], only: string[], skipList: string[]): ConformanceCase[] {
  for (const t of [...only, ...skipList])
    if (!all.some((c) => caseMatches(c, t)))
      throw new ConformanceUsageError(`no case is named or checks a clause matching '${t}' (see --list)`);
  return all.filter(
    (c) => (only.length === 0 || only.some((t) => caseMatches(c, t))) && !skipList.some((t) => caseMatches(c, t)),
  );
}

/** Runs `fn` with a deadline: past `ms` the outcome is a FAIL naming the timeout. */
function bounded(fn: (signal: AbortSignal) => Promise<CaseOutcome>, ms: number): Promise<CaseOutcome> {
  const ac = new AbortController();
  return new Promise<CaseOutcome>((resolve) => {
    const t = setTimeout(() => {
      ac.abort();
      resolve({ verdict: 'FAIL', evidence: `the case did not finish within ${ms} ms` });
    }, ms);
    Promise.resolve()
      .then(() => fn(ac.signal))
      .then(
        (o) => {
          clearTimeout(t);
          resolve(o);
        },
        (e: Error & { code?: string }) => {
          clearTimeout(t);
          resolve({ verdict: 'FAIL', evidence: `${e.message ?? String(e)}${e.code ? ` (${e.code})` : ''}` });
        },
      );
  });
}

export async function runCases(cases: readonly ConformanceCase[], o: RunOptions): Promise<RunSummary> {
  const t0 = performance.now();
  const results: CaseResult[] = [];
  for (const c of cases) {
    const started = performance.now();
    const conns: WireConn[] = [];
    const ctxFor = (signal: AbortSignal): CaseContext => {
      const connect = async () => {
        const target = o.target;
        if (!target) throw new ConformanceUsageError('this case needs --target');
        const conn = await Conn.connect(target.host, target.port, o.waitMs);
        conns.push(conn);
        return conn;
      };
      const accept = async () => {
        const l = o.listener;
        if (!l) throw new ConformanceUsageError('this case needs --listen');
        const conn = await l.accept(o.waitMs * 4);
        conns.push(conn);
        return conn;
      };
      return {
        role: o.role,
        mode: o.mode,
        app: o.app,
        waitMs: o.waitMs,
        connect,
        accept,
        open: o.role === 'client' ? connect : accept,
        signal,
      };
    };
    let outcome: CaseOutcome;
    const req = c.requirement ?? { strength: 'MUST' as const, quote: c.title, clause: c.clause };
    const why = !c.roles.includes(o.role)
      ? `checks the ${c.roles.join('/')} role of the kit only (${o.role === 'client' ? '--listen' : '--target'})`
      : !(c.apps ?? ['rping']).includes(o.app)
        ? `needs a ${(c.apps ?? ['rping']).join(' or ')} target (--app)`
        : c.skipIn?.(o.mode, o.role);
    if (why !== undefined) outcome = { verdict: 'SKIP', evidence: why };
    else {
      // Graded by the requirement's strength first: a SHOULD not followed is a WARN, a MAY an INFO.
      outcome = grade(await bounded((signal) => c.run(ctxFor(signal)), o.caseTimeoutMs), req.strength);
      // Liveness (client role): after an error case the target must still serve an honest client.
      const answered = outcome.verdict === 'PASS' || outcome.verdict === 'WARN' || outcome.verdict === 'INFO';
      if (c.error && answered && o.role === 'client' && o.liveness) {
        const live = o.liveness;
        const after = await bounded((signal) => live(ctxFor(signal)), o.caseTimeoutMs);
        if (after.verdict !== 'PASS')
          outcome = {
            verdict: 'FAIL',
            evidence: `${outcome.evidence}; then no honest client served: ${after.evidence}`,
          };
        else outcome = { verdict: outcome.verdict, evidence: `${outcome.evidence}; honest client served after` };
      }
    }
    for (const conn of conns) conn.destroy();
    let pcap: string | undefined;
    if (o.capture && conns.length > 0) pcap = await o.capture(c.name, conns);
    const r: CaseResult = {
      name: c.name,
      clause: c.clause,
      title: c.title,
      verdict: outcome.verdict,
      strength: req.strength,
      quote: `${req.clause}: "${req.quote}"`,
      evidence: outcome.evidence,
      ms: Math.round(performance.now() - started),
      ...(pcap ? { pcap } : {}),
    };
    results.push(r);
    o.onResult?.(r);
  }
  const count = (v: Verdict) => results.filter((r) => r.verdict === v).length;
  return {
    role: o.role,
    app: o.app,
    mode: o.mode,
    peer: o.role === 'client' ? `${o.target?.host}:${o.target?.port}` : `:${o.listener?.port}`,
    results,
    passed: count('PASS'),
    failed: count('FAIL'),
    warned: count('WARN'),
    informational: count('INFO'),
    skipped: count('SKIP'),
    ms: Math.round(performance.now() - t0),
  };
}
