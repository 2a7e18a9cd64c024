/**
 * `rddp experiment`'s user-space relay (delay, jitter, reordering) as its own process
 * (`rddp experiment --role relay --spec JSON`, no namespaces needed), flooded from outside with node
 * `dgram` and `net` sockets: every queue it keeps stops at its bound, and what goes past is dropped
 * (UDP datagrams, UDP sources, TCP connections) or held back at the sender (a TCP byte stream), counted.
 *
 * The TUN relay (packets between a TUN device in each of two namespaces) is checked end to end: a UDP
 * round trip takes the added delay twice, a TCP transfer through delay and reordering arrives whole, and
 * its queue stops at its bound. Needs root and @rddp/writev's native build; skipped with a warning
 * otherwise, failed instead when CI=… and RDDP_REQUIRE_WRITEV=1.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RelaySpec, RelayStats, SocketRelaySpec, TunRelaySpec } from '../src/experiment/relay.js';
import { run } from './procs.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts the relay process; `stop()` ends it with SIGTERM and returns the counters it prints. */
async function relay(spec: Partial<SocketRelaySpec> & Pick<SocketRelaySpec, 'proto' | 'upstreamPort'>) {
  return startRelayProcess({
    listenHost: '127.0.0.1',
    listenPort: 0,
    upstreamHost: '127.0.0.1',
    delayMs: 0,
    jitterMs: 0,
    reorder: 0,
    seed: 1,
    ...spec,
  });
}

async function startRelayProcess(full: RelaySpec) {
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

// ---- TUN: packets between two namespaces ----

const writev = (() => {
  try {
    return createRequire(import.meta.url)('@rddp/writev') as { openTun?: unknown };
  } catch {
    return undefined;
  }
})();
const tunWhyNot =
  process.platform !== 'linux' || process.getuid?.() !== 0
    ? 'needs Linux and root (network namespaces, TUN devices)'
    : typeof writev?.openTun !== 'function'
      ? "needs @rddp/writev's native build"
      : undefined;
const tunRequired = Boolean(process.env.CI) && process.env.RDDP_REQUIRE_WRITEV === '1';
if (tunWhyNot && !tunRequired) console.warn(`experiment relay, TUN: ${tunWhyNot}; skipped`);

const NS_A = `rddp-tuntest-${process.pid}-a`;
const NS_B = `rddp-tuntest-${process.pid}-b`;
const ADDR_A = '10.99.0.1';
const ADDR_B = '10.99.0.2';
const sh = (...args: string[]) => execFileSync(args[0] as string, args.slice(1), { stdio: 'pipe' }).toString();

/** Runs a node script in namespace `ns`; `line(re)` waits for a line of its output matching `re`. */
function nodeIn(ns: string, script: string) {
  const child: ChildProcess = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(() => child.kill('SIGKILL'));
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d));
  child.stderr?.on('data', (d: Buffer) => (err += d));
  const exited = once(child, 'exit');
  return {
    async line(re: RegExp): Promise<RegExpExecArray> {
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        const r = await Promise.race([once(child.stdout as NodeJS.ReadableStream, 'data'), exited.then(() => 'exit')]);
        if (r === 'exit') {
          const last = re.exec(out);
          if (last) return last;
          throw new Error(`script in ${ns} exited without ${re}: ${out}${err}`);
        }
      }
    },
  };
}

function tunRelay(spec: Partial<TunRelaySpec>) {
  return startRelayProcess({
    proto: 'tun',
    tunA: { name: 'tA', netns: NS_A },
    tunB: { name: 'tB', netns: NS_B },
    delayMs: 0,
    jitterMs: 0,
    reorder: 0,
    seed: 1,
    ...spec,
  });
}

