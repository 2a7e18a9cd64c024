/**
 * `rddp sctp-experiment` — many queue pairs on one SCTP association (RFC 5043: one DDP Stream per SCTP
 * stream): aggregate and per-stream RDMA Write bandwidth for 1…N streams, and head-of-line blocking seen
 * as the latency of small Sends on stream 0 while the other streams carry bulk Writes.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlpConnection } from '@rddp/llp';
import { type RdmapStreamBuilder, rdmapStreamOn } from '@rddp/stack';
import { firstValueFrom } from 'rxjs';
import { summarizeLatency } from '../bench/stats.js';
import { sctpBandwidthChart, sctpLatencyChart } from '../charts/tool-charts.js';
import { type PerfResult, perfClient, perfServe } from '../perf/engine.js';
import { octets, type ProgressSink, startProgress, tapCompletions } from '../progress.js';
import { type ToolTransport, toolTransport } from '../transports.js';

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

/**
 * One row per bulk stream count. With `progress`, the octets of the bulk RDMA Writes completed drive a
 * progress bar there (the command passes stderr).
 */
export async function runExperiment(
  counts: readonly number[],
  o: { size: number; iters: number; pings: number; transport?: string },
  onRow: (r: ExperimentRow) => void,
  progress?: ProgressSink,
): Promise<ExperimentRow[]> {
  const tt = toolTransport({ transport: o.transport ?? 'sctp' });
  const rows: ExperimentRow[] = [];
  const bar = progress
    ? startProgress({
        label: 'sctp-experiment',
        total: counts.reduce((a, n) => a + n * o.iters * o.size, 0),
        format: octets,
        ...progress,
      })
    : undefined;
  const viaTap = bar ? { rdmapFactory: tapCompletions(rdmapStreamOn, 'write', (n) => bar.add(n)) } : {};
  try {
    for (const n of counts) {
      const row = await experimentRow(tt, n, o, viaTap);
      rows.push(row);
      if (bar) bar.interrupt(() => onRow(row));
      else onRow(row);
    }
  } finally {
    bar?.stop();
  }
  return rows;
}

/** One association with n bulk streams and stream 0 pinging. */
async function experimentRow(
  tt: ToolTransport,
  n: number,
  o: { size: number; iters: number; pings: number },
  via: { rdmapFactory?: RdmapStreamBuilder },
): Promise<ExperimentRow> {
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
      via,
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
  return {
    streams: n,
    aggregateMBps: bws.reduce((a, b) => a + b, 0),
    perStreamMinMBps: Math.min(...bws),
    perStreamMaxMBps: Math.max(...bws),
    pingP50us: lat.median,
    pingP99us: lat.p99,
    verified: [pingRes, ...bulkRes].every((r) => r?.verified),
  };
}

/** `--out DIR`: the table (`sctp-experiment.txt`) and its charts (bandwidth and latency SVGs). */
export async function writeExperimentOut(dir: string, rows: readonly ExperimentRow[]): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files = ['sctp-experiment.txt', 'sctp-bandwidth.svg', 'sctp-latency.svg'].map((f) => path.join(dir, f));
  await writeFile(files[0] as string, `${[EXPERIMENT_HEADER, ...rows.map(experimentLine)].join('\n')}\n`);
  await writeFile(files[1] as string, sctpBandwidthChart(rows));
  await writeFile(files[2] as string, sctpLatencyChart(rows));
  return files;
}

export function experimentLine(r: ExperimentRow): string {
  const f = (v: number, w = 10) => v.toFixed(2).padStart(w);
  return ` ${String(r.streams).padStart(7)} ${f(r.aggregateMBps, 14)} ${f(r.perStreamMinMBps)} ${f(r.perStreamMaxMBps)} ${f(r.pingP50us, 12)} ${f(r.pingP99us, 12)}  ${r.verified ? 'yes' : 'NO'}`;
}

export const EXPERIMENT_HEADER = ' #bulk   aggregate[MB/s]  min[MB/s]  max[MB/s]  ping p50[us]  ping p99[us]  verified';

export { registerSctpExperiment } from './sctp-experiment-command.js';
