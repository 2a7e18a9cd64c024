/**
 * perftest-style tests over rddp (ib_write_bw, ib_read_lat, ...). Both ends speak a small control
 * protocol of Sends carrying JSON (HELLO → READY per run, RESULT at the end); the measured traffic is
 * plain RDMA Writes, Reads and Sends. Data is verified at the end of every size unless --no-verify.
 */
import { Access } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { ACCESS_REMOTE_ATOMIC, AtomicOpcode } from '@rddp/rdmap';
import type { RdmapStreamBuilder } from '@rddp/stack';
import { filter, firstValueFrom } from 'rxjs';
import { summarizeLatency } from '../bench/stats.js';
import { PeerWatch } from '../peer.js';
import { RdmaSession } from '../rping/session.js';
import { PerfBadMessageError, PerfHelloRefusedError, PerfServerRefusedError } from './errors.js';
import type { BwRow, LatRow } from './format.js';
import { mbPerSec } from './format.js';
import {
  CONTROL_SIZE,
  checkHello,
  checkResult,
  type Hello,
  MemoryBudget,
  PERF_DEFAULT_LIMITS,
  type PerfServerLimits,
  type PerfServerRun,
  SEND_CREDIT_BATCH,
  SEND_RECEIVES,
  serverMemory,
} from './hello.js';
import { OpWindow } from './window.js';

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

/** RFC 7306 Fetch-and-Add of this much per operation in the atomic tests (the final word is checked). */
const ATOMIC_ADD = 3n;
export type PerfTest = (typeof PERF_TESTS)[number];

export interface PerfParams {
  readonly test: PerfTest;
  readonly sizes: readonly number[];
  readonly iters: number;
  /** Run each size for this many seconds instead of `iters` (perftest -D). */
  readonly durationS?: number;
  readonly txDepth: number;
  readonly verify: boolean;
}

export type PerfResult =
  | { kind: 'bw'; row: BwRow; verified: boolean }
  | { kind: 'lat'; row: LatRow; verified: boolean };

/** Where `--debug` sends protocol events (Terminates sent or received); off by default. */
export const perfDebug: { log: ((s: string) => void) | undefined } = { log: undefined };
/** How long a close (after a refusal or a failure) may take before the LLP connection is aborted. */
const CLOSE_WITHIN_MS = 2000;

/** Deterministic payload octets so both ends can check data without shipping it. */
export function fillPattern(buf: Uint8Array, seed: number): void {
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < buf.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    buf[i] = x >>> 24;
  }
}

class Control {
  private readonly buffers: Uint8Array[] = [];
  constructor(private readonly s: RdmaSession) {
    for (let i = 0; i < 4; i++) this.repost(new Uint8Array(CONTROL_SIZE));
  }
  private repost(b: Uint8Array): void {
    this.buffers.push(b);
    this.s.postReceive(b);
  }
  async send(msg: object): Promise<void> {
    await this.s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify(msg))] });
  }
  /** The next control message's octets (the buffer is reposted once they are copied out). */
  async recv(): Promise<Uint8Array> {
    const c = await this.s.recv();
    const b = c.buffer;
    const msg = b.slice(0, c.byteLength);
    this.repost(b);
    return msg;
  }
}

interface Ready {
  type: 'ready';
  addr: string;
  rkey: number;
  /** The serving process (a `--workers` server serves from several). */
  pid: number;
}

/** The server's answer to a HELLO it does not serve; it closes the connection after it. */
interface Refused {
  type: 'refused';
  reason: string;
}

/** Client side: READY, or the server's refusal (PerfServerRefusedError). */
function readReady(octets: Uint8Array): { addr: bigint; rkey: number; pid?: number } {
  let m: { type?: unknown; reason?: unknown; addr?: unknown; rkey?: unknown; pid?: unknown } | null = null;
  try {
    m = JSON.parse(new TextDecoder().decode(octets));
  } catch {
    m = null;
  }
  if (m?.type === 'refused') throw new PerfServerRefusedError(String(m.reason).slice(0, 300));
  if (m?.type !== 'ready' || typeof m.addr !== 'string' || !/^\d{1,20}$/.test(m.addr) || !Number.isInteger(m.rkey))
    throw new PerfBadMessageError('the server answered HELLO with neither READY nor REFUSED');
  const pid = Number.isInteger(m.pid) && (m.pid as number) > 0 ? (m.pid as number) : undefined;
  return { addr: BigInt(m.addr), rkey: m.rkey as number, ...(pid !== undefined ? { pid } : {}) };
}

