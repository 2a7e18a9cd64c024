/** Small statistics helpers for benchmarks and perf latency tables. */

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** The q-quantile (0..1) of already sorted values, nearest-rank. */
export function quantile(sortedValues: readonly number[], q: number): number {
  if (sortedValues.length === 0) return Number.NaN;
  const idx = Math.min(sortedValues.length - 1, Math.max(0, Math.ceil(q * sortedValues.length) - 1));
  return sortedValues[idx] as number;
}

export function median(values: readonly number[]): number {
  const s = sorted(values);
  if (s.length === 0) return Number.NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export interface LatencySummary {
  readonly min: number;
  readonly median: number;
  readonly p99: number;
  readonly max: number;
  readonly avg: number;
}

export function summarizeLatency(samples: readonly number[]): LatencySummary {
  const s = sorted(samples);
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    min: s[0] ?? Number.NaN,
    median: median(s),
    p99: quantile(s, 0.99),
    max: s[s.length - 1] ?? Number.NaN,
    avg: s.length ? sum / s.length : Number.NaN,
  };
}
