/**
 * `rddp rping` — librdmacm's rping, over rddp: the same flags, the same application protocol
 * (src/rping/protocol.ts), so it can face a real rping over Linux siw.
 */
import { networkInterfaces } from 'node:os';
import { Access } from '@rddp/ddp';
import { type LlpConnection, type LlpListener, MemoryBudget, SourceShares } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { PeerWatch } from '../peer.js';
import { RPING_DEFAULT_MAX_CLIENTS, RPING_DEFAULT_MAX_MEMORY } from '../rping/defaults.js';
import {
  RpingAdvertisementTooLargeError,
  RpingBogusDataError,
  RpingError,
  RpingStepTimeoutError,
} from '../rping/errors.js';
import {
  clientSource,
  RPING_DEFAULT_STEP_TIMEOUT_MS,
  RpingBufferReservation,
  type RpingSharedBudget,
  withinStep,
} from '../rping/limits.js';
import {
  cString,
  cStringLength,
  decodeInfo,
  encodeInfo,
  fillPing,
  RPING_INFO_LENGTH,
  RPING_MAX_SIZE,
  RPING_MIN_SIZE,
} from '../rping/protocol.js';
import { RdmaSession } from '../rping/session.js';
import { mpaRunNote, type ToolTransport, toolTransport, UsageError } from '../transports.js';

export interface RpingOptions {
  server?: boolean;
  client?: boolean;
  addr: string;
  /** rping's `-I <addr>`: the client's source address (rping.c binds it in rdma_resolve_addr). */
  source?: string;
  port: string;
  count?: string;
  size: string;
  verbose?: boolean;
  validate?: boolean;
  debug?: boolean;
  transport: string;
  mpaRev?: string;
  crc?: boolean;
  markers?: boolean;
  /** Interop deviations (docs/MPA.md): `--max-ulpdu`, `--tolerate-early-fpdu`. */
  maxUlpdu?: string;
  tolerateEarlyFpdu?: boolean;
  /** SCTP: `--sctp-interleaving`, `--sctp-scheduler`, `--sctp-rto-min`. */
  sctpInterleaving?: boolean;
  sctpScheduler?: string;
  sctpRtoMin?: string;
  p2p?: string;
  /** librdmacm's -P: serve clients one after another, or concurrently, until stopped. */
  persistent?: boolean;
  /** -P: clients served at once; more are refused. */
  maxClients?: string;
  /** -P: octets of ping buffers all clients together may make the server hold. */
  maxMemory?: string;
  /** -P: clients one source (`sourceKey`) may have served at once. */
  maxClientsPerSource?: string;
  /** -P: octets of ping buffers one source's clients together may make the server hold. */
  maxMemoryPerSource?: string;
  /** IPv6 prefix length clients are grouped into sources by (IPv4: one address, one source). */
  ipv6SourcePrefix?: string;
  /** Server: milliseconds a client has for each step before it is Terminated. */
  stepTimeout?: string;
  /** Hidden: a deliberate bug, the control that proves `rddp conformance` can fail (PLANTED_BUGS). */
  plantBug?: string;
}

/** Largest ping a server follows a client to (its own -S may be smaller). */
const RPING_SERVER_MAX = 64 * 1024 * 1024;
/** How long the Terminate and the close after it may take before the LLP connection is aborted. */
const TERMINATE_WITHIN_MS = 2000;
/** -P defaults: clients served at once, and the octets of ping buffers they may make the server hold. */
/** -P defaults per source: a quarter of --max-clients (at least 1) and of --max-memory. */
export const RPING_SOURCE_SHARE_DIVISOR = 4;
export { RPING_DEFAULT_MAX_CLIENTS, RPING_DEFAULT_MAX_MEMORY, RPING_DEFAULT_STEP_TIMEOUT_MS };

/**
 * PLANTED BUG (hidden `--plant-bug`, for the conformance kit's control case only): `terminate-code`
 * answers an RDMA Write to an invalid STag with DDP Error Code 0x01 (base or bounds) instead of RFC 5041
 * §7.2's 0x00 (Invalid STag). The Terminate is rewritten on its way to the LLP, the stack is untouched.
 */
