/**
 * The bench's headline table (`rddp perf` between two processes, through verbs and RDMAP, each figure
 * against a same-run two-process baseline) and its cost-growth table (1 to 1 000 connections).
 * Subject and baselines alternate round by round (each round starts with the next one); medians.
 */
import { availableParallelism } from 'node:os';
import { type Figure, makeFigure, roundRange } from './report.js';
import { median } from './stats.js';
import {
  iperf3Bandwidth,
  iperf3Installed,
  type PerfFigures,
  type PerfRun,
  type PingPong,
  perfTwoProcess,
  rawPingPongTwoProcess,
  rawTcpTwoProcess,
  tcpCongestionSettable,
} from './two-process.js';

const KiB = 1024;
const MiB = 1 << 20;
const GiB = 1 << 30;

export interface HeadlinePlan {
  readonly rounds: number;
  /** One unrecorded run of every subject and baseline first (each run is a fresh process). */
  readonly warmUp: boolean;
  /** Data volume and round trips relative to a full run (--quick: 1/8). */
  readonly scale: number;
  /** Called after each recorded run (progress). */
  readonly ran: () => void;
  /** Each figure once measured. */
  readonly add: (f: Figure) => void;
}

/** Runs every function once per round, starting each round with the next one; samples per function. */
export async function alternateAll<T>(
  plan: Pick<HeadlinePlan, 'rounds' | 'warmUp' | 'ran'>,
  runs: readonly (() => Promise<T>)[],
): Promise<T[][]> {
  if (plan.warmUp) for (const r of runs) await r();
  const samples: T[][] = runs.map(() => []);
  for (let i = 0; i < plan.rounds; i++)
    for (let k = 0; k < runs.length; k++) {
      const j = (i + k) % runs.length;
      (samples[j] as T[]).push(await (runs[j] as () => Promise<T>)());
      plan.ran();
    }
  return samples;
}

const med = <T>(xs: readonly T[], f: (x: T) => number) => median(xs.map(f));

/** Server process counts the scaling rows run: 1, 2, 4, … up to the machine's cores, and the cores. */
export function workerSteps(cores = availableParallelism()): number[] {
  const steps: number[] = [];
  for (let w = 1; w < cores && w <= 64; w *= 2) steps.push(w);
  steps.push(Math.min(cores, 64));
  return steps;
}

/** The recorded runs the headline table makes (progress total). */
export function headlineRuns(
  rounds: number,
  iperf: boolean,
  cores = availableParallelism(),
  cubic = tcpCongestionSettable('cubic'),
): number {
  const bw = iperf ? 3 : 2;
  // write 64 KiB (warm, cold), write 1 MiB (system's congestion control, cubic), read (warm, cold),
  // send_lat, message rate, Markers (gathered, copied, none), -q / --workers (and 1 and 8 QPs under cubic).
  return rounds * (bw + 2 + bw + 2 + 2 + 2 + 1 + 3 + 1 + workerSteps(cores).length + (cubic ? bw + 2 : 0));
}

export const COST_CONNECTIONS = [1, 10, 100, 1000] as const;

export function costRuns(rounds: number): number {
  return rounds * COST_CONNECTIONS.length;
}

/** Messages for `total` octets of `size`-octet messages (at least 16). */
function itersFor(total: number, size: number): number {
  return Math.max(16, Math.ceil(total / size));
}

/**
 * Bandwidth rows measure a warm JIT on both sides: a quarter as many operations (raw: octets) again go
 * first, unmeasured, on the same connection — a cold `perf` process moves its first few hundred MiB slower
 * while V8 compiles its path, where the raw baseline has little JavaScript to compile
 * (docs/PERFORMANCE.md, "Warm-up").
 */
export function warmUpFor(iters: number): number {
  return Math.ceil(iters / 4);
}

