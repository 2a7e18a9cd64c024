/**
 * perftest-style tests over rddp (ib_write_bw, ib_read_lat, ...), through verbs as perftest runs through
 * libibverbs: registered memory regions, work requests on a queue pair, completions from its CQs. Both
 * ends speak a small control protocol of Sends carrying JSON: HELLO → READY per run (or REFUSED, and the
 * close), RESULT at the end; under `-b`, per size, the client's START → the server's GO (both ends measure
 * from it) and the server's SIDE (its direction's figures) once the size is done. The measured traffic is plain RDMA Writes, Reads and Sends, posted unsignaled but for one in `cqMod`
 * (perftest's CQ moderation). Data is verified at the end of every size unless --no-verify.
 */
import { type LlpConnection, type MemoryReservation, processMemoryBudget, sourceKey } from '@rddp/llp';
import type { RdmapStreamBuilder } from '@rddp/stack';
import { Access, type Device, type Mr, type RemoteBuffer, type SendWorkRequest, type Sge } from '@rddp/verbs';
import { filter, firstValueFrom } from 'rxjs';
import { PeerWatch, streamEnded, withinMs } from '../peer.js';
import {
  PerfBadMessageError,
  PerfHelloRefusedError,
  PerfServerRefusedError,
  PerfStepTimeoutError,
  PerfVersionError,
  PerfWriteBackError,
} from './errors.js';
import { type BwRow, type LatRow, mbPerSec, perfLatency } from './format.js';
import {
  CONTROL_SIZE,
  checkHello,
  checkResult,
  checkVersion,
  type Hello,
  MemoryBudget,
  PERF_DEFAULT_LIMITS,
  PERF_PROTOCOL_VERSION,
  type PerfServerLimits,
  type PerfServerRun,
  SEND_CREDIT_BATCH,
  SEND_RECEIVES,
  serverMemory,
} from './hello.js';
import { PerfSession } from './session.js';
import type { PerfTest } from './tests.js';

export { PERF_TESTS, type PerfTest } from './tests.js';

/** RFC 7306 Fetch-and-Add of this much per operation in the atomic tests (the final word is checked). */
const ATOMIC_ADD = 3n;

export interface PerfParams {
  readonly test: PerfTest;
  readonly sizes: readonly number[];
  readonly iters: number;
  /** Run each size for this many seconds instead of `iters` (perftest -D). */
  readonly durationS?: number;
  readonly txDepth: number;
  /**
   * Bandwidth tests: one send work request in this many is signaled (perftest's `--cq-mod`, at most the
   * tx-depth); the others complete silently, counted by the signaled one after them. Unset: `cqModFor`.
   */
  readonly cqMod?: number;
  /** RDMA Reads and atomics outstanding at once (perftest's `--outs`: the ORD, RFC 5040 §6.1). */
  readonly outs?: number;
  readonly verify: boolean;
  /** perftest's `-b`: both ends run the bandwidth test towards each other at once (BIDIRECTIONAL_TESTS). */
  readonly bidirectional?: boolean;
}

import { CQ_MOD_SIZE_LIMIT, DEFAULT_CQ_MOD, DEFAULT_OUTS, PERF_MAX_OUTS, PERF_MAX_TX_DEPTH } from './limits.js';

export type PerfResult =
  | { kind: 'bw'; row: BwRow; verified: boolean }
  | { kind: 'lat'; row: LatRow; verified: boolean };

/** Where `--debug` sends protocol events (Terminates sent or received); off by default. */
export const perfDebug: { log: ((s: string) => void) | undefined } = { log: undefined };
/** How long a close (after a refusal or a failure) may take before the LLP connection is aborted. */
const CLOSE_WITHIN_MS = 2000;

/**
 * The least a `-b` control step (the server's wait for START, the client's for GO) may take before the run
 * ends with PerfStepTimeoutError: 30 s. `RDDP_PERF_STEP_TIMEOUT_MS` (a positive integer) lowers or raises
 * it; it is a hook for tests, which cannot wait 30 s for a silent peer, and no flag sets it.
 */
const STEP_TIMEOUT_MS = 30_000;
function stepFloorMs(): number {
  const v = Number(process.env.RDDP_PERF_STEP_TIMEOUT_MS);
  return Number.isSafeInteger(v) && v > 0 ? v : STEP_TIMEOUT_MS;
}

/**
 * Bounds a `-b` control step. Since `mark` this end made the same operations the peer makes (its fill,
 * warm-up, measured span and verification of the size): the peer gets twice that time, and at least
 * `stepFloorMs()`, so a long -n or -D run is never cut short and a silent peer is, within its bound.
 */