/** What a server holds to its clients (the defaults serve any one-stream run). */
export interface PerfServeOptions {
  readonly limits?: PerfServerLimits;
  /** Shared by every stream and connection one server serves; by default this stream's alone. */
  readonly budget?: MemoryBudget;
  /** The test this server runs: a HELLO for another is refused. */
  readonly test?: PerfTest;
  /** The sizes and run length this server's flags fixed: a HELLO asking otherwise is refused. */
  readonly run?: PerfServerRun;
  /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
  readonly rdmapFactory?: RdmapStreamBuilder;
}

/** How a client builds its session (`perfClient`'s last argument). */
export interface PerfClientOptions {
  /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
  readonly rdmapFactory?: RdmapStreamBuilder;
  /** Hears the server's READY: the pid of the process serving this queue pair, when it says. */
  readonly onReady?: (serverPid: number | undefined) => void;
  /** Awaited after READY, before the first measured operation: starts every queue pair of `-q N` together. */
  readonly start?: () => Promise<void>;
  /** Latency tests: round trips made and not measured before each size's measured ones (a warm JIT). */
  readonly warmUp?: number;
}

function maxSize(p: PerfParams): number {
  return Math.max(...p.sizes, 1);
}

/**
 * Server side: answers one client's run, returns its results (sent back by the client). A HELLO outside
 * the server's limits is answered with REFUSED, the connection closed, and PerfHelloRefusedError thrown.
 */
export async function perfServe(
  conn: LlpConnection,
  profile: 'ietf' | 'rdmac',
  log: (s: string) => void,
  stream = 0,
  options: PerfServeOptions = {},
): Promise<PerfResult[]> {
  const limits = options.limits ?? PERF_DEFAULT_LIMITS;
  const budget = options.budget ?? new MemoryBudget(limits.maxMemory);
  // The server offers the RFC 7306 atomics (IETF profile); a client uses them only in atomic_* tests.
  const s = new RdmaSession(conn, {
    profile,
    stream,
    ...(profile === 'ietf' ? { extensions: { atomics: true } } : {}),
    ...(perfDebug.log ? { debug: perfDebug.log } : {}),
    ...(options.rdmapFactory ? { rdmapFactory: options.rdmapFactory } : {}),
  });
  const watch = new PeerWatch(conn, s.rdmap.terminate$);
  // One buffer for HELLO; what follows depends on the test.
  s.postReceive(new Uint8Array(CONTROL_SIZE));
  let reserved = 0;
  try {
    const first = await s.recv();
    let hello: Hello;
    try {
      hello = checkHello(first.buffer.subarray(0, first.byteLength), limits, options.test, profile, options.run);
      const need = serverMemory(hello.params);
      if (!budget.reserve(need))
        throw new PerfHelloRefusedError(
          `busy: ${need} octets of buffers asked, ${budget.inUse} of --max-memory ${budget.limit} in use`,
        );
      reserved = need;
    } catch (e) {
      if (e instanceof PerfHelloRefusedError) {
        const refused: Refused = { type: 'refused', reason: e.reason };
        await s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify(refused))] }).catch(() => {});
      }
      throw e;
    }
    return await serveRun(s, hello, log);
  } catch (e) {
    await s.closeWithin(CLOSE_WITHIN_MS);
    throw await watch.explain(e); // the client's Terminate, reset or close in mid-run, if that is what failed
  } finally {
    budget.release(reserved);
  }
}

