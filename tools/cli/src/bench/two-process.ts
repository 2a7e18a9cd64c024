/**
 * The headline figures: `rddp perf` as users run it — a server process and a client process on
 * 127.0.0.1, through verbs and RDMAP — and their baselines, each in two processes too: raw Node TCP
 * (./raw-tcp.ts) and, where installed, iperf3 (kernel TCP with no JavaScript in the path).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '../node-flags.js';

/** The CLI the figures run (`tools/cli/dist/main.js`, from src/bench and dist/bench alike). */
export const RDDP_MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
/** The raw TCP baseline program (compiled next to the CLI). */
export const RAW_TCP = fileURLToPath(new URL('../../dist/bench/raw-tcp.js', import.meta.url));
/** One child process may run this long before it is killed and the figure fails. */
const CHILD_TIMEOUT_MS = 10 * 60_000;

/** perf prints perftest's MB/sec (2^20 octets/s); the bench counts 10^6 octets/s as the baselines do. */
const MIB_PER_MB = 1.048576;

interface Ran {
  readonly code: number | null;
  readonly out: string;
  readonly err: string;
}

/** Starts `cmd`; `node` (this process's) with rddp's V8 flags, the same for rddp and the raw baselines. */
function start(cmd: string, args: readonly string[]): { child: ChildProcess; done: Promise<Ran> } {
  const argv = cmd === process.execPath ? [...NODE_FLAGS, ...args] : args;
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  const done = new Promise<Ran>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
  return { child, done };
}

async function ranOk(what: string, p: Promise<Ran>): Promise<Ran> {
  const r = await p;
  if (r.code !== 0) throw new Error(`${what} exited with code ${r.code}: ${r.err.trim().slice(-500)}`);
  return r;
}

function lastJson<T>(what: string, out: string): T {
  const line = out.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new Error(`${what} printed no JSON result: ${out.trim().slice(-300)}`);
  }
}

/** Resident set of a process in KiB from /proc (Linux); undefined elsewhere or once it has gone. */
export function rssKiB(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** USER_HZ: the unit of /proc/<pid>/stat's times (100 on every Linux that Node runs on). */
const CLOCK_TICKS_PER_S = 100;

/**
 * User + system CPU time of a process in ms (all its threads), from /proc/<pid>/stat (Linux, 10 ms
 * resolution); undefined elsewhere or once the process has been reaped.
 */
export function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "pid (comm) ": state is field 3, utime 14 and stime 15 (proc(5)).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]);
    return Number.isFinite(ticks) ? (ticks * 1000) / CLOCK_TICKS_PER_S : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A process's CPU time sampled every `everyMs` (and whenever `sample()` is called) from /proc, so that
 * the CPU it spent within a span the process itself timed can be read afterwards: `between(a, b)`
 * interpolates linearly between the samples around each end (times from `performance.now()`).
 */