class StepClock {
  private mark = performance.now();
  /** The step just taken: the next one is bounded from now. */
  taken(): void {
    this.mark = performance.now();
  }
  /** `p`, or PerfStepTimeoutError naming `step` once the bound passes; the loser's rejection is handled. */
  within<T>(p: Promise<T>, step: string): Promise<T> {
    const ms = Math.max(stepFloorMs(), Math.ceil(2 * (performance.now() - this.mark)));
    return withinMs(p, ms, () => new PerfStepTimeoutError(step, ms));
  }
}

/** Deterministic payload octets so both ends can check data without shipping it. */
export function fillPattern(buf: Uint8Array, seed: number): void {
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < buf.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    buf[i] = x >>> 24;
  }
}

/** Receives posted for control messages (HELLO/READY/RESULT) besides the measured traffic's. */
const CONTROL_RECEIVES = 4;
/** Send work requests a run keeps besides its tx-depth (control messages, the verify Read). */
const CONTROL_SENDS = 4;

/** Registered buffers for control messages: one to send from, `receives` posted for the peer's. */
class Control {
  private readonly out: Mr;
  constructor(
    private readonly s: PerfSession,
    receives = CONTROL_RECEIVES,
  ) {
    this.out = s.register(new Uint8Array(CONTROL_SIZE), Access.LocalRead);
    const rx = s.register(new Uint8Array(CONTROL_SIZE * receives), Access.LocalWrite);
    for (let i = 0; i < receives; i++) s.repost(rx.sge(i * CONTROL_SIZE, CONTROL_SIZE));
  }
  /** Sends `msg` as JSON (a Send, RFC 5040 §5.3) and resolves once it completed. */
  async send(msg: object): Promise<void> {
    const octets = new TextEncoder().encode(JSON.stringify(msg));
    if (octets.length > CONTROL_SIZE) throw new PerfBadMessageError(`a control message of ${octets.length} octets`);
    this.out.buffer.set(octets);
    await this.s.qp.send(this.out.sge(0, octets.length));
  }
  /** The next control message's octets (the receive is posted again once they are copied out). */
  async recv(): Promise<Uint8Array> {
    const r = await this.s.recv();
    const msg = received(r.sge, r.byteLength).slice();
    this.s.repost(r.sge);
    return msg;
  }
}

/** The octets a receive into `sge` filled. */
function received(sge: Sge, byteLength: number): Uint8Array {
  const off = sge.offset ?? 0;
  return sge.mr.buffer.subarray(off, off + byteLength);
}

interface Ready {
  type: 'ready';
  version: number;
  addr: string;
  rkey: number;
  /** The serving process (a `--workers` server serves from several). */
  pid: number;
}

/** The server's answer to a HELLO it does not serve; it closes the connection after it. */
interface Refused {
  type: 'refused';
  version: number;
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
  // A READY or REFUSED of another protocol version (or of none: an rddp before versions) is that, first.
  if (typeof m === 'object' && m !== null && (m.type === 'ready' || m.type === 'refused')) checkVersion(m, 'server');
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
  /**
   * The sizes and run length this server's flags fixed, and its `-b`: a HELLO asking otherwise is refused.
   * Left out, the server runs one direction only (a `-b` HELLO is refused) and takes any sizes and length.
   */
  readonly run?: PerfServerRun;
  /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
  readonly rdmapFactory?: RdmapStreamBuilder;
  /** The verbs device queue pairs are opened on (a stack's `device()`; default: one per session). */
  readonly device?: Device;
}