describe.runIf(!tunWhyNot || tunRequired)('rddp experiment relay: TUN devices, packet by packet', () => {
  beforeAll(() => {
    if (tunWhyNot) throw new Error(`CI with RDDP_REQUIRE_WRITEV=1: the TUN relay test ${tunWhyNot}`);
    for (const [ns, dev, local, peer] of [
      [NS_A, 'tA', ADDR_A, ADDR_B],
      [NS_B, 'tB', ADDR_B, ADDR_A],
    ] as const) {
      sh('ip', 'netns', 'add', ns);
      sh('ip', '-n', ns, 'tuntap', 'add', 'dev', dev, 'mode', 'tun');
      // IPv4 only: no router solicitations or MLD reports in the counts.
      sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.disable_ipv6=1`);
      sh('ip', '-n', ns, 'addr', 'add', local, 'peer', peer, 'dev', dev);
      sh('ip', '-n', ns, 'link', 'set', dev, 'mtu', '1500', 'up');
      sh('ip', '-n', ns, 'link', 'set', 'lo', 'up');
    }
  });
  afterAll(() => {
    for (const ns of [NS_A, NS_B])
      try {
        sh('ip', 'netns', 'del', ns);
      } catch {
        // not made
      }
  });

  it('UDP: a round trip takes the delay twice, and not more than twice delay + jitter', async () => {
    const delayMs = 20;
    const jitterMs = 5;
    const r = await tunRelay({ delayMs, jitterMs });
    const echo = nodeIn(
      NS_B,
      `const s = require('node:dgram').createSocket('udp4');
       s.on('message', (m, r) => s.send(m, r.port, r.address));
       s.bind(7001, '${ADDR_B}', () => console.log('BOUND'));`,
    );
    await echo.line(/BOUND/);
    const ping = nodeIn(
      NS_A,
      `const s = require('node:dgram').createSocket('udp4');
       const rtts = []; let t0 = 0;
       const next = () => { t0 = performance.now(); s.send(Buffer.alloc(100, rtts.length), 7001, '${ADDR_B}'); };
       s.on('message', () => { rtts.push(performance.now() - t0); if (rtts.length < 20) next(); else { console.log('RTTS ' + JSON.stringify(rtts)); s.close(); } });
       s.bind(0, '${ADDR_A}', next);`,
    );
    const rtts = JSON.parse((await ping.line(/^RTTS (.*)$/m))[1] as string) as number[];
    const stats = await r.stop();
    expect(rtts).toHaveLength(20);
    // Never early: each direction holds every packet its delay.
    expect(Math.min(...rtts)).toBeGreaterThanOrEqual(2 * delayMs);
    // At most delay + jitter per direction, plus the timers' ms granularity and scheduling.
    const sorted = [...rtts].sort((x, y) => x - y);
    expect(sorted[10]).toBeLessThan(2 * (delayMs + jitterMs) + 10);
    expect(stats).toMatchObject({ forwarded: 40, overflow: 0, reordered: 0, writeErrors: 0, readErrors: 0 });
  }, 20_000);

  it('TCP: 4 MB arrive byte-exact through 5 ms delay and 1 % reordering; the handshake takes the delay', async () => {
    const size = 4 << 20;
    const r = await tunRelay({ delayMs: 5, jitterMs: 1, reorder: 0.01, seed: 7 });
    const sink = nodeIn(
      NS_B,
      `const h = require('node:crypto').createHash('sha256'); let n = 0;
       const srv = require('node:net').createServer((c) => {
         c.on('data', (d) => { h.update(d); n += d.length; });
         c.on('end', () => { console.log('GOT ' + n + ' ' + h.digest('hex')); c.end(); srv.close(); });
       });
       srv.listen(7002, '${ADDR_B}', () => console.log('LISTENING'));`,
    );
    await sink.line(/LISTENING/);
    const source = nodeIn(
      NS_A,
      `const crypto = require('node:crypto');
       const data = crypto.randomBytes(${size});
       const t0 = performance.now();
       const c = require('node:net').connect(7002, '${ADDR_B}', () => {
         console.log('CONNECT ' + (performance.now() - t0));
         c.end(data);
       });
       c.on('close', () => console.log('SENT ' + data.length + ' ' + crypto.createHash('sha256').update(data).digest('hex')));
       c.resume();`,
    );
    const connectMs = Number((await source.line(/^CONNECT (\S+)$/m))[1]);
    const sent = (await source.line(/^SENT (\d+ \S+)$/m))[1];
    const got = (await sink.line(/^GOT (\d+ \S+)$/m))[1];
    const stats = await r.stop();
    expect(got).toBe(sent);
    expect(got?.startsWith(`${size} `)).toBe(true);
    // SYN and SYN-ACK: one round trip, each way held 5 ms.
    expect(connectMs).toBeGreaterThanOrEqual(10);
    expect(stats.reordered).toBeGreaterThan(0);
    expect(stats.forwarded).toBeGreaterThan(size / 1500);
    expect(stats).toMatchObject({ overflow: 0, writeErrors: 0, readErrors: 0 });
  }, 20_000);

  it('queue bound: packets beyond maxQueued or maxQueuedOctets held are dropped and counted', async () => {
    const flood = (n: number, size: number) =>
      nodeIn(
        NS_A,
        `const s = require('node:dgram').createSocket('udp4');
         let i = 0;
         const send = () => { if (i === ${n}) { console.log('DONE'); s.close(); return; }
           s.send(Buffer.alloc(${size}, i), 9, '${ADDR_B}', () => { i++; i % 10 ? send() : setTimeout(send, 2); }); };
         s.bind(0, '${ADDR_A}', send);`,
      ).line(/DONE/);
    // Held a minute each: nothing leaves during the flood.
    const byCount = await tunRelay({ delayMs: 60_000, maxQueued: 50 });
    await flood(200, 10);
    await sleep(200);
    expect(await byCount.stop()).toMatchObject({
      forwarded: 0,
      overflow: 150,
      peakQueued: 50,
      peakQueuedOctets: 50 * 38,
    });

    // 1028-octet packets (20 IP + 8 UDP + 1000): 97 fit in 100000 octets.
    const byOctets = await tunRelay({ delayMs: 60_000, maxQueuedOctets: 100_000 });
    await flood(150, 1000);
    await sleep(200);
    expect(await byOctets.stop()).toMatchObject({
      forwarded: 0,
      overflow: 53,
      peakQueued: 97,
      peakQueuedOctets: 97 * 1028,
    });
  }, 20_000);
});
