/** The tools' charts, each written beside its table by `--out DIR`: perf sweeps, soak's RSS, sctp-experiment. */
import type { ExperimentRow } from '../commands/sctp-experiment.js';
import type { SoakSample } from '../commands/soak.js';
import type { PerfResult } from '../perf/engine.js';
import { type BwUnit, inUnit } from '../perf/format.js';
import { humanSize, lineChartSvg } from './line-chart.js';

/**
 * A perf run's rows against message size: bandwidth (average, peak) or latency (typical, p99). The
 * title is `title` when the caller gives one, else `rddp perf <test> over <transport>`: the caller knows
 * how the run was made (two processes or one, which LLP), so it should say. The average and the typical
 * latency are dashed and drawn on top: on a steady run they equal the peak and the p99.
 */
export function perfChart(
  test: string,
  transport: string,
  results: readonly PerfResult[],
  title?: string,
  unit: BwUnit = 'MB',
): string {
  const bw = results.filter((r) => r.kind === 'bw').map((r) => r.row);
  const lat = results.filter((r) => r.kind === 'lat').map((r) => r.row);
  title ??= `rddp perf ${test} over ${transport}`;
  if (bw.length >= lat.length)
    return lineChartSvg({
      title,
      xLabel: 'message size (octets)',
      // --report_gbits: the table's unit, as perftest counts it.
      yLabel: unit === 'Gb' ? 'Gb/sec (10^9 bits per second)' : 'MB/sec (2^20 octets per second)',
      xScale: 'log2',
      xFormat: humanSize,
      series: [
        { label: 'BW average', points: bw.map((r) => ({ x: r.bytes, y: inUnit(r.avgMBps, unit) })), dashed: true },
        { label: 'BW peak', points: bw.map((r) => ({ x: r.bytes, y: inUnit(r.peakMBps, unit) })) },
      ],
    });
  return lineChartSvg({
    title,
    xLabel: 'message size (octets)',
    yLabel: 'latency (usec)',
    xScale: 'log2',
    xFormat: humanSize,
    series: [
      { label: 't_typical (median)', points: lat.map((r) => ({ x: r.bytes, y: r.lat.median })), dashed: true },
      { label: 't_p99', points: lat.map((r) => ({ x: r.bytes, y: r.lat.p99 })) },
    ],
  });
}

/** soak's resident set size, sampled each second, against time. */
export function soakChart(transport: string, samples: readonly SoakSample[]): string {
  return lineChartSvg({
    title: `rddp soak over ${transport}: resident set size, sampled each second`,
    xLabel: 'time (s)',
    yLabel: 'RSS (MiB)',
    xScale: 'linear',
    yFromZero: false,
    series: [{ label: 'RSS (MiB)', points: samples.map((s) => ({ x: s.seconds, y: s.rssMiB })) }],
  });
}

/** sctp-experiment's bandwidth: aggregate, slowest and fastest stream against the bulk stream count. */
export function sctpBandwidthChart(rows: readonly ExperimentRow[]): string {
  const at = (f: (r: ExperimentRow) => number) => rows.map((r) => ({ x: r.streams, y: f(r) }));
  return lineChartSvg({
    title: 'SCTP (RFC 5043): RDMA Write bandwidth on one association',
    xLabel: 'bulk streams (one DDP Stream each)',
    yLabel: 'MB/s',
    xScale: 'log2',
    series: [
      { label: 'aggregate', points: at((r) => r.aggregateMBps) },
      { label: 'slowest stream', points: at((r) => r.perStreamMinMBps) },
      { label: 'fastest stream', points: at((r) => r.perStreamMaxMBps) },
    ],
  });
}

/** sctp-experiment's head-of-line view: Send ping-pong latency on stream 0 while the bulk streams write. */
export function sctpLatencyChart(rows: readonly ExperimentRow[]): string {
  const at = (f: (r: ExperimentRow) => number) => rows.map((r) => ({ x: r.streams, y: f(r) }));
  return lineChartSvg({
    title: 'SCTP (RFC 5043): 64-octet Send latency on stream 0 under bulk Writes',
    xLabel: 'bulk streams (one DDP Stream each)',
    yLabel: 'half round trip (us)',
    xScale: 'log2',
    series: [
      { label: 'ping p50', points: at((r) => r.pingP50us) },
      { label: 'ping p99', points: at((r) => r.pingP99us) },
    ],
  });
}
