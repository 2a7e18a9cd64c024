/**
 * Issue 34 against the UDP LLP listener, played from outside with raw `dgram` sockets speaking the wire
 * format by hand (as test/hostile.test.ts): one source completing and keeping alive as many handshakes as
 * it likes (a share per source: connections, pending setups; IPv6 sources are /64 prefixes), a used
 * COOKIE_ECHO replayed after its connection ended (cookies are single-use; the remembered setups bounded),
 * and connection state charged to the process's memory budget under the peer's source.
 *
 * Other sources are other loopback addresses: Linux accepts a bind to any address of 127/8.
 */
import { networkInterfaces } from 'node:os';
import { isLlpError, type LlpConnectDecision, type LlpError, processMemoryBudget } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { AbortCode, DatagramType, decodeAbortBody, type UdpConnection, type UdpListener } from '../src/index.js';
import { fast, outsideTests, RawPeer, setupBody as setup, sleep, until } from './helpers.js';

const { open, raw, listen } = outsideTests();

const s1 = setup(1);

/** Whether `errors` holds a ResourceLimitError whose message matches `re`. */
const limitReported = (errors: readonly LlpError[], re: RegExp) =>
  errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && re.test(e.message));

/** ABORT of every stream of the listener's connection `dst` from the raw initiator `src`: the connection ends. */
const abortAll = (r: RawPeer, port: number, dst: number, src: number) =>
  r.send({ type: DatagramType.Abort, crc: true, streamId: 0xffff, dst, src, seq: 0 }, [Buffer.of(0, 0)], port);

const expectAbort = (d: { header: { type: number }; body: Uint8Array }, code: number) => {
  expect(d.header.type).toBe(DatagramType.Abort);
  expect(decodeAbortBody(d.body)).toBe(code);
};

