/**
 * The UDP LLP's own behaviour over real sockets on 127.0.0.1: setup (RFC 5041 §6.1), MULPDU (§3, §5.2),
 * boundaries, streams, flow control, teardown (§6.2), and its wire format as a hand-driven peer sees it.
 */
import dgram from 'node:dgram';
import { CapabilityError, type LlpConnection, type LlpStream } from '@rddp/llp';
import { createStack } from '@rddp/stack';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AbortCode,
  COOKIE_LENGTH,
  CRC_LENGTH,
  DATAGRAM_TYPES,
  DatagramType,
  decodeSetupBody,
  encodeSetupBody,
  HEADER_LENGTH,
  type UdpConnection,
  type UdpStream,
  udp,
  udpModule,
} from '../src/index.js';
import { collect, connectPair, hex, pattern, RawPeer, sendAll, until } from './helpers.js';

const fast = { retransmitMs: 10, lingerMs: 20, closeTimeoutMs: 500 };
const open: LlpConnection[] = [];
const raws: RawPeer[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.abort();
  for (const r of raws.splice(0)) r.close();
});

async function pair(a = udp(fast), b = a, options = {}) {
  const [x, y, listener] = await connectPair(a, b, options);
  open.push(x, y);
  await listener.close();
  return [x as UdpConnection, y as UdpConnection] as const;
}

async function raw(): Promise<RawPeer> {
  const r = await RawPeer.open();
  raws.push(r);
  return r;
}

