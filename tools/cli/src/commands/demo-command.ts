/**
 * `rddp demo`'s command line: flags and help only (issue 37: `rddp demo --help` loads no protocol code);
 * the run is ./demo.ts, loaded when the action runs.
 */
import type { Command } from 'commander';
import { integerIn } from '../flags.js';
import { PERF_DEFAULT_MAX_SIZE } from '../perf/limits.js';

/** `--pings` range. */
export const DEMO_MAX_PINGS = 1_000_000;
/** `--max-size`'s least value. */
export const DEMO_MIN_SIZE = 64;

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('the main demo: rping with validation and an RDMA Write bandwidth sweep over MPA/TCP on 127.0.0.1')
    .option('-C, --pings <n>', `rping count (1..${DEMO_MAX_PINGS})`, integerIn(1, DEMO_MAX_PINGS), '200')
    .option(
      '--max-size <octets>',
      `largest write_bw size (${DEMO_MIN_SIZE}..${PERF_DEFAULT_MAX_SIZE})`,
      integerIn(DEMO_MIN_SIZE, PERF_DEFAULT_MAX_SIZE),
      String(4 << 20),
    )
    .option('--quick', 'fewer iterations')
    .addHelpText('after', '\nExample:\n  $ tools/rddp demo\n  $ tools/rddp demo --quick')
    .action(async (raw: { pings: string; maxSize: string; quick?: boolean }) => {
      const { runDemo } = await import('./demo.js');
      const ok = await runDemo(
        { pings: Number(raw.pings), maxSize: Number(raw.maxSize), ...(raw.quick ? { quick: true } : {}) },
        (s) => console.log(s),
      );
      if (!ok) process.exitCode = 1;
    });
}
