/**
 * `rddp perf` — perftest's tests and habits (ib_write_bw, ib_read_lat, ...): server when no address is
 * given, client when the server's address is the positional argument, `--loopback` for both in one process.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlpConnection } from '@rddp/llp';
import type { Command } from 'commander';
import { firstValueFrom, take } from 'rxjs';
import { perfChart } from '../charts/tool-charts.js';
import {
  aggregate,
  cqModFor,
  PERF_TESTS,
  type PerfClientOptions,
  type PerfParams,
  type PerfResult,
  type PerfServeOptions,
  type PerfTest,
  perfClient,
  perfDebug,
  perfServe,
} from '../perf/engine.js';
import {
  allSizes,
  type BwUnit,
  bwHeader,
  bwLine,
  latHeader,
  latLine,
  type PerfConnHeader,
  RULE,
} from '../perf/format.js';
import { MemoryBudget, type PerfServerLimits, type PerfServerRun } from '../perf/hello.js';
import {
  CQ_MOD_SIZE_LIMIT,
  DEFAULT_OUTS,
  PERF_DEFAULT_BIND,
  PERF_DEFAULT_MAX_MEMORY,
  PERF_DEFAULT_MAX_SIZE,
  PERF_MAX_DURATION_S,
  PERF_MAX_ITERS,
  PERF_MAX_MESSAGE,
  PERF_MAX_OUTS,
  PERF_MAX_QPS,
  PERF_MAX_TX_DEPTH,
  PERF_MAX_WARM_UP,
} from '../perf/limits.js';
import { connectQps, perfClientQps, type QpsRow, qpsJson, qpsRows } from '../perf/qps.js';
import { BIDIRECTIONAL_TESTS } from '../perf/tests.js';
import { isPerfWorker, runPerfPrimary, runPerfWorker, workerCount } from '../perf/workers.js';
import { octets, type Progress, type ProgressSink, startProgress } from '../progress.js';
import { mpaLines, type ToolTransport, toolTransport, transportLabelOf, UsageError } from '../transports.js';

export interface PerfOptions {
  port: string;
  size: string;
  iters: string;
  all?: boolean;
  duration?: string;
  transport: string;
  mpaRev?: string;
  crc?: boolean;
  markers?: boolean;
  /** `--marker-framing gather|copy`: how this end sends FPDUs when the peer asked for Markers. */
  markerFraming?: string;
  /** `--send-path direct|socket`: how this end hands FPDUs to TCP. */
  sendPath?: string;
  /** `--congestion <name>`: this end's TCP congestion control (default the system's). */
  congestion?: string;
  /** Interop deviations (docs/MPA.md): `--max-ulpdu`, `--tolerate-early-fpdu`. */
  maxUlpdu?: string;
  tolerateEarlyFpdu?: boolean;
  /** SCTP: `--sctp-interleaving`, `--sctp-scheduler`, `--sctp-rto-min`. */
  sctpInterleaving?: boolean;
  sctpScheduler?: string;
  sctpRtoMin?: string;
  txDepth: string;
  /** Bandwidth tests: one send work request in this many is signaled (perftest's -Q). */
  cqMod?: string;
  /** Reads and atomics outstanding (perftest's -o / --outs). */
  outs?: string;
  json?: boolean;
  verify: boolean;
  loopback?: boolean;
  /** Queue pairs on one connection, one per LLP stream (SCTP: one per SCTP stream). */
  streams?: string;
  /** Server: largest message size a client may ask for. */
  maxSize?: string;
  /** Server: octets of buffers its clients may make it hold at once. */
  maxMemory?: string;
  /** Server: keep serving clients (each connection on its own) instead of exiting after one. */
  persistent?: boolean;
  /** Server: the address to listen on (perftest's --bind_source_ip); default every address. */
  bindSourceIp?: string;
  /** Client: also write the table and its chart (`<test>.txt`, `<test>.svg`) into this folder. */
  out?: string;
  /** perftest's `-q`: queue pairs over as many connections (client opens them, server waits for them). */
  qps?: string;
  /** Server: processes serving behind one port, or `auto` (the machine's cores). */
  workers?: string;
  /** Client, latency tests: unmeasured round trips before each size's measured ones. */
  warmUp?: string;
  /** perftest's `-d, --ib-dev <dev>`: the device named in the header (rddp runs its one software device). */
  ibDev?: string;
  /** perftest's `-R, --rdma_cm`: connect through rdma_cm — how rddp connects anyway (noted in the header). */
  rdmaCm?: boolean;
  /** perftest's `-b, --bidirectional`: both ends run the bandwidth test at once (give it to both ends). */
  bidirectional?: boolean;
  /** perftest's `-e, --events`: completions as CQ events — how rddp's always arrive (a no-op, noted in the header). */
  events?: boolean;
  /** perftest's `-F, --CPU-freq`: do not fail on CPU frequency warnings (rddp makes none: a no-op). */
  cpuFreq?: boolean;
  /** perftest's `--report_gbits`: bandwidth in Gb/sec (10^9 bits a second) instead of MB/sec. */
  reportGbits?: boolean;
}

