/**
 * The SCTP LLP itself: RFC 5043 setup and teardown, many streams per association, MULPDU sizing,
 * refusals, and what goes on the wire.
 */
import dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import {
  CapabilityError,
  ConnectionRefusedError,
  InvalidArgumentError,
  isLlpError,
  LLP_TRANSPORT,
  type LlpConnection,
  type LlpListener,
  LlpProtocolError,
  type LlpStream,
  type LlpTransport,
  UlpduTooLargeError,
} from '@rddp/llp';
import { Container } from 'inversify';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  RawSocketUnavailableError,
  type SctpConnection,
  type SctpTransportOptions,
  sctp,
  sctpModule,
} from '../src/index.js';
import { openUdpWire, PeerPath } from '../src/paths.js';
import { createEndpoint, type PkgAssociation, sctpPackage } from '../src/pkg.js';
import { loadRawSocket } from '../src/raw.js';
import {
  ADAPTATION_CODE_POINT_DDP,
  encodeSessionControl,
  PPID_DDP_SEGMENT,
  PPID_DDP_STREAM_SESSION_CONTROL,
  SessionFunction,
} from '../src/rfc5043.js';
import { adaptationCodePoint, ChunkType, chunks, dataChunks, initChunk } from '../src/wire.js';
import { pattern, udpDrops, until } from './harness.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function setup(
  opts: {
    initiator?: SctpTransportOptions;
    responder?: SctpTransportOptions;
    streams?: number;
    privateData?: Uint8Array;
  } = {},
): Promise<{ a: LlpConnection; b: LlpConnection; listener: LlpListener; ti: LlpTransport; tr: LlpTransport }> {
  const ti = sctp(opts.initiator);
  const tr = sctp(opts.responder);
  const listener = await tr.listen({ host: '127.0.0.1', port: 0 });
  cleanup.push(() => listener.close());
  const accepted = firstValueFrom(listener.connections$);
  const a = await ti.connect(
    { host: '127.0.0.1', port: listener.address.port as number },
    { streams: opts.streams ?? 1, privateData: opts.privateData ?? new Uint8Array(0) },
  );
  const b = await accepted;
  cleanup.push(() => {
    a.abort();
    b.abort();
  });
  return { a, b, listener, ti, tr };
}

function collect(s: LlpStream): Buffer[] {
  const got: Buffer[] = [];
  s.setReceiver((u) => got.push(Buffer.concat(u.chunks.map((c) => Buffer.from(c)))));
  return got;
}

async function sendAll(s: LlpStream, ulpdus: readonly Uint8Array[]): Promise<void> {
  for (const u of ulpdus) if (!s.send([u])) await s.waitForDrain();
}

/**
 * A peer built from the bare package plus this plugin's datagram layer (so its INIT carries the
 * adaptation indication), with its own stream counts, that has sent Session Initiate to a listener.
 */
async function foreignInitiator(streams: { OS: number; MIS: number }): Promise<{
  assoc: PkgAssociation;
  accepted: Promise<LlpConnection>;
}> {
  const tr = sctp();
  const listener = await tr.listen({ host: '127.0.0.1', port: 0 });
  cleanup.push(() => listener.close());
  const accepted = firstValueFrom(listener.connections$);
  let path: PeerPath | undefined;
  const peer = { host: '127.0.0.1', port: listener.address.port as number };
  const wire = await openUdpWire({
    host: '127.0.0.1',
    port: 0,
    recvBufferSize: 1 << 20,
    connectTo: peer,
    onPacket: (p) => path?.socket.receive(p),
    onError: () => {},
  });
  cleanup.push(() => wire.close());
  path = new PeerPath(
    (p, cb) => wire.send(p, peer, cb),
    peer,
    { localPort: wire.localPort, streams: Math.max(streams.OS, streams.MIS), aRwnd: 100_000 },
    { refused() {}, packageError() {}, violation() {} },
  );
  const live = path;
  cleanup.push(() => live.destroy());
  const assoc = live.endpoint.ASSOCIATE({ remotePort: peer.port, ...streams });
  await new Promise<void>((r) => assoc.once('COMMUNICATION UP', () => r()));
  assoc.SEND(
    encodeSessionControl(SessionFunction.Initiate),
    { stream_id: 0, ppid: PPID_DDP_STREAM_SESSION_CONTROL },
    () => {},
  );
  return { assoc, accepted };
}

