import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LlpStream } from '@rddp/llp';
import type { MpaParams } from '@rddp/llp-mpa-tcp';
import { copyLoopBandwidth, rawTcpBandwidth, rawTcpConnections, rawTcpPingPong } from '../bench/baselines.js';
import {
  connectionSetup,
  ddpSendPingPong,
  ddpWriteBandwidth,
  loopbackWriteBandwidth,
  mpaPair,
  rssGrowth,
} from '../bench/figures.js';
import { costFigures, costRuns, headlineFigures, headlineRuns } from '../bench/headline.js';
import {
  BENCH_MAX_ROUNDS,
  BENCH_MAX_SCALE,
  BENCH_MAX_WARMUP_S,
  BENCH_MIN_SCALE,
  BENCH_TABLES,
  type BenchTable,
} from '../bench/limits.js';
import {
  type Figure,
  figureLine,
  humanSize,
  makeFigure,
  QUICK_WARNING,
  type Series,
  toJsonLines,
  toMarkdown,
  toSvgChart,
} from '../bench/report.js';
import { anchorsHere, sctpAnchorFigures, sctpAnchorRuns } from '../bench/sctp-anchors.js';
import { median } from '../bench/stats.js';
import { iperf3Installed } from '../bench/two-process.js';
import { COMMANDS } from '../launch.js';
import { type ProgressSink, startProgress } from '../progress.js';
import { UsageError } from '../transports.js';

export interface BenchOptions {
  json?: boolean;
  out?: string;
  rounds: string;
  warmup: string;
  quick?: boolean;
  /** Tables to run, comma-separated: headline, ddp, cost, sctp (default all). */
  tables?: string;
  /** Data volume and round trips relative to a full run (multiplies --quick's eighth). */
  scale?: string;
}

export { BENCH_MAX_ROUNDS, BENCH_MAX_SCALE, BENCH_MAX_WARMUP_S, BENCH_MIN_SCALE };

const MiB = 1 << 20;

/** The MPA modes of the bandwidth figures: the label ends each figure's name, e.g. "… 64 KiB (CRC)". */
const MODES: readonly { label: string; params: MpaParams; target?: number }[] = [
  { label: 'CRC', params: { crc: true }, target: 0.85 },
  { label: 'no CRC', params: { crc: false }, target: 0.95 },
  { label: 'CRC + markers', params: { crc: true, markers: true } },
];

/**
 * bandwidth.svg: the in-process DDP figures — each MPA mode's RDMA Write bandwidth and raw Node TCP's,
 * both ends in the bench's process on 127.0.0.1 — against message size.
 */
export function bandwidthChart(figures: readonly Figure[]): string {
  const series: Series[] = MODES.map((m) => ({
    label: `rddp MPA/TCP (${m.label})`,
    points: figures
      .filter((f) => f.size && f.name.endsWith(`(${m.label})`))
      .map((f) => ({ size: f.size as number, value: f.value })),
  }));
  series.push({
    label: 'raw Node TCP',
    points: figures
      .filter((f) => f.size && f.name.endsWith('(CRC)'))
      .map((f) => ({ size: f.size as number, value: f.baseline })),
  });
  return toSvgChart('RDMA Write bandwidth, both ends in one process: MPA/TCP vs raw Node TCP', 'MB/s', series);
}

/**
 * Time to set up `n` MPA/TCP connections held by one server, against `n` raw TCP connections held by
 * one net.Server in the same run (the same sockets without the MPA Request/Reply exchange).
 */
export async function connectionFigure(
  plan: { rounds: number; warmupSeconds: number; ran?: () => void },
  n: number,
): Promise<Figure> {
  const [setup, raw] = await alternate(
    { ran: () => {}, ...plan },
    () => connectionSetup(n),
    () => rawTcpConnections(n),
  );
  return makeFigure(`set up ${n} MPA/TCP connections held by one server`, 'ms', setup, raw, {
    note: `baseline: ${n} raw TCP connections held by one net.Server, same batches, same run`,
  });
}

/** Milliseconds from spawning `node <args>` to its exit (it must exit 0, within 60 s). */
function spawnMs(args: readonly string[]): Promise<number> {
  const t0 = performance.now();
  return new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: 'ignore', timeout: 60_000 });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`node ${args.join(' ')} exited ${code}`)),
    );
  });
}

/**
 * A command line's start-up (issue 37: within 2 × of a bare Node): `rddp --help` or `--version` from spawn
 * to exit, against `node -e 0` from spawn to exit in the same run.
 */
export async function startupFigure(plan: Plan, flag: '--help' | '--version'): Promise<Figure> {
  const [cli, bare] = await againstBareNode(plan, [flag]);
  return makeFigure(`rddp ${flag} start-up`, 'ms', cli, bare, {
    target: 1 / 2,
    note: 'baseline: node -e 0, spawn to exit, same run',
  });
}