export const PLANTED_BUGS = ['terminate-code'] as const;

function plantTerminateCodeBug(conn: LlpConnection): LlpConnection {
  const wrap = (stream: LlpConnection['streams'][number]) =>
    new Proxy(stream, {
      get(t, p) {
        if (p === 'send')
          return (ulpdu: readonly Uint8Array[], done?: Parameters<typeof t.send>[1]) => {
            const u = Buffer.concat(ulpdu.map((x) => Buffer.from(x.buffer, x.byteOffset, x.byteLength)));
            // Untagged (T=0), RDMAP Terminate (opcode 0x7) on QN 2, Layer DDP / Tagged Buffer Error, code 0x00.
            if (
              u.length > 19 &&
              (u[0] as number) >> 7 === 0 &&
              ((u[1] as number) & 0x0f) === 0x7 &&
              u.readUInt32BE(6) === 2
            )
              if (u[18] === 0x11 && u[19] === 0x00) {
                u[19] = 0x01;
                return t.send([u], done);
              }
            return t.send(ulpdu, done);
          };
        const v = Reflect.get(t, p, t);
        return typeof v === 'function' ? v.bind(t) : v;
      },
    });
  const streams = conn.streams.map(wrap);
  return new Proxy(conn, {
    get(t, p) {
      if (p === 'streams') return streams;
      const v = Reflect.get(t, p, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

/** log: stdout; debug: stderr under -d; note: stderr always (-P's line per client). */
type Out = { log(s: string): void; debug(s: string): void; note?(s: string): void };

function int(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`${name} must be an integer in ${min}..${max} (got ${v})`);
  return n;
}

/** One client run: `count` pings (0 = forever), each read by the server and written back. */
export async function rpingClient(
  conn: LlpConnection,
  tt: ToolTransport,
  o: { count: number; size: number; verbose: boolean; validate: boolean },
  out: Out,
): Promise<void> {
  const s = new RdmaSession(conn, { profile: tt.profileOf(conn), debug: out.debug, rdmapFactory: tt.rdmapFactory });
  const watch = new PeerWatch(conn, s.rdmap.terminate$);
  const startBuf = new Uint8Array(o.size);
  const rdmaBuf = new Uint8Array(o.size);
  // Least access each buffer needs: the server reads the source, writes the sink.
  const start = s.register(startBuf, Access.RemoteRead);
  const sink = s.register(rdmaBuf, Access.RemoteWrite);
  const recvBuf = new Uint8Array(RPING_INFO_LENGTH);
  const sendBuf = new Uint8Array(RPING_INFO_LENGTH);
  let c = 65;
  try {
    for (let ping = 0; o.count === 0 || ping < o.count; ping++) {
      c = fillPing(startBuf, ping, c);
      s.postReceive(recvBuf);
      encodeInfo({ addr: start.addr, rkey: start.stag, size: o.size }, sendBuf);
      await s.post({ type: 'send', payload: [sendBuf] });
      await s.recv(); // go-ahead: the server has read our source buffer
      out.debug(`ping ${ping}: source read by the server`);
      s.postReceive(recvBuf);
      encodeInfo({ addr: sink.addr, rkey: sink.stag, size: o.size }, sendBuf);
      await s.post({ type: 'send', payload: [sendBuf] });
      await s.recv(); // done: the server has written our sink buffer
      if (o.validate && Buffer.compare(startBuf, rdmaBuf) !== 0) {
        const at = startBuf.findIndex((x, i) => x !== rdmaBuf[i]);
        throw new Error(`data mismatch on ping ${ping} at octet ${at} of ${o.size}`);
      }
      if (o.verbose) out.log(`ping data: ${cString(rdmaBuf)}`);
      rdmaBuf.fill(0);
    }
  } catch (e) {
    // A Terminate, a reset or a close in mid-run: say so, not which operation it flushed.
    throw await watch.explain(e);
  } finally {
    await s.close().catch(() => {});
  }
}

/**
 * Serves one client until it disconnects (rping's server loop). Each step the client must take (its
 * advertisements, the RDMA Read Response, the completions of what is sent to it) has `stepTimeoutMs`
 * (default 10 s); past it the client is Terminated (`RpingStepTimeoutError`; aborted if it has sent
 * nothing yet). Its ping buffer is reserved, when its first advertisement comes, under `source` (default:
 * `sourceKey` of its address) from `budget` (-P) and the process's memory budget.
 */
export async function rpingServe(
  conn: LlpConnection,
  tt: ToolTransport,
  o: { size: number; verbose: boolean; budget?: RpingSharedBudget; source?: string; stepTimeoutMs?: number },
  out: Out,
): Promise<number> {
  const s = new RdmaSession(conn, { profile: tt.profileOf(conn), debug: out.debug, rdmapFactory: tt.rdmapFactory });
  const watch = new PeerWatch(conn, s.rdmap.terminate$);
  const stepMs = o.stepTimeoutMs ?? RPING_DEFAULT_STEP_TIMEOUT_MS;
  const step = <T>(p: Promise<T>, what: string): Promise<T> => withinStep(p, stepMs, what);
  const reservation = new RpingBufferReservation(o.source ?? clientSource(conn.remoteAddress), o.budget);
  let rdmaBuf = new Uint8Array(0);
  let local = { stag: 0, addr: 0n };
  const recvBuf = new Uint8Array(RPING_INFO_LENGTH);
  // rping.c's server never formats its send buffer: its go-ahead and done Sends carry 16 zero octets.
  const sendBuf = new Uint8Array(RPING_INFO_LENGTH);
  let pings = 0;
  /** Whether the client has sent anything yet (its first advertisement). */
  let heard = false;
  try {
    s.postReceive(recvBuf);
    for (;;) {
      try {
        if (!(await serveOne())) return pings;
      } catch (e) {
        if (e instanceof RpingStepTimeoutError && !heard) {
          // Silent since it connected: no Terminate can go before its first message (MPA, RFC 5044 §7.1.2).
          await s.abort(e, TERMINATE_WITHIN_MS);
          throw e;
        }
        if (e instanceof RpingError) {
          // A bad advertisement (rping.c fails the connection), a buffer over a bound, a step not taken in
          // time: RFC 5040 §6.2.1 abortive termination (a peer that reads nothing is aborted after 2 s).
          await s.terminate(TERMINATE_WITHIN_MS);
          throw e;
        }
        // The client may close as soon as it has our last Send; what was still in flight is flushed then.
        if (await s.closedGracefully(1000)) return pings;
        await s.closeWithin(TERMINATE_WITHIN_MS);
        throw await watch.explain(e);
      }
      out.debug(`ping ${pings}: done`);
      pings++;
    }
  } finally {
    reservation.release();
  }

  /** This end's ping buffer, `size` octets, reserved first (-P's budgets, the process's budget). */
  function resize(size: number): void {
    reservation.grow(size);
    if (rdmaBuf.length > 0) s.stags.deregister(local.stag);
    rdmaBuf = new Uint8Array(size);
    local = s.register(rdmaBuf, Access.LocalRead | Access.LocalWrite);
  }

  /** struct rping_rdma_info, exactly 16 octets, as rping.c's server_recv() takes it. */
  function advertisement(byteLength: number) {
    if (byteLength !== RPING_INFO_LENGTH) throw new RpingBogusDataError(byteLength);
    return decodeInfo(recvBuf);
  }

  async function serveOne(): Promise<boolean> {
    let adv: Awaited<ReturnType<RdmaSession['recv']>>;
    try {
      adv = await step(
        s.recv(),
        pings === 0
          ? 'the first buffer advertisement (a Send) after the connection was established'
          : `ping ${pings}'s buffer advertisement (a Send)`,
      );
    } catch (e) {
      if (e instanceof RpingStepTimeoutError) throw e;
      if (await s.closedGracefully(1000)) return false; // the client disconnected
      throw e; // reset, framing error or Terminate: a failure, not the end of the pings
    }
    heard = true;
    const src = advertisement(adv.byteLength);
    // This end's buffer: -S, or more when the client pings with more (followed within bounds), reserved
    // when the first advertisement has come (an idle connection holds none).
    const have = Math.max(rdmaBuf.length, o.size);
    if (src.size > have && src.size > RPING_SERVER_MAX)
      throw new RpingAdvertisementTooLargeError(src.size, RPING_SERVER_MAX);
    if (Math.max(have, src.size) > rdmaBuf.length) resize(Math.max(have, src.size));
    const len = src.size;
    s.postReceive(recvBuf);
    await step(
      s.post({ type: 'read', sinkStag: local.stag, sinkTo: local.addr, size: len, srcStag: src.rkey, srcTo: src.addr }),
      `the RDMA Read Response of ${len} octets`,
    );
    if (o.verbose) out.log(`server ping data: ${cString(rdmaBuf)}`);
    await step(s.post({ type: 'send', payload: [sendBuf] }), 'the go-ahead Send to complete'); // go ahead
    const adv2 = await step(s.recv(), 'the sink buffer advertisement (a Send)');
    const dst = advertisement(adv2.byteLength);
    s.postReceive(recvBuf);
    const wlen = Math.min(cStringLength(rdmaBuf) + 1, dst.size, rdmaBuf.length);
    await step(
      s.post({ type: 'write', sinkStag: dst.rkey, sinkTo: dst.addr, payload: [rdmaBuf.subarray(0, wlen)] }),
      `the RDMA Write of ${wlen} octets to complete`,
    );
    out.debug(`ping ${pings}: read ${len}, wrote ${wlen} octets`);
    await step(s.post({ type: 'send', payload: [sendBuf] }), 'the done Send to complete'); // done
    return true;
  }
}

/** -d: the CRC32c backend, send path and congestion control the connection runs (MPA/TCP; issue 37). */
function runNote(conn: LlpConnection, out: Out): void {
  const note = mpaRunNote(conn);
  if (note !== undefined) out.debug(`running ${note}`);
}

/** Whether `host` is one of this host's interface addresses (what -I may bind). */
function isLocalAddress(host: string): boolean {
  return Object.values(networkInterfaces()).some((list) => list?.some((a) => a.address === host));
}

export async function runRping(o: RpingOptions, out: Out): Promise<void> {
  if (!!o.server === !!o.client) throw new UsageError('give exactly one of -s (server) or -c (client)');
  const port = int('-p', o.port, 0, 65535);
  const size = int('-S', o.size, RPING_MIN_SIZE, RPING_MAX_SIZE);
  const count = o.count === undefined ? 0 : int('-C', o.count, 0, 2 ** 31 - 1);
  if (o.persistent && o.client) throw new UsageError('-P applies to the server (-s)');
  const maxClients =
    o.maxClients === undefined ? RPING_DEFAULT_MAX_CLIENTS : int('--max-clients', o.maxClients, 1, 65535);
  const maxMemory =
    o.maxMemory === undefined ? RPING_DEFAULT_MAX_MEMORY : int('--max-memory', o.maxMemory, RPING_MIN_SIZE, 2 ** 40);
  const maxClientsPerSource =
    o.maxClientsPerSource === undefined
      ? Math.max(1, Math.floor(maxClients / RPING_SOURCE_SHARE_DIVISOR))
      : int('--max-clients-per-source', o.maxClientsPerSource, 1, 65535);
  const maxMemoryPerSource =
    o.maxMemoryPerSource === undefined
      ? Math.max(RPING_MIN_SIZE, Math.floor(maxMemory / RPING_SOURCE_SHARE_DIVISOR))
      : int('--max-memory-per-source', o.maxMemoryPerSource, RPING_MIN_SIZE, 2 ** 40);
  const ipv6SourcePrefix =
    o.ipv6SourcePrefix === undefined ? 64 : int('--ipv6-source-prefix', o.ipv6SourcePrefix, 0, 128);
  const stepTimeoutMs =
    o.stepTimeout === undefined ? RPING_DEFAULT_STEP_TIMEOUT_MS : int('--step-timeout', o.stepTimeout, 1, 2 ** 31 - 1);
  if (o.plantBug !== undefined && !(PLANTED_BUGS as readonly string[]).includes(o.plantBug))
    throw new UsageError(`--plant-bug must be one of: ${PLANTED_BUGS.join(', ')}`);
  if (o.plantBug !== undefined && o.client) throw new UsageError('--plant-bug applies to the server (-s)');
  const plant = o.plantBug === 'terminate-code' ? plantTerminateCodeBug : (c: LlpConnection) => c;
  if (o.source !== undefined && !o.client) throw new UsageError('-I applies to the client (-c)');
  if (o.source !== undefined && !isLocalAddress(o.source))
    throw new UsageError(`-I ${o.source} is not an address of this host`);
  const tt = toolTransport(o);
  if (o.client) {
    out.debug(`connecting to ${o.addr}:${port} over ${o.transport}`);
    const conn = await tt.transport.connect(
      { host: o.addr, port },
      {
        params: tt.connectParams,
        signal: AbortSignal.timeout(15_000),
        ...(o.source !== undefined ? { localAddress: { host: o.source } } : {}),
      },
    );
    out.debug(`connected: ${JSON.stringify(conn.setup.negotiated)}`);
    runNote(conn, out);
    // MPA/TCP binds the -I address; a transport that binds no source leaves it to the route: say so.
    if (o.source !== undefined && conn.localAddress.host !== o.source)
      (out.note ?? out.debug)(
        `-I ${o.source}: connected from ${conn.localAddress.host} (this transport binds no source)`,
      );
    const t0 = performance.now();
    await rpingClient(conn, tt, { count, size, verbose: !!o.verbose, validate: !!o.validate }, out);
    out.debug('client done');
    // One line on success; -v keeps rping.c's output, the ping data alone.
    if (!o.verbose)
      out.log(
        `${count} pings of ${size} octets${o.validate ? ', validated' : ''}, in ${(performance.now() - t0).toFixed(0)} ms`,
      );
    return;
  }
  // -P: SIGINT/SIGTERM are taken before any listening line, so a stop right after it is clean.
  const stopped = o.persistent
    ? new Promise<string>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'));
        process.once('SIGTERM', () => resolve('SIGTERM'));
      })
    : undefined;
  const listener = await tt.transport.listen({ host: o.addr, port }, { params: tt.listenParams });
  out.debug(`listening on ${listener.address.host}:${listener.address.port} over ${o.transport}`);
  listener.errors$.subscribe((e) => out.debug(`connection setup failed: ${e.message}`));
  if (stopped) {
    await servePersistent(
      listener,
      tt,
      {
        size,
        verbose: !!o.verbose,
        maxClients,
        maxMemory,
        maxClientsPerSource,
        maxMemoryPerSource,
        ipv6SourcePrefix,
        stepTimeoutMs,
        plant,
      },
      stopped,
      out,
    );
    return;
  }
  const conn = await firstValueFrom(listener.connections$);
  await listener.close();
  out.debug(`accepted ${conn.remoteAddress.host}:${conn.remoteAddress.port}: ${JSON.stringify(conn.setup.negotiated)}`);
  runNote(conn, out);
  const source = clientSource(conn.remoteAddress, ipv6SourcePrefix);
  const pings = await rpingServe(plant(conn), tt, { size, verbose: !!o.verbose, source, stepTimeoutMs }, out);
  (out.note ?? out.debug)(`served ${pings} pings`);
}

/**
 * librdmacm's `rping -s -P`: every client served on its own, concurrently (rping.c: a thread each), until
 * SIGINT or SIGTERM. A failing client ends its own connection only; one line per client on stderr.
 * Bounded per source (`sourceKey` of the client's address): --max-clients-per-source clients and
 * --max-memory-per-source octets of ping buffers; a client past --step-timeout is Terminated.
 */
async function servePersistent(
  listener: LlpListener,
  tt: ToolTransport,
  o: {
    size: number;
    verbose: boolean;
    maxClients: number;
    maxMemory: number;
    maxClientsPerSource: number;
    maxMemoryPerSource: number;
    ipv6SourcePrefix: number;
    stepTimeoutMs: number;
    plant: (c: LlpConnection) => LlpConnection;
  },
  stopped: Promise<string>,
  out: Out,
): Promise<void> {
  const note = out.note ?? out.debug;
  // The budget's own share per source is all of it: --max-memory-per-source is checked (and named) first.
  const shared: RpingSharedBudget = {
    budget: new MemoryBudget({ limit: o.maxMemory, sourceShare: 1 }),
    perSource: o.maxMemoryPerSource,
  };
  const places = new SourceShares(o.maxClientsPerSource);
  const active = new Set<LlpConnection>();
  note(`persistent server listening on ${listener.address.host}:${listener.address.port}`);
  const accepting = listener.connections$.subscribe((conn) => {
    const peer = `${conn.remoteAddress.host}:${conn.remoteAddress.port}`;
    if (active.size >= o.maxClients) {
      note(`${peer}: refused: ${active.size} clients served at once (--max-clients ${o.maxClients})`);
      conn.abort();
      return;
    }
    const source = clientSource(conn.remoteAddress, o.ipv6SourcePrefix);
    if (!places.take(source)) {
      note(
        `${peer}: refused: source ${source} has ${places.count(source)} clients served at once (--max-clients-per-source ${o.maxClientsPerSource})`,
      );
      conn.abort();
      return;
    }
    active.add(conn);
    out.debug(`accepted ${peer}: ${JSON.stringify(conn.setup.negotiated)}`);
    runNote(conn, out);
    rpingServe(
      o.plant(conn),
      tt,
      { size: o.size, verbose: o.verbose, budget: shared, source, stepTimeoutMs: o.stepTimeoutMs },
      out,
    )
      .then(
        (pings) => note(`${peer}: served ${pings} pings`),
        (e: { message?: string; code?: string }) =>
          note(`${peer}: failed: ${e.message ?? String(e)}${e.code ? ` (${e.code})` : ''}`),
      )
      .finally(() => {
        active.delete(conn);
        places.give(source);
      });
  });
  const signal = await stopped;
  accepting.unsubscribe();
  await listener.close();
  for (const conn of active) conn.abort();
  note(`${signal}: stopped`);
}

/** `rddp rping`'s action (registered by ./rping-command.ts, which loads this module when rping runs). */
export async function rpingAction(raw: Record<string, string | boolean | undefined>): Promise<void> {
  const o: RpingOptions = {
    server: raw.s as boolean | undefined,
    client: raw.c as boolean | undefined,
    addr: raw.a as string,
    ...(raw.I !== undefined ? { source: raw.I as string } : {}),
    port: raw.p as string,
    count: raw.C as string | undefined,
    size: raw.S as string,
    verbose: raw.v as boolean | undefined,
    validate: raw.V as boolean | undefined,
    debug: raw.d as boolean | undefined,
    transport: raw.transport as string,
    mpaRev: raw.mpaRev as string | undefined,
    crc: raw.crc as boolean | undefined,
    markers: raw.markers as boolean | undefined,
    maxUlpdu: raw.maxUlpdu as string | undefined,
    tolerateEarlyFpdu: raw.tolerateEarlyFpdu as boolean | undefined,
    sctpInterleaving: raw.sctpInterleaving as boolean | undefined,
    sctpScheduler: raw.sctpScheduler as string | undefined,
    sctpRtoMin: raw.sctpRtoMin as string | undefined,
    p2p: raw.p2p as string | undefined,
    persistent: raw.P as boolean | undefined,
    maxClients: raw.maxClients as string | undefined,
    maxMemory: raw.maxMemory as string | undefined,
    maxClientsPerSource: raw.maxClientsPerSource as string | undefined,
    maxMemoryPerSource: raw.maxMemoryPerSource as string | undefined,
    ipv6SourcePrefix: raw.ipv6SourcePrefix as string | undefined,
    stepTimeout: raw.stepTimeout as string | undefined,
    plantBug: raw.plantBug as string | undefined,
  };
  const out: Out = {
    log: (s) => console.log(s),
    debug: (s) => (o.debug ? console.error(`rping: ${s}`) : undefined),
    note: (s) => console.error(`rping: ${s}`),
  };
  await runRping(o, out);
  if (o.persistent) process.exit(0); // stopped by SIGINT/SIGTERM: the clients' connections were aborted
}