/** The measured part of one run, after a HELLO that passed the checks. */
async function serveRun(s: RdmaSession, hello: Hello, log: (s: string) => void): Promise<PerfResult[]> {
  const p = hello.params;
  const isSend = p.test === 'send_bw' || p.test === 'send_lat';
  const ctl = isSend ? undefined : new Control(s);
  const buf = new Uint8Array(maxSize(p));
  const region = s.register(
    buf,
    Access.RemoteWrite |
      Access.RemoteRead |
      Access.LocalRead |
      Access.LocalWrite |
      (p.test.startsWith('atomic') ? ACCESS_REMOTE_ATOMIC : 0),
  );
  if (p.test === 'read_bw' || p.test === 'read_lat') fillPattern(buf, 1);
  // send_bw / send_lat: receive buffers on the Send queue, replenished as they complete.
  const recvs: Uint8Array[] = [];
  if (isSend) for (let i = 0; i < SEND_RECEIVES; i++) recvs.push(new Uint8Array(Math.max(CONTROL_SIZE, maxSize(p))));
  let stop = false;
  if (p.test === 'write_lat') {
    // Ping-pong by memory: a complete Write into our region is answered with a Write of the same size back.
    s.rdmap.ddp.placement$.pipe(filter((e) => e.last)).subscribe((e) => {
      if (stop) return;
      const n = Number(e.to - region.addr) + e.length;
      void s
        .post({ type: 'write', sinkStag: hello.rkey, sinkTo: BigInt(hello.addr), payload: [buf.subarray(0, n)] })
        .catch(() => {});
    });
  }
  if (isSend) for (const r of recvs) s.postReceive(r); // before READY: the client starts sending on it
  const ready: Ready = { type: 'ready', addr: region.addr.toString(), rkey: region.stag, pid: process.pid };
  await s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify(ready))] });
  if (isSend) {
    // Measured Sends and the final RESULT share QN 0: everything is received in arrival order.
    let mismatches = 0;
    let sinceCredit = 0;
    for (;;) {
      const c = await s.recv();
      if (isResult(c.buffer, c.byteLength)) {
        stop = true;
        if (mismatches) log(`${mismatches} received Sends did not hold the expected payload`);
        const results = checkResult(c.buffer.subarray(0, c.byteLength), p);
        await s.close().catch(() => {});
        return results;
      }
      if (!samplesMatch(c.buffer, c.byteLength)) mismatches++;
      s.postReceive(c.buffer);
      if (p.test === 'send_lat') await s.post({ type: 'send', payload: [c.buffer.subarray(0, c.byteLength)] });
      else if (++sinceCredit === SEND_CREDIT_BATCH) {
        sinceCredit = 0;
        await s.post({ type: 'send', payload: [new Uint8Array(0)] }); // a credit: SEND_CREDIT_BATCH more buffers posted
      }
    }
  }
  let results: PerfResult[];
  try {
    results = checkResult(await (ctl as Control).recv(), p);
  } finally {
    stop = true;
  }
  log(`run finished: ${results.length} sizes`);
  await s.close().catch(() => {});
  return results;
}

/** Client side: runs every size and returns one result per size. */
export async function perfClient(
  conn: LlpConnection,
  profile: 'ietf' | 'rdmac',
  p: PerfParams,
  onResult: (r: PerfResult) => void,
  onProgress?: (done: number, total: number) => void,
  stream = 0,
  options: PerfClientOptions = {},
): Promise<PerfResult[]> {
  const atomic = p.test.startsWith('atomic');
  if (atomic && profile !== 'ietf')
    throw new Error('the RFC 7306 atomics extend RDMAP version 1: not on the RDMA Consortium profile');
  const s = new RdmaSession(conn, {
    profile,
    stream,
    ...(atomic ? { extensions: { atomics: true } } : {}),
    ...(perfDebug.log ? { debug: perfDebug.log } : {}),
    ...(options.rdmapFactory ? { rdmapFactory: options.rdmapFactory } : {}),
  });
  const watch = new PeerWatch(conn, s.rdmap.terminate$);
  try {
    return await clientRun(s, p, onResult, onProgress, options);
  } catch (e) {
    throw await watch.explain(e); // the server's Terminate, reset or close in mid-run, if that is what failed
  }
}