/**
 * The slowest `rddp <command> --help` (issue 37: each command loads its code only when it runs): one
 * unrecorded run of every command in launch.ts's COMMANDS picks it, then it is measured as startupFigure.
 */
export async function commandHelpFigure(plan: Plan): Promise<Figure> {
  const main = fileURLToPath(new URL('../main.js', import.meta.url));
  let slowest = '';
  let most = -1;
  for (const name of Object.keys(COMMANDS)) {
    const ms = await spawnMs([main, name, '--help']);
    if (ms > most) [slowest, most] = [name, ms];
  }
  const [cli, bare] = await againstBareNode(plan, [slowest, '--help']);
  return makeFigure('rddp <command> --help start-up, slowest command', 'ms', cli, bare, {
    target: 1 / 2,
    note: `baseline: node -e 0, spawn to exit, same run; slowest here: rddp ${slowest} --help`,
  });
}

/** `rddp args…` from spawn to exit against `node -e 0`, alternately: both medians. */
function againstBareNode(plan: Plan, args: readonly string[]): Promise<[number, number]> {
  const main = fileURLToPath(new URL('../main.js', import.meta.url));
  return alternate(
    plan,
    () => spawnMs([main, ...args]),
    () => spawnMs(['-e', '0']),
  );
}

/** Alternating rounds per figure, after each subject and baseline ran unrecorded for `warmupSeconds`. */
interface Plan {
  readonly rounds: number;
  readonly warmupSeconds: number;
  /** Called after each recorded run (progress). */
  readonly ran: () => void;
}

async function warmUp(run: () => Promise<number>, seconds: number): Promise<void> {
  const until = performance.now() + seconds * 1000;
  do await run();
  while (performance.now() < until);
}

/** Warms both up, then runs subject and baseline alternately for `rounds` rounds; returns both medians. */
async function alternate(
  { rounds, warmupSeconds, ran }: Plan,
  subject: () => Promise<number>,
  baseline: () => Promise<number>,
): Promise<[number, number]> {
  await warmUp(subject, warmupSeconds);
  await warmUp(baseline, warmupSeconds);
  const s: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      s.push(await subject());
      ran();
      b.push(await baseline());
    } else {
      b.push(await baseline());
      ran();
      s.push(await subject());
    }
    ran();
  }
  return [median(s), median(b)];
}

async function mpaWrite(params: MpaParams, size: number, total: number): Promise<number> {
  const { stack, a, b, close } = await mpaPair(params);
  try {
    return await ddpWriteBandwidth(stack, a.streams[0] as LlpStream, b.streams[0] as LlpStream, size, total);
  } finally {
    await close();
  }
}

async function mpaPingPong(iters: number): Promise<number> {
  const { stack, a, b, close } = await mpaPair({ crc: true });
  try {
    return median(await ddpSendPingPong(stack, a.streams[0] as LlpStream, b.streams[0] as LlpStream, 64, iters));
  } finally {
    await close();
  }
}

/** The number of recorded runs a bench makes with `rounds` rounds (its progress total). */
function benchRuns(rounds: number): number {
  // 9 bandwidth figures, latency, loopback, connection setup and the three start-ups: subject and baseline
  // each round; RSS: one run.
  return 15 * 2 * rounds + 1;
}

export async function runBench(o: BenchOptions, log: (s: string) => void, sink: ProgressSink = {}): Promise<Figure[]> {
  const rounds = Number(o.rounds);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > BENCH_MAX_ROUNDS)
    throw new UsageError(`--rounds must be an integer in 1..${BENCH_MAX_ROUNDS} (got ${o.rounds})`);
  const warmupSeconds = Number(o.warmup);
  if (
    o.warmup.trim() === '' ||
    !Number.isFinite(warmupSeconds) ||
    warmupSeconds < 0 ||
    warmupSeconds > BENCH_MAX_WARMUP_S
  )
    throw new UsageError(`--warmup must be a number in 0..${BENCH_MAX_WARMUP_S} (got ${o.warmup})`);
  const tables = benchTables(o.tables);
  const scale = (o.quick ? 1 / 8 : 1) * benchScale(o.scale);
  // The SCTP table's anchors that can be loaded here (the others' rows say why not).
  const anchors = tables.has('sctp') ? await anchorsHere() : undefined;
  const total =
    (tables.has('headline') ? headlineRuns(rounds, iperf3Installed()) : 0) +
    (tables.has('ddp') ? benchRuns(rounds) : 0) +
    (tables.has('cost') ? costRuns(rounds) : 0) +
    (anchors ? sctpAnchorRuns(rounds, [...anchors.values()].filter((why) => why === undefined).length) : 0);
  const progress = startProgress({ label: 'bench runs', total, ...sink });
  const print = (s: string) => progress.interrupt(() => log(s));
  try {
    if (o.quick && !o.json) print(QUICK_WARNING);
    const figures: Figure[] = [];
    const add = (f: Figure) => {
      figures.push(f);
      print(o.json ? toJsonLines([f]) : figureLine(f, o.quick));
    };
    const ran = () => progress.add(1);
    const headline = { rounds, warmUp: warmupSeconds > 0, scale, ran, add };
    if (tables.has('headline')) await headlineFigures(headline);
    if (tables.has('ddp')) await benchFigures(rounds, warmupSeconds, scale, progress, add);
    if (tables.has('cost')) await costFigures(headline);
    if (anchors) await sctpAnchorFigures(headline, anchors);
    if (o.out) {
      await mkdir(o.out, { recursive: true });
      await writeFile(path.join(o.out, 'bench.md'), `${toMarkdown(figures, { quick: o.quick })}\n`);
      await writeFile(path.join(o.out, 'bench.jsonl'), `${toJsonLines(figures)}\n`);
      await writeFile(path.join(o.out, 'bandwidth.svg'), bandwidthChart(figures));
    }
    return figures;
  } finally {
    progress.stop();
  }
}

