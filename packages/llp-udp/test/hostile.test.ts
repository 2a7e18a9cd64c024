/**
 * A hostile peer against the UDP LLP listener, from outside the stack (raw `dgram` sockets speaking the wire
 * format by hand): REQUEST floods, forged and stale cookies (RFC 4960 §5.1.3, §5.1.5), the connection and
 * pending-setup limits, and peers that go silent (idle expiry). RFC 5042 §5 (resource exhaustion).
 */
import dgram from 'node:dgram';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { isLlpError, type LlpCloseEvent, type LlpConnection } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  AbortCode,
  COOKIE_LENGTH,
  DatagramType,
  datagramParts,
  decodeAbortBody,
  type UdpConnection,
  udp,
} from '../src/index.js';
import { fast, outsideTests, type RawPeer, setupBody as setup, sleep, until } from './helpers.js';

const { open, raw, listen } = outsideTests();

/** The heap after a full collection (V8's gc, exposed for this process). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('UDP LLP listener against a REQUEST flood (RFC 4960 §5.1.3: stateless until the cookie comes back)', () => {
  it('20 000 REQUESTs for 256 streams each leave no per-peer state; an honest client still connects', async () => {
    const { t, l, port, accepted } = await listen(fast);
    const attacker = dgram.createSocket('udp4');
    await new Promise<void>((r) => attacker.bind(0, '127.0.0.1', r));
    let answers = 0;
    let cookies = 0;
    attacker.on('message', (m) => {
      answers++;
      if (m[0] === ((1 << 4) | DatagramType.Cookie)) cookies++;
    });
    const body = setup(256);
    const N = 20_000;
    const before = heapAfterGc();
    for (let i = 0; i < N; i += 25) {
      await Promise.all(
        Array.from({ length: 25 }, (_, k) => {
          const d = Buffer.concat(
            datagramParts({ type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src: 0x1000 + i + k, seq: 0 }, [
              body,
            ]),
          );
          return new Promise<void>((r) => attacker.send(d, port, '127.0.0.1', () => r()));
        }),
      );
      // Let the listener read them (it shares this event loop) before the kernel's buffer fills.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
    }
    // Until the answers stop coming: the listener has read everything that reached it.
    for (let last = -1; last !== answers; ) {
      last = answers;
      await sleep(100);
    }
    attacker.close();
    expect(accepted).toHaveLength(0);
    const seen = l.stats.socket.datagramsReceived;
    expect(seen).toBeGreaterThan(N * 0.9);
    expect(l.stats.cookiesSent).toBe(seen); // every REQUEST answered with a COOKIE, nothing set up
    expect(cookies).toBe(answers);
    expect(l.connectionCount).toBe(0);
    expect(l.pendingCount).toBe(0);
    // No per-peer state: the heap grew by well under the ~207 KB a single 256-stream connection would cost
    // per REQUEST (the old listener: 20 000 × 207 KB).
    expect(heapAfterGc() - before).toBeLessThan(4 * 1024 * 1024);
    const c = await t.connect(l.address, { streams: 256 });
    open.push(c);
    expect(c.streams).toHaveLength(256);
    await until(() => accepted.length === 1 && l.connectionCount === 1);
  }, 30_000);
});

describe('UDP LLP COOKIE_ECHO (RFC 4960 §5.1.5): only an authentic, unexpired cookie makes a connection', () => {
  it('forged, altered, replayed from elsewhere or for other parameters: dropped; stale: ABORT code 4; nothing created', async () => {
    const { l, port, accepted } = await listen({ ...fast, cookieLifetimeMs: 300 });
    const r = await raw();
    const s1 = setup(1);
    const echo = (from: RawPeer, src: number, cookie: Uint8Array, body: Uint8Array) =>
      from.send({ type: DatagramType.CookieEcho, crc: true, streamId: 0, dst: 0, src, seq: 0 }, [cookie, body], port);
    await r.send({ type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src: 11, seq: 0 }, [s1], port);
    const got = await r.next(DatagramType.Cookie);
    expect(got.d.header).toMatchObject({ dst: 11, src: 0 });
    const cookie = Uint8Array.from(got.d.body);
    expect(cookie.byteLength).toBe(COOKIE_LENGTH);
    expect(l.pendingCount).toBe(0);

    const forged = Uint8Array.from(cookie);
    forged[COOKIE_LENGTH - 1] = (forged[COOKIE_LENGTH - 1] as number) ^ 1;
    const restamped = Uint8Array.from(cookie);
    restamped[3] = (restamped[3] as number) ^ 0x40; // the timestamp moved: the MAC no longer matches
    await echo(r, 11, forged, s1); // MAC altered
    await echo(r, 11, restamped, s1);
    await echo(r, 11, new Uint8Array(COOKIE_LENGTH), s1); // all zero
    await echo(r, 11, cookie.subarray(0, 8), s1.subarray(0, 4)); // too short to hold a cookie and a body
    await echo(r, 12, cookie, s1); // another initiator connection id
    await echo(r, 11, cookie, setup(256)); // the same cookie for other parameters
    const other = await raw();
    await echo(other, 11, cookie, s1); // the right cookie, from another port
    await until(() => l.stats.forgedCookies === 7);
    await sleep(50);
    expect(r.drain(DatagramType.Accept)).toHaveLength(0);
    expect(r.drain(DatagramType.Abort)).toHaveLength(0);
    expect(other.drain(DatagramType.Accept)).toHaveLength(0);

    await sleep(350); // past cookieLifetimeMs
    await echo(r, 11, cookie, s1);
    const stale = await r.next(DatagramType.Abort);
    expect(stale.d.header).toMatchObject({ dst: 11 });
    expect(decodeAbortBody(stale.d.body)).toBe(AbortCode.StaleCookie);
    expect(l.stats.staleCookies).toBe(1);
    await sleep(50);
    expect(accepted).toHaveLength(0);
    expect([l.connectionCount, l.pendingCount]).toEqual([0, 0]);

    // The honest way: a fresh cookie, echoed at once, from where it went.
    const acc = await r.handshake(port, 11, s1);
    expect(acc.header.type).toBe(DatagramType.Accept);
    await until(() => accepted.length === 1);
    expect(l.connectionCount).toBe(1);
  });

  it('the initiator echoes the cookie with its REQUEST setup body, and starts over with REQUEST on ABORT code 4', async () => {
    const r = await raw();
    const connecting = udp(fast).connect({ host: '127.0.0.1', port: r.port }, { streams: 3 });
    const req = await r.next(DatagramType.Request);
    const id = req.d.header.src;
    const cookie = (n: number) => new Uint8Array(COOKIE_LENGTH).fill(n);
    const answer = (type: number, body: Uint8Array) =>
      r.send({ type, crc: true, streamId: 0, dst: id, src: 0, seq: 0 }, [body], req.from.port);
    await answer(DatagramType.Cookie, cookie(1));
    const e1 = await r.next(DatagramType.CookieEcho);
    expect(e1.d.header).toMatchObject({ crc: true, dst: 0, src: id });
    expect([...e1.d.body]).toEqual([...cookie(1), ...req.d.body]);
    await answer(DatagramType.Abort, Buffer.of(0, AbortCode.StaleCookie));
    await r.next(DatagramType.Request); // starting over
    await answer(DatagramType.Cookie, cookie(2));
    let e2 = await r.next(DatagramType.CookieEcho);
    while (e2.d.body[0] !== 2) e2 = await r.next(DatagramType.CookieEcho); // echoes of the first may be in flight
    expect([...e2.d.body]).toEqual([...cookie(2), ...req.d.body]);
    await r.send(
      { type: DatagramType.Accept, crc: true, streamId: 0, dst: id, src: 42, seq: 0 },
      [setup(3)],
      req.from.port,
    );
    const c = await connecting;
    open.push(c);
    expect(c.streams).toHaveLength(3);
  });
});

describe('UDP LLP listener limits', () => {
  it('bad limit options are refused with InvalidArgumentError', () => {
    for (const bad of [
      { maxConnections: 0 },
      { maxConnections: 1.5 },
      { maxPendingConnections: -1 },
      { cookieLifetimeMs: 0 },
      { idleTimeoutMs: 'x' as unknown as number },
      { idleTimeoutMs: 100, keepaliveMs: 100 },
      { maxConnectionsPerSource: 0 },
      { maxConnectionsPerSource: 2.5 },
      { maxConnections: 8, maxConnectionsPerSource: 9 }, // a share above the listener's bound
      { maxPendingConnectionsPerSource: 0 },
      { maxPendingConnections: 4, maxPendingConnectionsPerSource: 5 },
      { ipv6SourcePrefix: -1 },
      { ipv6SourcePrefix: 129 },
      { ipv6SourcePrefix: '64' as unknown as number },
    ])
      expect(() => udp(bad), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'ERR_LLP_INVALID_ARGUMENT' }),
      );
  });

  it('beyond maxConnections: ABORT code 5 and ResourceLimitError; an honest client gets in once others close or expire', async () => {
    const { t, l, port, accepted, errors } = await listen({
      ...fast,
      maxConnections: 2,
      maxConnectionsPerSource: 2, // every peer here is 127.0.0.1: the listener-wide bound, not a source's share
      idleTimeoutMs: 400,
      keepaliveMs: 100,
    });
    const r = await raw();
    expect((await r.handshake(port, 1, setup(4))).header.type).toBe(DatagramType.Accept);
    expect((await r.handshake(port, 2, setup(4))).header.type).toBe(DatagramType.Accept);
    await until(() => accepted.length === 2);
    expect(l.connectionCount).toBe(2);

    const third = await r.handshake(port, 3, setup(4));
    expect(third.header.type).toBe(DatagramType.Abort);
    expect(decodeAbortBody(third.body)).toBe(AbortCode.ResourceLimit);
    await expect(t.connect(l.address)).rejects.toMatchObject({ code: 'ERR_LLP_CONNECTION_REFUSED' });
    expect(errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /2 connections/.test(e.message))).toBe(true);
    expect(accepted).toHaveLength(2);
    expect(l.stats.refused).toBeGreaterThanOrEqual(2);

    // The attacker's first connection closed (ABORT for every stream): after its linger, room for one.
    const first = accepted[0] as UdpConnection;
    await r.send(
      { type: DatagramType.Abort, crc: true, streamId: 0xffff, dst: first.localId, src: 1, seq: 0 },
      [Buffer.of(0, 0)],
      port,
    );
    await until(() => l.connectionCount === 1);
    const honest = await t.connect(l.address);
    open.push(honest);
    await until(() => l.connectionCount === 2);
    // The second goes silent and expires (idleTimeoutMs); the honest one is kept alive by KEEPALIVEs.
    await until(() => l.connectionCount === 1, 3000);
    expect(honest.state).toBe('open');
    const another = await t.connect(l.address);
    open.push(another);
    expect(accepted).toHaveLength(4);
  });

  it('beyond maxPendingConnections (ULP still deciding): ABORT code 5; a ULP that never decides frees its slot', async () => {
    const { t, l, port, errors } = await listen(
      { ...fast, maxPendingConnections: 1, handshakeTimeoutMs: 300 },
      { onConnectRequest: () => new Promise(() => {}) },
    );
    const r = await raw();
    await r.handshake(port, 1, setup(1), 100).catch(() => undefined); // no answer: the ULP never decides
    await until(() => l.pendingCount === 1);
    const second = await r.handshake(port, 2, setup(1));
    expect(second.header.type).toBe(DatagramType.Abort);
    expect(decodeAbortBody(second.body)).toBe(AbortCode.ResourceLimit);
    expect(errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /1 pending/.test(e.message))).toBe(true);
    await until(() => l.pendingCount === 0, 2000);
    expect(l.stats.decisionTimeouts).toBe(1);
    expect(errors.some((e) => isLlpError(e, 'ERR_LLP_TIMEOUT'))).toBe(true);
    await expect(t.connect(l.address, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
  });

  it('a flood of refusals reports at most a few ResourceLimitErrors a second on errors$ and counts the rest', async () => {
    const { l, port, errors } = await listen({ ...fast, maxConnections: 1 });
    const r = await raw();
    await r.handshake(port, 1, setup(1));
    await until(() => l.connectionCount === 1);
    for (let i = 0; i < 200; i++)
      await r.send(
        { type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src: 100 + i, seq: 0 },
        [setup(1)],
        port,
      );
    await until(() => l.stats.refused === 200);
    const limits = errors.filter((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT')).length;
    expect(limits).toBeLessThanOrEqual(20);
    expect(limits + l.stats.unreportedErrors).toBe(200);
  });
});

describe('UDP LLP idle expiry', () => {
  it('a responder connection whose peer goes silent ends with LlpTimeoutError after idleTimeoutMs; KEEPALIVEs went out, then ABORT code 6', async () => {
    const { l, port, accepted } = await listen({ ...fast, idleTimeoutMs: 300, keepaliveMs: 100 });
    const r = await raw();
    expect((await r.handshake(port, 5, setup(2))).header.type).toBe(DatagramType.Accept);
    await until(() => accepted.length === 1);
    const b = accepted[0] as UdpConnection;
    let ended: LlpCloseEvent | undefined;
    b.closed$.subscribe((e) => {
      ended = e;
    });
    await until(() => ended !== undefined, 3000);
    expect(ended).toMatchObject({ graceful: false });
    expect(ended?.error?.code).toBe('ERR_LLP_TIMEOUT');
    expect(r.drain(DatagramType.Keepalive).length).toBeGreaterThan(0);
    const abort = await r.next(DatagramType.Abort);
    expect(abort.d.header).toMatchObject({ dst: 5, streamId: 0xffff });
    expect(decodeAbortBody(abort.d.body)).toBe(AbortCode.IdleTimeout);
    await until(() => l.connectionCount === 0);
  });

  it('an initiator connection whose responder goes silent expires too; an idle but live pair does not', async () => {
    const opts = { ...fast, idleTimeoutMs: 300, keepaliveMs: 100 };
    const r = await raw();
    const connecting = udp(opts).connect({ host: '127.0.0.1', port: r.port });
    const req = await r.next(DatagramType.Request);
    await r.send(
      { type: DatagramType.Accept, crc: true, streamId: 0, dst: req.d.header.src, src: 99, seq: 0 },
      [setup(1)],
      req.from.port,
    );
    const a = await connecting;
    open.push(a);
    const { t, l, accepted } = await listen(opts);
    const live = await t.connect(l.address);
    open.push(live);
    await until(() => accepted.length === 1);
    const closed = firstValueFrom(a.closed$);
    expect((await closed).error?.code).toBe('ERR_LLP_TIMEOUT');
    await sleep(700); // more than twice idleTimeoutMs with no data either way
    expect(live.state).toBe('open');
    expect((accepted[0] as LlpConnection).state).toBe('open');
  });
});