describe('UDP LLP listener: a share per source (issue 34: one socket holding every place)', () => {
  it('one source completing 256 handshakes and keeping them alive holds maxConnectionsPerSource (default 64 of 256); the rest get ABORT code 5 naming the source; other sources still connect', async () => {
    const { t, l, port, accepted, errors } = await listen({ ...fast, idleTimeoutMs: 600, keepaliveMs: 200 });
    const attacker = await raw('127.0.0.2');
    const held: { src: number; dst: number }[] = [];
    let refused = 0;
    for (let i = 1; i <= 256; i++) {
      const a = await attacker.handshake(port, i, s1);
      if (a.header.type === DatagramType.Accept) held.push({ src: i, dst: a.header.src });
      else {
        expectAbort(a, AbortCode.ResourceLimit);
        refused++;
      }
    }
    expect(held).toHaveLength(64);
    expect(refused).toBe(192);
    expect(limitReported(errors, /64 connections per source, from 127\.0\.0\.2\b/)).toBe(true);
    expect(l.connectionsFrom('127.0.0.2')).toBe(64);
    // Ports do not matter: another socket of the same host is the same source.
    const sameHost = await raw('127.0.0.2');
    expectAbort(await sameHost.handshake(port, 1000, s1), AbortCode.ResourceLimit);

    // The attacker keeps its 64 alive with KEEPALIVEs, well past idleTimeoutMs; other sources connect meanwhile.
    const honest = await t.connect(l.address); // from 127.0.0.1; its own KEEPALIVEs keep it up
    open.push(honest);
    const other = await raw('127.0.0.3');
    const otherAccept = await other.handshake(port, 1, s1);
    expect(otherAccept.header.type).toBe(DatagramType.Accept);
    const alive = [
      ...held.map((h) => ({ peer: attacker, ...h })),
      { peer: other, src: 1, dst: otherAccept.header.src },
    ];
    let keeping = true;
    const keepalives = (async () => {
      while (keeping) {
        for (const h of alive)
          await h.peer.send(
            { type: DatagramType.Keepalive, crc: true, streamId: 0xffff, dst: h.dst, src: h.src, seq: 0 },
            [],
            port,
          );
        await sleep(100);
      }
    })();
    await sleep(1500); // 2.5 × idleTimeoutMs
    keeping = false;
    await keepalives;
    expect(accepted.filter((c) => c.state === 'open')).toHaveLength(66);
    expect(honest.state).toBe('open');
    expect(l.connectionCount).toBe(66);
    expect([l.connectionsFrom('127.0.0.2'), l.connectionsFrom('127.0.0.1'), l.connectionsFrom('127.0.0.3')]).toEqual([
      64, 1, 1,
    ]);
  }, 20_000);

  it('the default share is a quarter of maxConnections (8 → 2); an explicit maxConnectionsPerSource wins', async () => {
    const a = await listen({ ...fast, maxConnections: 8 });
    const r = await raw('127.0.0.4');
    expect((await r.handshake(a.port, 1, s1)).header.type).toBe(DatagramType.Accept);
    expect((await r.handshake(a.port, 2, s1)).header.type).toBe(DatagramType.Accept);
    expectAbort(await r.handshake(a.port, 3, s1), AbortCode.ResourceLimit);
    expect(limitReported(a.errors, /2 connections per source, from 127\.0\.0\.4\b/)).toBe(true);

    const b = await listen({ ...fast, maxConnections: 8, maxConnectionsPerSource: 3 });
    for (let i = 1; i <= 3; i++) expect((await r.handshake(b.port, i, s1)).header.type).toBe(DatagramType.Accept);
    expectAbort(await r.handshake(b.port, 4, s1), AbortCode.ResourceLimit);
  });

  it('setups waiting for the ULP: a source with maxPendingConnectionsPerSource (default 16) gets ABORT code 5 at COOKIE_ECHO and REQUEST; another source is still put to the ULP', async () => {
    const asked: string[] = [];
    const decide: ((d: LlpConnectDecision) => void)[] = [];
    const { l, port, errors } = await listen(
      { ...fast, handshakeTimeoutMs: 10_000 },
      {
        onConnectRequest: (req) => {
          asked.push(req.remoteAddress.host as string);
          return new Promise<LlpConnectDecision>((resolve) => decide.push(resolve));
        },
      },
    );
    const a = await raw('127.0.0.5');
    // 17 cookies while nothing is pending yet, then 17 echoes: the 17th finds the share taken.
    const cookies: Uint8Array[] = [];
    for (let i = 1; i <= 17; i++) cookies.push(await a.cookie(port, i, s1));
    for (let i = 1; i <= 16; i++) await a.sendRaw(RawPeer.cookieEcho(i, cookies[i - 1] as Uint8Array, s1), port);
    await until(() => l.pendingCount === 16 && asked.length === 16);
    await a.sendRaw(RawPeer.cookieEcho(17, cookies[16] as Uint8Array, s1), port);
    expectAbort((await a.next(DatagramType.Abort)).d, AbortCode.ResourceLimit);
    expectAbort(await a.handshake(port, 18, s1), AbortCode.ResourceLimit); // and a new REQUEST
    expect(limitReported(errors, /16 pending setups per source, from 127\.0\.0\.5\b/)).toBe(true);
    expect(l.pendingCount).toBe(16);

    const b = await raw('127.0.0.6');
    await b.sendRaw(RawPeer.cookieEcho(1, await b.cookie(port, 1, s1), s1), port);
    await until(() => asked.length === 17);
    expect(asked[16]).toBe('127.0.0.6');
    expect(asked.slice(0, 16).every((h) => h === '127.0.0.5')).toBe(true);
    for (const d of decide) d({ accept: false });
    expect((await b.next(DatagramType.Reject)).d.header.dst).toBe(1);
  });
});

/** A global IPv6 address of this machine other than ::1 (not link-local), if it has one. */
function otherIpv6(): string | undefined {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? [])
      if (a.family === 'IPv6' && !a.internal && a.scopeid === 0 && !a.address.startsWith('fe80')) return a.address;
  return undefined;
}
const hasIpv6Loopback = Object.values(networkInterfaces()).some((l) => l?.some((a) => a.address === '::1'));
const secondIpv6 = otherIpv6();