/** The client's run on one session: HELLO, every size, RESULT. */
async function clientRun(
  s: RdmaSession,
  p: PerfParams,
  onResult: (r: PerfResult) => void,
  onProgress?: (done: number, total: number) => void,
  options: PerfClientOptions = {},
): Promise<PerfResult[]> {
  const atomic = p.test.startsWith('atomic');
  const isSend = p.test === 'send_bw' || p.test === 'send_lat';
  const ctl = isSend ? undefined : new Control(s);
  const local = new Uint8Array(maxSize(p));
  const region = s.register(local, Access.RemoteWrite | Access.LocalRead | Access.LocalWrite);
  const hello: Hello = { type: 'hello', params: p, addr: region.addr.toString(), rkey: region.stag };
  let remote: { addr: bigint; rkey: number; pid?: number };
  try {
    if (ctl) {
      await ctl.send(hello);
      remote = readReady(await ctl.recv());
    } else {
      // Send tests: our receives carry the credits / echoes; the first one carries READY.
      const rb = Array.from({ length: SEND_CREDIT_BATCH }, () => new Uint8Array(Math.max(CONTROL_SIZE, maxSize(p))));
      for (const b of rb) s.postReceive(b);
      await s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify(hello))] });
      const c = await s.recv();
      remote = readReady(c.buffer.subarray(0, c.byteLength));
      s.postReceive(c.buffer);
    }
    options.onReady?.(remote.pid);
    await options.start?.();
  } catch (e) {
    await s.closeWithin(CLOSE_WITHIN_MS);
    throw e;
  }
  const results: PerfResult[] = [];
  // send_bw flow control: the server posted this many buffers and announces each batch it reposts.
  let credits = SEND_CREDIT_BATCH * 2;
  const until = (start: number, i: number) =>
    p.durationS ? performance.now() - start < p.durationS * 1000 : i < p.iters;
  let atomicOps = 0n;
  const fetchAdd = () => {
    atomicOps++;
    return s.post({
      type: 'atomic',
      atomicOpcode: AtomicOpcode.FetchAdd,
      remoteStag: remote.rkey,
      remoteTo: remote.addr,
      addOrSwapData: ATOMIC_ADD,
    });
  };
  for (const [k, size] of (atomic ? [8] : p.sizes).entries()) {
    fillPattern(local.subarray(0, size), size);
    const payload = local.subarray(0, size);
    let result: PerfResult;
    if (p.test.endsWith('_bw')) {
      const t0 = performance.now();
      let issued = 0;
      let completed = 0;
      let peak = 0;
      let windowStart = t0;
      let windowDone = 0;
      const window = Math.max(p.txDepth, 16);
      const ops = new OpWindow(() => {
        completed++;
        windowDone++;
        if (windowDone === window) {
          const now = performance.now();
          peak = Math.max(peak, mbPerSec(window * size, now - windowStart));
          windowStart = now;
          windowDone = 0;
        }
      });
      while (until(t0, issued)) {
        if (p.test === 'send_bw') {
          while (credits === 0) {
            await s.recv().then((c) => s.postReceive(c.buffer));
            credits += SEND_CREDIT_BATCH;
          }
          credits--;
        }
        const op = atomic
          ? fetchAdd()
          : p.test === 'write_bw'
            ? s.post({ type: 'write', sinkStag: remote.rkey, sinkTo: remote.addr, payload: [payload] })
            : p.test === 'read_bw'
              ? s.post({
                  type: 'read',
                  sinkStag: region.stag,
                  sinkTo: region.addr,
                  size,
                  srcStag: remote.rkey,
                  srcTo: remote.addr,
                })
              : s.post({ type: 'send', payload: [payload] });
        issued++;
        ops.track(op);
        if (ops.full(p.txDepth)) await ops.room(p.txDepth);
      }
      await ops.drain();
      const ms = performance.now() - t0;
      const avg = mbPerSec(completed * size, ms);
      const verified = p.verify ? await verify(s, p.test, size, local, region, remote, atomicOps) : true;
      result = {
        kind: 'bw',
        verified,
        row: {
          bytes: size,
          iterations: completed,
          peakMBps: Math.max(peak, avg),
          avgMBps: avg,
          msgRateMpps: completed / (ms * 1000),
        },
      };
    } else {
      const samples: number[] = [];
      const warm = options.warmUp ?? 0;
      const t0 = performance.now();
      for (let i = -warm; i < 0 || until(t0, i); i++) {
        const ts = performance.now();
        if (atomic) {
          await fetchAdd();
        } else if (p.test === 'read_lat') {
          await s.post({
            type: 'read',
            sinkStag: region.stag,
            sinkTo: region.addr,
            size,
            srcStag: remote.rkey,
            srcTo: remote.addr,
          });
        } else if (p.test === 'write_lat') {
          const back = firstValueFrom(s.rdmap.ddp.placement$.pipe(filter((e) => e.last)));
          await s.post({ type: 'write', sinkStag: remote.rkey, sinkTo: remote.addr, payload: [payload] });
          await back;
        } else {
          const echo = s.recv();
          await s.post({ type: 'send', payload: [payload] });
          const c = await echo;
          s.postReceive(c.buffer);
        }
        if (i >= 0) samples.push(((performance.now() - ts) * 1000) / (p.test === 'read_lat' || atomic ? 1 : 2));
      }
      const verified = p.verify ? await verify(s, p.test, size, local, region, remote, atomicOps) : true;
      result = {
        kind: 'lat',
        verified,
        row: { bytes: size, iterations: samples.length, lat: summarizeLatency(samples) },
      };
    }
    results.push(result);
    onResult(result);
    onProgress?.(k + 1, p.sizes.length);
  }
  const msg = { type: 'result', results };
  if (ctl) await ctl.send(msg);
  else await s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify(msg))] });
  await s.close().catch(() => {});
  return results;
}