/**
 * What decides a run's figure besides its parameters, for the header (issue 37): the device named, the
 * connection's negotiated MPA parameters, CRC backend, send path and congestion control, QPs and streams.
 */
export interface PerfHeaderInfo {
  /** `-d`: the device the user named (perftest's --ib-dev). */
  readonly device?: string;
  readonly unit?: BwUnit;
  readonly qps?: number;
  readonly streams?: number;
  /** `-R` was given. */
  readonly rdmaCm?: boolean;
  /** `-e` was given. */
  readonly events?: boolean;
  /** The run's (client's or served) connection: the MPA lines it gives and its transport label. */
  readonly conn?: PerfConnHeader;
}

/** The header's words for connection `conn` on `--transport transport` (plain data: workers send it). */
export function connHeader(transport: string, conn: LlpConnection): PerfConnHeader {
  return { label: transportLabelOf(transport, conn), mpa: mpaLines(conn), streams: conn.streams.length };
}

function int(flag: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`${flag} must be an integer in ${min}..${max} (got ${v})`);
  return n;
}

export function perfParams(test: string, o: PerfOptions): PerfParams {
  if (!(PERF_TESTS as readonly string[]).includes(test))
    throw new UsageError(`unknown test '${test}' (one of: ${PERF_TESTS.join(', ')})`);
  const size = int('-s', o.size, 1, PERF_MAX_MESSAGE);
  if (o.bidirectional && !(BIDIRECTIONAL_TESTS as readonly string[]).includes(test))
    throw new UsageError(
      test.endsWith('_lat')
        ? '-b applies to the bandwidth tests (as perftest: bidirectional is only available in BW tests)'
        : `-b runs ${BIDIRECTIONAL_TESTS.join(', ')} (send_bw's receive credits run one way only)`,
    );
  return {
    test: test as PerfTest,
    sizes: o.all ? allSizes() : [size],
    iters: int('-n', o.iters, 1, PERF_MAX_ITERS),
    ...(o.duration !== undefined ? { durationS: int('-D', o.duration, 1, PERF_MAX_DURATION_S) } : {}),
    txDepth: int('--tx-depth', o.txDepth, 1, PERF_MAX_TX_DEPTH),
    ...(o.cqMod !== undefined ? { cqMod: int('--cq-mod', o.cqMod, 1, PERF_MAX_TX_DEPTH) } : {}),
    ...(o.outs !== undefined ? { outs: int('--outs', o.outs, 1, PERF_MAX_OUTS) } : {}),
    verify: o.verify,
    ...(o.bidirectional ? { bidirectional: true } : {}),
  };
}

/** The server's limits from its flags (defaults: any one-stream run perftest's -a makes). */
export function serverLimits(o: PerfOptions): PerfServerLimits {
  return {
    maxSize: o.maxSize === undefined ? PERF_DEFAULT_MAX_SIZE : int('--max-size', o.maxSize, 1, 1 << 30),
    maxMemory: o.maxMemory === undefined ? PERF_DEFAULT_MAX_MEMORY : int('--max-memory', o.maxMemory, 1, 2 ** 40),
  };
}

