/**
 * The bench's SCTP table: `rddp perf write_bw --transport sctp` between two processes against two other
 * SCTP stacks moving the same octets between two processes in the same run — usrsctp, the browsers' SCTP,
 * through `node-datachannel` (./anchor-usrsctp.ts, SCTP over DTLS over UDP), and werift-sctp, SCTP in
 * TypeScript (./anchor-werift.ts, SCTP over UDP) — at 64 KiB and 1 KiB messages on one stream: the
 * receivers' MB/s and each process's CPU per MB over the measured span. Then the in-process figure of the
 * LLP against the bare `@rddp/sctp` package (`runSctpBenchmark`), and stream 2's latency while the relay
 * loses 2 % of stream 1's chunks (./sctp-hol.ts, `runSctpHolBench`).
 *
 * The anchors are devDependencies of `@rddp/tools`: one that cannot be loaded here (not installed, no
 * binary for this platform) or whose run fails leaves its rows skipped, saying why; the bench goes on.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runSctpBenchmark } from '@rddp/llp-sctp';
import { NODE_FLAGS } from '../node-flags.js';
import { alternateAll, type HeadlinePlan, warmUpFor } from './headline.js';
import { type Figure, makeFigure, roundRange } from './report.js';
import { runSctpHolBench, type SctpHolResult } from './sctp-hol.js';
import { median } from './stats.js';
import { CpuTrace, perfTwoProcess } from './two-process.js';

const KiB = 1024;
const MiB = 1 << 20;

/** The anchor programs (compiled next to the CLI). */
export const ANCHOR_USRSCTP = fileURLToPath(new URL('../../dist/bench/anchor-usrsctp.js', import.meta.url));
export const ANCHOR_WERIFT = fileURLToPath(new URL('../../dist/bench/anchor-werift.js', import.meta.url));

/** One anchor run (both processes) must end within this long. */
const RUN_TIMEOUT_MS = 10 * 60_000;

/** The CPU budget of the 64 KiB rows, per side: ms of user + system CPU per MB (10^6 octets). */
export const CPU_BUDGET_MS_PER_MB = 10;

/** What one two-process run measured: the receiver's MB/s and each process's CPU per MB over that span. */
export interface SctpRun {
  /** MB/s, 10^6 octets per second. */
  readonly MBps: number;
  /** ms of user + system CPU per MB measured (NaN where /proc cannot be read). */
  readonly cpuMsPerMB: { readonly sender: number; readonly receiver: number };
}

export interface Anchor {
  /** As the rows name it. */
  readonly name: string;
  /** The npm package the anchor program loads. */
  readonly pkg: string;
  /** What the baseline is, for the rows' last column. */
  readonly what: string;
  readonly run: (size: number, total: number, warm: number) => Promise<SctpRun>;
}

export const ANCHORS: readonly Anchor[] = [
  {
    name: 'usrsctp (node-datachannel)',
    pkg: 'node-datachannel',
    what: 'usrsctp through node-datachannel (libdatachannel): one ordered reliable data channel between two processes, SCTP over DTLS over UDP (encrypted, which rddp is not)',
    run: (size, total, warm) => usrsctpTwoProcess(size, total, warm),
  },
  {
    name: 'werift-sctp',
    pkg: 'werift-sctp',
    what: 'werift-sctp (SCTP in TypeScript) between two processes, stream 0 ordered, SCTP over UDP',
    run: (size, total, warm) => weriftTwoProcess(size, total, warm),
  },
];

/** Why `pkg` cannot be loaded here, or undefined when it can. */
export async function anchorMissing(pkg: string): Promise<string | undefined> {
  try {
    await import(pkg);
    return undefined;
  } catch (e) {
    const first = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
    return `${pkg} cannot be loaded here (${first.slice(0, 160)})`;
  }
}

/** The anchors with why each cannot run here (undefined: it can). */
export async function anchorsHere(): Promise<Map<Anchor, string | undefined>> {
  const out = new Map<Anchor, string | undefined>();
  for (const a of ANCHORS) out.set(a, await anchorMissing(a.pkg));
  return out;
}

/** Message sizes of the table, each with its throughput target against usrsctp. */
export const SCTP_SIZES: readonly { size: number; target: number; cpuTarget: boolean }[] = [
  { size: 64 * KiB, target: 1.5, cpuTarget: true },
  { size: KiB, target: 1, cpuTarget: false },
];

/** Octets each run moves (before its warm-up) at `size`, for a run of `scale`. */
export function sctpOctets(size: number, scale: number): number {
  return Math.max(MiB, Math.round((size >= 64 * KiB ? 256 : 32) * MiB * scale));
}

/** The recorded runs the table makes (progress total): rddp and each runnable anchor per size, the LLP and HOL rows. */
export function sctpAnchorRuns(rounds: number, anchors: number): number {
  return rounds * (SCTP_SIZES.length * (1 + anchors) + 2);
}

