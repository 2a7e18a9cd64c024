/** The perf tests, perftest's names: bandwidth and latency of Write, Read, Send and (RFC 7306) atomics. */
export const PERF_TESTS = [
  'write_bw',
  'read_bw',
  'send_bw',
  'write_lat',
  'read_lat',
  'send_lat',
  'atomic_bw',
  'atomic_lat',
] as const;

export type PerfTest = (typeof PERF_TESTS)[number];

/** The bandwidth tests `-b` runs both ways (send_bw's receive credits run one way only). */
export const BIDIRECTIONAL_TESTS: readonly PerfTest[] = ['write_bw', 'read_bw', 'atomic_bw'];
