/**
 * `rddp sctp-experiment` — many queue pairs on one SCTP association (RFC 5043: one DDP Stream per SCTP
 * stream): aggregate and per-stream RDMA Write bandwidth for 1…N streams, and head-of-line blocking seen
 * as the latency of small Sends on stream 0 while the other streams carry bulk Writes.
 */
import type { LlpConnection } from '@rddp/llp';
import type { Command } from 'commander';
import { firstValueFrom } from 'rxjs';
import { summarizeLatency } from '../bench/stats.js';
import { integerIn, integerListIn } from '../flags.js';
import { type PerfResult, perfClient, perfServe } from '../perf/engine.js';
import { type ToolTransport, toolTransport, UsageError } from '../transports.js';

export interface ExperimentRow {
  readonly streams: number;
  readonly aggregateMBps: number;
  readonly perStreamMinMBps: number;
  readonly perStreamMaxMBps: number;
  /** Send ping-pong on stream 0 while the other streams write (idle line: streams = 1). */
  readonly pingP50us: number;
  readonly pingP99us: number;
  readonly verified: boolean;
}

async function pair(tt: ToolTransport, streams: number): Promise<[LlpConnection, LlpConnection]> {
  const l = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, {});
  const accepted = firstValueFrom(l.connections$);
  const c = await tt.transport.connect(l.address, { streams, signal: AbortSignal.timeout(15_000) });
  const s = await accepted;
  await l.close();
  return [c, s];
}

export async function runExperiment(
  counts: readonly number[],
  o: { size: number; iters: number; pings: number; transport?: string },
  onRow: (r: ExperimentRow) => void,
): Promise<ExperimentRow[]> {
  const tt = toolTransport({ transport: o.transport ?? 'sctp' });
  const rows: ExperimentRow[] = [];
  for (const n of counts) {
    const total = n + 1; // stream 0 pings; streams 1..n carry bulk Writes
    const [c, s] = await pair(tt, total);
    const served = Promise.all(s.streams.map((_, i) => perfServe(s, 'ietf', () => {}, i)));
    served.catch(() => {});
    const bulk = Array.from({ length: n }, (_, k) =>
      perfClient(
        c,
        'ietf',
        { test: 'write_bw', sizes: [o.size], iters: o.iters, txDepth: 16, verify: true },
        () => {},
        undefined,
        k + 1,
      ),
    );
    const ping = perfClient(
      c,
      'ietf',
      { test: 'send_lat', sizes: [64], iters: o.pings, txDepth: 1, verify: true },
      () => {},
      undefined,
      0,
    );
    const [pingRes, ...bulkRes] = (await Promise.all([ping, ...bulk])).map((r) => r[0] as PerfResult);
    await served;
    const bws = bulkRes.map((r) => (r.kind === 'bw' ? r.row.avgMBps : 0));
    const lat = pingRes?.kind === 'lat' ? pingRes.row.lat : summarizeLatency([]);
    const row: ExperimentRow = {
      streams: n,
      aggregateMBps: bws.reduce((a, b) => a + b, 0),
      perStreamMinMBps: Math.min(...bws),
      perStreamMaxMBps: Math.max(...bws),
      pingP50us: lat.median,
      pingP99us: lat.p99,
      verified: [pingRes, ...bulkRes].every((r) => r?.verified),
    };
    rows.push(row);
    onRow(row);
  }
  return rows;
}

export function experimentLine(r: ExperimentRow): string {
  const f = (v: number, w = 10) => v.toFixed(2).padStart(w);
  return ` ${String(r.streams).padStart(7)} ${f(r.aggregateMBps, 14)} ${f(r.perStreamMinMBps)} ${f(r.perStreamMaxMBps)} ${f(r.pingP50us, 12)} ${f(r.pingP99us, 12)}  ${r.verified ? 'yes' : 'NO'}`;
}

export const EXPERIMENT_HEADER = ' #bulk   aggregate[MB/s]  min[MB/s]  max[MB/s]  ping p50[us]  ping p99[us]  verified';

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
    .addHelpText('after', '\nExample:\n  rddp sctp-experiment --streams 1,4,16 --json')
    .action(async (raw: { streams: string; size: string; iters: string; pings: string; json?: boolean }) => {
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
      );
      if (rows.some((r) => !r.verified)) process.exitCode = 1;
    });
}
