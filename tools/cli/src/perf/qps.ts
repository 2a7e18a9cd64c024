/**
 * perftest's `-q N`: N queue pairs over N connections (one QP per RDMAP Stream, RFC 5040 §5), started
 * together once every QP has its READY; one aggregate row per size plus each QP's own row, as ib_write_bw
 * prints them.
 */
import type { LlpConnection } from '@rddp/llp';
import type { PerfClientOptions, PerfResult } from './engine.js';
import { aggregate } from './engine.js';
import type { BwRow } from './format.js';

/** Connections in MPA startup at once: under the MPA listener's 16 startups per source address. */
export const QP_CONNECT_CONCURRENCY = 8;

/** One queue pair's result for one size, and the server process that served it (READY's pid). */
export interface QpResult {
  readonly qp: number;
  readonly serverPid?: number;
  readonly result: PerfResult;
}

/** One size of a `-q N` run: the aggregate (bandwidth summed, latency the worst QP's) and every QP's row. */
export interface QpsRow {
  readonly aggregate: PerfResult;
  readonly qps: readonly QpResult[];
}

/**
 * A line every queue pair of the run waits at, again and again (once per size): all pass when the last
 * arrives; one failure releases every QP waiting now or later.
 */
export class QpLine {
  private arrived = 0;
  private release: () => void = () => {};
  private current: Promise<void> = Promise.resolve();
  private failure: { error: unknown } | undefined;
  private abort: (e: unknown) => void = () => {};

  constructor(private readonly n: number) {
    this.open();
  }

  private open(): void {
    this.arrived = 0;
    this.current = new Promise<void>((resolve, reject) => {
      this.release = resolve;
      this.abort = reject;
    });
    this.current.catch(() => {}); // each arrival awaits it; a failure is reported by the QP that failed
  }

  arrive(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure.error);
    const passing = this.current;
    if (++this.arrived >= this.n) {
      this.release();
      this.open();
    }
    return passing;
  }

  fail(e: unknown): void {
    this.failure ??= { error: e };
    this.abort(e);
  }
}

/**
 * Opens `n` connections, at most QP_CONNECT_CONCURRENCY in startup at once. One failure aborts those
 * already open and is thrown.
 */
export async function connectQps(n: number, connect: () => Promise<LlpConnection>): Promise<LlpConnection[]> {
  const conns: LlpConnection[] = [];
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async () => {
    while (next < n && !failure) {
      const i = next++;
      try {
        conns[i] = await connect();
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, QP_CONNECT_CONCURRENCY) }, lane));
  if (failure) {
    for (const c of conns) c?.abort();
    throw failure.error;
  }
  return conns;
}

/** Per-size rows of a run: `perQp[i][k]` is QP i's result for size k. */
export function qpsRows(perQp: readonly (readonly PerfResult[])[], pids: readonly (number | undefined)[]): QpsRow[] {
  const sizes = perQp[0]?.length ?? 0;
  const rows: QpsRow[] = [];
  for (let k = 0; k < sizes; k++) {
    const qps = perQp.map((r, qp) => {
      const pid = pids[qp];
      return { qp, ...(pid !== undefined ? { serverPid: pid } : {}), result: r[k] as PerfResult };
    });
    rows.push({ aggregate: aggregateQps(qps.map((q) => q.result)), qps });
  }
  return rows;
}

/**
 * One size's aggregate over QPs that started together: bandwidth and message rate are every QP's octets
 * and messages over the longest QP's time (as perftest counts from one start to the last completion),
 * not a sum of averages; latency is the worst QP's.
 */
export function aggregateQps(results: readonly PerfResult[]): PerfResult {
  const agg = aggregate(results);
  if (agg.kind !== 'bw') return agg;
  let longest = 0;
  for (const r of results) {
    const row = r.row as BwRow;
    if (row.avgMBps > 0) longest = Math.max(longest, (row.iterations * row.bytes) / 1048576 / row.avgMBps);
  }
  if (longest === 0) return agg;
  return {
    ...agg,
    row: {
      ...agg.row,
      avgMBps: (agg.row.iterations * agg.row.bytes) / 1048576 / longest,
      msgRateMpps: agg.row.iterations / longest / 1e6,
    },
  };
}

/**
 * Client side of `-q N`: runs `runQp` on every connection at once; each size's measured operations start
 * when every QP is ready for them and end, before any verification, when every QP has completed them.
 * Resolves with one row per size; the first QP failure is thrown once every QP has ended.
 */
export async function perfClientQps(
  conns: readonly LlpConnection[],
  runQp: (conn: LlpConnection, options: PerfClientOptions) => Promise<PerfResult[]>,
): Promise<QpsRow[]> {
  const qps = conns.reduce((a, c) => a + c.streams.length, 0);
  const start = new QpLine(qps);
  const finish = new QpLine(qps);
  const pids: (number | undefined)[] = [];
  const runs = conns.map((conn, i) =>
    runQp(conn, {
      onReady: (pid) => (pids[i] = pid),
      start: () => start.arrive(),
      finish: () => finish.arrive(),
    }).catch((e: unknown) => {
      start.fail(e);
      finish.fail(e);
      throw e;
    }),
  );
  const settled = await Promise.allSettled(runs);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) {
    for (const c of conns) c.abort();
    throw (failed as PromiseRejectedResult).reason;
  }
  return qpsRows(
    settled.map((s) => (s as PromiseFulfilledResult<PerfResult[]>).value),
    pids,
  );
}

/** A `-q` row as JSON: the aggregate's fields, `qps` (its count) and `perQp` (each QP's result and server pid). */
export function qpsJson(row: QpsRow): string {
  return JSON.stringify({
    ...row.aggregate,
    qps: row.qps.length,
    perQp: row.qps.map((q) => ({
      qp: q.qp,
      ...(q.serverPid !== undefined ? { serverPid: q.serverPid } : {}),
      ...q.result,
    })),
  });
}
