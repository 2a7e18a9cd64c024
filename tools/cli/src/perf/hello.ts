/**
 * The perf server's checks of what a client sends it: HELLO against server-side limits (the client picks
 * sizes, the server allocates them), RESULT against the HELLO it answers. Anything else is refused.
 */

import { MAX_U64 } from '@rddp/ddp';
import type { PerfParams, PerfResult } from './engine.js';
import { PerfBadMessageError, PerfHelloRefusedError, PerfVersionError } from './errors.js';
import { allSizes } from './format.js';
import {
  DEFAULT_OUTS,
  PERF_DEFAULT_MAX_MEMORY,
  PERF_DEFAULT_MAX_SIZE,
  PERF_MAX_DURATION_S,
  PERF_MAX_ITERS,
  PERF_MAX_OUTS,
  PERF_MAX_TX_DEPTH,
  PERF_MAX_WARM_UP,
} from './limits.js';
import { BIDIRECTIONAL_TESTS, PERF_TESTS, type PerfTest } from './tests.js';

/** What a server lets one client ask for. */
export interface PerfServerLimits {
  /** Largest message size (perftest's `-a` goes to 8 MiB). */
  readonly maxSize: number;
  /** Octets of buffers clients may make this server hold at once, all streams and connections together. */
  readonly maxMemory: number;
}

export const PERF_DEFAULT_LIMITS: PerfServerLimits = {
  maxSize: PERF_DEFAULT_MAX_SIZE,
  maxMemory: PERF_DEFAULT_MAX_MEMORY,
};
/** Bounds no flag changes: the client's own flag ranges. */
export const PERF_MAX_SIZES = 64;
/** The largest control message (HELLO, READY, RESULT, REFUSED) and each control receive buffer. */
export const CONTROL_SIZE = 64 * 1024;
/** Receive buffers the server posts for the Send tests. */
export const SEND_CREDIT_BATCH = 16;
export const SEND_RECEIVES = SEND_CREDIT_BATCH * 2;

/**
 * The version of the control protocol (HELLO, READY, REFUSED, RESULT), sent in HELLO, READY and REFUSED.
 * 2: the first one sent; an rddp before it sent none (protocol 1).
 */
export const PERF_PROTOCOL_VERSION = 2;

/** The version a peer's control message names: 1 where it names none (an rddp before the field). */
export function peerVersion(v: unknown): string {
  if (v === undefined) return '1';
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? String(v) : q(v);
}

/**
 * Throws PerfVersionError unless `msg` (from `peer`) names this end's PERF_PROTOCOL_VERSION; a REFUSED's
 * reason goes into the error (an older server's refusal says why, whatever its version).
 */
export function checkVersion(msg: Record<string, unknown>, peer: 'server' | 'client'): void {
  if (msg.version === PERF_PROTOCOL_VERSION) return;
  const reason = msg.type === 'refused' && typeof msg.reason === 'string' ? msg.reason.slice(0, 300) : undefined;
  throw new PerfVersionError(peer, peerVersion(msg.version), String(PERF_PROTOCOL_VERSION), reason);
}

export interface Hello {
  type: 'hello';
  version: number;
  params: PerfParams;
  /** Client's own region (latency tests: the server writes back into it), a decimal Tagged Offset. */
  addr: string;
  rkey: number;
  /** `-b`: the client's region the server's operations reach. */
  back?: { addr: string; rkey: number };
  /** The client's `--warm-up`: under `-b` the server's direction makes as many unmeasured operations. */
  warmUp?: number;
}

/** Octets the server allocates for one stream serving `p` (besides the HELLO buffer). */
export function serverMemory(p: PerfParams): number {
  const size = Math.max(...p.sizes, 1);
  const isSend = p.test === 'send_bw' || p.test === 'send_lat';
  // -b: a second region, the source (or Read sink) of the server's own operations.
  return (p.bidirectional ? 2 : 1) * size + (isSend ? SEND_RECEIVES * Math.max(CONTROL_SIZE, size) : 4 * CONTROL_SIZE);
}

/** The server's running total of what its clients hold (PerfServerLimits.maxMemory). */
export class MemoryBudget {
  private used = 0;
  constructor(readonly limit: number) {}
  get inUse(): number {
    return this.used;
  }
  reserve(n: number): boolean {
    if (this.used + n > this.limit) return false;
    this.used += n;
    return true;
  }
  release(n: number): void {
    this.used = Math.max(0, this.used - n);
  }
}

/**
 * What a server's own flags fixed (-s or -a, -n, -D). perftest's ends exchange their parameters and
 * refuse a mismatch; a HELLO asking for another run is refused, never silently served.
 */
export interface PerfServerRun {
  readonly sizes?: readonly number[];
  readonly iters?: number;
  readonly durationS?: number;
  /** perftest's `-b` is given to both ends (SYMMETRIC): a server's `-b` or its absence fixes it. */
  readonly bidirectional?: boolean;
  /**
   * Under `-b`: the ORD of the server's own Reads and atomics (its `-o`, or the default), fixed when its
   * queue pair is made, before HELLO; a read_bw or atomic_bw client asking another `-o` is refused.
   */
  readonly outs?: number;
}