/** A port on which nothing listens (bound, then closed). */
async function deadPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('UDP LLP setup (RFC 5041 §6.1)', () => {
  it('declares the DDPP core draft §3.4 class: unreliable, unordered, boundaries kept; digest per CRC choice', async () => {
    expect(udp().capabilities).toMatchObject({ reliable: false, ordered: false, preservesMessageBoundaries: true });
    expect(udp().capabilities.strongDigest).toBe(true);
    expect(udp({ crc: false }).capabilities.strongDigest).toBe(false);
    const [a, b] = await pair();
    expect(a.capabilities).toMatchObject({ reliable: false, ordered: false, strongDigest: true, maxStreams: 1 });
    expect(b.capabilities).toEqual(a.capabilities);
  });

  it('RFC 5041 §3/§5.2: MULPDU = datagram size − 16 (header) − 4 (CRC32c), the smaller datagram size of both ends', async () => {
    const [a, b] = await pair(udp({ ...fast, datagramSize: 1200 }), udp({ ...fast, datagramSize: 1000 }));
    for (const c of [a, b]) {
      expect(c.streams[0]?.mulpdu).toBe(1000 - HEADER_LENGTH - CRC_LENGTH);
      expect(c.setup.negotiated).toEqual({ crc: true, datagramSize: 1000, streams: 1 });
    }
    const [c, d] = await pair(udp({ ...fast, crc: false }), udp({ ...fast, crc: false }));
    expect(c.streams[0]?.mulpdu).toBe(1400 - HEADER_LENGTH);
    expect(d.capabilities.strongDigest).toBe(false);
  });

  it('CRC32c is used when either end asks for it (connect params override the transport options)', async () => {
    const [a, b] = await pair(udp({ ...fast, crc: false }), udp({ ...fast, crc: true }));
    expect([a.crc, b.crc, a.capabilities.strongDigest]).toEqual([true, true, true]);
    const [c] = await pair(udp({ ...fast, crc: false }), udp({ ...fast, crc: false }), { params: { crc: true } });
    expect(c.crc).toBe(true);
  });

  it('RFC 5043-style streams: the responder grants at most its maxStreams', async () => {
    const [a, b] = await pair(udp(fast), udp({ ...fast, maxStreams: 3 }), { streams: 5 });
    expect(a.streams).toHaveLength(3);
    expect(b.streams).toHaveLength(3);
    expect(a.setup.negotiated['streams']).toBe(3);
  });

  it('private data both ways; the request shows the initiator what it asked for', async () => {
    const t = udp(fast);
    const listener = await t.listen(
      { host: '127.0.0.1', port: 0 },
      {
        onConnectRequest: (req) => {
          expect(req.params).toEqual({ crc: true, datagramSize: 1400, streams: 2, window: 64 });
          return { accept: true, privateData: pattern(30, 2) };
        },
      },
    );
    const accepted = firstValueFrom(listener.connections$);
    const a = await t.connect(listener.address, { privateData: pattern(512, 1), streams: 2 });
    const b = await accepted;
    open.push(a, b);
    await listener.close();
    expect(b.setup.remotePrivateData).toEqual(pattern(512, 1));
    expect(a.setup.remotePrivateData).toEqual(pattern(30, 2));
    await expect(t.connect(listener.address, { privateData: new Uint8Array(513) })).rejects.toMatchObject({
      code: 'ERR_LLP_INVALID_ARGUMENT',
    });
  });

  it('nothing listening: ConnectionRefusedError (ICMP port unreachable on the connected socket)', async () => {
    const port = await deadPort();
    await expect(udp(fast).connect({ host: '127.0.0.1', port })).rejects.toMatchObject({
      code: 'ERR_LLP_CONNECTION_REFUSED',
    });
  });

  it('a closed listener whose socket still carries a connection answers REQUEST with ABORT: ConnectionRefusedError', async () => {
    const t = udp(fast);
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    open.push(await t.connect(listener.address), await accepted);
    await listener.close();
    await expect(t.connect(listener.address)).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_REFUSED' });
  });

  it('onConnectRequest throwing rejects the connection and reports on errors$', async () => {
    const t = udp(fast);
    const listener = await t.listen(
      { host: '127.0.0.1', port: 0 },
      {
        onConnectRequest: () => {
          throw new Error('no');
        },
      },
    );
    const reported = firstValueFrom(listener.errors$);
    await expect(t.connect(listener.address)).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_REJECTED' });
    expect((await reported).code).toBe('ERR_LLP_CONNECTION_ABORTED');
    await listener.close();
  });

  it('the handshake timer: a peer that never answers gives LlpTimeoutError; the AbortSignal gives LlpAbortError', async () => {
    const silent = await raw();
    const t = udp(fast);
    await expect(t.connect({ host: '127.0.0.1', port: silent.port }, { timeoutMs: 60 })).rejects.toMatchObject({
      code: 'ERR_LLP_TIMEOUT',
    });
    // The REQUEST was resent while waiting.
    expect(silent.drain(DatagramType.Request).length).toBeGreaterThan(1);
    const ac = new AbortController();
    const p = t.connect({ host: '127.0.0.1', port: silent.port }, { signal: ac.signal });
    setTimeout(() => ac.abort(), 20);
    await expect(p).rejects.toMatchObject({ code: 'ERR_LLP_ABORTED' });
    await expect(
      t.connect({ host: '127.0.0.1', port: silent.port }, { signal: AbortSignal.abort() }),
    ).rejects.toMatchObject({
      code: 'ERR_LLP_ABORTED',
    });
  });

  it('setup survives loss: REQUEST and ACCEPT are resent (half of all datagrams dropped, both ways)', async () => {
    for (let seed = 1; seed <= 5; seed++) {
      const lossy = { ...fast, faults: { seed, drop: 0.5, control: true } };
      const [a, b] = await pair(udp(lossy), udp({ ...lossy, faults: { ...lossy.faults, seed: seed + 100 } }), {
        privateData: pattern(9, seed),
      });
      expect(b.setup.remotePrivateData).toEqual(pattern(9, seed));
      expect(a.setup.negotiated).toEqual(b.setup.negotiated);
    }
  });
});