/** How a client builds its session (`perfClient`'s last argument). */
export interface PerfClientOptions {
  /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
  readonly rdmapFactory?: RdmapStreamBuilder;
  /** The verbs device queue pairs are opened on (a stack's `device()`; default: one per session). */
  readonly device?: Device;
  /** Hears the server's READY: the pid of the process serving this queue pair, when it says. */
  readonly onReady?: (serverPid: number | undefined) => void;
  /**
   * Awaited before each size's measured operations (bandwidth tests: after the size's warm-up): starts
   * every queue pair of `-q N` together. Every QP awaits it once per size.
   */
  readonly start?: () => Promise<void>;
  /**
   * Awaited once each size's measured operations have completed and been timed, before their verification
   * and the next size: no QP of `-q N` verifies or moves on while another is still measuring.
   */
  readonly finish?: () => Promise<void>;
  /**
   * Round trips (latency tests) or operations (bandwidth tests) made and not measured before each size's
   * measured ones (a warm JIT).
   */
  readonly warmUp?: number;
  /**
   * Hears the octets the client's operations moved (warm-up included), as the engine accounts for them:
   * per signaled completion in bandwidth tests, per operation in latency tests (progress, without a
   * subscription to every RDMAP completion).
   */
  readonly onMoved?: (octets: number) => void;
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
  // The server's -b, and its -o under -b, are known before HELLO: its queue pair is sized for them, and a
  // HELLO asking otherwise is refused.
  const bidi = options.run?.bidirectional === true;
  const outs = options.run?.outs ?? DEFAULT_OUTS;
  const run = { ...options.run, bidirectional: bidi, ...(bidi ? { outs } : {}) };
  // The server offers the RFC 7306 atomics (IETF profile); a client uses them only in atomic_* tests.
  const s = new PerfSession(conn, {
    profile,
    stream,
    ...(profile === 'ietf' ? { extensions: { atomics: true } } : {}),
    ...(perfDebug.log ? { debug: perfDebug.log } : {}),
    ...(options.rdmapFactory ? { rdmapFactory: options.rdmapFactory } : {}),
    ...(options.device ? { device: options.device } : {}),
    // The server answers one message at a time (READY, credits, echoes, write_lat's replies); under -b
    // it also keeps a client-chosen tx-depth of operations outstanding, its Reads and atomics at its -o.
    maxSendWr: CONTROL_SENDS * 4 + (bidi ? PERF_MAX_TX_DEPTH : 0),
    ...(bidi ? { ord: outs } : {}),
    // Reads and atomics a client may have outstanding (its --outs) are served at once, up to the most
    // --outs allows (RFC 5040 §6.1: the requester's ORD must not exceed the responder's IRD).
    ird: PERF_MAX_OUTS,
    maxRecvWr: 1 + CONTROL_RECEIVES + SEND_RECEIVES,
  });
  const watch = new PeerWatch(conn, s.qp.terminate$);
  // One buffer for HELLO; what follows depends on the test.
  const helloMr = s.register(new Uint8Array(CONTROL_SIZE), Access.LocalWrite);
  s.repost(helloMr.sge());
  let reserved = 0;
  let fromProcess: MemoryReservation | undefined;
  try {
    const first = await s.recv();
    let hello: Hello;
    try {
      hello = checkHello(received(first.sge, first.byteLength), limits, options.test, profile, run);
      const need = serverMemory(hello.params);
      if (!budget.reserve(need))
        throw new PerfHelloRefusedError(
          `busy: ${need} octets of buffers asked, ${budget.inUse} of --max-memory ${budget.limit} in use`,
        );
      reserved = need;
      // The same octets out of the process's one budget (its limit, not a source's share: --max-memory
      // and --max-size already bound one client, and perftest's -a sweep alone needs more than a quarter).
      const pb = processMemoryBudget();
      fromProcess = pb.reserve(need, sourceKey(conn.remoteAddress.host ?? ''), { share: false });
      if (fromProcess === undefined)
        throw new PerfHelloRefusedError(
          `busy: ${need} octets of buffers asked, over the process memory budget (${pb.used} of ${pb.limit} held)`,
        );
    } catch (e) {
      if (e instanceof PerfHelloRefusedError || e instanceof PerfVersionError) {
        const reason = e instanceof PerfVersionError ? e.message : e.reason;
        const refused: Refused = { type: 'refused', version: PERF_PROTOCOL_VERSION, reason };
        await new Control(s, 0).send(refused).catch(() => {});
      }
      throw e;
    }
    return await serveRun(s, hello, log);
  } catch (e) {
    await s.closeWithin(CLOSE_WITHIN_MS);
    throw await watch.explain(e); // the client's Terminate, reset or close in mid-run, if that is what failed
  } finally {
    budget.release(reserved);
    fromProcess?.release();
  }
}

