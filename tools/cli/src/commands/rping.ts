/**
 * `rddp rping` — librdmacm's rping, over rddp: the same flags, the same application protocol
 * (src/rping/protocol.ts), so it can face a real rping over Linux siw.
 */
import { Access } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { type Command, Option } from 'commander';
import { firstValueFrom } from 'rxjs';
import { RpingAdvertisementTooLargeError, RpingBogusDataError, RpingError } from '../rping/errors.js';
import {
  cString,
  cStringLength,
  decodeInfo,
  encodeInfo,
  fillPing,
  RPING_DEFAULT_PORT,
  RPING_DEFAULT_SIZE,
  RPING_INFO_LENGTH,
  RPING_MAX_SIZE,
  RPING_MIN_SIZE,
} from '../rping/protocol.js';
import { RdmaSession } from '../rping/session.js';
import { type ToolTransport, toolTransport, UsageError } from '../transports.js';

export interface RpingOptions {
  server?: boolean;
  client?: boolean;
  addr: string;
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
  p2p?: string;
}

/** Largest ping a server follows a client to (its own -S may be smaller). */
const RPING_SERVER_MAX = 64 * 1024 * 1024;
/** How long the Terminate and the close after it may take before the LLP connection is aborted. */
const TERMINATE_WITHIN_MS = 2000;

type Out = { log(s: string): void; debug(s: string): void };

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
  const s = new RdmaSession(conn, { profile: tt.profileOf(conn), debug: out.debug });
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
  } finally {
    await s.close().catch(() => {});
  }
}

/** Serves one client until it disconnects (rping's server loop). */
export async function rpingServe(
  conn: LlpConnection,
  tt: ToolTransport,
  o: { size: number; verbose: boolean },
  out: Out,
): Promise<number> {
  const s = new RdmaSession(conn, { profile: tt.profileOf(conn), debug: out.debug });
  let rdmaBuf = new Uint8Array(o.size);
  let local = s.register(rdmaBuf, Access.LocalRead | Access.LocalWrite);
  const recvBuf = new Uint8Array(RPING_INFO_LENGTH);
  const sendBuf = new Uint8Array(RPING_INFO_LENGTH);
  let pings = 0;
  s.postReceive(recvBuf);
  for (;;) {
    try {
      if (!(await serveOne())) return pings;
    } catch (e) {
      if (e instanceof RpingError) {
        // A bad advertisement (rping.c fails the connection): RFC 5040 §6.2.1 abortive termination.
        await s.terminate(TERMINATE_WITHIN_MS);
        throw e;
      }
      // The client may close as soon as it has our last Send; what was still in flight is flushed then.
      if (await s.closedGracefully(1000)) return pings;
      await s.closeWithin(TERMINATE_WITHIN_MS);
      throw e;
    }
    out.debug(`ping ${pings}: done`);
    pings++;
  }

  /** struct rping_rdma_info, exactly 16 octets, as rping.c's server_recv() takes it. */
  function advertisement(byteLength: number) {
    if (byteLength !== RPING_INFO_LENGTH) throw new RpingBogusDataError(byteLength);
    return decodeInfo(recvBuf);
  }

  async function serveOne(): Promise<boolean> {
    let adv: Awaited<ReturnType<RdmaSession['recv']>>;
    try {
      adv = await s.recv();
    } catch (e) {
      if (await s.closedGracefully(1000)) return false; // the client disconnected
      throw e; // reset, framing error or Terminate: a failure, not the end of the pings
    }
    const src = advertisement(adv.byteLength);
    if (src.size > rdmaBuf.length) {
      // The client pings with more than this end's -S: follow it, within bounds.
      if (src.size > RPING_SERVER_MAX) throw new RpingAdvertisementTooLargeError(src.size, RPING_SERVER_MAX);
      s.stags.deregister(local.stag);
      rdmaBuf = new Uint8Array(src.size);
      local = s.register(rdmaBuf, Access.LocalRead | Access.LocalWrite);
    }
    encodeInfo({ addr: local.addr, rkey: local.stag, size: rdmaBuf.length }, sendBuf);
    const len = src.size;
    s.postReceive(recvBuf);
    await s.post({
      type: 'read',
      sinkStag: local.stag,
      sinkTo: local.addr,
      size: len,
      srcStag: src.rkey,
      srcTo: src.addr,
    });
    if (o.verbose) out.log(`server ping data: ${cString(rdmaBuf)}`);
    await s.post({ type: 'send', payload: [sendBuf] }); // go ahead
    const adv2 = await s.recv();
    const dst = advertisement(adv2.byteLength);
    s.postReceive(recvBuf);
    const wlen = Math.min(cStringLength(rdmaBuf) + 1, dst.size, rdmaBuf.length);
    await s.post({ type: 'write', sinkStag: dst.rkey, sinkTo: dst.addr, payload: [rdmaBuf.subarray(0, wlen)] });
    out.debug(`ping ${pings}: read ${len}, wrote ${wlen} octets`);
    await s.post({ type: 'send', payload: [sendBuf] }); // done
    return true;
  }
}