const RESULT_PREFIX = new TextEncoder().encode('{"type":"result"');
function isResult(b: Uint8Array, n: number): boolean {
  return n >= RESULT_PREFIX.length && Buffer.compare(b.subarray(0, RESULT_PREFIX.length), RESULT_PREFIX) === 0;
}

/** The first and last 64 octets of a received Send against the pattern of its size (a cheap check per message). */
function samplesMatch(b: Uint8Array, n: number): boolean {
  const all = patternCache(n);
  const k = Math.min(64, n);
  return (
    Buffer.compare(b.subarray(0, k), all.subarray(0, k)) === 0 &&
    Buffer.compare(b.subarray(n - k, n), all.subarray(n - k, n)) === 0
  );
}

const patterns = new Map<number, Uint8Array>();
function patternCache(n: number): Uint8Array {
  let p = patterns.get(n);
  if (!p) {
    p = new Uint8Array(n);
    fillPattern(p, n);
    patterns.set(n, p);
  }
  return p;
}

/** Reads back / compares what the size's run moved. */
async function verify(
  s: RdmaSession,
  test: PerfTest,
  size: number,
  local: Uint8Array,
  region: { stag: number; addr: bigint },
  remote: { addr: bigint; rkey: number },
  atomicOps = 0n,
): Promise<boolean> {
  if (test.startsWith('atomic')) {
    // The word every Fetch-and-Add hit must hold their sum (read back over RDMA Read, network byte order).
    await s.post({
      type: 'read',
      sinkStag: region.stag,
      sinkTo: region.addr,
      size: 8,
      srcStag: remote.rkey,
      srcTo: remote.addr,
    });
    return new DataView(local.buffer, local.byteOffset, 8).getBigUint64(0) === atomicOps * ATOMIC_ADD;
  }
  const expected = new Uint8Array(size);
  if (test === 'read_bw' || test === 'read_lat') {
    fillPattern(expected, 1);
    return Buffer.compare(local.subarray(0, size), expected) === 0;
  }
  fillPattern(expected, size);
  if (test === 'write_bw' || test === 'write_lat') {
    // Read the server's region back over the wire and compare with what was written.
    local.fill(0, 0, size);
    await s.post({
      type: 'read',
      sinkStag: region.stag,
      sinkTo: region.addr,
      size,
      srcStag: remote.rkey,
      srcTo: remote.addr,
    });
    return Buffer.compare(local.subarray(0, size), expected) === 0;
  }
  // Sends: the payload buffer is ours; the server counted them — check the payload was not disturbed.
  return Buffer.compare(local.subarray(0, size), expected) === 0;
}

/** Sums per-stream results of one size into one row (bandwidth adds up; latency: the worst stream's). */
export function aggregate(perStream: readonly PerfResult[]): PerfResult {
  const first = perStream[0] as PerfResult;
  const verified = perStream.every((r) => r.verified);
  if (first.kind === 'bw') {
    const rows = perStream.map((r) => (r as Extract<PerfResult, { kind: 'bw' }>).row);
    return {
      kind: 'bw',
      verified,
      row: {
        bytes: first.row.bytes,
        iterations: rows.reduce((a, r) => a + r.iterations, 0),
        peakMBps: rows.reduce((a, r) => a + r.peakMBps, 0),
        avgMBps: rows.reduce((a, r) => a + r.avgMBps, 0),
        msgRateMpps: rows.reduce((a, r) => a + r.msgRateMpps, 0),
      },
    };
  }
  const worst = perStream.reduce((a, r) => ((r.row as LatRow).lat.median > (a.row as LatRow).lat.median ? r : a));
  return { ...worst, verified };
}
