/**
 * `rddp bench`'s tables and flag ranges: what its help text names, in a module that loads nothing else
 * (`rddp bench --help` loads no protocol code, issue 37).
 */

/** The tables, in report order: the two-process headline, the in-process DDP figures, cost growth, SCTP. */
export const BENCH_TABLES = ['headline', 'ddp', 'cost', 'sctp'] as const;
export type BenchTable = (typeof BENCH_TABLES)[number];

/** `--scale` range: a millionth of a run to ten runs. */
export const BENCH_MIN_SCALE = 1e-6;
export const BENCH_MAX_SCALE = 10;

/** `--rounds` range: at least one round (a median of nothing is no figure). */
export const BENCH_MAX_ROUNDS = 1000;
export const BENCH_MAX_WARMUP_S = 3600;
