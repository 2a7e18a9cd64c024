/**
 * A share per source, one budget per process, and idle associations (docs/SECURITY.md "Resource limits"),
 * played from outside over UDP: initiators bound to 127.0.0.2 … 127.0.0.4 open associations (each connect
 * is a new UDP port, so a new SCTP peer, RFC 6951) against one listener. Beyond a source's share of peers
 * with state its COOKIE ECHO is discarded (RFC 4960 §5.1.5) and its setup times out; beyond its share of
 * associations or of the memory budget the association gets an ABORT. Other sources are still served.
 */
import { isLlpError, type LlpConnection, type LlpError, MemoryBudget } from '@rddp/llp';
import { afterEach, describe, expect, it } from 'vitest';
import { sctp } from '../src/index.js';
import type { SctpListener } from '../src/listener.js';
import { until } from './harness.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function open(port: number, from: string, timeoutMs = 2500): Promise<LlpConnection | LlpError> {
  const t = sctp({ localHost: from, handshakeTimeoutMs: timeoutMs });
  try {
    const c = await t.connect({ host: '127.0.0.1', port }, { timeoutMs });
    cleanup.push(() => c.abort());
    return c;
  } catch (e) {
    return e as LlpError;
  }
}

const isConn = (x: LlpConnection | LlpError): x is LlpConnection => 'streams' in x;

/** A listener of `options` on 127.0.0.1 (closed after the test), its port, and the errors it reports. */
async function listen(options: Parameters<typeof sctp>[0]) {
  const l = (await sctp(options).listen({ host: '127.0.0.1', port: 0 })) as SctpListener;
  cleanup.push(() => l.close());
  const errors: LlpError[] = [];
  l.errors$.subscribe((e) => errors.push(e));
  return { l, port: l.address.port as number, errors };
}

describe('SCTP listener: shares per source', () => {
  it('peers with state per source: one address with many ports stops at maxPendingPeersPerSource; 127.0.0.3 still associates', async () => {
    const { l, port } = await listen({ maxPendingPeersPerSource: 3 });
    const flood = await Promise.all([0, 1, 2, 3, 4].map(() => open(port, '127.0.0.2', 2000)));
    expect(flood.filter(isConn)).toHaveLength(3);
    expect(flood.filter((x) => !isConn(x)).every((e) => isLlpError(e as LlpError, 'ERR_LLP_TIMEOUT'))).toBe(true);
    expect(l.outOfTheBlueDiscards.overSourceLimit).toBeGreaterThan(0);
    const honest = await open(port, '127.0.0.3');
    expect(isConn(honest)).toBe(true);
    // A place comes back with the peer's last connection.
    (flood.find(isConn) as LlpConnection).abort();
    await until(() => l.peerCount === 3, 'the peer state dropped');
    expect(isConn(await open(port, '127.0.0.2'))).toBe(true);
  });

  it('associations per source: beyond maxAssociationsPerSource an ABORT, reported as a ResourceLimitError; another source served', async () => {
    const { port, errors } = await listen({ maxAssociationsPerSource: 2 });
    const a = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
    expect(a.map(isConn)).toEqual([true, true, false]);
    // The ABORT reaches the initiator at once, with the reason (RFC 4960 §3.3.10.13 cause).
    expect((a[2] as LlpError).message).toMatch(/peer aborted the association: .*2 associations from 127\.0\.0\.2/);
    expect(
      errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /2 associations from 127\.0\.0\.2/.test(e.message)),
    ).toBe(true);
    expect(isConn(await open(port, '127.0.0.3'))).toBe(true);
  });

  it('the memory budget: receive windows reserved per association; past a source share an ABORT, released at the end', async () => {
    const window = 128 * 1024;
    const budget = new MemoryBudget({ limit: 40 * window, sourceShare: 2.5 / 40 }); // 2 windows per source
    const { port, errors } = await listen({ receiveWindow: window, memoryBudget: budget });
    const a = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
    expect(a.map(isConn)).toEqual([true, true, false]);
    expect(budget.usedBy('127.0.0.2')).toBeLessThanOrEqual(budget.sourceLimit);
    expect(errors.some((e) => /memory share of 127\.0\.0\.2/.test(e.message))).toBe(true);
    expect(isConn(await open(port, '127.0.0.3'))).toBe(true);
    for (const c of a) if (isConn(c)) c.abort();
    await until(() => budget.usedBy('127.0.0.2') === 0, 'the windows released');
  });

  it('an idle association is ended after idleTimeoutMs (LlpTimeoutError); one that sends stays', async () => {
    const { l, port } = await listen({ idleTimeoutMs: 600 });
    const accepted: LlpConnection[] = [];
    l.connections$.subscribe((c) => accepted.push(c));
    const t = sctp({ idleTimeoutMs: 0 });
    const idle = await t.connect({ host: '127.0.0.1', port });
    const busy = await t.connect({ host: '127.0.0.1', port });
    cleanup.push(() => idle.abort());
    cleanup.push(() => busy.abort());
    await until(() => accepted.length === 2, 'both accepted');
    const ends = new Map<LlpConnection, LlpError | undefined>();
    for (const c of accepted) c.closed$.subscribe((e) => ends.set(c, e.error));
    const busyServer = accepted.find((c) => c.remoteAddress.port === busy.localAddress.port) as LlpConnection;
    busyServer.streams[0]?.setReceiver(() => {});
    const timer = setInterval(() => busy.streams[0]?.send([new Uint8Array(16)]), 150);
    try {
      await until(() => ends.size >= 1, 'the idle one ended', 5000);
      await new Promise((r) => setTimeout(r, 600));
      expect(ends.size).toBe(1);
      const [[which, error]] = [...ends];
      expect(which).not.toBe(busyServer);
      expect(isLlpError(error as LlpError, 'ERR_LLP_TIMEOUT')).toBe(true);
      expect(error?.message).toMatch(/idleTimeoutMs/);
    } finally {
      clearInterval(timer);
    }
  });

  it('options are validated', () => {
    for (const bad of [0, -1, 1.5])
      expect(() => sctp({ maxPendingPeersPerSource: bad })).toThrow(/maxPendingPeersPerSource/);
    expect(() => sctp({ ipv6SourcePrefix: 129 })).toThrow(/ipv6SourcePrefix/);
    expect(sctp().options.idleTimeoutMs).toBe(300_000);
  });
});
