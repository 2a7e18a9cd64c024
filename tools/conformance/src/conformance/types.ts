/**
 * The conformance kit's vocabulary: a case checks one clause of RFC 5040/5041/5044/6581/7306 from the
 * wire, playing one end of a connection against an implementation under test.
 */
import type { WireConn } from './conn.js';

export type Verdict = 'PASS' | 'FAIL' | 'SKIP';

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
  readonly failed: number;
  readonly skipped: number;
  readonly ms: number;
}

export const pass = (evidence: string): CaseOutcome => ({ verdict: 'PASS', evidence });
export const fail = (evidence: string): CaseOutcome => ({ verdict: 'FAIL', evidence });
export const skip = (evidence: string): CaseOutcome => ({ verdict: 'SKIP', evidence });