/** The measured part of one run, after a HELLO that passed the checks. */
async function serveRun(s: PerfSession, hello: Hello, log: (s: string) => void): Promise<PerfResult[]> {
  const p = hello.params;
  const isSend = p.test === 'send_bw' || p.test === 'send_lat';
  // Send tests: READY goes out from the control buffer, everything after arrives on the Send receives.
  const ctl = new Control(s, isSend ? 0 : CONTROL_RECEIVES);
  const region = s.register(
    new Uint8Array(maxSize(p)),
    Access.RemoteWrite |
      Access.RemoteRead |
      Access.LocalRead |
      Access.LocalWrite |
      (p.test.startsWith('atomic') ? Access.RemoteAtomic : 0),
  );
  const remote = { stag: hello.rkey, to: BigInt(hello.addr) };
  if (p.test === 'read_bw' || p.test === 'read_lat') fillPattern(region.buffer, 1);
  let stop = false;
  // write_lat: the first Write back that fails (a full send queue, an error completion) ends the run, and
  // none is posted after it. One failing because the stream ended (the client killed or gone) rejects with
  // that end's error, so that `watch.explain` names the client's reset or close, as the RESULT wait would.
  let writeBackFailed: (e: unknown) => void = () => {};
  const writeBackFailure = new Promise<never>((_, reject) => (writeBackFailed = reject));
  writeBackFailure.catch(() => {}); // raced with RESULT below
  if (p.test === 'write_lat') {
    // Ping-pong by memory: a complete Write into our region is answered with a Write of the same size back.
    s.qp.placement$.pipe(filter((e) => e.last)).subscribe((e) => {
      if (stop) return;
      const n = Number(e.to - region.baseTo) + e.length;
      s.qp.write(region.sge(0, n), remote).catch((err: unknown) => {
        if (stop) return;
        stop = true;
        writeBackFailed(streamEnded(err) ?? new PerfWriteBackError(err));
      });
    });
  }
  // send_bw / send_lat: receives on the Send queue (QN 0), posted again as they complete; before READY,
  // since the client starts sending on it.
  if (isSend) {
    const slot = Math.max(CONTROL_SIZE, maxSize(p));
    const rx = s.register(new Uint8Array(slot * SEND_RECEIVES), Access.LocalWrite | Access.LocalRead);
    for (let i = 0; i < SEND_RECEIVES; i++) s.repost(rx.sge(i * slot, slot));
  }
  const credit = isSend ? s.register(new Uint8Array(1), Access.LocalRead).sge(0, 0) : undefined;
  const ready: Ready = {
    type: 'ready',
    version: PERF_PROTOCOL_VERSION,
    addr: region.baseTo.toString(),
    rkey: region.stag,
    pid: process.pid,
  };
  await ctl.send(ready);
  if (isSend) {
    // Measured Sends and the final RESULT share QN 0: everything is received in arrival order.
    let mismatches = 0;
    let results: PerfResult[] = [];
    if (p.test === 'send_lat') {
      // The echo is answered within the receive's completion (perftest polls its CQ): posted unsignaled,
      // and the receive it came from is posted again once the next ping shows the echo has arrived.
      // The echo goes first; the check of what arrived and the repost follow it, off the round trip.
      let last: Sge | undefined;
      await s.each((r) => {
        const octets = received(r.sge, r.byteLength);
        if (isResult(octets)) {
          results = checkResult(octets, p);
          return true;
        }
        s.qp.postSend({
          opcode: 'send',
          sgList: [{ mr: r.sge.mr, offset: r.sge.offset ?? 0, length: r.byteLength }],
          signaled: false,
        });
        if (!samplesMatch(octets)) mismatches++;
        if (last) s.repost(last);
        last = r.sge;
        return false;
      });
    } else {
      let sinceCredit = 0;
      for (;;) {
        const r = await s.recv();
        const octets = received(r.sge, r.byteLength);
        if (isResult(octets)) {
          results = checkResult(octets, p);
          break;
        }
        if (!samplesMatch(octets)) mismatches++;
        s.repost(r.sge);
        if (++sinceCredit === SEND_CREDIT_BATCH) {
          sinceCredit = 0;
          await s.qp.send(credit as Sge); // a credit: SEND_CREDIT_BATCH more receives posted
        }
      }
    }
    stop = true;
    if (mismatches) log(`${mismatches} received Sends did not hold the expected payload`);
    await s.close().catch(() => {});
    return results;
  }
  let results: PerfResult[];
  try {
    if (p.bidirectional && hello.back)
      await serveBack(s, ctl, p, { stag: hello.back.rkey, to: BigInt(hello.back.addr) }, hello.warmUp ?? 0, log);
    results = checkResult(await Promise.race([ctl.recv(), writeBackFailure]), p);
  } finally {
    stop = true;
  }
  log(`run finished: ${results.length} sizes`);
  await s.close().catch(() => {});
  return results;
}

/** One size's figures from this end's direction of a `-b` run, sent to the client after the size. */
interface Side {
  type: 'side';
  verified: boolean;
  row: BwRow;
}

/**
 * `-b`, server side: each size, its source filled and the client's warm-up made, the same operations
 * towards the client's `back` region from the GO that answers the client's START (both ends measure from
 * that one signal), verified as the client verifies its own; the figures go back as SIDE.
 */
async function serveBack(
  s: PerfSession,
  ctl: Control,
  p: PerfParams,
  back: RemoteBuffer,
  warm: number,
  log: (s: string) => void,
): Promise<void> {
  const source = s.register(new Uint8Array(maxSize(p)), Access.LocalRead | Access.LocalWrite);
  const sq = new SendQueueWindow(s);
  const st: BwState = { atomicOps: 0n, credits: 0 };
  // A client that stays connected and sends no START holds this server's buffers: the wait is bounded.
  const clock = new StepClock();
  const go = async () => {
    const m = parseControl(await clock.within(ctl.recv(), "the -b client's START"));
    if (m?.type !== 'start') throw new PerfBadMessageError('a -b client sent no START before a size');
    await ctl.send({ type: 'go' });
    clock.taken();
  };
  try {
    for (const size of p.test.startsWith('atomic') ? [8] : p.sizes) {
      fillPattern(source.buffer.subarray(0, size), size);
      const { row, from, to } = await bwSize(s, sq, p, size, source, back, st, { warm, before: go });
      logSpan(size, from, to);
      const verified = p.verify ? await verify(s, p.test, size, source, back, st.atomicOps) : true;
      const side: Side = { type: 'side', verified, row };
      await ctl.send(side);
      log(`-b: ${row.iterations} operations of ${size} octets towards the client${verified ? '' : ' (VERIFY FAILED)'}`);
    }
  } finally {
    sq.stop();
  }
}