export async function headlineFigures(plan: HeadlinePlan): Promise<void> {
  const { scale, add } = plan;
  const total = Math.max(MiB, Math.round(GiB * scale));
  const iperf = iperf3Installed();
  const congestionSettable = tcpCongestionSettable('cubic');
  const fig = (
    name: string,
    unit: string,
    v: number,
    b: number,
    note: string,
    extra: { target?: number; rounds?: readonly [number, number] | undefined } = {},
  ) =>
    add(
      makeFigure(name, unit, v, b, {
        table: 'headline',
        note,
        ...(extra.target !== undefined ? { target: extra.target } : {}),
        ...(extra.rounds !== undefined ? { rounds: extra.rounds } : {}),
      }),
    );
  // The 1 MiB rows and the -q rows move 4 times the octets: a run of 1 GiB at those sizes is short enough
  // that its start and finish (and, with -q, the QPs' spread) weigh in and single rounds spread widely
  // (docs/PERFORMANCE.md, "The headline: `rddp perf` between two processes").
  const long = 4 * total;

  // Bandwidth: perf write_bw / read_bw with CRC (the default) against raw Node TCP and iperf3, same
  // octets in same-size writes. `cold`: fresh processes, no warm-up on either side, no target, no iperf3.
  // `congestion`: every TCP connection of the row (rddp's, the raw baseline's, iperf3's) runs that
  // congestion control instead of the system's.
  interface BandwidthRow {
    readonly target?: number;
    readonly iperfTarget?: number;
    readonly cold?: boolean;
    readonly congestion?: string;
  }
  const bandwidth = async (
    test: 'write_bw' | 'read_bw',
    size: number,
    label: string,
    octets: number,
    row: BandwidthRow = {},
  ) => {
    const iters = itersFor(octets, size);
    const warm = row.cold ? 0 : warmUpFor(iters);
    const cc = row.congestion;
    const runs: (() => Promise<number>)[] = [
      async () => (await perfTwoProcess({ test, size, iters, warmUp: warm, ...(cc ? { congestion: cc } : {}) })).MBps,
      () => rawTcpTwoProcess(iters * size, size, warm * size, cc),
    ];
    const withIperf = !row.cold && (row.iperfTarget !== undefined || cc !== undefined);
    if (withIperf && iperf) runs.push(() => iperf3Bandwidth(size, iters * size, cc));
    const [s, b, i] = await alternateAll(plan, runs);
    const v = median(s as number[]);
    const on = cc ? `, TCP ${cc} on every connection` : '';
    const base = `baseline: raw Node TCP bulk transfer between two processes, ${size / KiB} KiB writes, same octets${on}`;
    fig(
      row.cold ? `${label}, cold processes, vs raw Node TCP` : `${label} vs raw Node TCP`,
      'MB/s',
      v,
      median(b as number[]),
      warm === 0
        ? `${base}, both timed from their first octet`
        : `${base}, both after ${(warm * size) / MiB} MiB unmeasured`,
      { ...(row.target !== undefined ? { target: row.target } : {}), rounds: roundRange(s as number[], b as number[]) },
    );
    if (!withIperf) return;
    const name = `${label} vs iperf3 -l ${size >= MiB ? `${size / MiB}M` : `${size / KiB}K`}${cc ? ` -C ${cc}` : ''}`;
    const note = `baseline: iperf3 -l ${size}${cc ? ` -C ${cc}` : ''} between two processes (kernel TCP ceiling), same measured octets, no warm-up`;
    const iperfTarget = row.iperfTarget !== undefined ? { target: row.iperfTarget } : {};
    if (i) fig(name, 'MB/s', v, median(i), note, { ...iperfTarget, rounds: roundRange(s as number[], i) });
    else
      add(
        makeFigure(name, 'MB/s', v, Number.NaN, {
          table: 'headline',
          note,
          ...iperfTarget,
          skipped: 'iperf3 not installed',
        }),
      );
  };
  const w64 = '`perf write_bw -s 65536` (CRC), two processes';
  const w1m = '`perf write_bw -s 1048576` (CRC), two processes';
  await bandwidth('write_bw', 64 * KiB, w64, total, { target: 0.9, iperfTarget: 0.6 });
  await bandwidth('write_bw', 64 * KiB, w64, total, { cold: true });
  await bandwidth('write_bw', MiB, w1m, long, { target: 0.9, iperfTarget: 0.6 });
  // The same under CUBIC, Linux's default, on every connection of the row: the congestion control decides
  // how much one loopback connection keeps in flight (docs/PERFORMANCE.md, "Congestion control").
  if (congestionSettable) await bandwidth('write_bw', MiB, `${w1m}, --congestion cubic`, long, { congestion: 'cubic' });
  else
    add(
      makeFigure(`${w1m}, --congestion cubic vs raw Node TCP`, 'MB/s', Number.NaN, Number.NaN, {
        table: 'headline',
        note: 'baseline: raw Node TCP bulk transfer between two processes, TCP cubic on every connection',
        skipped: 'no TCP congestion control to set here (needs Linux, cubic and @rddp/writev)',
      }),
    );
  await bandwidth('read_bw', 64 * KiB, '`perf read_bw -s 65536` (CRC), two processes', total, { target: 0.85 });
  await bandwidth('read_bw', 64 * KiB, '`perf read_bw -s 65536` (CRC), two processes', total, { cold: true });

  // send_lat 64 B against a raw ping-pong: the same round trips, both after the same unmeasured ones.
  const latIters = Math.max(100, Math.round(100_000 * scale));
  const warm = Math.min(2000, latIters);
  const [lat, pp] = (await alternateAll<PerfFigures | PingPong>(plan, [
    () => perfTwoProcess({ test: 'send_lat', size: 64, iters: latIters, warmUp: warm }),
    () => rawPingPongTwoProcess(latIters, 64, warm),
  ])) as [PerfFigures[], PingPong[]];
  const latNote = `baseline: raw Node TCP ping-pong (TCP_NODELAY) between two processes, ${latIters} round trips after ${warm} unmeasured (both)`;
  type Lat = NonNullable<PerfFigures['lat']>;
  const latRows: [string, (l: Lat) => number, (p: PingPong) => number, string, number | undefined][] = [
    ['typical half round trip', (l) => l.median, (p) => p.medianUs, 'median', 1 / 1.2],
    ['average', (l) => l.avg, (p) => p.meanUs, 'mean', undefined],
    ['p99', (l) => l.p99, (p) => p.p99Us, 'p99', 1 / 1.5],
    ['max', (l) => l.max, (p) => p.maxUs, 'max', 1 / 2],
  ];
  for (const [what, pick, base, stat, target] of latRows) {
    const ours = lat.map((x) => pick(x.lat ?? nanLat));
    const raw = pp.map(base);
    fig(`\`perf send_lat -s 64\`, ${what}`, 'us', median(ours), median(raw), `${latNote}, ${stat}`, {
      ...(target !== undefined ? { target } : {}),
      rounds: roundRange(ours, raw),
    });
  }

  // 64-octet RDMA Writes through verbs, one QP, tx-depth 64: an absolute target, no raw equivalent.
  const rateIters = Math.max(1000, Math.round(2_000_000 * scale));
  const [rate] = await alternateAll(plan, [
    async () =>
      (
        await perfTwoProcess({
          test: 'write_bw',
          size: 64,
          iters: rateIters,
          txDepth: 64,
          warmUp: warmUpFor(rateIters),
        })
      ).Mmsgs,
  ]);
  fig(
    '`perf write_bw -s 64 -t 64`, message rate',
    'M msg/s',
    median(rate as number[]),
    1,
    `baseline: the absolute target of 1 M messages/s (no same-run equivalent); after ${warmUpFor(rateIters)} Writes unmeasured`,
    { target: 1 },
  );

  // MPA Markers (RFC 5044 §5) on both ends against none, all with CRC: gathered (the default, no payload
  // copied) and framed by copy (`--marker-framing copy`).
  const mIters = itersFor(total, 64 * KiB);
  const markersRun = (markerFraming?: 'copy') => async () =>
    (
      await perfTwoProcess({
        test: 'write_bw',
        size: 64 * KiB,
        iters: mIters,
        markers: true,
        ...(markerFraming ? { markerFraming } : {}),
        warmUp: warmUpFor(mIters),
      })
    ).MBps;
  const [mk, mkCopy, none] = await alternateAll(plan, [
    markersRun(),
    markersRun('copy'),
    async () =>
      (await perfTwoProcess({ test: 'write_bw', size: 64 * KiB, iters: mIters, warmUp: warmUpFor(mIters) })).MBps,
  ]);
  fig(
    '`perf write_bw -s 65536 --markers` (CRC), two processes',
    'MB/s',
    median(mk as number[]),
    median(none as number[]),
    'baseline: the same without Markers, same run (both after a quarter as many Writes unmeasured)',
    { target: 0.7, rounds: roundRange(mk as number[], none as number[]) },
  );
  fig(
    '`perf write_bw -s 65536 --markers --marker-framing copy` (CRC), two processes',
    'MB/s',
    median(mkCopy as number[]),
    median(none as number[]),
    'baseline: the same without Markers, same run (both after a quarter as many Writes unmeasured)',
    { target: 0.7, rounds: roundRange(mkCopy as number[], none as number[]) },
  );

  // perftest's -q: 8 QPs over 8 connections against 1, and the server on 1 … cores processes.
  const steps = workerSteps();
  const oneIters = itersFor(long, 64 * KiB);
  const qIters = Math.max(16, Math.ceil(oneIters / 8));
  // One QP, or 8 QPs against a server with `workers` processes; `congestion` on both ends when given.
  const oneQpRun = (congestion?: string) => () =>
    perfTwoProcess({
      test: 'write_bw',
      size: 64 * KiB,
      iters: oneIters,
      warmUp: warmUpFor(oneIters),
      ...(congestion ? { congestion } : {}),
    });
  const eightQpRun = (workers: number, congestion?: string) => () =>
    perfTwoProcess({
      test: 'write_bw',
      size: 64 * KiB,
      iters: qIters,
      qps: 8,
      workers,
      warmUp: warmUpFor(qIters),
      ...(congestion ? { congestion } : {}),
    });
  const runs: (() => Promise<PerfFigures>)[] = [oneQpRun(), ...steps.map((w) => eightQpRun(w))];
  const [one, ...scaled] = await alternateAll(plan, runs);
  const oneQp = med(one as PerfFigures[], (x) => x.MBps);
  steps.forEach((w, k) => {
    const s = scaled[k] as PerfFigures[];
    const pids = Math.max(...s.map((x) => x.serverPids.length));
    fig(
      `\`perf write_bw -s 65536 -q 8\`, server \`--workers ${w}\` (${pids} serving process${pids === 1 ? '' : 'es'})`,
      'MB/s',
      med(s, (x) => x.MBps),
      oneQp,
      'baseline: `perf write_bw -s 65536`, 1 QP, one server process, same run (each QP after a quarter as many Writes unmeasured)',
      {
        ...(w === 1 ? { target: 1 } : {}),
        rounds: roundRange(
          s.map((x) => x.MBps),
          (one as PerfFigures[]).map((x) => x.MBps),
        ),
      },
    );
  });
  // The same 8 QPs against 1 with CUBIC on every connection (docs/PERFORMANCE.md, "Congestion control").
  if (!congestionSettable) return;
  const [oneC, eightC] = await alternateAll(plan, [oneQpRun('cubic'), eightQpRun(1, 'cubic')]);
  fig(
    '`perf write_bw -s 65536 -q 8 --congestion cubic`, server `--workers 1`',
    'MB/s',
    med(eightC as PerfFigures[], (x) => x.MBps),
    med(oneC as PerfFigures[], (x) => x.MBps),
    'baseline: `perf write_bw -s 65536 --congestion cubic`, 1 QP, one server process, same run (each QP after a quarter as many Writes unmeasured)',
    {
      rounds: roundRange(
        (eightC as PerfFigures[]).map((x) => x.MBps),
        (oneC as PerfFigures[]).map((x) => x.MBps),
      ),
    },
  );
}