describe('UDP LLP listener: IPv6 sources are prefixes (ipv6SourcePrefix, default /64)', () => {
  // This box may have only ::1 (a /128) to send from: two addresses of one /64 cannot both be bound. So the
  // grouping is checked three ways: with ::1 alone (the source the listener names and counts, at /64 and
  // /128), with ::1 and another address of the machine (other /64s: one source at ipv6SourcePrefix 0, two
  // at 64), and IPv4-mapped addresses on a dual-stack socket (counted as their IPv4 address).
  it.skipIf(!hasIpv6Loopback)(
    'from ::1: at /64 the source is ::/64 — the share holds for every address of that /64; at /128 it is ::1 alone',
    async () => {
      const at64 = await listen({ ...fast, maxConnectionsPerSource: 1 }, {}, '::1');
      const r1 = await raw('::1');
      const r2 = await raw('::1');
      expect((await r1.handshake(at64.port, 1, s1)).header.type).toBe(DatagramType.Accept);
      expectAbort(await r2.handshake(at64.port, 2, s1), AbortCode.ResourceLimit);
      expect(limitReported(at64.errors, /from 0:0:0:0:0:0:0:0\/64\b/)).toBe(true);
      expect(at64.l.connectionsFrom('::1')).toBe(1);
      expect(at64.l.connectionsFrom('::2')).toBe(1); // a neighbour in ::/64 counts under the same source
      expect(at64.l.connectionsFrom('::ffff:ffff:ffff:ffff')).toBe(1);
      expect(at64.l.connectionsFrom('0:0:0:1::1')).toBe(0); // another /64

      const at128 = await listen({ ...fast, maxConnectionsPerSource: 1, ipv6SourcePrefix: 128 }, {}, '::1');
      expect((await r1.handshake(at128.port, 1, s1)).header.type).toBe(DatagramType.Accept);
      expectAbort(await r2.handshake(at128.port, 2, s1), AbortCode.ResourceLimit);
      expect(limitReported(at128.errors, /from 0:0:0:0:0:0:0:1\/128\b/)).toBe(true);
      expect(at128.l.connectionsFrom('::1')).toBe(1);
      expect(at128.l.connectionsFrom('::2')).toBe(0);
    },
  );

  it.skipIf(!hasIpv6Loopback || secondIpv6 === undefined)(
    `two IPv6 addresses (::1 and ${secondIpv6 ?? 'none on this machine'}): one source at ipv6SourcePrefix 0, two at the default 64`,
    async () => {
      const other = secondIpv6 as string;
      const one = await listen({ ...fast, maxConnectionsPerSource: 1, ipv6SourcePrefix: 0 }, {}, '::');
      const a = await raw('::1');
      const b = await raw(other);
      expect((await a.handshake(one.port, 1, s1)).header.type).toBe(DatagramType.Accept);
      expectAbort(await b.handshake(one.port, 2, s1), AbortCode.ResourceLimit);
      expect(limitReported(one.errors, /from 0:0:0:0:0:0:0:0\/0\b/)).toBe(true);

      const two = await listen({ ...fast, maxConnectionsPerSource: 1 }, {}, '::');
      expect((await a.handshake(two.port, 1, s1)).header.type).toBe(DatagramType.Accept);
      expect((await b.handshake(two.port, 2, s1)).header.type).toBe(DatagramType.Accept);
      expect(two.l.connectionCount).toBe(2);
    },
  );

  it.skipIf(!hasIpv6Loopback)(
    'a dual-stack listener counts IPv4-mapped peers (::ffff:127.0.0.7) as their IPv4 address',
    async () => {
      const { l, port, accepted, errors } = await listen({ ...fast, maxConnectionsPerSource: 1 }, {}, '::');
      const a = await raw('127.0.0.7');
      const b = await raw('127.0.0.7');
      expect((await a.handshake(port, 1, s1)).header.type).toBe(DatagramType.Accept);
      await until(() => accepted.length === 1);
      expect(accepted[0]?.remoteAddress.host).toBe('::ffff:127.0.0.7');
      expectAbort(await b.handshake(port, 2, s1), AbortCode.ResourceLimit);
      expect(limitReported(errors, /per source, from 127\.0\.0\.7\b/)).toBe(true);
      expect(l.connectionsFrom('127.0.0.7')).toBe(1);
      expect((await (await raw('127.0.0.8')).handshake(port, 3, s1)).header.type).toBe(DatagramType.Accept);
    },
  );
});

