/**
 * `rddp experiment`'s user-space packet relay (delay, jitter, reordering) as its own process
 * (`rddp experiment --role relay --spec JSON`), between a TUN device in each of two namespaces, checked
 * end to end from sockets in those namespaces: a UDP
 * round trip takes the added delay twice, a TCP transfer through delay and reordering arrives whole, and
 * its queue stops at its bound. Needs root and @rddp/writev's native build; skipped with a warning
 * otherwise, failed instead when CI=… and RDDP_REQUIRE_WRITEV=1.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RelaySpec, RelayStats, TunRelaySpec } from '../src/experiment/relay.js';
import { run } from './procs.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
/** The queue-bound test's own pair: a packet the earlier tests' connections still send cannot reach its counts. */
const NS_C = `rddp-tuntest-${process.pid}-c`;
const NS_D = `rddp-tuntest-${process.pid}-d`;
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

/** A pair of namespaces joined by nothing but two TUN devices (IPv4 only: no RS or MLD in the counts). */
function makeTunPair(nsA: string, nsB: string): void {
  for (const [ns, dev, local, peer] of [
    [nsA, 'tA', ADDR_A, ADDR_B],
    [nsB, 'tB', ADDR_B, ADDR_A],
  ] as const) {
    sh('ip', 'netns', 'add', ns);
    sh('ip', '-n', ns, 'tuntap', 'add', 'dev', dev, 'mode', 'tun');
    sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.disable_ipv6=1`);
    sh('ip', '-n', ns, 'addr', 'add', local, 'peer', peer, 'dev', dev);
    sh('ip', '-n', ns, 'link', 'set', dev, 'mtu', '1500', 'up');
    sh('ip', '-n', ns, 'link', 'set', 'lo', 'up');
  }
}

function tunRelay(spec: Partial<TunRelaySpec>, nsA = NS_A, nsB = NS_B) {
  return startRelayProcess({
    proto: 'tun',
    tunA: { name: 'tA', netns: nsA },
    tunB: { name: 'tB', netns: nsB },
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
    makeTunPair(NS_A, NS_B);
  });
  afterAll(() => {
    for (const ns of [NS_A, NS_B, NS_C, NS_D])
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
    makeTunPair(NS_C, NS_D);
    const flood = (n: number, size: number) =>
      nodeIn(
        NS_C,
        `const s = require('node:dgram').createSocket('udp4');
         let i = 0;
         const send = () => { if (i === ${n}) { console.log('DONE'); s.close(); return; }
           s.send(Buffer.alloc(${size}, i), 9, '${ADDR_B}', () => { i++; i % 10 ? send() : setTimeout(send, 2); }); };
         s.bind(0, '${ADDR_A}', send);`,
      ).line(/DONE/);
    // Held a minute each: nothing leaves during the flood.
    const byCount = await tunRelay({ delayMs: 60_000, maxQueued: 50 }, NS_C, NS_D);
    await flood(200, 10);
    await sleep(200);
    expect(await byCount.stop()).toMatchObject({
      forwarded: 0,
      overflow: 150,
      peakQueued: 50,
      peakQueuedOctets: 50 * 38,
    });

    // 1028-octet packets (20 IP + 8 UDP + 1000): 97 fit in 100000 octets.
    const byOctets = await tunRelay({ delayMs: 60_000, maxQueuedOctets: 100_000 }, NS_C, NS_D);
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
