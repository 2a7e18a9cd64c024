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
