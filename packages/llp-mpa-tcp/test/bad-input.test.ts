/**
 * Bad input from a peer gets the RFC's answer and a typed error — never a crash, a hang, or harm to
 * other connections. Each case is sent from a raw `net` socket; afterwards an honest connection
 * through the same listener must still work.
 */
import net from 'node:net';
import type { LlpCloseEvent, LlpError } from '@rddp/llp';
import { collect } from '@rddp/llp-compliance';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeEnhancedData,
  FpduWriter,
  MpaCrcError,
  type MpaParams,
  type MpaTcpListener,
  mpaTcp,
} from '../src/index.js';
import { pattern } from './helpers.js';
import { type RawPeer, rawConnect, rawServer } from './raw.js';

const REQ_KEY = Buffer.from('MPA ID Req Frame');
const REP_KEY = Buffer.from('MPA ID Rep Frame');
const t = mpaTcp({ handshakeTimeoutMs: 800, closeTimeoutMs: 2000 });

function request(flags: number, rev: number, pd: Uint8Array = new Uint8Array(0), pdLength = pd.byteLength): Buffer {
  const h = Buffer.alloc(20);
  REQ_KEY.copy(h);
  h[16] = flags;
  h[17] = rev;
  h.writeUInt16BE(pdLength, 18);
  return Buffer.concat([h, pd]);
}

