/**
 * MPA slowloris (RFC 5042 §5.1.1/§6: resource consumption by a peer): raw sockets from 127.0.0.1 open
 * connections and never send the MPA Request. Beyond `maxPendingStartupsPerAddress` they are reset and
 * reported; an honest client from another source address (127.0.0.2, also on lo) still completes startup.
 */
import net from 'node:net';
import { isLlpError, type LlpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { mpaTcp } from '../src/index.js';
import { type RawPeer, rawConnect, wrap } from './raw.js';

/** A raw connect that reports a reset instead of failing when the listener refuses at once. */
function idlePeer(port: number): Promise<RawPeer | 'reset'> {
  return rawConnect(port).then(
    (p) => p,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNRESET') return 'reset' as const;
      throw e;
    },
  );
}

/** An honest MPA Initiator from `from` (RFC 5044 §7.1.2): Request (C, Rev 1), then an accepting Reply. */
async function honestStartup(port: number, from: string): Promise<net.Socket> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from, allowHalfOpen: true });
  const honest = wrap(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C
  req[17] = 1; // Rev 1
  socket.write(req);
  const reply = await honest.waitFor(20);
  expect(reply.subarray(0, 16).toString()).toBe('MPA ID Rep Frame');
  expect(reply[16]! & 0x20).toBe(0); // R=0: accepted
  return socket;
}

describe('MPA/TCP listener: pending startups per source address', () => {
  it('an idle flood from one address is capped at maxPendingStartupsPerAddress; a client from 127.0.0.2 completes startup', async () => {
    // maxPendingStartupsPerAddress left at its default, 16.
    const t = mpaTcp({ maxPendingStartups: 24, handshakeTimeoutMs: 20_000 });
    const l = await t.listen({ host: '127.0.0.1', port: 0 });
    const port = l.address.port as number;
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    // The slowloris: more idle connections than the whole listener allows, none sends its MPA Request.
    const idle: (RawPeer | 'reset')[] = [];
    for (let i = 0; i < 30; i++) idle.push(await idlePeer(port));
    const peers = idle.filter((p): p is RawPeer => p !== 'reset');
    // The honest client, from another source address: a full MPA startup (RFC 5044 §7.1.2).
    const accepted = firstValueFrom(l.connections$);
    const socket = await honestStartup(port, '127.0.0.2');
    const c = await accepted;
    expect(c.remoteAddress.host).toMatch(/127\.0\.0\.2$/);

    // Those beyond the per-address cap were reset at once; 16 stay (until the startup timer).
    const ends = await Promise.all(
      peers.map((p) => Promise.race([p.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 500))])),
    );
    expect(ends.filter((e) => e === 'open')).toHaveLength(16);
    expect(ends.every((e) => e === 'open' || e.reset)).toBe(true);
    const refused = errors.filter(
      (e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /16 MPA startups in progress from 127\.0\.0\.1/.test(e.message),
    );
    expect(refused).toHaveLength(14);

    c.abort();
    socket.destroy();
    for (const p of peers) p.socket.destroy();
    await l.close();
  });

  it('slowloris from many addresses filling every startup place: a new source sheds the oldest of the largest, 3 of 3 honest clients complete startup', async () => {
    // 9 sources × 4 idle connections > 32 places: the listener-wide bound is full.
    const t = mpaTcp({ maxPendingStartups: 32, maxPendingStartupsPerAddress: 4, handshakeTimeoutMs: 20_000 });
    const l = await t.listen({ host: '127.0.0.1', port: 0 });
    const port = l.address.port as number;
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    const idle: RawPeer[] = [];
    for (let a = 10; a < 19; a++)
      for (let i = 0; i < 4; i++) {
        const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${a}` });
        s.on('error', () => {});
        idle.push(wrap(s));
      }
    await new Promise((r) => setTimeout(r, 300));
    const accepted: unknown[] = [];
    l.connections$.subscribe((c) => accepted.push(c));
    for (const from of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) {
      const socket = await honestStartup(port, from);
      socket.destroy();
    }
    expect(accepted).toHaveLength(3);
    const shed = errors.filter(
      (e) => isLlpError(e, 'ERR_LLP_RESOURCE_LIMIT') && /shed for another source/.test(e.message),
    );
    expect(shed.length).toBeGreaterThanOrEqual(3);
    for (const p of idle) p.socket.destroy();
    await l.close();
  });

  it('maxPendingStartupsPerAddress is validated: a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '4'])
      expect(() => mpaTcp({ maxPendingStartupsPerAddress: bad as number })).toThrow(/maxPendingStartupsPerAddress/);
    expect(mpaTcp({ maxPendingStartupsPerAddress: 1 }).options.maxPendingStartupsPerAddress).toBe(1);
    expect(mpaTcp().options.maxPendingStartupsPerAddress).toBe(16);
  });
});