/** The head-of-line rows' flow (besides the messages per stream, 1000 in a full run) and their target's bound. */
const HOL = { intervalMs: 2, size: 800, pmtu: 1472, lossRate: 0.02, boundMs: 3 } as const;

/** A child process of an anchor: its stdout as JSON lines, stdin to write to, its end. */
interface Child {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Calls `f` with each JSON object the child prints on stdout. */
  onLine(f: (m: Record<string, unknown>, line: string) => void): void;
  write(line: string): void;
  /** Resolves with its exit code; rejects if it cannot be started. */
  readonly exited: Promise<number | null>;
  stderr(): string;
}

function startChild(program: string, args: readonly (string | number)[]): Child {
  const child = spawn(process.execPath, [...NODE_FLAGS, program, ...args.map(String)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  let buf = '';
  const listeners: ((m: Record<string, unknown>, line: string) => void)[] = [];
  child.stderr?.on('data', (d) => {
    err = (err + d).slice(-4000);
  });
  child.stdout?.on('data', (d) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let m: unknown;
      try {
        m = JSON.parse(line);
      } catch {
        continue;
      }
      if (m && typeof m === 'object') for (const f of listeners) f(m as Record<string, unknown>, line);
    }
  });
  child.stdin?.on('error', () => {}); // a child that already ended
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
  return {
    child,
    pid: child.pid as number,
    onLine: (f) => listeners.push(f),
    write: (line) => child.stdin?.write(`${line}\n`),
    exited,
    stderr: () => err.trim().slice(-500),
  };
}

interface AnchorResult {
  readonly MBps: number;
  readonly octets: number;
  readonly ms: number;
}

function isResult(r: unknown): r is AnchorResult {
  const x = r as AnchorResult | undefined;
  return typeof x?.MBps === 'number' && typeof x.octets === 'number' && typeof x.ms === 'number';
}

/**
 * Runs a sender and a receiver until the receiver prints its result; reads both processes' CPU over the
 * span the receiver timed (which ended as its result line arrived), then ends both.
 */