function fpdu(payload: Uint8Array, opts: { crc?: boolean; markers?: boolean } = {}): Buffer {
  const out: Uint8Array[] = [];
  new FpduWriter({ crc: opts.crc ?? true, markers: opts.markers ?? false }).frame([payload], payload.byteLength, out);
  return Buffer.concat(out);
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function listenerSuite(label: string, params: MpaParams, body: (ctx: Ctx) => void) {
  describe(label, () => {
    const ctx = { errors: [] as LlpError[] } as Ctx;
    beforeAll(async () => {
      ctx.listener = await t.listen({ host: '127.0.0.1', port: 0 }, { params });
      ctx.listener.errors$.subscribe((e) => ctx.errors.push(e));
      ctx.port = ctx.listener.address.port as number;
    });
    afterAll(async () => {
      await ctx.listener.close();
    });
    body(ctx);
  });
}
interface Ctx {
  listener: MpaTcpListener;
  errors: LlpError[];
  port: number;
}

/** An honest connection through the same listener still works. */
async function honest(ctx: Ctx, params: MpaParams = {}): Promise<void> {
  const accepted = firstValueFrom(ctx.listener.connections$);
  const a = await t.connect(ctx.listener.address, { params });
  const b = await accepted;
  const got = collect(b.streams[0]!);
  a.stream.send([pattern(33, 1)]);
  await got.wait(1);
  expect(got.ulpdus[0]).toEqual(pattern(33, 1));
  await a.close();
}

/** Sends `bytes`, expects the listener to close without answering and to report `violation`. */
async function closedWithout(ctx: Ctx, bytes: Buffer, violation: string | RegExp): Promise<RawPeer> {
  const n = ctx.errors.length;
  const raw = await rawConnect(ctx.port);
  raw.socket.write(bytes);
  await raw.closed;
  expect(raw.received().byteLength).toBe(0);
  await until(() => ctx.errors.length > n);
  const e = ctx.errors[n] as LlpError & { violation?: string };
  if (typeof violation === 'string') expect(e).toMatchObject({ code: 'ERR_LLP_PROTOCOL', violation });
  else expect(e.message).toMatch(violation);
  return raw;
}

listenerSuite('responder: bad MPA Requests', {}, (ctx) => {
  it('RFC 5044 §7.1.1 Key: an HTTP request instead of an MPA Request is closed unanswered (bad-key); others unaffected', async () => {
    await closedWithout(ctx, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), 'bad-key');
    await honest(ctx);
  });

  it('RFC 5044 §7.1.1 Key: a Reply key sent as a Request is closed unanswered (bad-key)', async () => {
    const b = request(0x40, 1);
    REP_KEY.copy(b);
    await closedWithout(ctx, b, 'bad-key');
    await honest(ctx);
  });

  it('RFC 5044 §7.1.1 Rev: Rev 3 is closed unanswered (bad-revision)', async () => {
    await closedWithout(ctx, request(0x40, 3), 'bad-revision');
    await honest(ctx);
  });

  it('RFC 5044 Appendix C: Rev 0 to a non-permissive responder is closed unanswered (bad-revision)', async () => {
    await closedWithout(ctx, request(0xc0, 0), 'bad-revision');
    await honest(ctx);
  });

  it('RFC 5044 §7.1.1 PD_Length: 513 is closed unanswered (pd-length), before any private data is read', async () => {
    await closedWithout(ctx, request(0x40, 1, new Uint8Array(0), 513), 'pd-length');
    await honest(ctx);
  });

  it('RFC 5044 §7.1.2: data right behind the Request, before the Reply, is closed unanswered (early-data)', async () => {
    await closedWithout(ctx, Buffer.concat([request(0x40, 1), fpdu(pattern(8, 1))]), 'early-data');
    await honest(ctx);
  });

  it('RFC 6581: an enhanced Request too short for IRD/ORD gets a Reply with R=1, then FIN (siw behaviour)', async () => {
    const n = ctx.errors.length;
    const raw = await rawConnect(ctx.port);
    raw.socket.write(request(0x10, 2, Uint8Array.of(0, 1)));
    const closed = await raw.closed;
    const r = raw.received();
    expect(r.subarray(0, 16)).toEqual(REP_KEY);
    expect(r[16]! & 0x20).toBe(0x20);
    expect(closed.fin).toBe(true);
    await until(() => ctx.errors.length > n);
    expect(ctx.errors[n]).toMatchObject({ violation: 'malformed-frame' });
    await honest(ctx);
  });

  it('a truncated Request times out with LlpTimeoutError and the socket is closed', async () => {
    const n = ctx.errors.length;
    const raw = await rawConnect(ctx.port);
    raw.socket.write(request(0x40, 1).subarray(0, 12));
    await raw.closed;
    await until(() => ctx.errors.length > n);
    expect(ctx.errors[n]).toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
    await honest(ctx);
  });

  it('twenty garbage peers at once do not stall an honest one', async () => {
    const peers = await Promise.all(Array.from({ length: 20 }, () => rawConnect(ctx.port)));
    for (const [i, p] of peers.entries()) p.socket.write(i % 2 ? Buffer.from(pattern(64, i)) : request(0x40, 9));
    await honest(ctx);
    await Promise.all(peers.map((p) => p.closed));
  });

  it('RFC 6581: something other than the negotiated RTR as the first FPDU is refused (no-matching-rtr) and never surfaces as a connection', async () => {
    const n = ctx.errors.length;
    let emitted = 0;
    const sub = ctx.listener.connections$.subscribe(() => emitted++);
    const raw = await rawConnect(ctx.port);
    raw.socket.write(
      request(0x40 | 0x10, 2, encodeEnhancedData({ ird: 1, ord: 1, p2p: true, send: false, write: true, read: false })),
    );
    await raw.waitFor(24);
    raw.socket.write(fpdu(pattern(30, 2)));
    const closed = await raw.closed;
    expect(closed.reset).toBe(true);
    await until(() => ctx.errors.length > n);
    expect(ctx.errors[n]).toMatchObject({ violation: 'no-matching-rtr', mpaErrorCode: 7 });
    sub.unsubscribe();
    expect(emitted).toBe(0);
    await honest(ctx);
  });
});

/** Raw initiator through MPA startup; returns the raw socket and the responder's connection. */
async function rawEstablished(ctx: Ctx, flags: number) {
  const accepted = firstValueFrom(ctx.listener.connections$);
  const raw = await rawConnect(ctx.port);
  raw.socket.write(request(flags, 1));
  await raw.waitFor(20);
  const b = await accepted;
  collect(b.streams[0]!);
  const closed = firstValueFrom(b.closed$);
  return { raw, b, closed };
}

