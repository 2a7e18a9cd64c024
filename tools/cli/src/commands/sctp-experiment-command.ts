/**
 * `rddp sctp-experiment`'s command line: flags and help only, so `rddp sctp-experiment --help` loads no
 * protocol code (issue 37); the run itself is ./sctp-experiment.ts, loaded when the action runs.
 */
import type { Command } from 'commander';
import { integerIn, integerListIn } from '../flags.js';

export function registerSctpExperiment(program: Command): void {
  program
    .command('sctp-experiment')
    .description(
      'multi-stream SCTP: aggregate and per-stream RDMA Write bandwidth, and Send latency on a separate stream under that load',
    )
    .option('--streams <list>', 'bulk stream counts to try (comma-separated)', integerListIn(1, 1000), '1,2,4,8')
    .option('-s, --size <octets>', 'RDMA Write size on the bulk streams', integerIn(1, 16 << 20), '16384')
    .option('-n, --iters <n>', 'Writes per bulk stream', integerIn(1, 1e9), '200')
    .option('--pings <n>', '64-octet Send ping-pongs on stream 0 during the run', integerIn(1, 1e9), '100')
    .option('--json', 'one JSON object per line')
    .option('--out <dir>', 'also write the table and its charts there (sctp-experiment.txt, sctp-*.svg)')
    .addHelpText('after', '\nExample:\n  rddp sctp-experiment --streams 1,4,16 --json')
    .action(
      async (raw: { streams: string; size: string; iters: string; pings: string; json?: boolean; out?: string }) => {
        const [{ EXPERIMENT_HEADER, experimentLine, runExperiment, writeExperimentOut }, { UsageError }] =
          await Promise.all([import('./sctp-experiment.js'), import('../transports.js')]);
        const counts = raw.streams.split(',').map((x) => Number(x));
        if (counts.some((x) => !Number.isInteger(x) || x < 1 || x > 1000))
          throw new UsageError(`--streams must list counts in 1..1000 (got ${raw.streams})`);
        const nums = [raw.size, raw.iters, raw.pings].map(Number);
        if (nums.some((x) => !Number.isInteger(x) || x < 1))
          throw new UsageError('-s, -n and --pings must be positive integers');
        if (!raw.json) {
          console.log('SCTP (RFC 5043, UDP encapsulation): one association, stream 0 pings while N streams write');
          console.log(EXPERIMENT_HEADER);
        }
        const rows = await runExperiment(
          counts,
          { size: nums[0] as number, iters: nums[1] as number, pings: nums[2] as number },
          (r) => console.log(raw.json ? JSON.stringify(r) : experimentLine(r)),
          {},
        );
        if (raw.out) await writeExperimentOut(raw.out, rows);
        if (rows.some((r) => !r.verified)) process.exitCode = 1;
      },
    );
}
