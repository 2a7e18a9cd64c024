import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlpStream } from '@rddp/llp';
import type { MpaParams } from '@rddp/llp-mpa-tcp';
import { runSctpBenchmark } from '@rddp/llp-sctp';
import type { Command } from 'commander';
import { copyLoopBandwidth, rawTcpBandwidth, rawTcpPingPong } from '../bench/baselines.js';
import {
  connectionSetup,
  ddpSendPingPong,
  ddpWriteBandwidth,
  loopbackWriteBandwidth,
  mpaPair,
  rssGrowth,
} from '../bench/figures.js';
import {
  type Figure,
  humanSize,
  makeFigure,
  type Series,
  toJsonLines,
  toMarkdown,
  toSvgChart,
} from '../bench/report.js';
import { median } from '../bench/stats.js';
import { integerIn, numberIn } from '../flags.js';

interface BenchOptions {
  json?: boolean;
  out?: string;
  rounds: string;
  warmup: string;
  quick?: boolean;
}

const MiB = 1 << 20;

/** Alternating rounds per figure, after each subject and baseline ran unrecorded for `warmupSeconds`. */
interface Plan {
  readonly rounds: number;
  readonly warmupSeconds: number;
}

async function warmUp(run: () => Promise<number>, seconds: number): Promise<void> {
  const until = performance.now() + seconds * 1000;
  do await run();
  while (performance.now() < until);
}

/** Warms both up, then runs subject and baseline alternately for `rounds` rounds; returns both medians. */
async function alternate(
  { rounds, warmupSeconds }: Plan,
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
      b.push(await baseline());
    } else {
      b.push(await baseline());
      s.push(await subject());
    }
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

export async function runBench(o: BenchOptions, log: (s: string) => void): Promise<Figure[]> {
  const rounds = Math.max(1, Number.parseInt(o.rounds, 10) || 9);
  const plan: Plan = { rounds, warmupSeconds: Math.max(0, Number.parseFloat(o.warmup) || 0) };
  const scale = o.quick ? 1 / 8 : 1;
  const figures: Figure[] = [];
  const add = (f: Figure) => {
    figures.push(f);
    log(
      o.json
        ? toJsonLines([f])
        : `${f.name}: ${f.value.toFixed(2)} ${f.unit} vs ${f.baseline.toFixed(2)} (ratio ${f.ratio.toFixed(3)}${f.target ? `, target ${f.target}` : ''})`,
    );
  };
  const modes: { label: string; params: MpaParams; target?: number }[] = [
    { label: 'CRC', params: { crc: true }, target: 0.85 },
    { label: 'no CRC', params: { crc: false }, target: 0.95 },
    { label: 'CRC + markers', params: { crc: true, markers: true } },
  ];
  for (const size of [4096, 64 * 1024, MiB]) {
    const total = Math.max(size * 16, 256 * MiB * scale);
    for (const m of modes) {
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
  const iters = Math.round(2000 * scale) + 100;
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
  // SCTP (UDP encapsulation): our LLP layer against the bare `sctp` package moving the same messages.
  const sctpRuns: { subjectMBps: number; baselineMBps: number }[] = [];
  for (let i = 0; i < rounds; i++)
    sctpRuns.push(await runSctpBenchmark({ messageSize: 64 * 1024, totalBytes: Math.round(16 * MiB * scale) }));
  add(
    makeFigure(
      'SCTP (UDP) 64 KiB messages through the rddp LLP',
      'MB/s',
      median(sctpRuns.map((r) => r.subjectMBps)),
      median(sctpRuns.map((r) => r.baselineMBps)),
      { target: 0.8, note: 'baseline: the bare sctp package, same messages, same run' },
    ),
  );
  const rss = await rssGrowth(1024 * MiB * scale);
  add(
    makeFigure('peak RSS growth over a 1 GiB transfer', 'MiB', rss, 64, {
      target: 1,
      note: 'baseline: the 64 MiB budget',
    }),
  );
  const n = o.quick ? 200 : 1000;
  const setup = await connectionSetup(n);
  add(
    makeFigure(`set up ${n} MPA/TCP connections held by one server`, 'ms', setup, setup, {
      note: 'no baseline: absolute figure',
    }),
  );
  if (o.out) {
    await mkdir(o.out, { recursive: true });
    await writeFile(path.join(o.out, 'bench.md'), `${toMarkdown(figures)}\n`);
    await writeFile(path.join(o.out, 'bench.jsonl'), `${toJsonLines(figures)}\n`);
    const series: Series[] = modes.map((m) => ({
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
    await writeFile(
      path.join(o.out, 'bandwidth.svg'),
      toSvgChart('RDMA Write bandwidth over MPA/TCP vs raw TCP', 'MB/s', series),
    );
  }
  return figures;
}

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description(
      'benchmark suite: each figure against its baseline measured alternately in the same run (median of rounds)',
    )
    .option('--json', 'one JSON object per figure: {"name","unit","value","baseline","ratio"}')
    .option('--out <dir>', 'also write bench.md, bench.jsonl and bandwidth.svg there')
    .option('--rounds <n>', 'alternating rounds per figure (medians of both sides)', integerIn(1, 1000), '9')
    .option(
      '--warmup <seconds>',
      'unrecorded warm-up per subject and baseline before its rounds',
      numberIn(0, 3600),
      '1',
    )
    .option('--quick', 'an eighth of the data, for a fast look')
    .addHelpText('after', '\nExamples:\n  rddp bench --json\n  rddp bench --out bench-results --rounds 3')
    .action(async (o: BenchOptions) => {
      const figures = await runBench(o, (s) => console.log(s));
      if (!o.json) console.log(`\n${toMarkdown(figures)}`);
    });
}