function expectFailure(e: LlpCloseEvent, check: object) {
  expect(e.graceful).toBe(false);
  expect(e.error).toMatchObject(check);
}

listenerSuite('responder: bad FPDUs after startup', {}, (ctx) => {
  it('RFC 5044 §8 code 2: a bad CRC is not delivered; the connection is reset and closed$ carries MpaCrcError', async () => {
    const { raw, closed } = await rawEstablished(ctx, 0x40);
    const f = fpdu(pattern(20, 3));
    f[f.byteLength - 2] ^= 0xff;
    raw.socket.write(f);
    const e = await closed;
    expectFailure(e, { code: 'ERR_LLP_DIGEST', mpaErrorCode: 2 });
    expect(e.error).toBeInstanceOf(MpaCrcError);
    expect((await raw.closed).reset).toBe(true);
    await honest(ctx);
  });

  it('RFC 5044 §3: a ULPDU_Length over 64768 resets the connection (ulpdu-length)', async () => {
    const { raw, closed } = await rawEstablished(ctx, 0x40);
    raw.socket.write(Buffer.from([0xff, 0xf0, 1, 2, 3, 4, 5, 6]));
    expectFailure(await closed, { violation: 'ulpdu-length' });
    await raw.closed;
    await honest(ctx);
  });

  it('RFC 5044 §8 code 1: a FIN in the middle of an FPDU fails the connection (stream-ended)', async () => {
    const { raw, closed } = await rawEstablished(ctx, 0x40);
    raw.socket.end(fpdu(pattern(100, 4)).subarray(0, 50));
    expectFailure(await closed, { violation: 'stream-ended', mpaErrorCode: 1 });
    await honest(ctx);
  });

  it('RFC 5044 §4.1 / §7.1.1 C: with CRCs off a bad CRC field is ignored and the FPDU delivered', async () => {
    const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: { crc: false } });
    const accepted = firstValueFrom(l.connections$);
    const raw = await rawConnect(l.address.port as number);
    raw.socket.write(request(0x00, 1));
    await raw.waitFor(20);
    const b = await accepted;
    const got = collect(b.streams[0]!);
    const f = fpdu(pattern(21, 5), { crc: false });
    f.writeUInt32LE(0xdeadbeef, f.byteLength - 4);
    raw.socket.write(f);
    await got.wait(1);
    expect(got.ulpdus[0]).toEqual(pattern(21, 5));
    b.abort();
    await l.close();
  });
});

listenerSuite('responder: Markers requested', { markers: true }, (ctx) => {
  it('RFC 5044 §8 code 3: an FPDU without the Markers the responder asked for fails (marker)', async () => {
    const { raw, closed } = await rawEstablished(ctx, 0x40);
    raw.socket.write(fpdu(Uint8Array.from([9, 9, 9, 9, 9, 9])));
    expectFailure(await closed, { violation: 'marker', mpaErrorCode: 3 });
    await raw.closed;
    await honest(ctx);
  });

  it('RFC 5044 §4.3: the same FPDU with its Marker is accepted', async () => {
    const { raw, b } = await rawEstablished(ctx, 0x40);
    const got = collect(b.streams[0]!);
    raw.socket.write(fpdu(Uint8Array.from([9, 9, 9, 9, 9, 9]), { markers: true }));
    await got.wait(1);
    expect(got.ulpdus[0]).toEqual(Uint8Array.from([9, 9, 9, 9, 9, 9]));
    b.abort();
  });
});

