import { CapabilityError, LLP_TRANSPORT, type LlpTransport } from '@rddp/llp';
import { loopback, loopbackModule } from '@rddp/llp-loopback';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { createStack, transportModule } from '../src/index.js';

describe('@rddp/stack composition', () => {
  it('composes a stack from an LLP container module in one call', async () => {
    const stack = createStack(loopbackModule({ mulpdu: 2048 }));
    expect(stack.transport.name).toBe('loopback');
    expect(stack.get<LlpTransport>(LLP_TRANSPORT)).toBe(stack.transport);
    const listener = await stack.transport.listen({ host: 'stack-test', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    const conn = await stack.transport.connect(listener.address);
    const peer = await accepted;
    expect(conn.streams[0]?.mulpdu).toBe(2048);
    const got = new Promise<number>((resolve) => peer.streams[0]?.setReceiver((u) => resolve(u.length)));
    conn.streams[0]?.send([new Uint8Array(10)]);
    expect(await got).toBe(10);
    await conn.close();
    await listener.close();
  });

  it('accepts a bare transport object too', () => {
    const t = loopback();
    expect(createStack(t).transport).toBe(t);
    expect(createStack(transportModule(t)).transport).toBe(t);
  });

  it('RFC 5041 §3: refuses an LLP that is not reliable/ordered when asked to', () => {
    const lossy = loopbackModule({ faults: { drop: { probability: 0.5 } } });
    expect(() => createStack(lossy, { requireRfc5041: true })).toThrow(CapabilityError);
    expect(() => createStack(loopbackModule(), { requireRfc5041: true })).not.toThrow();
    // The loopback has no digest: refused when a strong digest is required.
    expect(() => createStack(loopbackModule(), { requireRfc5041: { requireDigest: true } })).toThrow(/CRC32c/);
  });
});
