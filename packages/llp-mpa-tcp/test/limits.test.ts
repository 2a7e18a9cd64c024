/** Listener resource limits (RFC 5042: resource consumption by idle or many peers): typed errors, resets. */
import { isLlpError, type LlpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { mpaTcp } from '../src/index.js';
import { rawConnect } from './raw.js';

describe('MPA/TCP listener limits', () => {
  it('startups beyond maxPendingStartups are reset and reported as ResourceLimitError; others go on', async () => {
    const t = mpaTcp({ maxPendingStartups: 2, handshakeTimeoutMs: 5000 });
    const l = await t.listen({ host: '127.0.0.1', port: 0 });
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    const idle = [await rawConnect(l.address.port as number), await rawConnect(l.address.port as number)];
    await new Promise((r) => setTimeout(r, 100));
    // The third is reset at once (its connect may even fail with ECONNRESET).
    const third = await rawConnect(l.address.port as number).then(
      async (p) => p.closed,
      (e: NodeJS.ErrnoException) => ({ reset: e.code === 'ECONNRESET', fin: false }),
    );
    expect(third.reset || third.fin).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /2 MPA startups/.test(e.message))).toBe(true);
    for (const p of idle) p.socket.destroy();
    await Promise.all(idle.map((p) => p.closed));
    await new Promise((r) => setTimeout(r, 300));
    // Room again: an honest connection is accepted.
    const accepted = firstValueFrom(l.connections$);
    const c = await t.connect(l.address);
    (await accepted).abort();
    c.abort();
    await l.close();
  });

  it('connections beyond maxConnections are refused until one closes', async () => {
    const t = mpaTcp({ maxConnections: 1 });
    const l = await t.listen({ host: '127.0.0.1', port: 0 });
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    const accepted = firstValueFrom(l.connections$);
    const first = await t.connect(l.address);
    const server1 = await accepted;
    await expect(t.connect(l.address, { timeoutMs: 3000 })).rejects.toBeDefined();
    expect(errors.some((e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT'))).toBe(true);
    first.abort();
    server1.abort();
    await new Promise((r) => setTimeout(r, 100));
    const again = firstValueFrom(l.connections$);
    const second = await t.connect(l.address);
    (await again).abort();
    second.abort();
    await l.close();
  });
});

describe('MPA/TCP established-connection timers', () => {
  /** `t` makes the initiator, `r` (by default `t`) the responder. */
  async function pair(t: ReturnType<typeof mpaTcp>, r = t) {
    const l = await r.listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(l.connections$);
    const a = await t.connect(l.address);
    const b = await accepted;
    await l.close();
    return [a, b] as const;
  }

  it('idleTimeoutMs: a connection with no octet either way for that long is reset with LlpTimeoutError; one with traffic stays up', async () => {
    const t = mpaTcp({ idleTimeoutMs: 300 });
    // The responders have no idle timer: the initiator's own must fire (not a reset from its peer's).
    const [a, b] = await pair(t, mpaTcp());
    const [c, d] = await pair(t, mpaTcp());
    d.streams[0]?.setReceiver(() => {});
    c.streams[0]?.setReceiver(() => {});
    // c sends every 100 ms: never idle for 300 ms. a and b stay silent.
    const timer = setInterval(() => c.streams[0]?.send([new Uint8Array(8)]), 100);
    const ended = await firstValueFrom(a.closed$);
    expect(ended.graceful).toBe(false);
    expect(ended.error && isLlpError(ended.error, 'ERR_LLP_TIMEOUT')).toBe(true);
    expect(ended.error?.message).toMatch(/idleTimeoutMs/);
    await firstValueFrom(b.closed$);
    await new Promise((r) => setTimeout(r, 400));
    expect([c.state, d.state]).toEqual(['open', 'open']);
    clearInterval(timer);
    c.abort();
    d.abort();
  });

  it('keepAliveMs: TCP keepalive is on by default (60 s) and off with 0; bad values are InvalidArgumentError', async () => {
    const net = await import('node:net');
    const calls: unknown[][] = [];
    const orig = net.Socket.prototype.setKeepAlive;
    net.Socket.prototype.setKeepAlive = function (this: import('node:net').Socket, ...args: unknown[]) {
      calls.push(args);
      return orig.apply(this, args as Parameters<typeof orig>);
    };
    try {
      const [a, b] = await pair(mpaTcp());
      expect(calls).toEqual([
        [true, 60_000],
        [true, 60_000],
      ]);
      a.abort();
      b.abort();
      calls.length = 0;
      const [c, d] = await pair(mpaTcp({ keepAliveMs: 0 }));
      expect(calls).toEqual([]);
      c.abort();
      d.abort();
    } finally {
      net.Socket.prototype.setKeepAlive = orig;
    }
    for (const v of [-1, 1.5, '10'])
      expect(() => mpaTcp({ keepAliveMs: v as number })).toThrow(/keepAliveMs must be an integer/);
    expect(() => mpaTcp({ idleTimeoutMs: -5 })).toThrow(/idleTimeoutMs must be an integer/);
  });
});