describe('UDP LLP data path (RFC 5041 §3: one ULPDU per datagram, exact length and octets)', () => {
  it('every ULPDU, 0..MULPDU octets, arrives whole on its own stream; nothing lost on a quiet 127.0.0.1', async () => {
    const [a, b] = await pair(udp(fast), udp(fast), { streams: 4 });
    const mulpdu = (a.streams[0] as LlpStream).mulpdu;
    const sent = a.streams.map((_, k) =>
      Array.from({ length: 60 }, (_, i) =>
        pattern(i === 0 ? 0 : i === 1 ? mulpdu : (i * 97 + k * 13) % mulpdu, k * 1000 + i),
      ),
    );
    const got = b.streams.map((s) => collect(s));
    await Promise.all(a.streams.map((s, k) => sendAll(s, sent[k] as Uint8Array[])));
    await until(() => got.every((g, k) => g.length === sent[k]?.length));
    for (let k = 0; k < 4; k++)
      expect((got[k] as Uint8Array[]).map(hex).sort()).toEqual((sent[k] as Uint8Array[]).map(hex).sort());
    expect(a.stats.socket.faultDrops).toBe(0);
  });

  it('RFC 5041 §5.2: over MULPDU is refused before anything is sent', async () => {
    const [a] = await pair();
    const s = a.streams[0] as UdpStream;
    const before = a.stats.datagramsSent;
    expect(() => s.send([new Uint8Array(s.mulpdu), new Uint8Array(1)])).toThrow(
      expect.objectContaining({ code: 'ERR_LLP_ULPDU_TOO_LARGE' }),
    );
    expect(a.stats.datagramsSent).toBe(before);
  });

  it('fault injection is seeded: the same seed loses the same datagrams; every other one arrives', async () => {
    const run = async () => {
      const t = udp({ ...fast, faults: { seed: 42, drop: 0.25 } });
      const [a, b] = await pair(t, udp(fast));
      const got = collect(b.streams[0] as LlpStream);
      const sent = Array.from({ length: 200 }, (_, i) => pattern(8, i));
      await sendAll(a.streams[0] as LlpStream, sent);
      const dropped = a.stats.socket.faultDrops;
      await until(() => got.length === 200 - dropped);
      await new Promise((r) => setTimeout(r, 20));
      expect(got.length).toBe(200 - dropped);
      return got.map(hex);
    };
    const first = await run();
    expect(first.length).toBeGreaterThan(120);
    expect(first.length).toBeLessThan(180);
    expect(await run()).toEqual(first);
  });

  it('duplicates and reordering are passed up as they come (the LLP neither dedupes nor reorders)', async () => {
    const [a, b] = await pair(udp({ ...fast, faults: { seed: 5, duplicate: 0.3, reorder: 0.3 } }), udp(fast));
    const got = collect(b.streams[0] as LlpStream);
    const sent = Array.from({ length: 100 }, (_, i) => pattern(4, i));
    await sendAll(a.streams[0] as LlpStream, sent);
    const dups = a.stats.socket.faultDuplicates;
    expect(dups).toBeGreaterThan(0);
    expect(a.stats.socket.faultReorders).toBeGreaterThan(0);
    await until(() => got.length === 100 + dups);
    expect(new Set(got.map(hex))).toEqual(new Set(sent.map(hex)));
    expect(got.map(hex)).not.toEqual(sent.map(hex));
  });
});

describe('UDP LLP flow control and backpressure', () => {
  it('a lost tail cannot stall the window: the blocked sender PROBEs and the reading peer frees it', async () => {
    const [a, b] = await pair(udp({ ...fast, faults: { seed: 3, drop: 0.5 } }), udp({ ...fast, receiveWindow: 4 }));
    const got = collect(b.streams[0] as LlpStream);
    const s = a.streams[0] as UdpStream;
    await sendAll(
      s,
      Array.from({ length: 300 }, (_, i) => pattern(10, i)),
      1000,
    );
    expect(s.stats.probesSent).toBeGreaterThan(0);
    await until(() => got.length === 300 - a.stats.socket.faultDrops);
  });

  it('a peer ignoring the window loses what exceeds twice the window while the reader is paused', async () => {
    const t = udp({ ...fast, receiveWindow: 4 });
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    const r = await raw();
    await r.handshake(
      listener.address.port as number,
      77,
      encodeSetupBody({ streams: 1, datagramSize: 1400, window: 64, crc: true, privateData: new Uint8Array(0) }),
    );
    const b = (await accepted) as UdpConnection;
    open.push(b);
    const s = b.streams[0] as UdpStream;
    const got = collect(s);
    s.pause();
    for (let i = 1; i <= 12; i++)
      await r.send(
        { type: DatagramType.Data, crc: true, streamId: 0, dst: b.localId, src: 77, seq: i },
        [pattern(5, i)],
        listener.address.port as number,
      );
    await until(() => s.stats.holdOverflows === 4);
    expect(got).toHaveLength(0);
    s.resume();
    expect(got.map(hex)).toEqual(Array.from({ length: 8 }, (_, i) => hex(pattern(5, i + 1))));
    await listener.close();
  });
});

