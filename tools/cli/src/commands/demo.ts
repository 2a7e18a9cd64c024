/**
 * `rddp demo` — the main job: a server and a client on 127.0.0.1 over MPA/TCP (CRC on), rping with
 * validation, then a short RDMA Write bandwidth sweep printed as perftest's table. No setup.
 */
import type { LlpConnection } from '@rddp/llp';
import { crc32cBackend } from '@rddp/llp-mpa-tcp';
import { type PerfResult, perfClient, perfServe } from '../perf/engine.js';
import { bwHeader, RULE } from '../perf/format.js';
import { PERF_DEFAULT_MAX_SIZE } from '../perf/limits.js';
import { octets, type ProgressSink, startProgress, tapCompletions } from '../progress.js';
import { type ToolTransport, toolTransport, UsageError } from '../transports.js';
import { DEMO_MAX_PINGS, DEMO_MIN_SIZE } from './demo-command.js';
import { resultLine } from './perf.js';
import { rpingClient, rpingServe } from './rping.js';

/** A client and a server connection on 127.0.0.1, made by the stack (its transport and MPA parameters). */
function pair(tt: ToolTransport): Promise<[LlpConnection, LlpConnection]> {
  return tt.stack.pair({ host: '127.0.0.1', port: 0 }, { signal: AbortSignal.timeout(15_000) });
}

/** The demo's flag ranges: at least one ping, at least the sweep's first size (64 octets). */
export { DEMO_MAX_PINGS, DEMO_MIN_SIZE };
/** perftest's default iterations per size. */
export const DEMO_ITERATIONS = 5000;
/**
 * Octets one size may move: perftest's 5000 iterations up to 1 MiB; 4 MiB runs 4096 (16 GiB), which
 * keeps the demo at about 30 s.
 */
export const DEMO_MAX_OCTETS_PER_SIZE = 16 * 2 ** 30;

/** Iterations of `size` in the demo's sweep. */
export function demoIterations(size: number, quick: boolean): number {
  return quick ? 300 : Math.min(DEMO_ITERATIONS, Math.max(1, Math.floor(DEMO_MAX_OCTETS_PER_SIZE / size)));
}

export interface DemoOptions {
  pings: number;
  maxSize: number;
  quick?: boolean;
}

/**
 * Runs the demo, printing its report with `print` and the sweep's progress on `progress` (stderr: a bar
 * on a terminal, a line per tenth otherwise). Ends with one verdict line; true when everything passed.
 */
export async function runDemo(
  o: DemoOptions,
  print: (s: string) => void,
  progress: ProgressSink = {},
): Promise<boolean> {
  const range = (name: string, v: number, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max)
      throw new UsageError(`${name} must be an integer in ${min}..${max} (got ${v})`);
  };
  range('--pings', o.pings, 1, DEMO_MAX_PINGS);
  range('--max-size', o.maxSize, DEMO_MIN_SIZE, PERF_DEFAULT_MAX_SIZE);
  const began = performance.now();
  const tt = toolTransport({ transport: 'tcp', mpaRev: '2', crc: true });
  print('rddp demo: iWARP (RDMAP / DDP / MPA with CRC32c, MPA revision 2) over TCP on 127.0.0.1');
  print(`CRC32c backend: ${crc32cBackend}`);
  print('');
  // 1. rping with validation: RDMA Read of the client's buffer, RDMA Write back, Sends in between.
  const [c1, s1] = await pair(tt);
  print(`rping: ${o.pings} pings of 4096 octets, validated (negotiated: ${JSON.stringify(c1.setup.negotiated)})`);
  const served = rpingServe(s1, tt, { size: 64, verbose: false }, { log: () => {}, debug: () => {} });
  served.catch(() => {});
  const t0 = performance.now();
  await rpingClient(
    c1,
    tt,
    { count: o.pings, size: 4096, verbose: false, validate: true },
    { log: print, debug: () => {} },
  );
  const pings = await served;
  const ms = performance.now() - t0;
  print(
    `rping: ${pings} pings OK in ${ms.toFixed(0)} ms (${((ms * 1000) / pings).toFixed(0)} us per ping: Send, Read, Send, Send, Write, Send)`,
  );
  print('');
  // 2. A write_bw sweep, as ib_write_bw -a would print it; one run per iteration count (one connection each).
  const sizes: number[] = [];
  for (let s = 64; s <= o.maxSize; s *= 4) sizes.push(s);
  const runs: { iters: number; sizes: number[] }[] = [];
  for (const size of sizes) {
    const iters = demoIterations(size, !!o.quick);
    const last = runs.at(-1);
    if (last?.iters === iters) last.sizes.push(size);
    else runs.push({ iters, sizes: [size] });
  }
  print(RULE);
  print('                    RDMA_Write BW Test (rddp, MPA/TCP, CRC on)');
  print(RULE);
  print(bwHeader());
  const bar = startProgress({
    label: 'write_bw sweep',
    total: runs.reduce((a, r) => a + r.iters * r.sizes.reduce((x, y) => x + y, 0), 0),
    format: octets,
    ...progress,
  });
  const results: PerfResult[] = [];
  try {
    // The client's completed RDMA Writes drive the bar (RFC 5040 §5: each completion carries its octets).
    const rdmapFactory = tapCompletions(tt.rdmapFactory, 'write', (n) => bar.add(n));
    for (const run of runs) {
      const [c2, s2] = await pair(tt);
      const serving = perfServe(s2, tt.profileOf(s2), () => {}, 0, { rdmapFactory: tt.rdmapFactory });
      serving.catch(() => {});
      results.push(
        ...(await perfClient(
          c2,
          tt.profileOf(c2),
          { test: 'write_bw', sizes: run.sizes, iters: run.iters, txDepth: 64, verify: true },
          (r) => {
            bar.interrupt(() => print(resultLine(r)));
          },
          undefined,
          0,
          { rdmapFactory },
        )),
      );
      await serving;
    }
  } finally {
    bar.stop();
  }
  print(RULE);
  const ok = results.length === sizes.length && results.every((r) => r.verified);
  print(
    ok ? 'every size verified: the server region read back over RDMA Read matched what was written' : 'VERIFY FAILED',
  );
  const moved = results.reduce((a, r) => a + r.row.bytes * r.row.iterations, 0);
  const seconds = ((performance.now() - began) / 1000).toFixed(1);
  print(
    ok
      ? `demo: PASSED: ${pings} pings validated, ${results.length} sizes written and verified (${octets(moved)}) in ${seconds} s`
      : `demo: FAILED: ${results.filter((r) => !r.verified).length} of ${sizes.length} sizes did not verify (${seconds} s)`,
  );
  return ok;
}
