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
  return medianSorted(sorted(values));
}

/** The median of already sorted values: the middle one, or the mean of the middle two (NaN when empty). */
export function medianSorted(s: readonly number[]): number {
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
  return summarizeSorted(sorted(samples));
}

/** `summarizeLatency` of values already sorted ascending (perf's latency table sorts once for all its figures). */
export function summarizeSorted(s: readonly number[]): LatencySummary {
  const n = s.length;
  let sum = 0;
  for (const v of s) sum += v;
  return {
    min: n ? (s[0] as number) : Number.NaN,
    median: medianSorted(s),
    p99: quantile(s, 0.99),
    max: n ? (s[n - 1] as number) : Number.NaN,
    avg: n ? sum / n : Number.NaN,
  };
}