describe('DDP over SCTP (RFC 5043)', () => {
  it('RFC 5043 §4: 64 DDP Streams on one association move data independently and in order', async () => {
    const { a, b } = await setup({ streams: 64 });
    expect(a.streams.length).toBe(64);
    expect(b.streams.length).toBe(64);
    expect(a.capabilities.maxStreams).toBeGreaterThanOrEqual(64);
    const sets = a.streams.map((_, k) =>
      Array.from({ length: 12 }, (_, i) => pattern(1 + ((k * 977 + i * 131) % 4000), k * 100 + i)),
    );
    const gots = b.streams.map((s) => collect(s));
    // Stream 7's reader is paused: the 63 others must still flow.
    (b.streams[7] as LlpStream).pause();
    await Promise.all(a.streams.map((s, k) => sendAll(s, sets[k] as Buffer[])));
    await until(() => gots.every((g, k) => k === 7 || g.length === 12), '63 streams delivered');
    expect(gots[7]).toEqual([]);
    (b.streams[7] as LlpStream).resume();
    await until(() => gots[7]?.length === 12, 'stream 7 after resume');
    for (let k = 0; k < 64; k++) {
      const want = sets[k] as Buffer[];
      expect(gots[k]?.length).toBe(want.length);
      expect(gots[k]?.every((g, i) => g.equals(want[i] as Buffer))).toBe(true);
    }
  });

  it('RFC 5043 §4: a Session Terminate closes one DDP Stream; the others go on', async () => {
    const { a, b } = await setup({ streams: 3 });
    const got0 = collect(b.streams[0] as LlpStream);
    const got1 = collect(b.streams[1] as LlpStream);
    (a.streams[1] as LlpStream).send([pattern(3000, 1)]);
    const peerClosed = firstValueFrom((b.streams[1] as LlpStream).closed$);
    await (a.streams[1] as LlpStream).close();
    const e = await peerClosed;
    expect(e).toEqual({ graceful: true, initiator: 'remote' });
    expect(got1).toEqual([pattern(3000, 1)]);
    expect(a.state).toBe('open');
    (a.streams[0] as LlpStream).send([pattern(10, 2)]);
    await until(() => got0.length === 1, 'stream 0 still carrying data');
    expect(() => (b.streams[1] as LlpStream).send([new Uint8Array(1)])).toThrow();
  });

  it('RFC 5043: private data goes both ways at setup; a reject carries the responder private data', async () => {
    const ti = sctp();
    const tr = sctp();
    const listener = await tr.listen(
      { host: '127.0.0.1', port: 0 },
      {
        onConnectRequest: (r) =>
          r.privateData[0] === 1
            ? { accept: true, privateData: Buffer.from('welcome') }
            : { accept: false, privateData: Buffer.from('go away') },
      },
    );
    cleanup.push(() => listener.close());
    const accepted = firstValueFrom(listener.connections$);
    const a = await ti.connect(
      { host: '127.0.0.1', port: listener.address.port as number },
      { privateData: new Uint8Array([1, 9]) },
    );
    const b = await accepted;
    cleanup.push(() => a.abort());
    expect(Buffer.from(a.setup.remotePrivateData).toString()).toBe('welcome');
    expect(b.setup.remotePrivateData).toEqual(new Uint8Array([1, 9]));
    const err = await ti
      .connect({ host: '127.0.0.1', port: listener.address.port as number }, { privateData: new Uint8Array([2]) })
      .catch((e) => e);
    expect(isLlpError(err, 'ERR_LLP_CONNECTION_REJECTED')).toBe(true);
    expect(Buffer.from(err.privateData).toString()).toBe('go away');
  });

  it('RFC 5041 §5.2: MULPDU fits the peer receive window; over it send() refuses, at it the ULPDU arrives', async () => {
    // Ethernet-size packets: the MULPDU leaves one packet of the window free.
    const { a, b } = await setup({ initiator: { pmtu: 1472 }, responder: { receiveWindow: 16 * 1024 } });
    const s = a.streams[0] as LlpStream;
    expect(s.mulpdu).toBeLessThan(16 * 1024);
    expect(s.mulpdu).toBe(16 * 1024 - 1472);
    expect(await firstValueFrom(s.mulpdu$)).toBe(s.mulpdu);
    const got = collect(b.streams[0] as LlpStream);
    expect(() => s.send([new Uint8Array(s.mulpdu + 1)])).toThrow(UlpduTooLargeError);
    expect(() => s.send([new Uint8Array(s.mulpdu), new Uint8Array(1)])).toThrow(UlpduTooLargeError);
    const max = pattern(s.mulpdu, 5);
    s.send([max.subarray(0, 100), max.subarray(100, 5000), max.subarray(5000)]); // parts, not concatenated
    await until(() => got.length === 1, 'the MULPDU-sized ULPDU');
    expect(got[0]?.equals(max)).toBe(true);
  });

  it('UDP: the socket buffer is sized from the window, so a 256 KiB MULPDU burst is not dropped by the kernel', async () => {
    const { a, b, listener } = await setup({ initiator: { mulpdu: 256 * 1024 }, responder: { mulpdu: 256 * 1024 } });
    const port = listener.address.port as number;
    const before = udpDrops(port);
    const s = a.streams[0] as LlpStream;
    const got = collect(b.streams[0] as LlpStream);
    const big = pattern(s.mulpdu, 7);
    for (let i = 0; i < 3; i++) s.send([big]);
    await until(() => got.length === 3, 'three MULPDU-sized ULPDUs');
    for (const g of got) expect(g.equals(big)).toBe(true);
    if (before !== undefined) expect(udpDrops(port)).toBe(before);
  });

  it('RFC 4960 §6.2: a paused reader holds at most a receive window, and the sender sees backpressure', async () => {
    const { a, b } = await setup({ responder: { receiveWindow: 64 * 1024 } });
    const rx = b.streams[0] as LlpStream & { heldBytes: number };
    const got = collect(rx);
    rx.pause();
    const s = a.streams[0] as LlpStream;
    let sent = 0;
    // Sends complete when handed to the wire: the sender's queue fills once the peer's window has closed.
    for (let round = 0; round < 4; round++) {
      while (s.send([pattern(4096, sent)])) sent++;
      sent++;
      await new Promise((r) => setTimeout(r, 25));
    }
    await until(() => rx.heldBytes > 0, 'segments held at the paused reader');
    await new Promise((r) => setTimeout(r, 100));
    expect(rx.heldBytes).toBeLessThanOrEqual(64 * 1024 + 4096);
    expect(s.needsDrain).toBe(true);
    const drained = s.waitForDrain();
    rx.resume();
    await drained;
    await until(() => got.length === sent, 'everything after resume');
  });

  it('RFC 5041 §6.2: graceful close is Session Terminate both ways, then SHUTDOWN; abort is ABORT', async () => {
    const trace: {
      dir: string;
      types: number[];
      data: ReturnType<typeof dataChunks>;
      code: number | null | undefined;
    }[] = [];
    const opts: SctpTransportOptions = {
      trace: (p, dir) => {
        const buf = Buffer.from(p);
        const init = initChunk(buf);
        trace.push({
          dir,
          types: chunks(buf).map((c) => c.type),
          data: dataChunks(buf),
          code: init ? adaptationCodePoint(buf, init) : undefined,
        });
      },
    };
    const { a, b } = await setup({ initiator: opts, privateData: new Uint8Array([7]) });
    const got = collect(b.streams[0] as LlpStream);
    (a.streams[0] as LlpStream).send([pattern(5000, 1)]);
    const bClosed = firstValueFrom(b.closed$);
    await a.close();
    expect(await bClosed).toEqual({ graceful: true, initiator: 'remote' });
    expect(got.length).toBe(1);
    const out = trace.filter((t) => t.dir === 'out');
    const inn = trace.filter((t) => t.dir === 'in');
    // RFC 5043 §5.1: the adaptation indication with the DDP code point in INIT and INIT ACK.
    expect(out.find((t) => t.types[0] === ChunkType.INIT)?.code).toBe(ADAPTATION_CODE_POINT_DDP);
    expect(inn.find((t) => t.types[0] === ChunkType.INIT_ACK)?.code).toBe(ADAPTATION_CODE_POINT_DDP);
    // RFC 5043 §5.2: PPID 17 for session control, 16 for DDP Segments; always ordered.
    const sentData = out.flatMap((t) => t.data);
    expect(new Set(sentData.map((d) => d.ppid))).toEqual(new Set([PPID_DDP_SEGMENT, PPID_DDP_STREAM_SESSION_CONTROL]));
    expect(sentData.some((d) => d.unordered)).toBe(false);
    expect(sentData[0]?.ppid).toBe(PPID_DDP_STREAM_SESSION_CONTROL); // Session Initiate first
    // RFC 4960 §9.2: SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE; no ABORT.
    expect(out.some((t) => t.types.includes(ChunkType.SHUTDOWN))).toBe(true);
    expect(inn.some((t) => t.types.includes(ChunkType.SHUTDOWN_ACK))).toBe(true);
    expect(out.some((t) => t.types.includes(ChunkType.SHUTDOWN_COMPLETE))).toBe(true);
    expect(trace.some((t) => t.types.includes(ChunkType.ABORT))).toBe(false);

    trace.length = 0;
    const { a: a2, b: b2 } = await setup({ initiator: opts });
    const b2Closed = firstValueFrom(b2.closed$);
    a2.abort();
    const e = await b2Closed;
    expect(e.graceful).toBe(false);
    expect(e.initiator).toBe('remote');
    expect(isLlpError(e.error, 'ERR_LLP_CONNECTION_ABORTED')).toBe(true);
    expect(trace.some((t) => t.dir === 'out' && t.types.includes(ChunkType.ABORT))).toBe(true);
  });

  it('RFC 5043 §5.1: an association without the Adaptation Layer Indication is refused, both ways', async () => {
    // A bare sctp-package client (no indication in its INIT) against this listener.
    const tr = sctp();
    const listener = await tr.listen({ host: '127.0.0.1', port: 0 });
    cleanup.push(() => listener.close());
    const refusal = firstValueFrom(listener.errors$);
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
    await new Promise<void>((r) => udp.connect(listener.address.port as number, '127.0.0.1', () => r()));
    cleanup.push(() => udp.close());
    const bare = sctpPackage.connect({ localPort: udp.address().port, port: listener.address.port, udpTransport: udp });
    bare.on('error', () => {});
    const lost = new Promise<void>((r) => bare.once('end', () => r()));
    const err = await refusal;
    expect(err).toBeInstanceOf(LlpProtocolError);
    expect(err.message).toMatch(/Adaptation Layer Indication/);
    await lost; // the bare client got an ABORT

    // This transport against a bare sctp-package endpoint (no indication in its INIT ACK).
    const server = dgram.createSocket('udp4');
    await new Promise<void>((r) => server.bind(0, '127.0.0.1', () => r()));
    cleanup.push(() => server.close());
    const fake = Object.assign(new EventEmitter(), {
      peer: undefined as dgram.RemoteInfo | undefined,
      send(b: Buffer, _p: number, _a: string, cb?: () => void) {
        if (this.peer) server.send(b, this.peer.port, this.peer.address, cb);
      },
    });
    server.on('message', (m, r) => {
      fake.peer = r;
      fake.emit('message', m, r);
    });
    const endpoint = createEndpoint({ localPort: server.address().port, streams: 4, aRwnd: 100_000 }, fake);
    cleanup.push(() => endpoint.DESTROY());
    const e2 = await sctp()
      .connect({ host: '127.0.0.1', port: server.address().port })
      .catch((e) => e);
    expect(e2).toBeInstanceOf(CapabilityError);
    expect(String(e2.message)).toMatch(/not a DDP endpoint/);
  });

  it('RFC 4960 §6.5: DATA on a stream the connection does not have gets an Invalid Stream Identifier ERROR and is dropped', async () => {
    const { assoc, accepted } = await foreignInitiator({ OS: 2, MIS: 2 });
    const causes: { cause?: string; stream_id?: number }[] = [];
    assoc.on('COMMUNICATION ERROR', (c: typeof causes) => causes.push(...c));
    const b = (await accepted) as SctpConnection;
    cleanup.push(() => b.abort());
    expect(b.streams.length).toBe(2);
    const got = collect(b.streams[0] as LlpStream);
    // A peer that sends beyond the streams it announced (played by the package told it has three).
    assoc.OS = 3;
    assoc.SEND(Buffer.from('stray'), { stream_id: 2, ppid: PPID_DDP_SEGMENT }, () => {});
    assoc.SEND(Buffer.from('fine'), { stream_id: 0, ppid: PPID_DDP_SEGMENT }, () => {});
    await until(() => causes.length === 1 && got.length === 1, 'the ERROR and the good segment');
    expect(causes[0]).toMatchObject({ cause: 'INVALID_STREAM_IDENTIFIER', stream_id: 2 });
    expect(got[0]?.toString()).toBe('fine');
    expect(b.stats.invalidStreamId).toBe(1);
  });

  it('RFC 4960 §5.1.1, RFC 5043 §4: a peer that sends on fewer streams than it receives on gets that many DDP Streams', async () => {
    // The peer's INIT: OS 3, MIS 8. The package alone would settle on min(256, 8) = 8 streams this way.
    const { assoc, accepted } = await foreignInitiator({ OS: 3, MIS: 8 });
    const b = (await accepted) as SctpConnection;
    cleanup.push(() => b.abort());
    expect(b.sctpAssociation.OS).toBe(8);
    expect(b.streams.length).toBe(3);
    const got = collect(b.streams[2] as LlpStream);
    assoc.SEND(Buffer.from('on the last'), { stream_id: 2, ppid: PPID_DDP_SEGMENT }, () => {});
    await until(() => got.length === 1, 'a segment on stream 2');
  });

  it('RFC 5043 (rfc5043.ts UNORDERED_DATA_ACCEPTED): an unordered DATA chunk is a protocol violation: ABORT, nothing delivered', async () => {
    const { assoc, accepted } = await foreignInitiator({ OS: 2, MIS: 2 });
    const b = (await accepted) as SctpConnection;
    cleanup.push(() => b.abort());
    const got = collect(b.streams[0] as LlpStream);
    const closed = firstValueFrom(b.closed$);
    const lost = new Promise<string | undefined>((r) => assoc.once('COMMUNICATION LOST', (event?: string) => r(event)));
    assoc.SEND(Buffer.from('unordered'), { stream_id: 0, ppid: PPID_DDP_SEGMENT, unordered: true }, () => {});
    const e = await closed;
    expect(e.graceful).toBe(false);
    expect(isLlpError(e.error, 'ERR_LLP_PROTOCOL')).toBe(true);
    expect(String(e.error?.message)).toMatch(/unordered/);
    expect(await lost).toBe('abort'); // the peer got an ABORT
    expect(got).toEqual([]);
  });

  it('RFC 5043 §5.2: a user message with another PPID is a protocol violation: ABORT', async () => {
    const { a, b } = await setup();
    const closed = firstValueFrom(b.closed$);
    const aClosed = firstValueFrom(a.closed$);
    (a as SctpConnection).sctpAssociation.SEND(Buffer.from('x'), { stream_id: 0, ppid: 51 }, () => {});
    const e = await closed;
    expect(e.graceful).toBe(false);
    expect(isLlpError(e.error, 'ERR_LLP_PROTOCOL')).toBe(true);
    expect((await aClosed).graceful).toBe(false);
  });

  it('connect: nothing listening is ConnectionRefusedError; silence is LlpTimeoutError; AbortSignal is LlpAbortError', async () => {
    const t = sctp();
    const spare = dgram.createSocket('udp4');
    await new Promise<void>((r) => spare.bind(0, '127.0.0.1', () => r()));
    const deadPort = spare.address().port;
    await new Promise<void>((r) => spare.close(() => r()));
    const refused = await t.connect({ host: '127.0.0.1', port: deadPort }).catch((e) => e);
    expect(refused).toBeInstanceOf(ConnectionRefusedError);

    const silent = dgram.createSocket('udp4');
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    cleanup.push(() => silent.close());
    const port = silent.address().port;
    const timedOut = await t.connect({ host: '127.0.0.1', port }, { timeoutMs: 100 }).catch((e) => e);
    expect(isLlpError(timedOut, 'ERR_LLP_TIMEOUT')).toBe(true);
    const ac = new AbortController();
    const p = t.connect({ host: '127.0.0.1', port }, { signal: ac.signal }).catch((e) => e);
    ac.abort();
    expect(isLlpError(await p, 'ERR_LLP_ABORTED')).toBe(true);
  });

  it('caller errors are typed: streams, private data, empty ULPDU, options', async () => {
    const t = sctp({ maxStreams: 8, maxPrivateData: 16 });
    await expect(t.connect({ host: '127.0.0.1', port: 9 }, { streams: 9 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(t.connect({ host: '127.0.0.1', port: 9 }, { streams: 0 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(t.connect({ host: '127.0.0.1', port: 9 }, { privateData: new Uint8Array(17) })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(t.connect({ host: '127.0.0.1' })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(() => sctp({ mulpdu: 10 })).toThrow(InvalidArgumentError);
    expect(() => sctp({ encapsulation: 'tcp' as 'udp' })).toThrow(InvalidArgumentError);
    expect(() => sctp({ rtoMinMs: 2000, rtoMaxMs: 1000 })).toThrow(InvalidArgumentError);
    const { a } = await setup();
    // RFC 4960 §3.3.1: no empty user messages (DDP Segments always carry a header).
    expect(() => (a.streams[0] as LlpStream).send([])).toThrow(InvalidArgumentError);
  });

  it('RFC 4960 §15: RTO.Initial, RTO.Min and RTO.Max from the options reach the association at each end (RFC 9260 §16 defaults: 1 s, 1 s, 60 s)', async () => {
    const { a, b } = await setup({ initiator: { rtoInitialMs: 700, rtoMinMs: 30, rtoMaxMs: 5000 } });
    type Rto = { rto_initial: number; rto_min: number; rto_max: number };
    const rto = (c: LlpConnection) => {
      const t = (c as SctpConnection).sctpAssociation as unknown as Rto;
      return { initial: t.rto_initial, min: t.rto_min, max: t.rto_max };
    };
    expect(rto(a)).toEqual({ initial: 700, min: 30, max: 5000 });
    expect(rto(b)).toEqual({ initial: 1000, min: 1000, max: 60_000 });
  });

  it('raw IPv4 encapsulation (protocol 132): works as root with raw-socket, else RawSocketUnavailableError', async () => {
    let available = true;
    try {
      loadRawSocket();
    } catch (e) {
      available = false;
      expect(e).toBeInstanceOf(RawSocketUnavailableError);
    }
    const t = sctp({ encapsulation: 'raw', mulpdu: 65_536 });
    if (!available || process.getuid?.() !== 0) {
      const e = await t.listen({ host: '127.0.0.1', port: 0 }).catch((x) => x);
      expect(e).toBeInstanceOf(RawSocketUnavailableError);
      expect(isLlpError(e, 'ERR_LLP_CAPABILITY')).toBe(true);
      return;
    }
    const listener = await t.listen({ host: '127.0.0.1', port: 40_000 + Math.floor(Math.random() * 9000) });
    cleanup.push(() => listener.close());
    const accepted = firstValueFrom(listener.connections$);
    const a = await t.connect({ host: '127.0.0.1', port: listener.address.port as number }, { streams: 2 });
    const b = await accepted;
    cleanup.push(() => {
      a.abort();
      b.abort();
    });
    // Messages of many packets: raw-socket's reused receive buffer must not leak into them.
    const sent = [pattern(65_536, 1), pattern(3000, 2), pattern(40_000, 3)];
    const got = collect(b.streams[1] as LlpStream);
    await sendAll(a.streams[1] as LlpStream, sent);
    await until(() => got.length === 3, 'raw-mode delivery');
    for (let i = 0; i < 3; i++) expect(got[i]?.equals(sent[i] as Buffer)).toBe(true);
    const bClosed = firstValueFrom(b.closed$);
    await a.close();
    expect((await bClosed).graceful).toBe(true);
  });

  it('sctpModule binds the transport under LLP_TRANSPORT', () => {
    const c = new Container();
    c.load(sctpModule({ maxStreams: 16 }));
    const t = c.get<LlpTransport>(LLP_TRANSPORT);
    expect(t.name).toBe('sctp');
    expect(t.capabilities).toMatchObject({
      reliable: true,
      ordered: true,
      preservesMessageBoundaries: true,
      strongDigest: true,
      maxStreams: 16,
    });
  });
});
