/**
 * `rddp experiment`'s user-space relay (delay, jitter, reordering) as its own process
 * (`rddp experiment --role relay --spec JSON`, no namespaces needed), flooded from outside with node
 * `dgram` and `net` sockets: every queue it keeps stops at its bound, and what goes past is dropped
 * (UDP datagrams, UDP sources, TCP connections) or held back at the sender (a TCP byte stream), counted.
 */
import dgram from 'node:dgram';
import { once } from 'node:events';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RelaySpec, RelayStats } from '../src/experiment/relay.js';
import { run } from './procs.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts the relay process; `stop()` ends it with SIGTERM and returns the counters it prints. */
async function relay(spec: Partial<RelaySpec> & Pick<RelaySpec, 'proto' | 'upstreamPort'>) {
  const full: RelaySpec = {
    listenHost: '127.0.0.1',
    listenPort: 0,
    upstreamHost: '127.0.0.1',
    delayMs: 0,
    jitterMs: 0,
    reorder: 0,
    seed: 1,
    ...spec,
  };
  const r = run(['experiment', '--role', 'relay', '--spec', JSON.stringify(full)]);
  cleanups.push(() => r.child.kill('SIGKILL'));
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    r.child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^LISTENING (\d+)$/m.exec(out);
      if (m) resolve(Number(m[1]));
    });
    r.done.then((x) => reject(new Error(`relay exited ${x.code}: ${x.err}`)));
  });
  return {
    port,
    async stop(): Promise<RelayStats> {
      r.child.kill('SIGTERM');
      const x = await r.done;
      expect(x.code).toBe(0);
      return JSON.parse(x.out.trim().split('\n').pop() as string) as RelayStats;
    },
  };
}

/** A UDP socket on 127.0.0.1 that counts what it receives, by sender. */
async function udpSink() {
  const s = dgram.createSocket('udp4');
  const from = new Map<number, number>();
  s.on('message', (_m, r) => from.set(r.port, (from.get(r.port) ?? 0) + 1));
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  cleanups.push(() => s.close());
  return { port: s.address().port, from };
}

async function udpClient() {
  const s = dgram.createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  cleanups.push(() => s.close());
  return s;
}

/** Sends `n` datagrams of `size` octets, paced so that none is lost before the relay reads it. */
async function flood(s: dgram.Socket, port: number, n: number, size: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await new Promise<void>((res, rej) =>
      s.send(Buffer.alloc(size, i), port, '127.0.0.1', (e) => (e ? rej(e) : res())),
    );
    if (i % 10 === 9) await sleep(5);
  }
  await sleep(300);
}