/** `--tables`: a comma-separated subset of BENCH_TABLES. */
function benchTables(v: string | undefined): Set<BenchTable> {
  if (v === undefined) return new Set(BENCH_TABLES);
  const names = v.split(',').map((x) => x.trim());
  for (const n of names)
    if (!(BENCH_TABLES as readonly string[]).includes(n))
      throw new UsageError(`--tables takes ${BENCH_TABLES.join(', ')} (got ${n})`);
  return new Set(names as BenchTable[]);
}

function benchScale(v: string | undefined): number {
  if (v === undefined) return 1;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < BENCH_MIN_SCALE || n > BENCH_MAX_SCALE)
    throw new UsageError(`--scale must be a number in ${BENCH_MIN_SCALE}..${BENCH_MAX_SCALE} (got ${v})`);
  return n;
}

/** The in-process DDP table: both ends in this process against raw TCP in this process. */
async function benchFigures(
  rounds: number,
  warmupSeconds: number,
  scale: number,
  progress: { add(n: number): void },
  add0: (f: Figure) => void,
): Promise<void> {
  const plan: Plan = { rounds, warmupSeconds, ran: () => progress.add(1) };
  const add = (f: Figure) => add0({ ...f, table: 'ddp' });
  for (const size of [4096, 64 * 1024, MiB]) {
    const total = Math.max(size * 16, 256 * MiB * scale);
    for (const m of MODES) {
      const [v, base] = await alternate(
        plan,
        () => mpaWrite(m.params, size, total),
        () => rawTcpBandwidth(size, total),
      );
      add(
        makeFigure(`MPA/TCP RDMA Write ${humanSize(size)} (${m.label})`, 'MB/s', v, base, {
          size,
          ...(size === 64 * 1024 && m.target ? { target: m.target } : {}),
          note: 'baseline: raw Node TCP, same sizes, same process layout',
        }),
      );
    }
  }
  const iters = Math.round(2000 * scale) + 100; // at least 100 round trips
  const [lat, latBase] = await alternate(
    plan,
    () => mpaPingPong(iters),
    async () => median(await rawTcpPingPong(64, iters)),
  );
  add(
    makeFigure('MPA/TCP Send ping-pong 64 B (half round trip)', 'us', lat, latBase, {
      target: 1 / 1.3,
      note: 'baseline: raw TCP ping-pong',
    }),
  );
  const [lb, copy] = await alternate(
    plan,
    () => loopbackWriteBandwidth(64 * 1024, 512 * MiB * scale),
    async () => copyLoopBandwidth(64 * 1024, 512 * MiB * scale),
  );
  add(
    makeFigure('loopback LLP RDMA Write 64 KiB', 'MB/s', lb, copy, {
      size: 64 * 1024,
      target: 0.5,
      note: 'baseline: Uint8Array.set copy loop',
    }),
  );
  const rss = await rssGrowth(1024 * MiB * scale);
  progress.add(1);
  add(
    makeFigure('peak RSS growth over a 1 GiB transfer', 'MiB', rss, 64, {
      target: 1,
      note: 'baseline: the 64 MiB budget',
    }),
  );
  add(await connectionFigure(plan, Math.max(10, Math.round(1000 * Math.min(1, scale * 1.6)))));
  for (const flag of ['--help', '--version'] as const) add({ ...(await startupFigure(plan, flag)), table: 'ddp' });
  add(await commandHelpFigure(plan));
}

export { registerBench } from './bench-command.js';