describe('UDP LLP cookies are single-use (issue 34: a used COOKIE_ECHO replayed after its connection ended)', () => {
  it('a used COOKIE_ECHO replayed from the same address:port after its connection ended: ABORT code 4, no second connection; a fresh REQUEST still connects', async () => {
    const { l, port, accepted } = await listen(fast);
    const r = await raw();
    const cookie = await r.cookie(port, 7, s1);
    await sleep(3);
    const later = await r.cookie(port, 7, s1); // a retransmitted REQUEST's COOKIE: the same setup
    const echo = RawPeer.cookieEcho(7, cookie, s1);
    await r.sendRaw(echo, port);
    const acc = await r.next(DatagramType.Accept);
    await until(() => accepted.length === 1);
    await abortAll(r, port, acc.d.header.src, 7);
    await until(() => l.connectionCount === 0); // ended and let go of (lingerMs)
    r.drain(DatagramType.Abort);

    await r.sendRaw(echo, port); // the replay, well within cookieLifetimeMs
    expectAbort((await r.next(DatagramType.Abort)).d, AbortCode.StaleCookie);
    await r.sendRaw(RawPeer.cookieEcho(7, later, s1), port); // the other cookie of the same setup
    expectAbort((await r.next(DatagramType.Abort)).d, AbortCode.StaleCookie);
    expect(l.stats.usedCookies).toBe(2);
    await sleep(50);
    expect(r.drain(DatagramType.Accept)).toHaveLength(0);
    expect(accepted).toHaveLength(1);
    expect([l.connectionCount, l.pendingCount]).toEqual([0, 0]);

    // Not a block on the address: a new REQUEST (even with the same port and id) gets a new cookie and connects.
    await sleep(5);
    expect((await r.handshake(port, 7, s1)).header.type).toBe(DatagramType.Accept);
    await until(() => accepted.length === 2);
  });

  it('a REJECTed setup: its COOKIE_ECHO replayed after the REJECT is no longer kept gets ABORT code 4; the ULP is asked once', async () => {
    let asked = 0;
    const { l, port } = await listen(fast, {
      onConnectRequest: () => {
        asked++;
        return { accept: false };
      },
    });
    const r = await raw();
    const echo = RawPeer.cookieEcho(9, await r.cookie(port, 9, s1), s1);
    await r.sendRaw(echo, port);
    await r.next(DatagramType.Reject);
    await r.sendRaw(echo, port); // retransmitted while the REJECT is kept: the same REJECT
    await r.next(DatagramType.Reject);
    await until(() => l.pendingCount === 0); // lingerMs later
    await r.sendRaw(echo, port);
    expectAbort((await r.next(DatagramType.Abort)).d, AbortCode.StaleCookie);
    expect(asked).toBe(1);
    expect(l.stats.usedCookies).toBe(1);
  });

  it('a COOKIE_ECHO retransmitted while its connection is open gets the same ACCEPT (same connection id) and makes nothing new', async () => {
    const { l, port, accepted } = await listen(fast);
    const r = await raw();
    const cookie = await r.cookie(port, 10, s1);
    await sleep(3);
    const later = await r.cookie(port, 10, s1);
    const echo = RawPeer.cookieEcho(10, cookie, s1);
    await r.sendRaw(echo, port);
    const first = (await r.next(DatagramType.Accept)).d;
    await until(() => accepted.length === 1);
    for (const e of [echo, echo, RawPeer.cookieEcho(10, later, s1)]) {
      await r.sendRaw(e, port);
      const again = (await r.next(DatagramType.Accept)).d;
      expect(again.header).toMatchObject({ dst: 10, src: first.header.src });
      expect([...again.body]).toEqual([...first.body]);
    }
    await sleep(50);
    expect(accepted).toHaveLength(1);
    expect(accepted[0]?.localId).toBe(first.header.src);
    expect([l.connectionCount, l.pendingCount, l.rememberedCount]).toEqual([1, 0, 1]);
    expect(l.stats.usedCookies).toBe(0);
  });
});