/** Resolves with the event's arguments, or `undefined` after `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let t: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<undefined>((res) => (t = setTimeout(res, ms)))]);
  clearTimeout(t);
  return r;
}

describe('rddp experiment relay: bounded queues', () => {
  it('UDP: datagrams beyond maxQueued or maxQueuedOctets held, and sources beyond maxPeers, are dropped and counted', async () => {
    const sink = await udpSink();
    // Held a minute each: nothing leaves during the flood.
    const byCount = await relay({ proto: 'udp', upstreamPort: sink.port, delayMs: 60_000, maxQueued: 50 });
    await flood(await udpClient(), byCount.port, 120, 10);
    const a = await byCount.stop();
    expect(a).toMatchObject({ forwarded: 0, overflow: 70, peakQueued: 50, peakQueuedOctets: 500 });

    const byOctets = await relay({ proto: 'udp', upstreamPort: sink.port, delayMs: 60_000, maxQueuedOctets: 100_000 });
    await flood(await udpClient(), byOctets.port, 40, 8000);
    const b = await byOctets.stop();
    // 12 datagrams of 8000 octets fit in 100000; the other 28 are dropped.
    expect(b).toMatchObject({ forwarded: 0, overflow: 28, peakQueued: 12, peakQueuedOctets: 96_000 });

    // Ten sources, four places: the first four are relayed, the other six refused.
    const byPeers = await relay({ proto: 'udp', upstreamPort: sink.port, maxPeers: 4 });
    for (let i = 0; i < 10; i++) await flood(await udpClient(), byPeers.port, 1, 10);
    const c = await byPeers.stop();
    expect(c).toMatchObject({ forwarded: 4, refusedPeers: 6, overflow: 0 });
    expect([...sink.from.values()]).toEqual([1, 1, 1, 1]);
  }, 60_000);

  it('TCP: a receiver that does not read holds the sender back at maxBufferedOctets; the relay does not buffer the flood', async () => {
    const held: net.Socket[] = [];
    const upstream = net.createServer((s) => {
      s.pause(); // never reads
      s.on('error', () => {});
      held.push(s);
    });
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    cleanups.push(() => {
      for (const s of held) s.destroy();
      upstream.close();
    });
    const limit = 1 << 20;
    const r = await relay({
      proto: 'tcp',
      upstreamPort: (upstream.address() as net.AddressInfo).port,
      delayMs: 1,
      maxBufferedOctets: limit,
    });
    const client = net.connect(r.port, '127.0.0.1');
    client.on('error', () => {});
    cleanups.push(() => client.destroy());
    await once(client, 'connect');
    // 256 MiB in 64 KiB writes, each waited for: `handed` counts what the kernel took from the client.
    const total = 256 << 20;
    const chunk = Buffer.alloc(64 << 10, 0x5a);
    let handed = 0;
    while (handed < total) {
      const written = new Promise<boolean>((res) => client.write(chunk, (e) => res(!e)));
      if (!(await within(written, 1000))) break; // no progress for a second: held back
      handed += chunk.length;
    }
    // What the relay took is at most its bound plus the kernel's socket buffers on both of its legs.
    expect(handed).toBeLessThan(total / 2);
    client.destroy();
    const stats = await r.stop();
    expect(stats.paused).toBeGreaterThanOrEqual(1);
    expect(stats.peakBufferedOctets).toBeGreaterThan(limit);
    // One read (at most 64 KiB) past the bound before the direction stops reading.
    expect(stats.peakBufferedOctets).toBeLessThanOrEqual(limit + 65_536);
  }, 60_000);

  it('TCP: connections beyond maxPeers are closed at once and counted; a connection that ends frees its place', async () => {
    const seen: net.Socket[] = [];
    const upstream = net.createServer((s) => {
      seen.push(s);
      s.on('error', () => {});
      s.resume();
    });
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    cleanups.push(() => {
      for (const s of seen) s.destroy();
      upstream.close();
    });
    const r = await relay({ proto: 'tcp', upstreamPort: (upstream.address() as net.AddressInfo).port, maxPeers: 3 });
    const open = async () => {
      const c = net.connect(r.port, '127.0.0.1');
      c.on('error', () => {});
      cleanups.push(() => c.destroy());
      const closed = new Promise<boolean>((res) => c.once('close', () => res(true)));
      await once(c, 'connect');
      c.write('hello');
      return { c, closed };
    };
    const clients = [];
    for (let i = 0; i < 5; i++) clients.push(await open());
    // The fourth and fifth are closed by the relay; the first three stay.
    for (const k of [3, 4]) expect(await within(clients[k]?.closed as Promise<boolean>, 5000)).toBe(true);
    for (const k of [0, 1, 2]) expect(await within(clients[k]?.closed as Promise<boolean>, 300)).toBeUndefined();
    expect(seen).toHaveLength(3);
    // One of the three ends: its place is free again.
    clients[0]?.c.destroy();
    await sleep(500);
    const again = await open();
    expect(await within(again.closed, 1000)).toBeUndefined();
    expect(seen).toHaveLength(4);
    const stats = await r.stop();
    expect(stats.refusedPeers).toBe(2);
  }, 60_000);
});
