/**
 * One memory budget per process, and one share of it per source (docs/SECURITY.md "Resource limits").
 *
 * Every transport and tool that holds octets because a peer sent or asked for them (receive arenas,
 * reassembly, send queues a peer can pin, capture buffers, rping/perf buffers) reserves them here first.
 * A reservation that would exceed the process's budget, or the share one source may hold, is refused:
 * the caller then answers as its RFC says (reset, Terminate, ABORT) instead of letting the process grow
 * until the OOM killer ends it. The budget is a counter, not an allocator: it bounds what rddp promises
 * to hold, so a limit set below the machine's memory keeps the process alive under any mix of peers.
 *
 * All copies of this package in one process share one budget (a `Symbol.for` slot on `globalThis`).
 */

/** Default process budget: 1 GiB, or `RDDP_MEMORY_BUDGET` (octets, or with a `k`/`m`/`g` suffix). */
export const DEFAULT_MEMORY_BUDGET = 1024 * 1024 * 1024;
/** Default share of the budget one source may hold: a quarter. */
export const DEFAULT_SOURCE_SHARE = 0.25;

/** Parses `512m`, `1g`, `65536`, `64k` (binary multiples) into octets; `undefined` if not a size. */
export function parseOctets(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  if (!m) return undefined;
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[(m[2] ?? '').toLowerCase()] ?? 1;
  const n = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** What one holder has reserved; `release()` gives it back (idempotent), `resize()` moves it. */
export interface MemoryReservation {
  readonly octets: number;
  readonly source: string;
  /** Grows or shrinks to `octets`; returns false (and keeps the old size) when growing would not fit. */
  resize(octets: number): boolean;
  release(): void;
}

export interface MemoryBudgetOptions {
  /** Octets the process may hold for peers. */
  readonly limit?: number;
  /** Fraction of `limit` one source may hold (0 < share ≤ 1). */
  readonly sourceShare?: number;
}

/** A budget: a limit for the process and a share per source (see `sourceKey`). */
export class MemoryBudget {
  private limitOctets: number;
  private share: number;
  private usedOctets = 0;
  private peakOctets = 0;
  private refusedCount = 0;
  private readonly bySource = new Map<string, number>();

  constructor(options: MemoryBudgetOptions = {}) {
    this.limitOctets = checkLimit(options.limit ?? DEFAULT_MEMORY_BUDGET);
    this.share = checkShare(options.sourceShare ?? DEFAULT_SOURCE_SHARE);
  }

  /** The process's limit, in octets. */
  get limit(): number {
    return this.limitOctets;
  }
  /** Octets one source may hold. */
  get sourceLimit(): number {
    return Math.floor(this.limitOctets * this.share);
  }
  get used(): number {
    return this.usedOctets;
  }
  get peak(): number {
    return this.peakOctets;
  }
  /** Reservations refused so far. */
  get refused(): number {
    return this.refusedCount;
  }
  /** Octets `source` holds now. */
  usedBy(source: string): number {
    return this.bySource.get(source) ?? 0;
  }
  /** Sources holding octets now. */
  get sources(): number {
    return this.bySource.size;
  }

  /** Changes the limit and share; what is held stays held (new reservations see the new limit). */
  configure(options: MemoryBudgetOptions): void {
    if (options.limit !== undefined) this.limitOctets = checkLimit(options.limit);
    if (options.sourceShare !== undefined) this.share = checkShare(options.sourceShare);
  }

  /** Whether `octets` more would fit for `source` now. */
  fits(octets: number, source: string): boolean {
    return (
      this.usedOctets + octets <= this.limitOctets && (this.bySource.get(source) ?? 0) + octets <= this.sourceLimit
    );
  }

  /**
   * Reserves `octets` for `source`, or returns `undefined` (counted in `refused`) when it would not fit.
   * `{ share: false }` checks the process limit only (still counted under `source`): for a holder whose
   * own bounds already limit one client (perf's `--max-memory`).
   */
  reserve(octets: number, source: string, options: { share?: boolean } = {}): MemoryReservation | undefined {
    if (!Number.isSafeInteger(octets) || octets < 0) throw new RangeError(`reserve: ${octets} is not an octet count`);
    const share = options.share ?? true;
    if (!this.take(octets, source, share)) return undefined;
    const budget = this;
    let held = octets;
    let released = false;
    return {
      source,
      get octets() {
        return held;
      },
      resize(next: number): boolean {
        if (released || !Number.isSafeInteger(next) || next < 0) return false;
        if (next > held) {
          if (!budget.take(next - held, source, share)) return false;
        } else budget.give(held - next, source);
        held = next;
        return true;
      },
      release(): void {
        if (released) return;
        released = true;
        budget.give(held, source);
        held = 0;
      },
    };
  }

  private take(octets: number, source: string, share: boolean): boolean {
    if (octets === 0) return true;
    if (share ? !this.fits(octets, source) : this.usedOctets + octets > this.limitOctets) {
      this.refusedCount++;
      return false;
    }
    this.usedOctets += octets;
    if (this.usedOctets > this.peakOctets) this.peakOctets = this.usedOctets;
    this.bySource.set(source, (this.bySource.get(source) ?? 0) + octets);
    return true;
  }

  private give(octets: number, source: string): void {
    if (octets === 0) return;
    this.usedOctets -= octets;
    const left = (this.bySource.get(source) ?? 0) - octets;
    if (left > 0) this.bySource.set(source, left);
    else this.bySource.delete(source);
  }
}

function checkLimit(n: number): number {
  if (!Number.isSafeInteger(n) || n <= 0) throw new RangeError(`memory budget: ${n} is not a positive octet count`);
  return n;
}
function checkShare(s: number): number {
  if (!(s > 0 && s <= 1)) throw new RangeError(`memory budget: source share ${s} is not in (0, 1]`);
  return s;
}

const SLOT = Symbol.for('rddp.processMemoryBudget');

function initialLimit(): number {
  const env = typeof process !== 'undefined' ? process.env.RDDP_MEMORY_BUDGET : undefined;
  return (env !== undefined ? parseOctets(env) : undefined) ?? DEFAULT_MEMORY_BUDGET;
}

/** The process's budget, shared by every transport and tool (and by every copy of this package). */
export function processMemoryBudget(): MemoryBudget {
  const g = globalThis as unknown as Record<symbol, MemoryBudget | undefined>;
  let b = g[SLOT];
  if (b === undefined) {
    b = new MemoryBudget({ limit: initialLimit() });
    g[SLOT] = b;
  }
  return b;
}