describe('initiator: bad MPA Replies', () => {
  async function withServer(reply: (p: RawPeer) => void, check: (port: number) => Promise<void>) {
    const srv = await rawServer(async (p) => {
      await p.waitFor(20);
      reply(p);
    });
    try {
      await check(srv.port);
    } finally {
      srv.close();
    }
  }
  const rep = (flags: number, rev: number, pd: Uint8Array = new Uint8Array(0), pdLength = pd.byteLength) => {
    const b = request(flags, rev, pd, pdLength);
    REP_KEY.copy(b);
    return b;
  };

  it('RFC 5044 §7.1.1 Key: a Request key in the Reply fails the connect (bad-key)', async () => {
    await withServer(
      (p) => p.socket.write(request(0x40, 1)),
      (port) => expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ violation: 'bad-key' }),
    );
  });

  it('RFC 5044 §7.1.1 PD_Length: a Reply announcing 600 octets fails the connect (pd-length)', async () => {
    await withServer(
      (p) => p.socket.write(rep(0x40, 1, new Uint8Array(0), 600)),
      (port) => expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ violation: 'pd-length' }),
    );
  });

  it('RFC 5044 §7.1.1 Rev: a Rev 7 Reply fails the connect (bad-revision)', async () => {
    await withServer(
      (p) => p.socket.write(rep(0x40, 7)),
      (port) => expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ violation: 'bad-revision' }),
    );
  });

  it('RFC 5044 §7.1.2: an FPDU right behind the Reply, before the initiator sent one, fails the connect (early-data)', async () => {
    await withServer(
      (p) => p.socket.write(Buffer.concat([rep(0x40, 1), fpdu(pattern(4, 1))])),
      (port) => expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ violation: 'early-data' }),
    );
  });

  it('RFC 5044 §7.1.1 R: a rejecting Reply fails with ConnectionRejectedError carrying its private data', async () => {
    await withServer(
      (p) => p.socket.end(rep(0x60, 1, Uint8Array.of(7, 7))),
      (port) =>
        expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({
          code: 'ERR_LLP_CONNECTION_REJECTED',
          privateData: Uint8Array.of(7, 7),
        }),
    );
  });

  it('RFC 5044 §8 code 1: the responder closing before its Reply fails with ConnectionAbortedError', async () => {
    await withServer(
      (p) => p.socket.end(),
      (port) =>
        expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_ABORTED' }),
    );
  });

  it('a responder that never replies fails the connect with LlpTimeoutError at timeoutMs', async () => {
    await withServer(
      () => {},
      (port) =>
        expect(t.connect({ host: '127.0.0.1', port }, { timeoutMs: 200 })).rejects.toMatchObject({
          code: 'ERR_LLP_TIMEOUT',
        }),
    );
  });

  it('AbortSignal ends a pending connect with LlpAbortError', async () => {
    await withServer(
      () => {},
      async (port) => {
        const ac = new AbortController();
        const p = t.connect({ host: '127.0.0.1', port }, { signal: ac.signal });
        setTimeout(() => ac.abort(), 50);
        await expect(p).rejects.toMatchObject({ code: 'ERR_LLP_ABORTED' });
      },
    );
  });

  it('nothing listening: ConnectionRefusedError; a taken port: AddressInUseError', async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    const port = (s.address() as net.AddressInfo).port;
    await expect(t.listen({ host: '127.0.0.1', port })).rejects.toMatchObject({ code: 'ERR_LLP_ADDRESS_IN_USE' });
    await new Promise<void>((r) => s.close(() => r()));
    await expect(t.connect({ host: '127.0.0.1', port })).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_REFUSED' });
  });

  it('a responder ULP answering with private data over the limit gets the connection rejected, and errors$ says why', async () => {
    const l = await t.listen(
      { host: '127.0.0.1', port: 0 },
      { onConnectRequest: () => ({ accept: true, privateData: new Uint8Array(600) }) },
    );
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    await expect(t.connect(l.address)).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_REJECTED' });
    await until(() => errors.length > 0);
    expect(errors[0]).toMatchObject({ code: 'ERR_LLP_INVALID_ARGUMENT' });
    await l.close();
  });
});