describe('UDP LLP remembered setups are bounded (8 per place, kept a cookie lifetime after they end)', () => {
  /** Opens and ends `n` connections from `r` (ids from `first`); returns their COOKIE_ECHOs. */
  async function cycle(r: RawPeer, port: number, l: UdpListener, first: number, n: number): Promise<Buffer[]> {
    const echoes: Buffer[] = [];
    for (let i = first; i < first + n; i++) {
      const e = RawPeer.cookieEcho(i, await r.cookie(port, i, s1), s1);
      echoes.push(e);
      await r.sendRaw(e, port);
      const acc = await r.next(DatagramType.Accept);
      await abortAll(r, port, acc.d.header.src, i);
      await until(() => l.connectionCount === 0);
    }
    return echoes;
  }

  it('at 8 × (maxConnections + maxPendingConnections) new setups get ABORT code 5 (REQUEST and COOKIE_ECHO) and a used cookie stays refused; a cookie lifetime later there is room', async () => {
    const lifetime = 3000;
    const { l, port, errors } = await listen({
      ...fast,
      maxConnections: 1,
      maxPendingConnections: 1,
      cookieLifetimeMs: lifetime,
    });
    const r = await raw();
    const t0 = Date.now();
    const echoes = await cycle(r, port, l, 1, 15);
    const pendingCookie = await r.cookie(port, 100, s1); // issued below the bound
    echoes.push(...(await cycle(r, port, l, 16, 1)));
    expect(Date.now() - t0).toBeLessThan(lifetime / 2); // the test's premise: nothing expired yet
    expect(l.rememberedCount).toBe(16);

    await r.sendRaw(RawPeer.cookieEcho(100, pendingCookie, s1), port);
    expectAbort((await r.next(DatagramType.Abort)).d, AbortCode.ResourceLimit);
    expectAbort(await r.handshake(port, 101, s1), AbortCode.ResourceLimit);
    expect(limitReported(errors, /16 remembered setups\)/)).toBe(true);
    await r.sendRaw(echoes[0] as Buffer, port); // the bound does not make the listener forget a used cookie
    expectAbort((await r.next(DatagramType.Abort)).d, AbortCode.StaleCookie);
    expect(l.stats.usedCookies).toBe(1);
    expect(l.rememberedCount).toBe(16);

    await sleep(lifetime + 100 - (Date.now() - t0));
    expect((await r.handshake(port, 102, s1)).header.type).toBe(DatagramType.Accept);
    expect(l.rememberedCount).toBeLessThan(16);
  }, 15_000);

  it('one source at its share of remembered setups (8 × (maxConnectionsPerSource + maxPendingConnectionsPerSource)) is refused; others are not', async () => {
    const { t, l, port, errors } = await listen({
      ...fast,
      maxConnections: 4,
      maxPendingConnections: 4,
      maxConnectionsPerSource: 1,
      maxPendingConnectionsPerSource: 1,
    });
    const r = await raw('127.0.0.9');
    await cycle(r, port, l, 1, 16);
    expectAbort(await r.handshake(port, 17, s1), AbortCode.ResourceLimit);
    expect(limitReported(errors, /16 remembered setups per source, from 127\.0\.0\.9\b/)).toBe(true);
    const honest = await t.connect(l.address);
    open.push(honest);
    expect(l.rememberedCount).toBe(17);
  });
});