/**
 * What the server's own flags fix for its clients: the ones given on its command line (-s or -a, -n,
 * -D), and -b given or not (a -b client needs a -b server, and the reverse). Under -b the server's -o
 * (or its default) is its own Reads' and atomics' ORD, so a read_bw or atomic_bw client must ask the same.
 * perftest's ends exchange parameters and refuse a mismatch; the other defaults follow the client.
 */
export function serverRun(
  p: PerfParams,
  given: (flag: 'size' | 'all' | 'iters' | 'duration') => boolean,
): PerfServerRun {
  return {
    ...(given('size') || given('all') ? { sizes: p.sizes } : {}),
    ...(given('iters') ? { iters: p.iters } : {}),
    ...(given('duration') && p.durationS !== undefined ? { durationS: p.durationS } : {}),
    // perftest's -b is SYMMETRIC: the server's flag, given or not, fixes it.
    bidirectional: p.bidirectional === true,
    ...(p.bidirectional ? { outs: p.outs ?? DEFAULT_OUTS } : {}),
  };
}

/** Resolves at SIGINT or SIGTERM: how a persistent server is stopped (exit 0, as Ctrl-C ends a server). */
function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}

/**
 * A run's progress on `sink`: octets moved by the test's operations on all `streams` (`warmUp` unmeasured
 * ones per size included), or seconds under -D. `onMoved` hears the engine's accounting of the octets
 * moved (absent under -D, where a timer moves the bar).
 */
export function runProgress(
  p: PerfParams,
  streams: number,
  sink: ProgressSink,
  warmUp = 0,
): { progress: Progress; onMoved?: (octets: number) => void; stop(): void } {
  const label = `${p.test}${streams > 1 ? `, ${streams} streams` : ''}`;
  if (p.durationS !== undefined) {
    const total = p.durationS * p.sizes.length;
    const progress = startProgress({ label, total, format: (n) => `${Math.round(n)} s`, ...sink });
    const t0 = performance.now();
    const timer = setInterval(() => progress.update((performance.now() - t0) / 1000), 1000);
    timer.unref();
    return {
      progress,
      stop() {
        clearInterval(timer);
        progress.stop();
      },
    };
  }
  const sizes = p.test.startsWith('atomic') ? [8] : p.sizes;
  const total = (p.iters + warmUp) * streams * sizes.reduce((a, b) => a + b, 0);
  const progress = startProgress({ label, total, format: octets, ...sink });
  return { progress, onMoved: (n) => progress.add(n), stop: () => progress.stop() };
}

/** rddp's one software device: what perftest's `Device` line names when `-d` names none. */
export const PERF_DEVICE = 'rddp0';

