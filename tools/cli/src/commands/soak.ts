/**
 * `rddp soak` (`pnpm soak --minutes N`) — a long run that checks memory stays flat: MPA/TCP RDMA Writes,
 * Reads and Sends between two in-process endpoints, new connections every round, RSS sampled each
 * second. Fails when RSS after warm-up grows by more than the allowed budget.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { soakChart } from '../charts/tool-charts.js';
import { UsageError } from '../transports.js';
import { perfLoopback } from './perf.js';

export interface SoakSample {
  readonly seconds: number;
  readonly rssMiB: number;
  readonly rounds: number;
}

export async function runSoak(
  o: { minutes: number; budgetMiB: number; transport: string },
  onSample: (s: SoakSample) => void,
): Promise<{ samples: SoakSample[]; growthMiB: number; ok: boolean }> {
  const t0 = performance.now();
  const samples: SoakSample[] = [];
  let rounds = 0;
  const timer = setInterval(() => {
    const s = {
      seconds: Math.round((performance.now() - t0) / 1000),
      rssMiB: process.memoryUsage().rss / 2 ** 20,
      rounds,
    };
    samples.push(s);
    onSample(s);
  }, 1000);
  const tests = ['write_bw', 'read_bw', 'send_bw', 'send_lat'];
  try {
    while (performance.now() - t0 < o.minutes * 60_000) {
      const test = tests[rounds % tests.length] as string;
      const r = await perfLoopback(
        test,
        { port: '0', size: '65536', iters: '200', txDepth: '16', verify: true, transport: o.transport, json: true },
        () => {},
      );
      if (!r.every((x) => x.verified)) throw new Error(`soak round ${rounds} (${test}): data verification failed`);
      rounds++;
    }
  } finally {
    clearInterval(timer);
  }
  // Growth after warm-up: the median of the last fifth against the median of the second fifth.
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const fifth = Math.max(1, Math.floor(samples.length / 5));
  const early = med(samples.slice(fifth, 2 * fifth).map((s) => s.rssMiB));
  const late = med(samples.slice(-fifth).map((s) => s.rssMiB));
  const growthMiB = samples.length >= 5 ? late - early : 0;
  return { samples, growthMiB, ok: growthMiB <= o.budgetMiB };
}

/** `--out DIR`: the samples (`soak.jsonl`, one per second, then the summary) and the RSS chart (`soak-rss.svg`). */
export async function writeSoakOut(
  dir: string,
  transport: string,
  samples: readonly SoakSample[],
  summary: object,
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files = [path.join(dir, 'soak.jsonl'), path.join(dir, 'soak-rss.svg')];
  await writeFile(files[0] as string, `${[...samples, summary].map((x) => JSON.stringify(x)).join('\n')}\n`);
  await writeFile(files[1] as string, soakChart(transport, samples));
  return files;
}

/** The options `rddp soak` takes (./soak-command.ts registers them). */
export type SoakRawOptions = { minutes: string; budget: string; transport: string; json?: boolean; out?: string };

/** `rddp soak`'s action (registered by ./soak-command.ts, which loads this module when soak runs). */
export async function soakAction(raw: SoakRawOptions): Promise<void> {
  const minutes = Number(raw.minutes);
  const budgetMiB = Number(raw.budget);
  if (!(minutes > 0) || !(budgetMiB > 0)) throw new UsageError('--minutes and --budget must be positive');
  const res = await runSoak({ minutes, budgetMiB, transport: raw.transport }, (s) =>
    console.log(
      raw.json
        ? JSON.stringify(s)
        : `${String(s.seconds).padStart(6)} s  RSS ${s.rssMiB.toFixed(1).padStart(8)} MiB  rounds ${s.rounds}`,
    ),
  );
  const summary = {
    growthMiB: Number(res.growthMiB.toFixed(1)),
    budgetMiB,
    ok: res.ok,
    rounds: res.samples.at(-1)?.rounds ?? 0,
  };
  console.log(
    raw.json
      ? JSON.stringify(summary)
      : `RSS growth after warm-up: ${summary.growthMiB} MiB (budget ${budgetMiB} MiB): ${res.ok ? 'flat' : 'GROWING'}`,
  );
  if (raw.out) await writeSoakOut(raw.out, raw.transport, res.samples, summary);
  if (!res.ok) process.exitCode = 1;
}