export async function runRping(o: RpingOptions, out: Out): Promise<void> {
  if (!!o.server === !!o.client) throw new UsageError('give exactly one of -s (server) or -c (client)');
  const port = int('-p', o.port, 0, 65535);
  const size = int('-S', o.size, RPING_MIN_SIZE, RPING_MAX_SIZE);
  const count = o.count === undefined ? 0 : int('-C', o.count, 0, 2 ** 31 - 1);
  const tt = toolTransport(o);
  if (o.client) {
    out.debug(`connecting to ${o.addr}:${port} over ${o.transport}`);
    const conn = await tt.transport.connect(
      { host: o.addr, port },
      { params: tt.connectParams, signal: AbortSignal.timeout(15_000) },
    );
    out.debug(`connected: ${JSON.stringify(conn.setup.negotiated)}`);
    await rpingClient(conn, tt, { count, size, verbose: !!o.verbose, validate: !!o.validate }, out);
    out.debug('client done');
    return;
  }
  const listener = await tt.transport.listen({ host: o.addr, port }, { params: tt.listenParams });
  out.debug(`listening on ${listener.address.host}:${listener.address.port} over ${o.transport}`);
  listener.errors$.subscribe((e) => out.debug(`connection setup failed: ${e.message}`));
  const conn = await firstValueFrom(listener.connections$);
  await listener.close();
  out.debug(`accepted ${conn.remoteAddress.host}:${conn.remoteAddress.port}: ${JSON.stringify(conn.setup.negotiated)}`);
  const pings = await rpingServe(conn, tt, { size, verbose: !!o.verbose }, out);
  out.debug(`served ${pings} pings`);
}

export function registerRping(program: Command): void {
  program
    .command('rping')
    .description(
      "RDMA ping, librdmacm rping's protocol: the client advertises a buffer, the server RDMA Reads it, then RDMA Writes it back",
    )
    .option('-s', 'server')
    .option('-c', 'client')
    .option('-a <addr>', 'address (server: bind; client: connect to)', '127.0.0.1')
    .option('-p <port>', 'port', String(RPING_DEFAULT_PORT))
    .option('-C <count>', 'ping count (default: forever)')
    .option('-S <size>', `ping data size (${RPING_MIN_SIZE}..)`, String(RPING_DEFAULT_SIZE))
    .option('-v', 'print ping data')
    .option('-V', 'validate ping data')
    .option('-d', 'debug: protocol events')
    .addOption(new Option('--transport <name>', 'LLP to run on').default('tcp'))
    .option('--mpa-rev <rev>', 'MPA revision: 1, 2 (RFC 6581), 0 (RDMA Consortium profile, DDP/RDMAP version 0)')
    .option('--crc', 'ask for MPA CRCs (default)')
    .option('--no-crc', 'do not ask for MPA CRCs (used anyway if the peer asks)')
    .option('--markers', 'ask the peer to put MPA Markers in the FPDUs this end receives')
    .option(
      '--p2p <rtr>',
      'initiator: RFC 6581 peer-to-peer mode with this RTR (write, read or send); needs --mpa-rev 2',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  rddp rping -s -a 127.0.0.1\n  rddp rping -c -a 127.0.0.1 -C 100 -S 4096 -V\n  rddp rping -c -a 127.0.0.1 -C 10 -v --mpa-rev 2 --p2p read',
    )
    .action(async (raw: Record<string, string | boolean | undefined>) => {
      const o: RpingOptions = {
        server: raw.s as boolean | undefined,
        client: raw.c as boolean | undefined,
        addr: raw.a as string,
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
        p2p: raw.p2p as string | undefined,
      };
      const out: Out = {
        log: (s) => console.log(s),
        debug: (s) => (o.debug ? console.error(`rping: ${s}`) : undefined),
      };
      await runRping(o, out);
    });
}
