/** perftest's output tables (ib_write_bw / ib_write_lat), so RDMA users read rddp's figures at a glance. */
import type { LatencySummary } from '../bench/stats.js';

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

export interface LatRow {
  readonly bytes: number;
  readonly iterations: number;
  readonly lat: LatencySummary;
}

export function bwHeader(): string {
  return ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]`;
}

export function bwLine(r: BwRow): string {
  return ` ${String(r.bytes).padEnd(10)} ${String(r.iterations).padEnd(14)} ${r.peakMBps
    .toFixed(2)
    .padStart(10)}         ${r.avgMBps.toFixed(2).padStart(10)}             ${r.msgRateMpps.toFixed(6)}`;
}

export function latHeader(): string {
  return ` #bytes #iterations    t_min[usec]    t_typical[usec]    t_p99[usec]    t_max[usec]    t_avg[usec]`;
}

export function latLine(r: LatRow): string {
  const f = (v: number) => v.toFixed(2).padStart(10);
  return ` ${String(r.bytes).padEnd(6)} ${String(r.iterations).padEnd(11)} ${f(r.lat.min)}     ${f(r.lat.median)}         ${f(
    r.lat.p99,
  )}     ${f(r.lat.max)}     ${f(r.lat.avg)}`;
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