describe('UDP LLP teardown (RFC 5041 §6.2, best effort)', () => {
  it('graceful: FIN answered by FIN_ACK; both ends end gracefully, the peer as "remote"', async () => {
    const [a, b] = await pair();
    const bClosed = firstValueFrom(b.closed$);
    await a.close();
    expect(await firstValueFrom(a.closed$)).toMatchObject({ graceful: true, initiator: 'local' });
    expect(await bClosed).toMatchObject({ graceful: true, initiator: 'remote' });
  });

  it('both ends closing at once both end gracefully', async () => {
    const [a, b] = await pair();
    await Promise.all([a.close(), b.close()]);
    expect((await firstValueFrom(a.closed$)).graceful).toBe(true);
    expect((await firstValueFrom(b.closed$)).graceful).toBe(true);
  });

  it('a FIN never answered ends the close with LlpTimeoutError after closeTimeoutMs; the FIN was resent', async () => {
    const r = await raw();
    const t = udp({ ...fast, closeTimeoutMs: 80 });
    const connecting = t.connect({ host: '127.0.0.1', port: r.port });
    const req = await r.next(DatagramType.Request);
    await r.send(
      { type: DatagramType.Accept, crc: true, streamId: 0, dst: req.d.header.src, src: 99, seq: 0 },
      [encodeSetupBody({ streams: 1, datagramSize: 1400, window: 64, crc: true, privateData: new Uint8Array(0) })],
      req.from.port,
    );
    const a = await connecting;
    open.push(a);
    (a.streams[0] as LlpStream).send([pattern(3)]);
    await expect(a.close()).rejects.toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
    expect(await firstValueFrom(a.closed$)).toMatchObject({ graceful: false, initiator: 'local' });
    const fins = r.drain(DatagramType.Fin);
    expect(fins.length).toBeGreaterThan(1);
    expect(fins[0]?.header.seq).toBe(1); // the highest DATA sequence number sent on the stream
  });

  it('one stream aborted: only that stream of the peer ends, with ConnectionAbortedError; the others still carry data', async () => {
    const [a, b] = await pair(udp(fast), udp(fast), { streams: 2 });
    const b1Closed = firstValueFrom((b.streams[1] as LlpStream).closed$);
    (a.streams[1] as LlpStream).abort();
    const e = await b1Closed;
    expect(e).toMatchObject({ graceful: false, initiator: 'remote' });
    expect(e.error?.code).toBe('ERR_LLP_CONNECTION_ABORTED');
    const got = collect(b.streams[0] as LlpStream);
    (a.streams[0] as LlpStream).send([pattern(7)]);
    await until(() => got.length === 1);
    expect(b.state).toBe('closing');
  });

  it('the peer socket gone (ICMP port unreachable): the connection ends with ConnectionAbortedError', async () => {
    const r = await raw();
    const connecting = udp(fast).connect({ host: '127.0.0.1', port: r.port });
    const req = await r.next(DatagramType.Request);
    await r.send(
      { type: DatagramType.Accept, crc: true, streamId: 0, dst: req.d.header.src, src: 99, seq: 0 },
      [encodeSetupBody({ streams: 1, datagramSize: 1400, window: 64, crc: true, privateData: new Uint8Array(0) })],
      req.from.port,
    );
    const a = await connecting;
    open.push(a);
    raws.splice(raws.indexOf(r), 1);
    r.close();
    const closed = firstValueFrom(a.closed$);
    const s = a.streams[0] as LlpStream;
    for (let i = 0; i < 5 && s.state === 'open'; i++) {
      s.send([pattern(3)]);
      await new Promise((res) => setTimeout(res, 10));
    }
    const e = await closed;
    expect(e.graceful).toBe(false);
    expect(e.error?.code).toBe('ERR_LLP_CONNECTION_ABORTED');
  });
});