const nanLat = { median: Number.NaN, avg: Number.NaN, p99: Number.NaN, max: Number.NaN };

/**
 * Cost growth: `perf write_bw -s 65536 -q N` for N = 1, 10, 100, 1 000 connections: bandwidth per
 * connection and server RSS growth per connection, each against the 1-connection figure.
 */
export async function costFigures(plan: HeadlinePlan): Promise<void> {
  const total = Math.max(MiB, Math.round(256 * MiB * plan.scale));
  const size = 64 * KiB;
  const per: { n: number; MBps: number; rssKiB: number }[] = [];
  for (const n of COST_CONNECTIONS) {
    const run: PerfRun = { test: 'write_bw', size, iters: Math.max(4, Math.ceil(total / size / n)), qps: n, rss: true };
    const [s] = (await alternateAll(plan, [() => perfTwoProcess(run)])) as [PerfFigures[]];
    per.push({
      n,
      MBps: med(s, (x) => x.MBps / n),
      rssKiB: med(s, (x) => (x.rss ? (x.rss.peakKiB - x.rss.idleKiB) / n : Number.NaN)),
    });
  }
  const first = per[0] as (typeof per)[number];
  for (const p of per) {
    const n = p.n.toLocaleString('en-US').replace(',', ' ');
    plan.add(
      makeFigure(`${n} connection${p.n === 1 ? '' : 's'}: bandwidth per connection`, 'MB/s', p.MBps, first.MBps, {
        table: 'cost',
        note: 'baseline: 1 connection, same run',
      }),
    );
    plan.add(
      makeFigure(
        `${n} connection${p.n === 1 ? '' : 's'}: server RSS growth per connection`,
        'KiB',
        p.rssKiB,
        first.rssKiB,
        {
          table: 'cost',
          note: 'baseline: 1 connection, same run (peak RSS while serving minus RSS once listening, /proc)',
        },
      ),
    );
  }
}