describe('UDP LLP connection state is charged to the process memory budget under the peer source', () => {
  it('a connection that does not fit its source share: ABORT code 5 and ResourceLimitError; released when the connection ends', async () => {
    const budget = processMemoryBudget();
    const source = '127.0.0.10';
    const { t, l, port, accepted, errors } = await listen(fast);
    const r = await raw(source);
    const acc = await r.handshake(port, 1, setup(4));
    expect(acc.header.type).toBe(DatagramType.Accept);
    await until(() => accepted.length === 1);
    const per = (accepted[0] as UdpConnection).stats.reservedOctets;
    expect(per).toBeGreaterThan(4 * 1024); // at least a KiB a stream
    expect(budget.usedBy(source)).toBe(per);

    // Something else holds all but less than one connection's worth of the source's share.
    const hog = budget.reserve(budget.sourceLimit - per - per + 1, source);
    expect(hog).toBeDefined();
    try {
      expectAbort(await r.handshake(port, 2, setup(4)), AbortCode.ResourceLimit);
      expect(limitReported(errors, /memory budget, \d+ octets for source 127\.0\.0\.10\b/)).toBe(true);
      const honest = await t.connect(l.address, { streams: 4 }); // another source's share
      open.push(honest);

      await abortAll(r, port, acc.header.src, 1);
      await until(() => budget.usedBy(source) === (hog?.octets ?? 0));
      expect((accepted[0] as UdpConnection).stats.reservedOctets).toBe(0);
      expect((await r.handshake(port, 3, setup(4))).header.type).toBe(DatagramType.Accept);
    } finally {
      hog?.release();
    }
  });

  it('datagrams held for a paused reader grow the reservation as they are held, shrink it as they are read, and are dropped when they do not fit', async () => {
    const budget = processMemoryBudget();
    const source = '127.0.0.11';
    const { port, accepted } = await listen(fast);
    const r = await raw(source);
    const acc = await r.handshake(port, 1, s1);
    await until(() => accepted.length === 1);
    const conn = accepted[0] as UdpConnection;
    const stream = conn.streams[0] as (typeof conn.streams)[number];
    const got: number[] = [];
    stream.setReceiver((u) => got.push(u.length));
    stream.pause();
    const per = conn.stats.reservedOctets;
    const data = (seq: number) =>
      r.send(
        { type: DatagramType.Data, crc: true, streamId: 0, dst: acc.header.src, src: 1, seq },
        [new Uint8Array(100)],
        port,
      );
    const datagram = 16 + 100 + 4; // header, body, CRC32c: what holding the body keeps
    for (let seq = 1; seq <= 10; seq++) await data(seq);
    await until(() => conn.stats.reservedOctets === per + 10 * datagram);
    expect(budget.usedBy(source)).toBe(per + 10 * datagram);

    // The source's share full: the next datagram is not held (lost, as the class allows), and counted.
    const hog = budget.reserve(budget.sourceLimit - budget.usedBy(source), source);
    try {
      await data(11);
      await until(() => stream.stats.budgetDrops === 1);
      expect(conn.stats.reservedOctets).toBe(per + 10 * datagram);
    } finally {
      hog?.release();
    }
    stream.resume();
    await until(() => got.length === 10);
    expect(conn.stats.reservedOctets).toBe(per);
  });

  it('the initiator charges its connection to the responder source and refuses one that does not fit: ResourceLimitError, and the responder gets ABORT code 5', async () => {
    const budget = processMemoryBudget();
    const { t, accepted, l } = await listen(fast, {}, '127.0.0.12'); // the initiator sends from 127.0.0.1
    const hog = budget.reserve(budget.sourceLimit - budget.usedBy('127.0.0.12'), '127.0.0.12');
    try {
      await expect(t.connect(l.address)).rejects.toMatchObject({ code: 'ERR_LLP_RESOURCE_LIMIT' });
      await until(() => accepted.length === 1);
      const ended = await firstValueFrom((accepted[0] as UdpConnection).closed$); // replayed if already ended
      expect(ended.error?.message).toMatch(/ABORT code 5/);
    } finally {
      hog?.release();
    }
    const c = await t.connect(l.address);
    open.push(c);
    expect(c.state).toBe('open');
  });
});