describe('UDP LLP wire format seen by a hand-driven peer', () => {
  it('ACCEPT, DATA (one datagram per ULPDU, parts in order, CRC32c), and what the responder drops', async () => {
    const t = udp({ ...fast, datagramSize: 600 });
    const listener = await t.listen(
      { host: '127.0.0.1', port: 0 },
      { onConnectRequest: () => ({ accept: true, privateData: pattern(4) }) },
    );
    const accepted = firstValueFrom(listener.connections$);
    const port = listener.address.port as number;
    const r = await raw();
    const setup = encodeSetupBody({ streams: 2, datagramSize: 1400, window: 8, crc: false, privateData: pattern(3) });
    await r.send(
      { type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src: 0xabcdef01, seq: 0 },
      [setup],
      port,
    );
    // RFC 4960 §5.1.3: a COOKIE (16 octets: timestamp, truncated HMAC), Source connection id 0; nothing kept.
    const cookie = await r.next(DatagramType.Cookie);
    expect(cookie.d.header).toMatchObject({ crc: true, dst: 0xabcdef01, src: 0, streamId: 0, seq: 0 });
    expect(cookie.raw.byteLength).toBe(HEADER_LENGTH + COOKIE_LENGTH + CRC_LENGTH);
    await r.send(
      { type: DatagramType.CookieEcho, crc: true, streamId: 0, dst: 0, src: 0xabcdef01, seq: 0 },
      [cookie.d.body, setup],
      port,
    );
    const acc = await r.next(DatagramType.Accept);
    const b = (await accepted) as UdpConnection;
    open.push(b);
    expect(acc.d.header).toMatchObject({ crc: true, dst: 0xabcdef01, src: b.localId, streamId: 0 });
    expect(decodeSetupBody(acc.d.body)).toEqual({
      streams: 2,
      datagramSize: 600,
      window: 64,
      crc: true, // the responder asks for it, so it is used
      privateData: pattern(4),
    });
    // The responder sends a ULPDU given as two parts: one datagram, header + parts + CRC32c.
    (b.streams[1] as LlpStream).send([pattern(10, 1), pattern(20, 2)]);
    const data = await r.next(DatagramType.Data);
    expect(data.d.header).toMatchObject({ crc: true, streamId: 1, dst: 0xabcdef01, src: b.localId, seq: 1 });
    expect(hex(data.d.body)).toBe(hex(pattern(10, 1)) + hex(pattern(20, 2)));
    expect(data.raw.byteLength).toBe(HEADER_LENGTH + 30 + CRC_LENGTH);

    const got = collect(b.streams[0] as LlpStream);
    const h = { type: DatagramType.Data, crc: true, streamId: 0, dst: b.localId, src: 0xabcdef01, seq: 1 };
    await r.send(h, [pattern(5, 5)], port); // good
    await r.send({ ...h, seq: 2, crc: false }, [pattern(5, 6)], port); // no CRC on a CRC connection
    const corrupt = Buffer.concat([Buffer.from(encodeHeaderBytes({ ...h, seq: 3 })), pattern(5, 7), Buffer.alloc(4)]);
    await r.sendRaw(corrupt, port); // wrong CRC
    await r.send({ ...h, seq: 4, streamId: 9 }, [pattern(5, 8)], port); // no such stream
    await r.send({ ...h, seq: 5, src: 1234 }, [pattern(5, 9)], port); // another connection's id
    await r.send({ ...h, seq: 6 }, [pattern(5, 10)], port); // good
    await until(() => got.length === 2);
    expect(got.map(hex)).toEqual([hex(pattern(5, 5)), hex(pattern(5, 10))]);
    expect(b.stats).toMatchObject({ missingCrc: 1, badStream: 1, wrongSource: 1 });
    expect(b.stats.socket.crcErrors).toBe(1);
    await listener.close();
  });

  it('DATA for an unknown connection is answered with ABORT (code 1), like a TCP RST', async () => {
    const t = udp(fast);
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const r = await raw();
    await r.send(
      { type: DatagramType.Data, crc: true, streamId: 3, dst: 4242, src: 17, seq: 1 },
      [pattern(2)],
      listener.address.port as number,
    );
    const ab = await r.next(DatagramType.Abort);
    expect(ab.d.header).toMatchObject({ dst: 17, src: 4242, streamId: 3 });
    expect([...ab.d.body]).toEqual([0, AbortCode.UnknownConnection]);
    await listener.close();
  });

  it('of every type naming an unknown connection, only DATA, PROBE, FIN and KEEPALIVE are answered (ABORT code 1)', async () => {
    // docs/UDP-LLP.md "Wire format": the types; answers and setup datagrams are never answered with ABORT.
    expect(DATAGRAM_TYPES.map((t) => [t.code, t.name])).toEqual(
      [
        'REQUEST',
        'ACCEPT',
        'REJECT',
        'DATA',
        'ACK',
        'PROBE',
        'FIN',
        'FIN_ACK',
        'ABORT',
        'COOKIE',
        'COOKIE_ECHO',
        'KEEPALIVE',
      ].map((name, i) => [i + 1, name]),
    );
    const t = udp(fast);
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const port = listener.address.port as number;
    const r = await raw();
    for (let type = 1; type <= 12; type++)
      await r.send({ type, crc: true, streamId: type, dst: 4242, src: 17, seq: 1 }, [pattern(2)], port);
    const last = { type: DatagramType.Data, crc: true, streamId: 99, dst: 4242, src: 17, seq: 1 };
    await r.send(last, [pattern(2)], port);
    const answered: number[] = [];
    for (let id = 0; id !== 99; ) {
      const ab = await r.next(DatagramType.Abort);
      expect([...ab.d.body]).toEqual([0, AbortCode.UnknownConnection]);
      id = ab.d.header.streamId;
      answered.push(id);
    }
    expect(answered).toEqual([DatagramType.Data, DatagramType.Probe, DatagramType.Fin, DatagramType.Keepalive, 99]);
    await listener.close();
  });

  it("an ABORT's reason code is named in the error it ends a connect or a stream with", async () => {
    // A responder that refuses the REQUEST with ABORT code 3.
    const r = await raw();
    const connecting = udp(fast).connect({ host: '127.0.0.1', port: r.port });
    const req = await r.next(DatagramType.Request);
    await r.send(
      { type: DatagramType.Abort, crc: true, streamId: 0, dst: req.d.header.src, src: 0, seq: 0 },
      [Buffer.of(0, AbortCode.Protocol)],
      req.from.port,
    );
    await expect(connecting).rejects.toMatchObject({
      code: 'ERR_LLP_CONNECTION_REFUSED',
      message: expect.stringContaining('(ABORT code 3: protocol violation)'),
    });
    // An initiator that aborts stream 0 of its connection with ABORT code 6.
    const listener = await udp(fast).listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    const port = listener.address.port as number;
    const setup = encodeSetupBody({ streams: 1, datagramSize: 1400, window: 8, crc: true, privateData: pattern(0) });
    const acc = await r.handshake(port, 0x1234, setup);
    const b = await accepted;
    open.push(b);
    const ended = firstValueFrom((b.streams[0] as LlpStream).closed$);
    await r.send(
      { type: DatagramType.Abort, crc: true, streamId: 0, dst: acc.header.src, src: 0x1234, seq: 0 },
      [Buffer.of(0, AbortCode.IdleTimeout)],
      port,
    );
    expect((await ended).error).toMatchObject({
      code: 'ERR_LLP_CONNECTION_ABORTED',
      message: 'the UDP peer aborted stream 0 (ABORT code 6: idle timeout)',
    });
    await listener.close();
  });
});

describe('udpModule', () => {
  it('binds the UDP transport under LLP_TRANSPORT; RFC 5041 §3 strictness refuses it (unreliable, unordered)', () => {
    expect(createStack(udpModule()).transport.name).toBe('udp');
    expect(() => createStack(udpModule(), { requireRfc5041: true })).toThrow(CapabilityError);
    expect(() => createStack(udpModule(), { requireRfc5041: true })).toThrow(/not reliable.*not ordered/);
  });
});

function encodeHeaderBytes(h: {
  type: number;
  crc: boolean;
  streamId: number;
  dst: number;
  src: number;
  seq: number;
}): Buffer {
  const b = Buffer.alloc(HEADER_LENGTH);
  b[0] = 0x10 | h.type;
  b[1] = h.crc ? 0x80 : 0;
  b.writeUInt16BE(h.streamId, 2);
  b.writeUInt32BE(h.dst, 4);
  b.writeUInt32BE(h.src, 8);
  b.writeUInt32BE(h.seq, 12);
  return b;
}