/** A run's sizes and length as the flags that ask for them: `-s 4096`, `-a`, `-n 1000`, `-D 5`. */
function sizesFlag(sizes: readonly number[]): string {
  if (sizes.length === 1) return `-s ${sizes[0]}`;
  const all = allSizes();
  return sizes.length === all.length && sizes.every((s, i) => s === all[i]) ? '-a' : `sizes ${q(sizes)}`;
}
function lengthFlag(p: { iters: number; durationS?: number | undefined }): string {
  return p.durationS !== undefined ? `-D ${p.durationS}` : `-n ${p.iters}`;
}

/** Refuses a run other than the one the server's flags fixed. */
function checkRun(p: PerfParams, run: PerfServerRun): void {
  if (run.sizes && (p.sizes.length !== run.sizes.length || p.sizes.some((s, i) => s !== run.sizes?.[i])))
    throw new PerfHelloRefusedError(
      `this server runs ${sizesFlag(run.sizes)}, the client asked for ${sizesFlag(p.sizes)}`,
    );
  if (run.bidirectional !== undefined && !!p.bidirectional !== run.bidirectional)
    throw new PerfHelloRefusedError(
      run.bidirectional
        ? 'this server runs -b (bidirectional), the client asked for one direction'
        : 'this server runs one direction, the client asked for -b (bidirectional): give -b to both ends',
    );
  const outs = p.outs ?? DEFAULT_OUTS;
  if (
    p.bidirectional &&
    run.outs !== undefined &&
    outs !== run.outs &&
    (p.test === 'read_bw' || p.test === 'atomic_bw')
  )
    throw new PerfHelloRefusedError(
      `this server's Reads and atomics run -o ${run.outs} under -b, the client asked for -o ${outs}: give the same -o to both ends`,
    );
  if (run.durationS !== undefined && p.durationS !== run.durationS)
    throw new PerfHelloRefusedError(`this server runs -D ${run.durationS}, the client asked for ${lengthFlag(p)}`);
  if (run.iters !== undefined && run.durationS === undefined && (p.durationS !== undefined || p.iters !== run.iters))
    throw new PerfHelloRefusedError(`this server runs -n ${run.iters}, the client asked for ${lengthFlag(p)}`);
}

/** A client value quoted in a reason, cut short: reasons go back on the wire and to the log. */
function q(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function integer(name: string, v: unknown, min: number, max: number, limitName?: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v))
    throw new PerfHelloRefusedError(`${name} ${q(v)} is not an integer`);
  if (v < min) throw new PerfHelloRefusedError(`${name} ${v} is under ${min}`);
  if (v > max) throw new PerfHelloRefusedError(`${name} ${v} is over this server's ${limitName ?? ''}${max}`.trim());
  return v;
}

/**
 * Parses and checks a HELLO (its UTF-8 JSON octets); throws PerfHelloRefusedError with the reason the
 * client is told. `test`: the test this server runs (perftest's ends run the same test); `run`: what
 * else the server's flags fixed.
 */