export function printHeader(p: PerfParams, tt: string, print: (s: string) => void, h: PerfHeaderInfo = {}): void {
  print(RULE);
  // perftest's title: `RDMA_Write Bidirectional BW Test` under -b.
  const [verb, kind] = p.test.toUpperCase().split('_');
  print(`                    ${verb}${p.bidirectional ? ' Bidirectional' : ''} ${kind} Test (rddp)`);
  // perftest's -e line; rddp's verbs deliver every completion as an event, polled or not.
  if (h.events) print(" Test with events: rddp's completions always arrive as events (-e changes nothing)");
  print(
    ` Device         : ${h.device === undefined ? `${PERF_DEVICE} (rddp's software device)` : `${h.device} (named by -d; rddp has one software device)`}`,
  );
  print(` Number of qps  : ${h.qps ?? 1}    Streams: ${h.streams ?? 1}`);
  for (const l of h.conn?.mpa ?? []) print(l);
  // perftest's -R picks rdma_cm over its out-of-band socket; rddp's ends always meet over the connection.
  print(` Data ex. method: over the connection (rdma_cm-style connect${h.rdmaCm ? '; -R: as asked' : ''})`);
  print(` Transport: ${tt}    TX depth: ${p.txDepth}    Verify: ${p.verify ? 'on' : 'off'}`);
  if (p.test.endsWith('_bw')) {
    const mods = [...new Set(p.sizes.map((size) => cqModFor(p, size)))];
    print(` CQ moderation: ${mods.join(' / ')}`);
    // perftest's own warning: moderation on large messages lets the window drain between signals.
    if ((p.cqMod ?? 1) > 1 && p.sizes.some((size) => size > CQ_MOD_SIZE_LIMIT))
      print(' Warning: large messages with CQ moderation enabled: the window drains between signaled completions');
  }
  print(RULE);
  print(p.test.endsWith('_bw') ? bwHeader(h.unit) : latHeader());
}

export function resultLine(r: PerfResult, unit: BwUnit = 'MB'): string {
  const line = r.kind === 'bw' ? bwLine(r.row, unit) : latLine(r.row);
  return r.verified ? line : `${line}   (VERIFY FAILED)`;
}

/** The bandwidth unit the flags ask for: perftest's MB/sec, or Gb/sec with --report_gbits. */
export function unitOf(o: PerfOptions): BwUnit {
  return o.reportGbits ? 'Gb' : 'MB';
}

/** The header's information from the flags and, once there is one, the run's connection. */
export function headerInfo(o: PerfOptions, more: { conn?: PerfConnHeader; qps?: number } = {}): PerfHeaderInfo {
  return {
    ...(o.ibDev !== undefined ? { device: o.ibDev } : {}),
    unit: unitOf(o),
    qps: more.qps ?? 1,
    streams: more.conn?.streams ?? (o.streams === undefined ? 1 : Number(o.streams)),
    ...(o.rdmaCm ? { rdmaCm: true } : {}),
    ...(o.events ? { events: true } : {}),
    ...(more.conn ? { conn: more.conn } : {}),
  };
}

export function streamCount(o: PerfOptions, tt: ToolTransport): number {
  const n = o.streams === undefined ? 1 : int('--streams', o.streams, 1, 65535);
  if (n > tt.transport.capabilities.maxStreams)
    throw new UsageError(
      `--transport ${o.transport} carries at most ${tt.transport.capabilities.maxStreams} stream(s) per connection (try --transport sctp)`,
    );
  return n;
}

/**
 * Runs the client side on every stream of `conn` at once; one aggregate result per size. `onMoved`
 * hears the octets the test's operations moved, on any stream, as the engine accounts for them (progress).
 */
export async function perfClientStreams(
  conn: LlpConnection,
  tt: ToolTransport,
  p: PerfParams,
  onResult: (r: PerfResult, perStream: readonly PerfResult[]) => void,
  onMoved?: (octets: number) => void,
  extra: PerfClientOptions = {},
): Promise<PerfResult[]> {
  const n = conn.streams.length;
  // Progress from the engine's own accounting, not a subscription to every RDMAP completion (which would
  // put an observer on the completion path of every message).
  const viaStack = { ...extra, rdmapFactory: tt.rdmapFactory, ...(onMoved ? { onMoved } : {}) };
  if (n === 1) return perfClient(conn, tt.profileOf(conn), p, (r) => onResult(r, [r]), undefined, 0, viaStack);
  const per = await Promise.all(
    conn.streams.map((_, i) => perfClient(conn, tt.profileOf(conn), p, () => {}, undefined, i, viaStack)),
  );
  const out: PerfResult[] = [];
  for (let k = 0; k < p.sizes.length; k++) {
    const rows = per.map((r) => r[k] as PerfResult);
    const agg = aggregate(rows);
    out.push(agg);
    onResult(agg, rows);
  }
  return out;
}

/**
 * Serves every stream of `conn`; resolves with stream 0's results. One stream refused or failed ends
 * the connection (the others' runs cannot be reported whole).
 */
export async function perfServeStreams(
  conn: LlpConnection,
  tt: ToolTransport,
  log: (s: string) => void,
  options: PerfServeOptions = {},
): Promise<PerfResult[]> {
  // One budget for all the connection's streams unless the server shares one across connections.
  const limits = options.limits;
  const budget = options.budget ?? (limits ? new MemoryBudget(limits.maxMemory) : undefined);
  const served = conn.streams.map((_, i) =>
    perfServe(conn, tt.profileOf(conn), log, i, {
      ...options,
      rdmapFactory: tt.rdmapFactory,
      ...(budget ? { budget } : {}),
    }),
  );
  try {
    const all = await Promise.all(served);
    return all[0] as PerfResult[];
  } catch (e) {
    conn.abort();
    await Promise.allSettled(served);
    throw e;
  }
}

function printResults(
  test: string,
  o: PerfOptions,
  results: readonly PerfResult[],
  print: (s: string) => void,
  conn?: PerfConnHeader,
): void {
  if (!o.json && results.length) {
    printHeader(
      { ...perfParams(test, o), sizes: results.map((r) => r.row.bytes) },
      conn?.label ?? o.transport,
      print,
      headerInfo(o, conn ? { conn } : {}),
    );
    for (const r of results) print(resultLine(r, unitOf(o)));
    print(RULE);
  } else for (const r of results) print(JSON.stringify(r));
}

async function connectPair(tt: ToolTransport, port: number, streams = 1): Promise<[LlpConnection, LlpConnection]> {
  const listener = await tt.transport.listen({ host: '127.0.0.1', port }, { params: tt.listenParams });
  const accepted = firstValueFrom(listener.connections$);
  const client = await tt.transport.connect(listener.address, {
    params: tt.connectParams,
    streams,
    signal: AbortSignal.timeout(15_000),
  });
  const server = await accepted;
  await listener.close();
  return [client, server];
}

/**
 * Runs one perf test with both ends in this process; returns the client's results. With `progress`,
 * the run's progress goes there (the command passes stderr; soak and tests pass none).
 */
export async function perfLoopback(
  test: string,
  o: PerfOptions,
  print: (s: string) => void,
  progress?: ProgressSink,
): Promise<PerfResult[]> {
  return (await loopbackRun(test, o, print, progress)).results;
}

/** `perfLoopback`, with the header it printed (what `--out` saves with the table). */
async function loopbackRun(
  test: string,
  o: PerfOptions,
  print: (s: string) => void,
  progress?: ProgressSink,
): Promise<{ results: PerfResult[]; header: PerfHeaderInfo }> {
  const p = perfParams(test, o);
  const tt = toolTransport(o);
  const n = streamCount(o, tt);
  const [client, server] = await connectPair(tt, o.transport === 'loopback' ? 1 : 0, n);
  perfDebug.log?.(`connected over ${client.transport}: ${JSON.stringify(client.setup.negotiated)}`);
  const header = headerInfo(o, { conn: connHeader(transportLabel(o.transport, n), client) });
  if (!o.json) printHeader(p, header.conn?.label ?? o.transport, print, header);
  // Both ends are this user's: the server serves whatever the flags ask for (-b and -o included).
  const limits = { maxSize: Math.max(...p.sizes), maxMemory: Number.MAX_SAFE_INTEGER };
  const served = perfServeStreams(server, tt, () => {}, { limits, run: serverRun(p, () => false) });
  served.catch(() => {}); // awaited below; a server failure also fails the client's run
  const bar = progress ? runProgress(p, n, progress, warmUpOf(o).warmUp) : undefined;
  let results: PerfResult[];
  try {
    results = await perfClientStreams(
      client,
      tt,
      p,
      (r) => {
        const line = o.json ? JSON.stringify(r) : resultLine(r, unitOf(o));
        if (bar) bar.progress.interrupt(() => print(line));
        else print(line);
      },
      bar?.onMoved,
      warmUpOf(o),
    );
  } finally {
    bar?.stop();
  }
  await served;
  if (!o.json) print(RULE);
  return { results, header };
}

/** `--warm-up <n>` as the client's option (latency and bandwidth tests). */
export function warmUpOf(o: PerfOptions): PerfClientOptions {
  return o.warmUp === undefined ? {} : { warmUp: int('--warm-up', o.warmUp, 0, PERF_MAX_WARM_UP) };
}

/** `-q` as a count of queue pairs (connections). */
export function qpCount(o: PerfOptions): number {
  return o.qps === undefined ? 1 : int('-q', o.qps, 1, PERF_MAX_QPS);
}

/** A `-q N` run's rows: the aggregate line, then each QP's line and the server process that served it. */
export function printQpsRows(
  p: PerfParams,
  label: string,
  rows: readonly QpsRow[],
  json: boolean | undefined,
  print: (s: string) => void,
  h: PerfHeaderInfo = {},
): void {
  if (json) {
    for (const r of rows) print(qpsJson(r));
    return;
  }
  printHeader({ ...p, sizes: rows.map((r) => r.aggregate.row.bytes) }, label, print, h);
  for (const r of rows) {
    print(`${resultLine(r.aggregate, h.unit)}   (aggregate of ${r.qps.length} QPs)`);
    for (const q of r.qps)
      print(
        `${resultLine(q.result, h.unit)}   QP ${q.qp}${q.serverPid !== undefined ? `, server pid ${q.serverPid}` : ''}`,
      );
  }
  print(RULE);
}

function transportLabel(transport: string, streams: number): string {
  return `${transport}${streams > 1 ? `, ${streams} streams (aggregate)` : ''}`;
}

/** The transport a `-q N` run's header names, on both ends: `tcp, 4 QPs` (the connection adds its congestion). */
function qpsLabel(transport: string, qps: number): string {
  return qps > 1 ? `${transport}, ${qps} QPs` : transport;
}

/**
 * `--out DIR`: the run's table as perftest prints it (`<test>.txt`) and its chart (`<test>.svg`), titled
 * with how the run was made (`inProcess`: `--loopback`, both ends in this process; issue 37).
 */
export async function writePerfOut(
  dir: string,
  p: PerfParams,
  transport: string,
  results: readonly PerfResult[],
  h: PerfHeaderInfo = {},
  inProcess = false,
): Promise<string[]> {
  const table: string[] = [];
  printHeader({ ...p, sizes: results.map((r) => r.row.bytes) }, h.conn?.label ?? transport, (s) => table.push(s), h);
  for (const r of results) table.push(resultLine(r, h.unit));
  table.push(RULE);
  await mkdir(dir, { recursive: true });
  const files = [path.join(dir, `${p.test}.txt`), path.join(dir, `${p.test}.svg`)];
  await writeFile(files[0] as string, `${table.join('\n')}\n`);
  const title = `rddp perf ${p.test} over ${transport}${inProcess ? ', both ends in one process (--loopback)' : ', client and server processes'}`;
  await writeFile(files[1] as string, perfChart(p.test, transport, results, title, h.unit));
  return files;
}

/** `rddp perf`'s action (registered by ./perf-command.ts, which loads this module when perf runs). */
export async function perfAction(
  test: string,
  server: string | undefined,
  raw: PerfOptions & {
    outstanding?: string;
    bind_source_ip?: string;
    rdma_cm?: boolean;
    CPUFreq?: boolean;
    report_gbits?: boolean;
  },
  cmd: Command,
): Promise<void> {
  const o: PerfOptions = {
    ...raw,
    ...(raw.outstanding ? { txDepth: raw.outstanding } : {}),
    ...(raw.bind_source_ip !== undefined ? { bindSourceIp: raw.bind_source_ip } : {}),
    ...(raw.rdma_cm ? { rdmaCm: true } : {}),
    ...(raw.CPUFreq ? { cpuFreq: true } : {}),
    ...(raw.report_gbits ? { reportGbits: true } : {}),
  };
  const print = (s: string) => console.log(s);
  if ((raw as { debug?: boolean }).debug) perfDebug.log = (s) => console.error(`rddp perf: ${s}`);
  const debugConn = (c: LlpConnection) =>
    perfDebug.log?.(`connected over ${c.transport}: ${JSON.stringify(c.setup.negotiated)}`);
  const qps = qpCount(o);
  const workers = workerCount(o.workers);
  if (o.loopback) {
    if (qps > 1) throw new UsageError('-q runs between two processes (without --loopback)');
    if (o.workers !== undefined) throw new UsageError('--workers applies to a server (without --loopback)');
    const { results, header } = await loopbackRun(test, o, print, {});
    if (o.out) {
      const n = o.streams === undefined ? 1 : Number(o.streams);
      await writePerfOut(o.out, perfParams(test, o), transportLabel(o.transport, n), results, header, true);
    }
    return;
  }
  const tt = toolTransport(o);
  const port = int('-p', o.port, 0, 65535);
  if (o.out !== undefined && server === undefined) throw new UsageError('--out applies to the client');
  if (server === undefined) {
    const p = perfParams(test, o); // flag errors show on the server too
    const limits = serverLimits(o);
    // -s/-a, -n, -D given to the server fix the run: a client asking for another is refused.
    const run = serverRun(p, (flag) => cmd.getOptionValueSource(flag) === 'cli');
    const serveOptions: PerfServeOptions = { limits, test: test as PerfTest, run };
    const log = (s: string) => console.error(`rddp perf: ${s}`);
    const host = o.bindSourceIp ?? PERF_DEFAULT_BIND;
    if (workers > 1 || isPerfWorker()) {
      if (o.transport !== 'tcp') throw new UsageError('--workers serves MPA/TCP connections (--transport tcp)');
      if (isPerfWorker()) {
        const serve = async (conn: LlpConnection, options: PerfServeOptions) => {
          debugConn(conn);
          const label = o.persistent ? o.transport : qpsLabel(o.transport, qps);
          return { results: await perfServeStreams(conn, tt, log, options), conn: connHeader(label, conn) };
        };
        await runPerfWorker({ tt, host, port, options: { ...serveOptions, limits }, serve });
        return;
      }
      const stopped = o.persistent ? stopSignal() : undefined;
      const perQp: PerfResult[][] = [];
      const pids: number[] = [];
      let served: PerfConnHeader | undefined;
      const failed = await runPerfPrimary({
        workers,
        connections: o.persistent ? undefined : qps,
        log,
        onListening: (at) =>
          console.error(`rddp perf: ${test} server listening on ${host}:${at} (${o.transport}, ${workers} workers)`),
        onServed: ({ results, conn }, pid) => {
          if (o.persistent) {
            log(`worker ${pid} served a client`);
            printResults(test, o, results, print, conn);
          } else {
            served ??= conn;
            perQp.push(results);
            pids.push(pid);
          }
        },
        ...(stopped ? { stopped } : {}),
      });
      if (perQp.length)
        printQpsRows(
          p,
          served?.label ?? qpsLabel(o.transport, perQp.length),
          qpsRows(perQp, pids),
          o.json,
          print,
          headerInfo(o, { qps: perQp.length, ...(served ? { conn: served } : {}) }),
        );
      if (failed) log(`${failed} of ${o.persistent ? 'the' : qps} connections failed`);
      process.exit(failed && !o.persistent ? 1 : 0);
    }
    const listener = await tt.transport.listen({ host, port }, { params: tt.listenParams });
    // --persistent: SIGINT/SIGTERM are taken before the listening line, so a stop right after it is clean.
    const stopped = o.persistent ? stopSignal() : undefined;
    console.error(
      `rddp perf: ${test} server listening on ${listener.address.host ?? host}:${listener.address.port} (${o.transport})`,
    );
    if (o.persistent) {
      // Each client on its own; one budget for all of them; a refused or failed client is logged.
      const budget = new MemoryBudget(limits.maxMemory);
      listener.connections$.subscribe((conn) => {
        debugConn(conn);
        const peer = `${conn.remoteAddress.host}:${conn.remoteAddress.port}`;
        perfServeStreams(conn, tt, log, { ...serveOptions, budget }).then(
          (results) => printResults(test, o, results, print, connHeader(o.transport, conn)),
          (e: Error) => log(`${peer}: ${e.message}`),
        );
      });
      const signal = await stopped;
      await listener.close();
      log(`${signal}: stopped`);
      process.exit(0);
    }
    if (qps > 1) {
      // -q N: N connections, each served as it comes, one --max-memory budget for all of them.
      const budget = new MemoryBudget(limits.maxMemory);
      const served: Promise<PerfResult[]>[] = [];
      let first: PerfConnHeader | undefined;
      await new Promise<void>((resolve) =>
        listener.connections$.pipe(take(qps)).subscribe({
          next: (conn) => {
            debugConn(conn);
            first ??= connHeader(qpsLabel(o.transport, qps), conn);
            const one = perfServeStreams(conn, tt, log, { ...serveOptions, budget });
            one.catch(() => {}); // settled below
            served.push(one);
          },
          complete: resolve,
        }),
      );
      await listener.close();
      const settled = await Promise.allSettled(served);
      const ok = settled.filter((r) => r.status === 'fulfilled').map((r) => r.value);
      for (const r of settled) if (r.status === 'rejected') log((r.reason as Error).message);
      if (ok.length)
        printQpsRows(
          p,
          first?.label ?? qpsLabel(o.transport, qps),
          qpsRows(
            ok,
            ok.map(() => process.pid),
          ),
          o.json,
          print,
          headerInfo(o, { qps, ...(first ? { conn: first } : {}) }),
        );
      if (ok.length < qps) {
        process.exitCode = 1;
        log(`${qps - ok.length} of ${qps} connections failed`);
      }
      return;
    }
    const conn = await firstValueFrom(listener.connections$);
    debugConn(conn);
    await listener.close();
    printResults(test, o, await perfServeStreams(conn, tt, log, serveOptions), print, connHeader(o.transport, conn));
    return;
  }
  if (o.bindSourceIp !== undefined) throw new UsageError('--bind_source_ip applies to the server');
  if (o.workers !== undefined) throw new UsageError('--workers applies to the server');
  const p = perfParams(test, o);
  if (qps > 1) {
    const conns = await connectQps(qps, () =>
      tt.transport.connect({ host: server, port }, { params: tt.connectParams, signal: AbortSignal.timeout(15_000) }),
    );
    const bar = runProgress(
      p,
      conns.reduce((a, c) => a + c.streams.length, 0),
      {},
      warmUpOf(o).warmUp,
    );
    let rows: QpsRow[];
    try {
      rows = await perfClientQps(conns, (conn, extra) =>
        perfClientStreams(conn, tt, p, () => {}, bar.onMoved, { ...warmUpOf(o), ...extra }),
      );
    } finally {
      bar.stop();
    }
    const label = qpsLabel(o.transport, qps);
    const h = headerInfo(o, { qps, ...(conns[0] ? { conn: connHeader(label, conns[0]) } : {}) });
    printQpsRows(p, h.conn?.label ?? label, rows, o.json, print, h);
    if (o.out)
      await writePerfOut(
        o.out,
        p,
        label,
        rows.map((r) => r.aggregate),
        h,
      );
    if (rows.some((r) => !r.aggregate.verified)) {
      process.exitCode = 1;
      console.error('rddp perf: data verification failed');
    }
    return;
  }
  const conn = await tt.transport.connect(
    { host: server, port },
    { params: tt.connectParams, signal: AbortSignal.timeout(15_000) },
  );
  const h = headerInfo(o, { conn: connHeader(o.transport, conn) });
  // The header once the server has accepted the run (its READY), not before a refusal (issue 37).
  let headed = o.json === true;
  const onReady = () => {
    if (headed) return;
    headed = true;
    bar.progress.interrupt(() => printHeader(p, h.conn?.label ?? o.transport, print, h));
  };
  const bar = runProgress(p, conn.streams.length, {}, warmUpOf(o).warmUp);
  let results: PerfResult[];
  try {
    results = await perfClientStreams(
      conn,
      tt,
      p,
      (r) => {
        bar.progress.interrupt(() => print(o.json ? JSON.stringify(r) : resultLine(r, h.unit)));
      },
      bar.onMoved,
      { ...warmUpOf(o), onReady },
    );
  } finally {
    bar.stop();
  }
  if (!o.json) print(RULE);
  if (o.out) await writePerfOut(o.out, p, o.transport, results, h);
  if (results.some((r) => !r.verified)) {
    process.exitCode = 1;
    console.error('rddp perf: data verification failed');
  }
}