async function pairRun(name: string, sender: Child, receiver: Child): Promise<SctpRun> {
  const cpu = { sender: new CpuTrace(sender.pid), receiver: new CpuTrace(receiver.pid) };
  const result = new Promise<{ r: AnchorResult; at: number }>((resolve, reject) => {
    receiver.onLine((m) => {
      if (!('result' in m)) return;
      const at = performance.now();
      cpu.sender.sample();
      cpu.receiver.sample();
      if (isResult(m.result)) resolve({ r: m.result, at });
      else reject(new Error(`${name}: the receiver printed a result without MBps, octets and ms`));
    });
    for (const [side, c] of [
      ['sender', sender],
      ['receiver', receiver],
    ] as const)
      c.exited.then(
        (code) => reject(new Error(`${name} ${side} exited (code ${code}) before a result: ${c.stderr()}`)),
        reject,
      );
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: no result within ${RUN_TIMEOUT_MS} ms`)), RUN_TIMEOUT_MS);
  });
  try {
    const { r, at } = await Promise.race([result, timeout]);
    const mb = r.octets / 1e6;
    const from = at - r.ms;
    return {
      MBps: r.MBps,
      cpuMsPerMB: { sender: cpu.sender.between(from, at) / mb, receiver: cpu.receiver.between(from, at) / mb },
    };
  } finally {
    clearTimeout(timer);
    cpu.sender.stop();
    cpu.receiver.stop();
    for (const c of [sender, receiver]) c.child.stdin?.end(); // both wait for it to close and exit
    const ended = Promise.all([sender.exited, receiver.exited]).catch(() => {});
    const kill = setTimeout(() => {
      sender.child.kill('SIGKILL');
      receiver.child.kill('SIGKILL');
    }, 5000);
    await ended;
    clearTimeout(kill);
  }
}

/**
 * usrsctp (node-datachannel) between two processes: `warm` octets unmeasured, then `total` octets of
 * `size`-octet messages, timed at the receiver. Signaling (SDP, ICE candidates) is relayed between the
 * two through this process.
 */
export async function usrsctpTwoProcess(size: number, total: number, warm = 0): Promise<SctpRun> {
  const sender = startChild(ANCHOR_USRSCTP, ['send', size, total, warm]);
  const receiver = startChild(ANCHOR_USRSCTP, ['recv', size, total, warm]);
  sender.onLine((m, line) => {
    if ('signal' in m) receiver.write(line);
  });
  receiver.onLine((m, line) => {
    if ('signal' in m) sender.write(line);
  });
  return pairRun('usrsctp', sender, receiver);
}

/** werift-sctp between two processes over UDP, as `usrsctpTwoProcess` measures. */
export async function weriftTwoProcess(size: number, total: number, warm = 0): Promise<SctpRun> {
  const receiver = startChild(ANCHOR_WERIFT, ['recv', size, total, warm]);
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      receiver.onLine((m) => {
        if (typeof m.port === 'number') resolve(m.port);
      });
      receiver.exited.then(
        (code) => reject(new Error(`werift-sctp receiver exited (code ${code}): ${receiver.stderr()}`)),
        reject,
      );
      setTimeout(() => reject(new Error('werift-sctp receiver: no port within 30 s')), 30_000).unref();
    });
  } catch (e) {
    receiver.child.kill('SIGKILL');
    throw e;
  }
  const sender = startChild(ANCHOR_WERIFT, ['send', size, total, warm, port]);
  return pairRun('werift-sctp', sender, receiver);
}

/** `rddp perf write_bw --transport sctp` between two processes, as the anchors are measured. */
export async function rddpSctpTwoProcess(size: number, iters: number, warmUp: number): Promise<SctpRun> {
  const f = await perfTwoProcess({ test: 'write_bw', transport: 'sctp', size, iters, warmUp, cpu: true });
  return {
    MBps: f.MBps,
    cpuMsPerMB: { sender: f.cpuMsPerMB?.client ?? Number.NaN, receiver: f.cpuMsPerMB?.server ?? Number.NaN },
  };
}

/** A number as the notes print it: three significant digits at most. */
function num(v: number): string {
  return Number.isFinite(v) ? String(Number(v.toPrecision(3))) : '—';
}

/**
 * The SCTP table: for each size, rddp and the anchors alternately (each round starting with the next),
 * medians; then the LLP against the bare package in one process. `anchors`: from `anchorsHere()`.
 */
export async function sctpAnchorFigures(
  plan: HeadlinePlan,
  anchors: ReadonlyMap<Anchor, string | undefined>,
): Promise<void> {
  const add = (f: Figure) => plan.add({ ...f, table: 'sctp' });
  const runnable = [...anchors].filter(([, why]) => why === undefined).map(([a]) => a);
  for (const { size, target, cpuTarget } of SCTP_SIZES) {
    const octets = sctpOctets(size, plan.scale);
    const iters = Math.max(16, Math.ceil(octets / size));
    const warm = warmUpFor(iters);
    // An anchor whose run fails is not run again: its rows say why.
    const failed = new Map<Anchor, string>();
    const guarded = (a: Anchor) => async (): Promise<SctpRun | undefined> => {
      if (failed.has(a)) return undefined;
      try {
        return await a.run(size, iters * size, warm * size);
      } catch (e) {
        failed.set(a, `${a.name} run failed: ${(e instanceof Error ? e.message : String(e)).slice(0, 200)}`);
        return undefined;
      }
    };
    const [ours, ...theirs] = await alternateAll<SctpRun | undefined>(plan, [
      () => rddpSctpTwoProcess(size, iters, warm),
      ...runnable.map(guarded),
    ]);
    const rddp = (ours ?? []) as SctpRun[];
    const label = `\`perf write_bw -s ${size} --transport sctp\`, two processes`;
    const common = `same octets (${num((iters * size) / MiB)} MiB of ${size / KiB} KiB messages, one stream) after ${num((warm * size) / MiB)} MiB unmeasured; rddp timed by its client, the anchor at its receiver`;
    const anchorRuns = new Map<Anchor, SctpRun[]>();
    for (const a of ANCHORS) {
      const k = runnable.indexOf(a);
      const runs = k < 0 ? [] : ((theirs[k] ?? []).filter((x) => x !== undefined) as SctpRun[]);
      const why = anchors.get(a) ?? failed.get(a) ?? (runs.length ? undefined : `${a.name} did not run`);
      anchorRuns.set(a, why ? [] : runs);
      const name = `${label} vs ${a.name}`;
      const note = `baseline: ${a.what}, ${common}`;
      const t = a.pkg === 'node-datachannel' ? { target } : {};
      const v = median(rddp.map((x) => x.MBps));
      if (why) add(makeFigure(name, 'MB/s', v, Number.NaN, { note, ...t, skipped: why }));
      else {
        const rounds = roundRange(
          rddp.map((x) => x.MBps),
          runs.map((x) => x.MBps),
        );
        add(
          makeFigure(name, 'MB/s', v, median(runs.map((x) => x.MBps)), {
            note,
            ...t,
            ...(rounds ? { rounds } : {}),
          }),
        );
      }
    }
    // CPU per MB of each process against the absolute budget; the anchors' same-side figures in the note.
    for (const side of ['sender', 'receiver'] as const) {
      const others = ANCHORS.map((a) => {
        const runs = anchorRuns.get(a) ?? [];
        return `${a.name} ${runs.length ? num(median(runs.map((x) => x.cpuMsPerMB[side]))) : '—'}`;
      }).join(', ');
      const who = side === 'sender' ? 'client (sending)' : 'server (receiving)';
      add(
        makeFigure(
          `${label}, ${who} process CPU per MB`,
          'ms/MB',
          median(rddp.map((x) => x.cpuMsPerMB[side])),
          CPU_BUDGET_MS_PER_MB,
          {
            note: `baseline: the absolute budget of ${CPU_BUDGET_MS_PER_MB} ms of user + system CPU per MB${cpuTarget ? '' : ' (a target at 64 KiB only)'}, over the measured span (/proc); same run, the ${side} of ${others} ms/MB`,
            ...(cpuTarget ? { target: 1 } : {}),
          },
        ),
      );
    }
  }
  // The LLP against the bare package it runs on, both ends in this process (one run a round, both inside).
  const llp: { subjectMBps: number; baselineMBps: number }[] = [];
  for (let i = 0; i < plan.rounds; i++) {
    llp.push(await runSctpBenchmark({ messageSize: 64 * KiB, totalBytes: Math.round(16 * MiB * plan.scale) }));
    plan.ran();
  }
  add(
    makeFigure(
      'SCTP (UDP) 64 KiB messages through the rddp LLP, one process',
      'MB/s',
      median(llp.map((r) => r.subjectMBps)),
      median(llp.map((r) => r.baselineMBps)),
      {
        target: 0.8,
        note: 'baseline: the bare @rddp/sctp package (its Socket API), same messages, same run, both ends in this process',
        ...(() => {
          const r = roundRange(
            llp.map((x) => x.subjectMBps),
            llp.map((x) => x.baselineMBps),
          );
          return r ? { rounds: r } : {};
        })(),
      },
    ),
  );
  await sctpHolFigures(plan, add);
}

/**
 * Stream 2's latency while the relay loses 2 % of stream 1's chunks, against the same flow without loss
 * in the same round (one `runSctpHolBench` a round: the no-loss run, then the lossy one). The p99 row's
 * baseline is the target's bound, the no-loss p99 + 3 ms, so "≤ 1 ×" is the target.
 */
async function sctpHolFigures(plan: HeadlinePlan, add: (f: Figure) => void): Promise<void> {
  const perStream = Math.max(100, Math.round(1000 * plan.scale));
  const runs: SctpHolResult[] = [];
  let failed: string | undefined;
  for (let i = 0; i < plan.rounds && !failed; i++) {
    try {
      runs.push(await runSctpHolBench({ ...HOL, rounds: perStream }));
    } catch (e) {
      failed = `run failed: ${(e instanceof Error ? e.message : String(e)).slice(0, 200)}`;
    }
    plan.ran();
  }
  const unverified = runs.filter((r) => !(r.noLoss.verified && r.withLoss.verified)).length;
  const skipped =
    failed ?? (unverified ? `${unverified} of ${runs.length} rounds lost, reordered or corrupted messages` : undefined);
  const med = (f: (r: SctpHolResult) => number) => median(runs.map(f));
  const p99 = runs.map((r) => r.withLoss.stream2.p99);
  const bound = runs.map((r) => r.noLoss.stream2.p99 + HOL.boundMs);
  const p50 = runs.map((r) => r.withLoss.stream2.p50);
  const p50NoLoss = runs.map((r) => r.noLoss.stream2.p50);
  const flow = `${perStream} messages of ${HOL.size} octets on each of streams 1 and 2, one on each every ${HOL.intervalMs} ms, ${HOL.pmtu}-octet packets, two processes through a UDP relay`;
  const name = `SCTP stream 2 latency with ${HOL.lossRate * 100} % of stream-1 chunks lost`;
  const spread = (a: number[], b: number[]) => {
    const r = roundRange(a, b);
    return r ? { rounds: r } : {};
  };
  add(
    makeFigure(`${name}, p99`, 'ms', median(p99), median(bound), {
      target: 1,
      note:
        `baseline: the bound, stream 2's p99 without loss (${num(med((r) => r.noLoss.stream2.p99))} ms) + ${HOL.boundMs} ms, same round; ${flow}; ` +
        `medians: ${num(med((r) => r.withLoss.lost))} stream-1 chunks lost, ${num(med((r) => r.withLoss.stream2HeldByStream1))} stream-2 messages held by stream 1; ` +
        `the target held in ${runs.filter((r) => r.holds).length} of ${runs.length} rounds`,
      ...(skipped ? { skipped } : spread(p99, bound)),
    }),
  );
  add(
    makeFigure(`${name}, p50`, 'ms', median(p50), median(p50NoLoss), {
      note: `baseline: stream 2's p50 without loss, same round; ${flow}`,
      ...(skipped ? { skipped } : spread(p50, p50NoLoss)),
    }),
  );
}