export function checkHello(
  octets: Uint8Array,
  limits: PerfServerLimits,
  test: PerfTest | undefined,
  profile: 'ietf' | 'rdmac',
  run: PerfServerRun = {},
): Hello {
  let msg: unknown;
  try {
    msg = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(octets));
  } catch {
    throw new PerfHelloRefusedError(`HELLO of ${octets.length} octets is not JSON`);
  }
  if (!isObject(msg) || msg.type !== 'hello') throw new PerfHelloRefusedError('the first message is not a HELLO');
  checkVersion(msg, 'client');
  const p = msg.params;
  if (!isObject(p)) throw new PerfHelloRefusedError('HELLO without params');
  if (typeof p.test !== 'string' || !(PERF_TESTS as readonly string[]).includes(p.test))
    throw new PerfHelloRefusedError(`unknown test ${q(p.test)}`);
  if (test !== undefined && p.test !== test) throw new PerfHelloRefusedError(`this server runs ${test}, not ${p.test}`);
  if (p.test.startsWith('atomic') && profile !== 'ietf')
    throw new PerfHelloRefusedError('the RFC 7306 atomics are not on the RDMA Consortium profile');
  if (!Array.isArray(p.sizes) || p.sizes.length === 0)
    throw new PerfHelloRefusedError('sizes is not a non-empty array');
  if (p.sizes.length > PERF_MAX_SIZES)
    throw new PerfHelloRefusedError(`${p.sizes.length} sizes, over this server's ${PERF_MAX_SIZES}`);
  const sizes = p.sizes.map((s, i) => integer(`sizes[${i}]`, s, 1, limits.maxSize, '--max-size '));
  const iters = integer('iters', p.iters, 1, PERF_MAX_ITERS);
  const durationS = p.durationS === undefined ? undefined : integer('durationS', p.durationS, 1, PERF_MAX_DURATION_S);
  const txDepth = integer('txDepth', p.txDepth, 1, PERF_MAX_TX_DEPTH);
  const cqMod = p.cqMod === undefined ? undefined : integer('cqMod', p.cqMod, 1, PERF_MAX_TX_DEPTH);
  const outs = p.outs === undefined ? undefined : integer('outs', p.outs, 1, PERF_MAX_OUTS);
  const warmUp = msg.warmUp === undefined ? undefined : integer('warmUp', msg.warmUp, 0, PERF_MAX_WARM_UP);
  if (typeof p.verify !== 'boolean') throw new PerfHelloRefusedError(`verify ${q(p.verify)} is not a boolean`);
  if (typeof msg.addr !== 'string' || !/^\d{1,20}$/.test(msg.addr) || BigInt(msg.addr) > MAX_U64)
    throw new PerfHelloRefusedError(`addr ${q(msg.addr)} is not a 64-bit Tagged Offset`);
  const rkey = integer('rkey', msg.rkey, 0, 0xffff_ffff);
  if (p.bidirectional !== undefined && typeof p.bidirectional !== 'boolean')
    throw new PerfHelloRefusedError(`bidirectional ${q(p.bidirectional)} is not a boolean`);
  let back: Hello['back'];
  if (p.bidirectional) {
    if (!(BIDIRECTIONAL_TESTS as readonly string[]).includes(p.test))
      throw new PerfHelloRefusedError(`-b (bidirectional) runs ${BIDIRECTIONAL_TESTS.join(', ')}, not ${p.test}`);
    const b = msg.back;
    if (!isObject(b) || typeof b.addr !== 'string' || !/^\d{1,20}$/.test(b.addr) || BigInt(b.addr) > MAX_U64)
      throw new PerfHelloRefusedError('a -b HELLO without the back region (a 64-bit Tagged Offset)');
    back = { addr: b.addr, rkey: integer('back.rkey', b.rkey, 0, 0xffff_ffff) };
  }
  const params: PerfParams = {
    test: p.test as PerfTest,
    sizes,
    iters,
    ...(durationS !== undefined ? { durationS } : {}),
    txDepth,
    ...(cqMod !== undefined ? { cqMod } : {}),
    ...(outs !== undefined ? { outs } : {}),
    verify: p.verify,
    ...(p.bidirectional ? { bidirectional: true } : {}),
  };
  checkRun(params, run);
  const need = serverMemory(params);
  if (need > limits.maxMemory)
    throw new PerfHelloRefusedError(
      `${p.test} of ${Math.max(...sizes)} octets needs ${need} octets of buffers, over this server's --max-memory ${limits.maxMemory}`,
    );
  return {
    type: 'hello',
    version: PERF_PROTOCOL_VERSION,
    params,
    addr: msg.addr,
    rkey,
    ...(back ? { back } : {}),
    ...(warmUp ? { warmUp } : {}),
  };
}

/** A number or JSON's null (NaN, Infinity) as a number. */
function num(v: unknown): number {
  if (v === null) return Number.NaN;
  if (typeof v !== 'number') throw new PerfBadMessageError(`RESULT holds ${q(v)} where a number belongs`);
  return v;
}

/** Parses and checks the client's RESULT for the run `p` asked for: one result per size. */
export function checkResult(octets: Uint8Array, p: PerfParams): PerfResult[] {
  let msg: unknown;
  try {
    msg = JSON.parse(new TextDecoder().decode(octets));
  } catch {
    throw new PerfBadMessageError(`RESULT of ${octets.length} octets is not JSON`);
  }
  const expected = p.test.startsWith('atomic') ? 1 : p.sizes.length;
  if (!isObject(msg) || msg.type !== 'result' || !Array.isArray(msg.results) || msg.results.length !== expected)
    throw new PerfBadMessageError(`not a RESULT of ${expected} sizes`);
  return msg.results.map((r: unknown): PerfResult => {
    if (!isObject(r) || !isObject(r.row) || typeof r.verified !== 'boolean')
      throw new PerfBadMessageError('a RESULT row is not an object');
    const row = r.row;
    const bytes = num(row.bytes);
    const iterations = num(row.iterations);
    if (r.kind === 'bw')
      return {
        kind: 'bw',
        verified: r.verified,
        row: {
          bytes,
          iterations,
          peakMBps: num(row.peakMBps),
          avgMBps: num(row.avgMBps),
          msgRateMpps: num(row.msgRateMpps),
        },
      };
    if (r.kind === 'lat' && isObject(row.lat))
      return {
        kind: 'lat',
        verified: r.verified,
        row: {
          bytes,
          iterations,
          lat: {
            min: num(row.lat.min),
            median: num(row.lat.median),
            p99: num(row.lat.p99),
            max: num(row.lat.max),
            avg: num(row.lat.avg),
            stdev: num(row.lat.stdev),
            p999: num(row.lat.p999),
          },
        },
      };
    throw new PerfBadMessageError(`RESULT row of kind ${q(r.kind)}`);
  });
}