/** `--debug`: a -b direction's measured span on this host's clock, comparable with the other end's on one host. */
function logSpan(size: number, from: number, to: number): void {
  const epoch = (t: number) => (performance.timeOrigin + t).toFixed(3);
  perfDebug.log?.(
    `-b: ${size} octets: this end's direction measured from ${epoch(from)} to ${epoch(to)} (ms since the epoch)`,
  );
}

function parseControl(octets: Uint8Array): Record<string, unknown> | undefined {
  try {
    const m: unknown = JSON.parse(new TextDecoder().decode(octets));
    return typeof m === 'object' && m !== null && !Array.isArray(m) ? (m as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The server's SIDE of a `-b` size, checked. */
function readSide(octets: Uint8Array, size: number): Side {
  const m = parseControl(octets);
  const row = m?.row as Record<string, unknown> | undefined;
  const ok =
    m?.type === 'side' &&
    typeof m.verified === 'boolean' &&
    row !== undefined &&
    row.bytes === size &&
    ['iterations', 'peakMBps', 'avgMBps', 'msgRateMpps'].every((k) => typeof row[k] === 'number' || row[k] === null);
  if (!ok) throw new PerfBadMessageError(`the server sent no SIDE for the ${size}-octet size of a -b run`);
  return m as unknown as Side;
}

/** perftest's bidirectional line: this end's iterations, both ends' rates summed (print_full_bw_report). */
function bothWays(mine: BwRow, verified: boolean, side: Side): PerfResult {
  const num = (v: number | null) => v ?? Number.NaN;
  return {
    kind: 'bw',
    verified: verified && side.verified,
    row: {
      bytes: mine.bytes,
      iterations: mine.iterations,
      peakMBps: mine.peakMBps + num(side.row.peakMBps),
      avgMBps: mine.avgMBps + num(side.row.avgMBps),
      msgRateMpps: mine.msgRateMpps + num(side.row.msgRateMpps),
    },
  };
}

/** A bandwidth sender's state across sizes: atomics posted (what the verify sums) and send_bw's credits. */
interface BwState {
  atomicOps: bigint;
  credits: number;
}

/** What a bandwidth size does around its measured operations. */
interface BwSizeSteps {
  /** Unmeasured operations first (--warm-up). */
  readonly warm?: number;
  /** Awaited after the warm-up: the measured span starts when it resolves. */
  readonly before?: () => Promise<void>;
  /** Awaited once the measured operations have completed and been timed. */
  readonly after?: () => Promise<void>;
}

/** Whether the `i`-th operation of a size whose measured span began at `start` is still to be made (-n or -D). */
function underWay(p: PerfParams, start: number, i: number): boolean {
  return p.durationS ? performance.now() - start < p.durationS * 1000 : i < p.iters;
}

/**
 * One size of a bandwidth test (perftest's run_iter_bw): `warm` unmeasured operations, `before`, then the
 * measured ones from `local` towards `remote` until -n or -D, then `after`. Verification is the caller's.
 * Returns the row and the measured span (`performance.now()` at its start and end).
 */
async function bwSize(
  s: PerfSession,
  sq: SendQueueWindow,
  p: PerfParams,
  size: number,
  local: Mr,
  remote: RemoteBuffer,
  st: BwState,
  steps: BwSizeSteps = {},
): Promise<{ row: BwRow; from: number; to: number }> {
  const { warm = 0, before, after } = steps;
  const atomic = p.test.startsWith('atomic');
  const payload = local.sge(0, size);
  // One work request for every operation of the size, posted again and again (as perftest does).
  const wr = (signaled: boolean): SendWorkRequest =>
    atomic
      ? { opcode: 'atomic-fetch-add', sgList: [local.sge(0, 8)], remote, add: ATOMIC_ADD, signaled }
      : p.test === 'write_bw'
        ? { opcode: 'rdma-write', sgList: [payload], remote, signaled }
        : p.test === 'read_bw'
          ? { opcode: 'rdma-read', sgList: [payload], remote, signaled }
          : { opcode: 'send', sgList: [payload], signaled };
  const quiet = wr(false);
  const signaled = wr(true);
  const cqMod = cqModFor(p, size);
  const window = Math.max(p.txDepth, 16);
  // Posts operations while `more(n)` says the n-th may go, and waits until all have completed.
  const burst = async (t0: number, more: (n: number) => boolean): Promise<number> => {
    sq.start(t0, window, size);
    let posted = 0;
    let sinceSignal = 0;
    for (let go = more(0); go; ) {
      if (p.test === 'send_bw') {
        while (st.credits === 0) {
          const c = await s.recv();
          s.repost(c.sge);
          st.credits += SEND_CREDIT_BATCH;
        }
        st.credits--;
      }
      go = more(posted + 1);
      // The last one is signaled too, so that every work request of the size is accounted for.
      const signal = ++sinceSignal === cqMod || !go;
      s.qp.postSend(signal ? signaled : quiet);
      if (atomic) st.atomicOps++;
      posted++;
      if (signal) {
        sq.signaled(sinceSignal);
        sinceSignal = 0;
      }
      if (sq.outstanding(posted) >= p.txDepth) await sq.room(posted, p.txDepth);
    }
    await sq.room(posted, 1);
    return posted;
  };
  // --warm-up: operations posted the same way and not measured (a warm JIT, as perftest's -D margin).
  if (warm > 0) await burst(performance.now(), (n) => n < warm);
  await before?.();
  const t0 = performance.now();
  const posted = await burst(t0, (n) => underWay(p, t0, n));
  const t1 = performance.now();
  const ms = t1 - t0;
  await after?.();
  const avg = mbPerSec(posted * size, ms);
  const row = {
    bytes: size,
    iterations: posted,
    peakMBps: Math.max(sq.peak, avg),
    avgMBps: avg,
    msgRateMpps: posted / (ms * 1000),
  };
  return { row, from: t0, to: t1 };
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
  const s = new PerfSession(conn, {
    profile,
    stream,
    ...(atomic ? { extensions: { atomics: true } } : {}),
    ...(perfDebug.log ? { debug: perfDebug.log } : {}),
    ...(options.rdmapFactory ? { rdmapFactory: options.rdmapFactory } : {}),
    ...(options.device ? { device: options.device } : {}),
    maxSendWr: p.txDepth + CONTROL_SENDS,
    ord: p.outs ?? DEFAULT_OUTS,
    // -b: the server's Reads and atomics towards this end are served as the server serves the client's.
    ...(p.bidirectional ? { ird: PERF_MAX_OUTS } : {}),
    maxRecvWr: CONTROL_RECEIVES + SEND_CREDIT_BATCH,
  });
  const watch = new PeerWatch(conn, s.qp.terminate$);
  try {
    return await clientRun(s, p, onResult, onProgress, options);
  } catch (e) {
    throw await watch.explain(e); // the server's Terminate, reset or close in mid-run, if that is what failed
  }
}

/** The client's run on one session: HELLO, every size, RESULT. */
async function clientRun(
  s: PerfSession,
  p: PerfParams,
  onResult: (r: PerfResult) => void,
  onProgress?: (done: number, total: number) => void,
  options: PerfClientOptions = {},
): Promise<PerfResult[]> {
  const atomic = p.test.startsWith('atomic');
  const isSend = p.test === 'send_bw' || p.test === 'send_lat';
  const ctl = new Control(s, isSend ? 0 : CONTROL_RECEIVES);
  const local = s.register(new Uint8Array(maxSize(p)), Access.RemoteWrite | Access.LocalRead | Access.LocalWrite);
  // -b: the region the server's operations reach (its Writes land, its Reads and atomics read).
  const back = p.bidirectional
    ? s.register(
        new Uint8Array(maxSize(p)),
        Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic | Access.LocalRead | Access.LocalWrite,
      )
    : undefined;
  if (back && p.test === 'read_bw') fillPattern(back.buffer, 1);
  const warm = options.warmUp ?? 0;
  const hello: Hello = {
    ...(back ? { back: { addr: back.baseTo.toString(), rkey: back.stag } } : {}),
    ...(back && warm ? { warmUp: warm } : {}),
    type: 'hello',
    version: PERF_PROTOCOL_VERSION,
    params: p,
    addr: local.baseTo.toString(),
    rkey: local.stag,
  };
  let remote: RemoteBuffer;
  try {
    let ready: { addr: bigint; rkey: number; pid?: number };
    if (!isSend) {
      await ctl.send(hello);
      ready = readReady(await ctl.recv());
    } else {
      // Send tests: our receives carry the credits / echoes; the first one carries READY.
      const slot = Math.max(CONTROL_SIZE, maxSize(p));
      const rx = s.register(new Uint8Array(slot * SEND_CREDIT_BATCH), Access.LocalWrite | Access.LocalRead);
      for (let i = 0; i < SEND_CREDIT_BATCH; i++) s.repost(rx.sge(i * slot, slot));
      await ctl.send(hello);
      const r = await s.recv();
      ready = readReady(received(r.sge, r.byteLength));
      s.repost(r.sge);
    }
    remote = { stag: ready.rkey, to: ready.addr };
    options.onReady?.(ready.pid);
  } catch (e) {
    await s.closeWithin(CLOSE_WITHIN_MS);
    throw e;
  }
  // `-q N`: every QP's measured operations of a size start together (after its warm-up) and end together
  // before any QP verifies or moves on, so the aggregate's QPs measure one span undisturbed by the others'
  // verification and control messages (docs/PERFORMANCE.md "`-q 8`").
  const line = async (at: (() => Promise<void>) | undefined): Promise<void> => {
    if (at === undefined) return;
    try {
      await at();
    } catch (e) {
      await s.closeWithin(CLOSE_WITHIN_MS);
      throw e;
    }
  };
  const results: PerfResult[] = [];
  const sq = new SendQueueWindow(s, options.onMoved);
  // -b: the wait for the server's GO is bounded (a server that stays connected and silent).
  const clock = new StepClock();
  const moved = options.onMoved;
  // send_bw flow control: the server posted this many receives and announces each batch it posts again.
  const st: BwState = { atomicOps: 0n, credits: SEND_CREDIT_BATCH * 2 };
  try {
    for (const [k, size] of (atomic ? [8] : p.sizes).entries()) {
      fillPattern(local.buffer.subarray(0, size), size);
      let result: PerfResult;
      if (p.test.endsWith('_bw')) {
        const before = async () => {
          await line(options.start);
          if (!back) return;
          // -b: both ends measure from the server's GO, which answers START once the server is ready.
          try {
            await ctl.send({ type: 'start' });
            if (parseControl(await clock.within(ctl.recv(), "the -b server's GO"))?.type !== 'go')
              throw new PerfBadMessageError('the -b server answered START with no GO');
          } catch (e) {
            await s.closeWithin(CLOSE_WITHIN_MS);
            throw e;
          }
          clock.taken();
        };
        const { row, from, to } = await bwSize(s, sq, p, size, local, remote, st, {
          warm,
          before,
          after: () => line(options.finish),
        });
        if (back) logSpan(size, from, to);
        const verified = p.verify ? await verify(s, p.test, size, local, remote, st.atomicOps) : true;
        result = back
          ? bothWays(row, verified, readSide(await clock.within(ctl.recv(), "the -b server's SIDE"), size))
          : { kind: 'bw', verified, row };
      } else {
        // Preallocated, as perftest allocates its timestamp arrays before the loop: no array grows (and is
        // copied) inside a measured round trip.
        const samples = new LatencySamples(p.durationS === undefined ? p.iters : 1 << 16);
        const payload = local.sge(0, size);
        const halve = p.test === 'read_lat' || atomic ? 1 : 2;
        await line(options.start);
        const t0 = performance.now();
        if (p.test === 'send_lat') {
          // Ping-pong as perftest runs it: the next ping is posted (unsignaled) within the echo's receive
          // completion; the echo shows the ping arrived, so nothing waits for the ping's own completion.
          const ping: SendWorkRequest = { opcode: 'send', sgList: [payload], signaled: false };
          let i = -warm;
          let ts = performance.now();
          const done = s.each((r) => {
            const now = performance.now();
            if (i >= 0) samples.push(((now - ts) * 1000) / halve);
            moved?.(size);
            i++;
            const again = i < 0 || underWay(p, t0, i);
            if (again) {
              ts = performance.now();
              s.qp.postSend(ping);
            }
            // Posted again after the next ping: its echo is read in a later turn than this one.
            s.repost(r.sge);
            return !again;
          });
          s.qp.postSend(ping);
          await done;
        } else {
          for (let i = -warm; i < 0 || underWay(p, t0, i); i++) {
            const ts = performance.now();
            if (atomic) {
              await s.qp.fetchAdd(local.sge(0, 8), remote, ATOMIC_ADD);
              st.atomicOps++;
            } else if (p.test === 'read_lat') {
              await s.qp.read(payload, remote);
            } else {
              // write_lat: our Write, then the peer's Write back into our region.
              const back = firstValueFrom(s.qp.placement$.pipe(filter((e) => e.last)));
              await s.qp.write(payload, remote);
              await back;
            }
            if (i >= 0) samples.push(((performance.now() - ts) * 1000) / halve);
            moved?.(atomic ? 8 : size);
          }
        }
        await line(options.finish);
        const verified = p.verify ? await verify(s, p.test, size, local, remote, st.atomicOps) : true;
        result = {
          kind: 'lat',
          verified,
          row: { bytes: size, iterations: samples.length, lat: perfLatency(samples.values()) },
        };
      }
      results.push(result);
      onResult(result);
      onProgress?.(k + 1, p.sizes.length);
    }
  } finally {
    sq.stop();
  }
  await ctl.send({ type: 'result', results });
  await s.close().catch(() => {});
  return results;
}

/** The CQ moderation a bandwidth run of `size` octets uses (perftest's rules; per size, also under -a). */
export function cqModFor(p: Pick<PerfParams, 'cqMod' | 'txDepth'>, size: number): number {
  const asked = p.cqMod ?? (size > CQ_MOD_SIZE_LIMIT ? 1 : DEFAULT_CQ_MOD);
  return Math.max(1, Math.min(asked, p.txDepth));
}

/** Latency samples in µs, in a buffer sized before the loop (doubled only under -D, whose count is unknown). */
class LatencySamples {
  private buf: Float64Array;
  length = 0;
  constructor(capacity: number) {
    this.buf = new Float64Array(Math.max(1, capacity));
  }
  push(us: number): void {
    if (this.length === this.buf.length) {
      const grown = new Float64Array(this.buf.length * 2);
      grown.set(this.buf);
      this.buf = grown;
    }
    this.buf[this.length++] = us;
  }
  values(): number[] {
    return Array.from(this.buf.subarray(0, this.length));
  }
}

/**
 * The send queue of a bandwidth run as perftest keeps it: work requests posted, and those accounted for
 * by the signaled completions that came back (each counts itself and the unsignaled ones before it, in
 * order: RFC 5040 §5.5). A counter and one waiter; the first error completion is thrown by `room`.
 */
class SendQueueWindow {
  private readonly batches: number[] = [];
  private completed = 0;
  private waiter: (() => void) | undefined;
  private failure: Error | undefined;
  private readonly sub;
  private windowStart = 0;
  private windowDone = 0;
  private window = 1;
  private size = 0;
  peak = 0;

  constructor(
    s: PerfSession,
    private readonly onMoved?: (octets: number) => void,
  ) {
    this.sub = s.qp.sendCq.completions$.subscribe((wc) => {
      if (wc.status !== 'success') this.failure ??= wc.error ?? new Error(`a work request completed: ${wc.status}`);
      else this.account(this.batches.shift() ?? 1);
      const w = this.waiter;
      this.waiter = undefined;
      w?.();
    });
  }

  /** A new size: counters from zero, the peak measured over windows of `window` operations. */
  start(t0: number, window: number, size: number): void {
    this.completed = 0;
    this.batches.length = 0;
    this.windowStart = t0;
    this.windowDone = 0;
    this.window = window;
    this.size = size;
    this.peak = 0;
  }

  /** A signaled work request was posted: its completion accounts for `n` work requests. */
  signaled(n: number): void {
    this.batches.push(n);
  }

  outstanding(posted: number): number {
    return posted - this.completed;
  }

  /** Resolves once fewer than `depth` of the `posted` work requests are outstanding. */
  async room(posted: number, depth: number): Promise<void> {
    while (!this.failure && posted - this.completed >= depth) await new Promise<void>((r) => (this.waiter = r));
    if (this.failure) throw this.failure;
  }

  stop(): void {
    this.sub.unsubscribe();
  }

  private account(n: number): void {
    this.completed += n;
    this.onMoved?.(n * this.size);
    this.windowDone += n;
    if (this.windowDone >= this.window) {
      const now = performance.now();
      this.peak = Math.max(this.peak, mbPerSec(this.windowDone * this.size, now - this.windowStart));
      this.windowStart = now;
      this.windowDone = 0;
    }
  }
}

const RESULT_PREFIX = new TextEncoder().encode('{"type":"result"');
function isResult(octets: Uint8Array): boolean {
  return (
    octets.length >= RESULT_PREFIX.length &&
    Buffer.compare(octets.subarray(0, RESULT_PREFIX.length), RESULT_PREFIX) === 0
  );
}

/** The first and last 64 octets of a received Send against the pattern of its size (a cheap check per message). */
function samplesMatch(b: Uint8Array): boolean {
  const n = b.length;
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
  s: PerfSession,
  test: PerfTest,
  size: number,
  local: Mr,
  remote: RemoteBuffer,
  atomicOps = 0n,
): Promise<boolean> {
  const mine = local.buffer.subarray(0, size);
  if (test.startsWith('atomic')) {
    // The word every Fetch-and-Add hit must hold their sum (read back over RDMA Read, network byte order).
    await s.qp.read(local.sge(0, 8), remote);
    return new DataView(mine.buffer, mine.byteOffset, 8).getBigUint64(0) === atomicOps * ATOMIC_ADD;
  }
  const expected = new Uint8Array(size);
  if (test === 'read_bw' || test === 'read_lat') {
    fillPattern(expected, 1);
    return Buffer.compare(mine, expected) === 0;
  }
  fillPattern(expected, size);
  if (test === 'write_bw' || test === 'write_lat') {
    // Read the server's region back over the wire and compare with what was written.
    mine.fill(0);
    await s.qp.read(local.sge(0, size), remote);
    return Buffer.compare(mine, expected) === 0;
  }
  // Sends: the payload buffer is ours; the server counted them — check the payload was not disturbed.
  return Buffer.compare(mine, expected) === 0;
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
