/**
 * What a client can make `rddp rping -s` hold, and for how long (docs/SECURITY.md, Tools): every step a
 * client must take is bounded in time (--step-timeout), and its ping buffer is reserved, under its source
 * (`sourceKey`), from the -P server's --max-memory and --max-memory-per-source and from the process's one
 * memory budget (`processMemoryBudget()`), before it is allocated.
 */
import {
  DEFAULT_IPV6_SOURCE_PREFIX,
  type LlpAddress,
  type MemoryBudget,
  type MemoryReservation,
  processMemoryBudget,
  sourceKey,
} from '@rddp/llp';
import { withinMs } from '../peer.js';
import { RPING_DEFAULT_STEP_TIMEOUT_MS } from './defaults.js';
import { RpingServerBusyError, RpingStepTimeoutError } from './errors.js';

export { RPING_DEFAULT_STEP_TIMEOUT_MS };

/** The source a client counts under: its IPv4 address, or its IPv6 address's `ipv6Prefix` (`sourceKey`). */
export function clientSource(remote: LlpAddress, ipv6Prefix: number = DEFAULT_IPV6_SOURCE_PREFIX): string {
  return remote.host === undefined ? 'an unaddressed peer' : sourceKey(remote.host, ipv6Prefix);
}

/**
 * `p`, or an `RpingStepTimeoutError` naming `step` if it has not settled within `ms`. A promise that loses
 * the race is left to settle on its own, its rejection handled (the Terminate that follows flushes it).
 */
export function withinStep<T>(p: Promise<T>, ms: number, step: string): Promise<T> {
  return withinMs(p, ms, () => new RpingStepTimeoutError(step, ms));
}

/** -P: the budget all clients' ping buffers share (--max-memory), and what one source may hold of it. */
export interface RpingSharedBudget {
  /** --max-memory; its own share per source is 1 (the per-source bound is `perSource`, checked first). */
  readonly budget: MemoryBudget;
  /** --max-memory-per-source, in octets. */
  readonly perSource: number;
}

/**
 * One client's ping buffer reservation: grown before the buffer is (never shrunk), released when the
 * client goes. A growth that would not fit throws `RpingServerBusyError` naming the bound and the source.
 */
export class RpingBufferReservation {
  private held = 0;
  private server: MemoryReservation | undefined;
  private proc: MemoryReservation | undefined;

  constructor(
    readonly source: string,
    private readonly shared?: RpingSharedBudget,
    private readonly process: MemoryBudget = processMemoryBudget(),
  ) {}

  /** Octets reserved now. */
  get octets(): number {
    return this.held;
  }

  /** Makes the reservation at least `size` octets, or throws `RpingServerBusyError` (nothing changed). */
  grow(size: number): void {
    const more = size - this.held;
    if (more <= 0) return;
    const source = this.source;
    const shared = this.shared;
    if (shared) {
      const { budget, perSource } = shared;
      if (budget.used + more > budget.limit) throw new RpingServerBusyError(size, budget.used, budget.limit);
      const mine = budget.usedBy(source);
      if (mine + more > perSource)
        throw new RpingServerBusyError(size, mine, perSource, '--max-memory-per-source', source);
      this.server ??= budget.reserve(0, source);
      if (!this.server?.resize(size)) throw new RpingServerBusyError(size, budget.used, budget.limit);
    }
    const p = this.process;
    this.proc ??= p.reserve(0, source);
    if (!this.proc?.resize(size)) {
      this.server?.resize(this.held); // shrinking always succeeds
      if (p.used + more > p.limit)
        throw new RpingServerBusyError(size, p.used, p.limit, 'the process memory budget (RDDP_MEMORY_BUDGET)');
      throw new RpingServerBusyError(
        size,
        p.usedBy(source),
        p.sourceLimit,
        "the process memory budget's share per source",
        source,
      );
    }
    this.held = size;
  }

  /** Gives everything back (idempotent). */
  release(): void {
    this.server?.release();
    this.proc?.release();
    this.held = 0;
  }
}
