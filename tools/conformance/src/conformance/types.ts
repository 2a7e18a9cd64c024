/**
 * The conformance kit's vocabulary: a case checks one clause of RFC 5040/5041/5044/6581/7306 from the
 * wire, playing one end of a connection against an implementation under test.
 */
import type { WireConn } from './conn.js';

/**
 * A case's grade. FAIL: a MUST broken; WARN: a SHOULD not followed; INFO: a choice the RFC leaves open,
 * reported; SKIP: the case does not apply (the reason says why). Only FAILs make the run fail.
 */
export type Verdict = 'PASS' | 'FAIL' | 'WARN' | 'INFO' | 'SKIP';

/** The RFC 2119 strength of the requirement a case checks. */
export type Strength = 'MUST' | 'SHOULD' | 'MAY';

/** The words a case checks, quoted from the RFC, with their strength and section. */
export interface Requirement {
  readonly strength: Strength;
  /** The RFC's own words (abridged with … where long). */
  readonly quote: string;
  /** Where they stand, e.g. `RFC 5044 §7.1.2`. */
  readonly clause: string;
}

/** The kit's role: `client` against a server under test (--target), `server` for a client under test (--listen). */
export type Role = 'client' | 'server';

/** The application protocol the target runs. */
export type App = 'rping' | 'perf';

/**
 * What the kit asks for in its MPA Request or Reply (RFC 5044 §7.1, RFC 6581). Rev 0 is the RDMA
 * Consortium profile (RFC 5044 Appendix C): Markers and CRCs always, DDP and RDMAP version 0.
 */
export interface Mode {
  readonly mpaRev: 0 | 1 | 2;
  readonly crc: boolean;
  readonly markers: boolean;
}

export interface CaseOutcome {
  readonly verdict: Verdict;
  /** One line: what was sent and what came back. */
  readonly evidence: string;
}

export interface CaseContext {
  readonly role: Role;
  readonly mode: Mode;
  readonly app: App;
  /** Milliseconds a single wait on the target may take (a silent target is a FAIL, never a hang). */
  readonly waitMs: number;
  /** Client role: a new recorded TCP connection to the target. */
  connect(): Promise<WireConn>;
  /** Server role: the next client under test's recorded TCP connection. */
  accept(): Promise<WireConn>;
  /** The role's own way to a fresh connection: connect() or accept(). */
  open(): Promise<WireConn>;
  /** Aborted when the case's time is up. */
  readonly signal: AbortSignal;
}

export interface ConformanceCase {
  /** Stable name, e.g. `mpa.rev-bad-key`. */
  readonly name: string;
  /** The clause it checks, e.g. `RFC 5044 §7.1.2`. */
  readonly clause: string;
  /** One sentence: what the target must do. */
  readonly title: string;
  /**
   * The RFC's words the case checks and their strength: a broken MUST is a FAIL, a SHOULD not followed
   * a WARN, a MAY an INFO (the runner grades a case's FAIL by it). Default: MUST, quoting the title.
   */
  readonly requirement?: Requirement;
  /** Kit roles the case runs in. */
  readonly roles: readonly Role[];
  /** Application protocols the case needs (default: rping). */
  readonly apps?: readonly App[];
  /** A reason to skip in this mode, or undefined when it applies. */
  readonly skipIn?: (mode: Mode, role: Role) => string | undefined;
  /** An error case: afterwards the runner checks that an honest peer is still served (client role). */
  readonly error?: boolean;
  run(ctx: CaseContext): Promise<CaseOutcome>;
}

export interface CaseResult {
  readonly name: string;
  readonly clause: string;
  readonly title: string;
  readonly verdict: Verdict;
  /** The strength of the requirement the case checks (what a FAIL, WARN or INFO rests on). */
  readonly strength: Strength;
  /** The RFC's words the case checks. */
  readonly quote: string;
  readonly evidence: string;
  readonly ms: number;
  /** The capture of this case's connections (--pcap). */
  readonly pcap?: string;
}

export interface RunSummary {
  readonly role: Role;
  readonly app: App;
  readonly mode: Mode;
  /** `HOST:PORT` (client role) or `:PORT` (server role). */
  readonly peer: string;
  readonly results: readonly CaseResult[];
  readonly passed: number;
  /** FAILs only (MUSTs broken): the exit status rests on this count alone. */
  readonly failed: number;
  /** WARNs: SHOULDs not followed. */
  readonly warned: number;
  /** INFOs: choices the RFCs leave open, reported. */
  readonly informational: number;
  readonly skipped: number;
  readonly ms: number;
}

export const pass = (evidence: string): CaseOutcome => ({ verdict: 'PASS', evidence });
export const fail = (evidence: string): CaseOutcome => ({ verdict: 'FAIL', evidence });
export const skip = (evidence: string): CaseOutcome => ({ verdict: 'SKIP', evidence });
export const warn = (evidence: string): CaseOutcome => ({ verdict: 'WARN', evidence });
export const info = (evidence: string): CaseOutcome => ({ verdict: 'INFO', evidence });

/** Shorthands for a case's requirement. */
export const must = (clause: string, quote: string): Requirement => ({ strength: 'MUST', quote, clause });
export const should = (clause: string, quote: string): Requirement => ({ strength: 'SHOULD', quote, clause });
export const may = (clause: string, quote: string): Requirement => ({ strength: 'MAY', quote, clause });

/**
 * Grades an outcome by the requirement's strength: a FAIL against a SHOULD is a WARN, against a MAY an
 * INFO; every other verdict stands.
 */
export function grade(o: CaseOutcome, strength: Strength): CaseOutcome {
  if (o.verdict !== 'FAIL' || strength === 'MUST') return o;
  return { verdict: strength === 'SHOULD' ? 'WARN' : 'INFO', evidence: o.evidence };
}
