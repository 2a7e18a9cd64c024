/**
 * One memory budget per process, one share per source (docs/SECURITY.md, "Resource limits"), played from
 * outside: raw TCP peers from several loopback addresses run MPA startups (RFC 5044 §7.1.2) against a
 * listener and then hold their connections. Beyond a source's share of connections or of the budget the
 * new connection is reset; other sources are still served. A receive arena grown by a burst is given back
 * once the connection is idle (socket-rx.ts), and a grown arena never exceeds the budget.
 */
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { isLlpError, type LlpConnection, type LlpError, MemoryBudget, sourceKey } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { FpduWriter } from '../src/fpdu.js';
import { type MpaTcpConnection, mpaTcp } from '../src/index.js';
import { ARENA_INITIAL, arenaFootprint, IDLE_SHRINK_MS } from '../src/socket-rx.js';
import { pattern } from './helpers.js';
import { type RawPeer, wrap } from './raw.js';

/** A raw MPA Initiator from `from`: Request (C set, Rev 1), then the Reply or a reset. */
async function startup(port: number, from: string): Promise<{ peer: RawPeer; accepted: boolean }> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from, allowHalfOpen: true });
  const peer = wrap(socket);
  const connected = await new Promise<boolean>((resolve, reject) => {
    socket.once('connect', () => resolve(true));
    // Reset before the connect completes: refused at once.
    socket.once('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? resolve(false) : reject(e)));
  });
  if (!connected) return { peer, accepted: false };
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C (RFC 5044 §7.1.1)
  req[17] = 1; // Rev 1
  socket.write(req);
  const reply = await Promise.race([
    peer.waitFor(20).then((b) => b as Buffer | undefined),
    peer.closed.then(() => undefined),
  ]);
  return { peer, accepted: reply !== undefined && reply.subarray(0, 16).toString() === 'MPA ID Rep Frame' };
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('MPA/TCP listener: a share per source, one budget per process', () => {
  it('established connections per source: one source stops at maxConnectionsPerSource, another is still served', async () => {
    const t = mpaTcp({ maxConnectionsPerSource: 4 });
    const l = await t.listen({ host: '127.0.0.1', port: 0 });
    const port = l.address.port as number;
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    const conns: LlpConnection[] = [];
    l.connections$.subscribe((c) => conns.push(c));
    const flood = [];
    for (let i = 0; i < 6; i++) flood.push(await startup(port, '127.0.0.2'));
    expect(flood.map((p) => p.accepted)).toEqual([true, true, true, true, false, false]);
    const honest = await startup(port, '127.0.0.3');
    expect(honest.accepted).toBe(true);
    const refused = errors.filter(
      (e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /4 connections from 127\.0\.0\.2/.test(e.message),
    );
    expect(refused).toHaveLength(2);
    // A place comes back when one of that source's connections ends.
    await until(() => conns.length === 5);
    const first = conns.find((c) => /127\.0\.0\.2$/.test(c.remoteAddress.host ?? ''));
    first?.abort();
    await until(() => !l.closed && conns.filter((c) => c.state === 'open').length === 4);
    expect((await startup(port, '127.0.0.2')).accepted).toBe(true);
    for (const p of [...flood, honest]) p.peer.socket.destroy();
    for (const c of conns) c.abort();
    await l.close();
  });

  it('the memory budget: a source past its share, then the process past its limit, is reset; released octets serve again', async () => {
    const per = arenaFootprint(ARENA_INITIAL);
    const budget = new MemoryBudget({ limit: 5 * per, sourceShare: 0.5 }); // 2 connections a source, 5 in all
    const l = await mpaTcp({ memoryBudget: budget }).listen({ host: '127.0.0.1', port: 0 });
    const port = l.address.port as number;
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    const conns: LlpConnection[] = [];
    l.connections$.subscribe((c) => conns.push(c));
    const a = [await startup(port, '127.0.0.2'), await startup(port, '127.0.0.2'), await startup(port, '127.0.0.2')];
    expect(a.map((p) => p.accepted)).toEqual([true, true, false]);
    expect(budget.usedBy('127.0.0.2')).toBe(2 * per);
    const b = [await startup(port, '127.0.0.3'), await startup(port, '127.0.0.3')];
    const c = [await startup(port, '127.0.0.4'), await startup(port, '127.0.0.4')];
    expect([...b, ...c].map((p) => p.accepted)).toEqual([true, true, true, false]);
    expect(budget.used).toBe(5 * per);
    expect(errors.some((e) => /memory share of 127\.0\.0\.2/.test(e.message))).toBe(true);
    expect(errors.some((e) => /process memory budget/.test(e.message))).toBe(true);
    // Closing gives the octets back (socket 'close').
    for (const p of b) p.peer.socket.destroy();
    await until(() => budget.used === 3 * per);
    expect((await startup(port, '127.0.0.4')).accepted).toBe(true);
    for (const p of [...a, ...c]) p.peer.socket.destroy();
    for (const x of conns) x.abort();
    await until(() => budget.used === 0);
    await l.close();
  });

  it('a receive arena grown by a burst is given back when the connection is idle (4 KiB left); growth stays within the budget', async () => {
    const budget = new MemoryBudget({ limit: 64 << 20, sourceShare: 1 });
    const l = await mpaTcp({ memoryBudget: budget }).listen({ host: '127.0.0.1', port: 0 });
    const port = l.address.port as number;
    const accepted = new Promise<LlpConnection>((r) => l.connections$.subscribe(r));
    const { peer } = await startup(port, '127.0.0.2');
    const server = (await accepted) as MpaTcpConnection;
    let got = 0;
    let bad = 0;
    const u = pattern(60_000, 3);
    server.stream.setReceiver((m) => {
      const b = Buffer.concat(m.chunks);
      if (!b.equals(u)) bad++;
      got++;
    });
    const w = new FpduWriter({ crc: true, markers: false });
    const out: Uint8Array[] = [];
    w.frame([u], u.byteLength, out);
    const fpdu = Buffer.concat(out);
    const burst = async (n: number) => {
      for (let i = 0; i < n; i++) if (!peer.socket.write(fpdu)) await new Promise((r) => peer.socket.once('drain', r));
    };
    await burst(400);
    await until(() => got === 400);
    const grown = server.stream.readStats;
    expect(grown.arenaSize).toBeGreaterThan(ARENA_INITIAL);
    expect(budget.usedBy('127.0.0.2')).toBe(arenaFootprint(grown.arenaSize));
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().arrayBuffers;
    // Under load the idle sweep can run during that gc(): then the baseline already lacks the arena.
    const baselineHoldsArena = server.stream.readStats.shrinks === 0;
    // Idle: within two sweeps the arena is given back (the next read goes into a 4 KiB buffer), and the
    // budget holds what a first arena takes again.
    await until(() => server.stream.readStats.shrinks >= 1, 4 * IDLE_SHRINK_MS + 2000);
    expect(server.stream.readStats.arenaSize).toBe(0);
    // The grown arena is garbage now: Node's pending read buffer moved to the new one.
    gc();
    if (baselineHoldsArena) expect(before - process.memoryUsage().arrayBuffers).toBeGreaterThan(grown.arenaSize / 2);
    expect(budget.usedBy(sourceKey('127.0.0.2'))).toBe(arenaFootprint(ARENA_INITIAL));
    // Reading goes on into the new arena, every octet intact.
    await burst(100);
    await until(() => got === 500);
    expect(bad).toBe(0);
    peer.socket.destroy();
    server.abort();
    await l.close();
  });

  it('a budget too small to grow into: the arena stays small, nothing is lost', async () => {
    const budget = new MemoryBudget({ limit: arenaFootprint(ARENA_INITIAL), sourceShare: 1 });
    const l = await mpaTcp({ memoryBudget: budget }).listen({ host: '127.0.0.1', port: 0 });
    const accepted = new Promise<LlpConnection>((r) => l.connections$.subscribe(r));
    const { peer } = await startup(l.address.port as number, '127.0.0.2');
    const server = (await accepted) as MpaTcpConnection;
    let got = 0;
    server.stream.setReceiver(() => got++);
    const w = new FpduWriter({ crc: true, markers: false });
    const out: Uint8Array[] = [];
    w.frame([pattern(60_000, 9)], 60_000, out);
    const fpdu = Buffer.concat(out);
    for (let i = 0; i < 300; i++) if (!peer.socket.write(fpdu)) await new Promise((r) => peer.socket.once('drain', r));
    await until(() => got === 300);
    expect(server.stream.readStats.arenaSize).toBe(ARENA_INITIAL);
    expect(server.stream.readStats.growthRefused).toBeGreaterThan(0);
    expect(budget.used).toBe(arenaFootprint(ARENA_INITIAL));
    peer.socket.destroy();
    server.abort();
    await l.close();
  });

  it('new options are validated', () => {
    for (const bad of [0, -1, 1.5, '4'])
      expect(() => mpaTcp({ maxConnectionsPerSource: bad as number })).toThrow(/maxConnectionsPerSource/);
    for (const bad of [-1, 129, 1.5]) expect(() => mpaTcp({ ipv6SourcePrefix: bad })).toThrow(/ipv6SourcePrefix/);
    expect(mpaTcp().options.maxConnectionsPerSource).toBe(1024);
    expect(mpaTcp().options.idleTimeoutMs).toBe(300_000);
  });
});
