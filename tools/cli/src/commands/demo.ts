/**
 * `rddp demo` — the main job: a server and a client on 127.0.0.1 over MPA/TCP (CRC on), rping with
 * validation, then a short RDMA Write bandwidth sweep printed as perftest's table. No setup.
 */
import type { LlpConnection } from '@rddp/llp';
import type { Command } from 'commander';
import { integerIn } from '../flags.js';
import { perfClient, perfServe } from '../perf/engine.js';
import { bwHeader, RULE } from '../perf/format.js';
import { PERF_DEFAULT_MAX_SIZE } from '../perf/hello.js';
import { type ToolTransport, toolTransport, UsageError } from '../transports.js';
import { resultLine } from './perf.js';
import { rpingClient, rpingServe } from './rping.js';

/** A client and a server connection on 127.0.0.1, made by the stack (its transport and MPA parameters). */
function pair(tt: ToolTransport): Promise<[LlpConnection, LlpConnection]> {
  return tt.stack.pair({ host: '127.0.0.1', port: 0 }, { signal: AbortSignal.timeout(15_000) });
}

/** The demo's flag ranges: at least one ping, at least the sweep's first size (64 octets). */
export const DEMO_MAX_PINGS = 1_000_000;
export const DEMO_MIN_SIZE = 64;

export interface DemoOptions {
  pings: number;
  maxSize: number;
  quick?: boolean;
}

export async function runDemo(o: DemoOptions, print: (s: string) => void): Promise<boolean> {
  const range = (name: string, v: number, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max)
      throw new UsageError(`${name} must be an integer in ${min}..${max} (got ${v})`);
  };
  range('--pings', o.pings, 1, DEMO_MAX_PINGS);
  range('--max-size', o.maxSize, DEMO_MIN_SIZE, PERF_DEFAULT_MAX_SIZE);
  const tt = toolTransport({ transport: 'tcp', mpaRev: '2', crc: true });
  print('rddp demo: iWARP (RDMAP / DDP / MPA with CRC32c, MPA revision 2) over TCP on 127.0.0.1');
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
  // 2. A write_bw sweep, as ib_write_bw -a would print it.
  const sizes: number[] = [];
  for (let s = 64; s <= o.maxSize; s *= 4) sizes.push(s);
  const [c2, s2] = await pair(tt);
  print(RULE);
  print('                    RDMA_Write BW Test (rddp, MPA/TCP, CRC on)');
  print(RULE);
  print(bwHeader());
  const serving = perfServe(s2, tt.profileOf(s2), () => {}, 0, { rdmapFactory: tt.rdmapFactory });
  serving.catch(() => {});
  let ok = true;
  const results = await perfClient(
    c2,
    tt.profileOf(c2),
    { test: 'write_bw', sizes, iters: o.quick ? 300 : 5000, txDepth: 64, verify: true }, // 5000: perftest's default
    (r) => {
      ok &&= r.verified;
      print(resultLine(r));
    },
    undefined,
    0,
    { rdmapFactory: tt.rdmapFactory },
  );
  await serving;
  print(RULE);
  print(
    results.every((r) => r.verified)
      ? 'every size verified: the server region read back over RDMA Read matched what was written'
      : 'VERIFY FAILED',
  );
  return ok;
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('the main demo: rping with validation and an RDMA Write bandwidth sweep over MPA/TCP on 127.0.0.1')
    .option('-C, --pings <n>', `rping count (1..${DEMO_MAX_PINGS})`, integerIn(1, DEMO_MAX_PINGS), '200')
    .option(
      '--max-size <octets>',
      `largest write_bw size (${DEMO_MIN_SIZE}..${PERF_DEFAULT_MAX_SIZE})`,
      integerIn(DEMO_MIN_SIZE, PERF_DEFAULT_MAX_SIZE),
      String(4 << 20),
    )
    .option('--quick', 'fewer iterations')
    .addHelpText('after', '\nExample:\n  $ tools/rddp demo\n  $ tools/rddp demo --quick')
    .action(async (raw: { pings: string; maxSize: string; quick?: boolean }) => {
      const ok = await runDemo(
        { pings: Number(raw.pings), maxSize: Number(raw.maxSize), ...(raw.quick ? { quick: true } : {}) },
        (s) => console.log(s),
      );
      if (!ok) process.exitCode = 1;
    });
}