export class CpuTrace {
  private readonly t: number[] = [];
  private readonly cpu: number[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly pid: number,
    everyMs = 20,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  sample(): void {
    const ms = cpuMsOf(this.pid);
    if (ms === undefined) return;
    this.t.push(performance.now());
    this.cpu.push(ms);
  }

  /** CPU ms the process spent between `from` and `to`; NaN without samples on both sides of each. */
  between(from: number, to: number): number {
    return this.at(to) - this.at(from);
  }

  private at(time: number): number {
    const { t, cpu } = this;
    if (!t.length || time < (t[0] as number) || time > (t.at(-1) as number)) return Number.NaN;
    let i = 0;
    while ((t[i + 1] ?? Number.POSITIVE_INFINITY) < time) i++;
    const t0 = t[i] as number;
    const t1 = t[i + 1] ?? t0;
    const c0 = cpu[i] as number;
    const c1 = cpu[i + 1] ?? c0;
    return t1 === t0 ? c0 : c0 + ((c1 - c0) * (time - t0)) / (t1 - t0);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

export interface PerfRun {
  readonly test: 'write_bw' | 'read_bw' | 'send_lat';
  /** `--transport` on both ends (unset: perf's default, MPA/TCP). */
  readonly transport?: 'tcp' | 'sctp';
  readonly size: number;
  readonly iters: number;
  /** perftest -t; unset: the tool's default (perftest's 128). */
  readonly txDepth?: number;
  readonly crc?: boolean;
  readonly markers?: boolean;
  /** `--marker-framing` on both ends (with `markers`). */
  readonly markerFraming?: 'gather' | 'copy';
  /** `--congestion` on both ends: their TCP congestion control (unset: the system's). */
  readonly congestion?: string;
  readonly qps?: number;
  readonly workers?: number;
  /** Unmeasured round trips (latency tests) or operations (bandwidth tests) first (perf --warm-up). */
  readonly warmUp?: number;
  /** Sample the server's RSS while it runs (cost figures). */
  readonly rss?: boolean;
  /** Each side's CPU over the client's measured span (one QP, one size): `PerfFigures.cpuMsPerMB`. */
  readonly cpu?: boolean;
}

/** The client's aggregate row (perf --json), in bench units, and the server's RSS when sampled. */
export interface PerfFigures {
  /** MB/s, 10^6 octets per second (bandwidth tests). */
  readonly MBps: number;
  /** Million messages per second (bandwidth tests). */
  readonly Mmsgs: number;
  /** Half round trip in µs (latency tests). */
  readonly lat?: { median: number; avg: number; p99: number; max: number };
  /** Distinct server processes that served the queue pairs (READY's pid). */
  readonly serverPids: readonly number[];
  /** Server RSS in KiB once listening (idle) and its peak during the run. */
  readonly rss?: { idleKiB: number; peakKiB: number };
  /**
   * Each process's user + system CPU (ms, /proc) over the client's measured span, per MB (10^6 octets)
   * measured: the span ends when the client's result line arrives and lasts as long as the client timed
   * it (warm-up, startup and connection setup left out). NaN where /proc cannot be read.
   */
  readonly cpuMsPerMB?: { client: number; server: number };
}

interface PerfJson {
  kind: 'bw' | 'lat';
  verified: boolean;
  row: {
    bytes?: number;
    iterations?: number;
    avgMBps?: number;
    msgRateMpps?: number;
    lat?: { median: number; avg: number; p99: number; max: number };
  };
  perQp?: { serverPid?: number; verified: boolean }[];
}

/** Runs `rddp perf` as two processes (server, then client on the port it prints); the client's figures. */
export async function perfTwoProcess(r: PerfRun): Promise<PerfFigures> {
  const common = [
    ...(r.crc === false ? ['--no-crc'] : []),
    ...(r.markers ? ['--markers'] : []),
    ...(r.markerFraming ? ['--marker-framing', r.markerFraming] : []),
    ...(r.congestion ? ['--congestion', r.congestion] : []),
    ...(r.transport ? ['--transport', r.transport] : []),
  ];
  const q = r.qps ?? 1;
  const server = start(process.execPath, [
    RDDP_MAIN,
    'perf',
    r.test,
    '-p',
    '0',
    '--bind_source_ip',
    '127.0.0.1',
    '-q',
    String(q),
    '--max-memory',
    String(2 ** 34),
    ...(r.workers && r.workers > 1 ? ['--workers', String(r.workers)] : []),
    ...common,
  ]);
  try {
    const port = await listeningPort(server.child, server.done);
    const pid = server.child.pid as number;
    let idle: number | undefined;
    let peak = 0;
    const sample = () => {
      const kib = rssKiB(pid);
      if (kib !== undefined) {
        idle ??= kib;
        peak = Math.max(peak, kib);
      }
    };
    if (r.rss) sample();
    const timer = r.rss ? setInterval(sample, 20) : undefined;
    const serverCpu = r.cpu ? new CpuTrace(pid) : undefined;
    let clientCpu: CpuTrace | undefined;
    let resultAt = Number.NaN; // when the client's first result line arrived
    let c: Ran;
    try {
      const client = start(process.execPath, [
        RDDP_MAIN,
        'perf',
        r.test,
        '127.0.0.1',
        '-p',
        String(port),
        '-s',
        String(r.size),
        '-n',
        String(r.iters),
        '-q',
        String(q),
        '--json',
        ...(r.txDepth !== undefined ? ['-t', String(r.txDepth)] : []),
        ...(r.warmUp ? ['--warm-up', String(r.warmUp)] : []),
        ...common,
      ]);
      if (r.cpu) {
        clientCpu = new CpuTrace(client.child.pid as number);
        client.child.stdout?.on('data', (d: Buffer) => {
          if (!Number.isNaN(resultAt) || !d.includes(10)) return;
          resultAt = performance.now();
          clientCpu?.sample();
          serverCpu?.sample();
        });
      }
      c = await ranOk(`perf ${r.test} client`, client.done);
    } finally {
      if (timer) clearInterval(timer);
      serverCpu?.stop();
      clientCpu?.stop();
    }
    await ranOk(`perf ${r.test} server`, server.done);
    const j = lastJson<PerfJson>(`perf ${r.test} client`, c.out);
    if (!j.verified) throw new Error(`perf ${r.test}: the client's data verification failed`);
    const serverPids = [...new Set((j.perQp ?? []).map((x) => x.serverPid).filter((x) => x !== undefined))];
    return {
      MBps: (j.row.avgMBps ?? Number.NaN) * MIB_PER_MB,
      Mmsgs: j.row.msgRateMpps ?? Number.NaN,
      ...(j.row.lat ? { lat: j.row.lat } : {}),
      serverPids,
      ...(r.rss && idle !== undefined ? { rss: { idleKiB: idle, peakKiB: peak } } : {}),
      ...(serverCpu && clientCpu ? { cpuMsPerMB: measuredCpu(j, resultAt, clientCpu, serverCpu) } : {}),
    };
  } finally {
    server.child.kill();
  }
}

/** Each side's CPU per MB over the span the client measured, which ended when its result line arrived. */
function measuredCpu(j: PerfJson, end: number, client: CpuTrace, server: CpuTrace): { client: number; server: number } {
  const octets = (j.row.bytes ?? Number.NaN) * (j.row.iterations ?? Number.NaN);
  // perf's MB/sec is 2^20 octets per second.
  const ms = (octets / 2 ** 20 / (j.row.avgMBps ?? Number.NaN)) * 1000;
  const mb = octets / 1e6;
  return { client: client.between(end - ms, end) / mb, server: server.between(end - ms, end) / mb };
}

/** The port from the server's "listening on HOST:PORT" line on stderr. */
async function listeningPort(child: ChildProcess, done: Promise<Ran>): Promise<number> {
  let seen = '';
  const port = new Promise<number>((resolve) => {
    child.stderr?.on('data', (d) => {
      seen += d;
      const m = /listening on \S+:(\d+)/.exec(seen);
      if (m) resolve(Number(m[1]));
    });
  });
  const ended = done.then((r) => {
    throw new Error(`the perf server exited before listening (code ${r.code}): ${r.err.trim().slice(-300)}`);
  });
  return Promise.race([port, ended]);
}

/**
 * Raw Node TCP bulk transfer between two processes: `total` octets in `size`-octet writes, timed after
 * `warm` unmeasured ones. MB/s.
 */
export async function rawTcpTwoProcess(total: number, size: number, warm = 0, congestion?: string): Promise<number> {
  const r = await ranOk(
    'raw TCP bulk',
    start(process.execPath, [
      RAW_TCP,
      'bulk',
      String(total),
      String(size),
      String(warm),
      ...(congestion ? [congestion] : []),
    ]).done,
  );
  return lastJson<{ MBps: number }>('raw TCP bulk', r.out).MBps;
}

export interface PingPong {
  readonly medianUs: number;
  readonly meanUs: number;
  readonly p99Us: number;
  readonly maxUs: number;
}

/** Raw Node TCP ping-pong between two processes: `iters` measured round trips after `warm` unmeasured. */
export async function rawPingPongTwoProcess(iters: number, size: number, warm: number): Promise<PingPong> {
  const r = await ranOk(
    'raw TCP ping-pong',
    start(process.execPath, [RAW_TCP, 'pingpong', String(iters), String(size), String(warm)]).done,
  );
  return lastJson<PingPong>('raw TCP ping-pong', r.out);
}

/**
 * Whether TCP connections here can be set to congestion control `name`: Linux lists it in
 * net.ipv4.tcp_allowed_congestion_control (what an unprivileged socket may pick) and `@rddp/writev` is built.
 */
export function tcpCongestionSettable(name: string): boolean {
  try {
    const allowed = readFileSync('/proc/sys/net/ipv4/tcp_allowed_congestion_control', 'utf8').split(/\s+/);
    if (!allowed.includes(name)) return false;
    const m = createRequire(import.meta.url)('@rddp/writev') as { congestionControl?: unknown };
    return typeof m.congestionControl === 'function';
  } catch {
    return false;
  }
}

/** Whether iperf3 runs here. */
export function iperf3Installed(): boolean {
  const r = spawnSync('iperf3', ['--version'], { stdio: 'ignore' });
  return !r.error && r.status === 0;
}

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  await once(s, 'close');
  return port;
}

/**
 * `iperf3 -l <len>` between two processes on 127.0.0.1 moving `total` octets: the receiver's MB/s
 * (`-C congestion` when given).
 */
export async function iperf3Bandwidth(len: number, total: number, congestion?: string): Promise<number> {
  const port = await freePort();
  const server = start('iperf3', ['-s', '-1', '--forceflush', '-B', '127.0.0.1', '-p', String(port)]);
  try {
    await new Promise<void>((resolve, reject) => {
      let seen = '';
      server.child.stdout?.on('data', (d) => {
        seen += d;
        if (seen.includes('Server listening')) resolve();
      });
      server.done.then((r) => reject(new Error(`iperf3 -s exited (code ${r.code}): ${r.err.trim()}`)), reject);
    });
    const c = await ranOk(
      'iperf3 -c',
      start('iperf3', [
        '-c',
        '127.0.0.1',
        '-p',
        String(port),
        '-l',
        String(len),
        '-n',
        String(total),
        '-J',
        ...(congestion ? ['-C', congestion] : []),
      ]).done,
    );
    const j = JSON.parse(c.out) as { end?: { sum_received?: { bits_per_second?: number } } };
    const bps = j.end?.sum_received?.bits_per_second;
    if (typeof bps !== 'number') throw new Error('iperf3 -J printed no sum_received');
    return bps / 8 / 1e6;
  } finally {
    server.child.kill();
  }
}
