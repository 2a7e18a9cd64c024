/** perftest's output tables (ib_write_bw / ib_write_lat), so RDMA users read rddp's figures at a glance. */
import { type LatencySummary, quantile, sorted, summarizeSorted } from '../bench/stats.js';

export const RULE = '-'.repeat(87);

export interface BwRow {
  readonly bytes: number;
  readonly iterations: number;
  /** MB/sec as perftest counts it: 2^20 octets per second. */
  readonly peakMBps: number;
  readonly avgMBps: number;
  /** Million messages per second. */
  readonly msgRateMpps: number;
}

/** A latency run's figures as ib_send_lat reports them: the summary, its standard deviation and 99.9 % percentile. */
export interface PerfLatency extends LatencySummary {
  /** Standard deviation of the samples (population, µs). */
  readonly stdev: number;
  /** 99.9 % percentile (µs). */
  readonly p999: number;
}

export interface LatRow {
  readonly bytes: number;
  readonly iterations: number;
  readonly lat: PerfLatency;
}

/** The figures ib_send_lat prints of `samples` (µs): min, max, typical (median), avg, stdev, 99 %, 99.9 %. */
export function perfLatency(samples: readonly number[]): PerfLatency {
  // Sorted once: every figure below reads the one sorted copy.
  const s = sorted(samples);
  const summary = summarizeSorted(s);
  let sq = 0;
  for (const v of s) sq += (v - summary.avg) ** 2;
  return { ...summary, stdev: s.length ? Math.sqrt(sq / s.length) : Number.NaN, p999: quantile(s, 0.999) };
}

/** perftest's units: MB/sec (2^20 octets a second), or Gb/sec (10^9 bits a second) with --report_gbits. */
export type BwUnit = 'MB' | 'Gb';

/** The header's words for a run's connection (plain data: a `--workers` worker sends them to its primary). */
export interface PerfConnHeader {
  /** `--transport` with what the connection adds (`tcp, bbr`). */
  readonly label: string;
  /** The MPA lines (transports.ts `mpaLines`): none on SCTP and the loopback LLP. */
  readonly mpa: readonly string[];
  readonly streams: number;
}

/** perftest's format factor: Gb/sec is octets / 125 000 000 a second, MB/sec octets / 2^20. */
export function inUnit(mbps: number, unit: BwUnit): number {
  return unit === 'MB' ? mbps : (mbps * 1048576) / 125_000_000;
}

export function bwHeader(unit: BwUnit = 'MB'): string {
  return ` #bytes     #iterations    BW peak[${unit}/sec]    BW average[${unit}/sec]   MsgRate[Mpps]`;
}

export function bwLine(r: BwRow, unit: BwUnit = 'MB'): string {
  return ` ${String(r.bytes).padEnd(10)} ${String(r.iterations).padEnd(14)} ${inUnit(r.peakMBps, unit)
    .toFixed(2)
    .padStart(10)}         ${inUnit(r.avgMBps, unit).toFixed(2).padStart(10)}             ${r.msgRateMpps.toFixed(6)}`;
}

/** ib_send_lat's columns, in its order (perftest's RESULT_FMT_LAT). */
export const LAT_COLUMNS = [
  '#bytes',
  '#iterations',
  't_min[usec]',
  't_max[usec]',
  't_typical[usec]',
  't_avg[usec]',
  't_stdev[usec]',
  '99% percentile[usec]',
  '99.9% percentile[usec]',
] as const;

/** Widths of the columns: each figure right-aligned under the end of its title. */
const LAT_WIDTHS = [7, 11, 14, 14, 18, 14, 16, 23, 25];

export function latHeader(): string {
  return ` ${LAT_COLUMNS.map((c, i) => (i < 2 ? c.padEnd(LAT_WIDTHS[i] as number) : c.padStart(LAT_WIDTHS[i] as number))).join(' ')}`;
}

export function latLine(r: LatRow): string {
  const l = r.lat;
  const cells = [
    String(r.bytes),
    String(r.iterations),
    ...[l.min, l.max, l.median, l.avg, l.stdev, l.p99, l.p999].map((v) => v.toFixed(2)),
  ];
  return ` ${cells.map((c, i) => (i < 2 ? c.padEnd(LAT_WIDTHS[i] as number) : c.padStart(LAT_WIDTHS[i] as number))).join(' ')}`;
}

/** perftest's MB/sec: 2^20 octets per second. */
export function mbPerSec(octets: number, ms: number): number {
  return octets / 1048576 / (ms / 1000);
}

/** Sizes of perftest's `-a`: 2 octets to 8 MiB, doubling. */
export function allSizes(max = 8 << 20): number[] {
  const out: number[] = [];
  for (let s = 2; s <= max; s *= 2) out.push(s);
  return out;
}
