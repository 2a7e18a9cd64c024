/**
 * `rddp bench`'s command line: flags and help only, so `rddp bench --help` loads no protocol code
 * (issue 37); the suite itself is ./bench.ts, loaded when the action runs.
 */
import type { Command } from 'commander';
import {
  BENCH_MAX_ROUNDS,
  BENCH_MAX_SCALE,
  BENCH_MAX_WARMUP_S,
  BENCH_MIN_SCALE,
  BENCH_TABLES,
} from '../bench/limits.js';
import { integerIn, numberIn } from '../flags.js';
import type { BenchOptions } from './bench.js';

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description(
      'benchmark suite: each figure against its baseline measured alternately in the same run (median of rounds)',
    )
    .option('--json', 'one JSON object per figure: {"name","unit","value","baseline","ratio"}')
    .option('--out <dir>', 'also write bench.md, bench.jsonl and bandwidth.svg there')
    .option(
      '--rounds <n>',
      `alternating rounds per figure (medians of both sides; 1..${BENCH_MAX_ROUNDS})`,
      integerIn(1, BENCH_MAX_ROUNDS),
      '9',
    )
    .option(
      '--warmup <seconds>',
      'unrecorded warm-up per subject and baseline before its rounds',
      numberIn(0, BENCH_MAX_WARMUP_S),
      '1',
    )
    .option(
      '--quick',
      'an eighth of the data, for a fast look: figures not comparable with the targets (no met/MISSED)',
    )
    .option('--tables <list>', `tables to run, comma-separated: ${BENCH_TABLES.join(', ')} (default all)`)
    .option(
      '--scale <fraction>',
      `data volume and round trips relative to a full run, ${BENCH_MIN_SCALE}..${BENCH_MAX_SCALE} (with --quick: of its eighth)`,
    )
    .addHelpText('after', '\nExamples:\n  rddp bench --json\n  rddp bench --out bench-results --rounds 3')
    .action(async (o: BenchOptions) => {
      const [{ runBench }, { toMarkdown }] = await Promise.all([import('./bench.js'), import('../bench/report.js')]);
      const figures = await runBench(o, (s) => console.log(s));
      if (!o.json) console.log(`\n${toMarkdown(figures, { quick: o.quick })}`);
    });
}
