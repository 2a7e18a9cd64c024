/**
 * `congestionControl`: each side's connections run the TCP congestion control it names (Linux
 * TCP_CONGESTION through `@rddp/writev`), checked from outside the stack with `ss -ti`, which prints the
 * algorithm of every socket; a name the kernel refuses fails that connection with a `CapabilityError` (and
 * the listener goes on accepting); a malformed name is refused when the transport is made.
 */
import { execFileSync } from 'node:child_process';
import { CapabilityError, InvalidArgumentError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { MpaTcpConnection, MpaTcpListener } from '../src/index.js';
import { tcpPair, transportWith } from './helpers.js';
import { writevAvailable } from './writev.js';

const required = process.env.RDDP_REQUIRE_WRITEV === '1';
const native = writevAvailable && process.platform === 'linux';
if (!native && !required) console.warn('@rddp/writev not built here (or not Linux): congestionControl is not tested');

/** `ss`'s algorithm for the TCP socket from local port `sport` to `dport` on 127.0.0.1 (undefined: no ss). */
function ssAlgorithm(sport: number, dport: number): string | undefined {
  let out: string;
  try {
    out = execFileSync('ss', ['-tinH', 'src', `127.0.0.1:${sport}`, 'dst', `127.0.0.1:${dport}`], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
  // The info line starts with the algorithm's name (`cubic wscale:...`, `bbr wscale:...`).
  const m = /^\s+([a-z0-9_]+)\s/m.exec(out);
  return m?.[1];
}

const open: MpaTcpConnection[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.abort();
});

describe.runIf(native || required)('congestionControl (Linux TCP_CONGESTION)', () => {
  it('runs each side on the algorithm it names, as the kernel reports it', async () => {
    const [a, b] = await tcpPair(transportWith({ congestionControl: 'reno' }));
    open.push(a, b);
    expect(a.congestionControl).toBe('reno');
    // The responder's transport (the same here) set it on the accepted socket.
    expect(b.congestionControl).toBe('reno');
    const seen = ssAlgorithm(a.localAddress.port as number, a.remoteAddress.port as number);
    if (seen !== undefined) expect(seen).toBe('reno');

    const server = transportWith({ congestionControl: 'cubic' });
    const listener = (await server.listen({ host: '127.0.0.1', port: 0 })) as MpaTcpListener;
    try {
      const accepted = firstValueFrom(listener.connections$);
      const c = await transportWith({ congestionControl: 'reno' }).connect(listener.address);
      const d = (await accepted) as MpaTcpConnection;
      open.push(c, d);
      expect([c.congestionControl, d.congestionControl]).toEqual(['reno', 'cubic']);
      const fromServer = ssAlgorithm(d.localAddress.port as number, d.remoteAddress.port as number);
      if (fromServer !== undefined) expect(fromServer).toBe('cubic');
    } finally {
      await listener.close();
    }
  });

  it('reads back the system default when none is named', async () => {
    const [a, b] = await tcpPair();
    open.push(a, b);
    const system = execFileSync('sysctl', ['-n', 'net.ipv4.tcp_congestion_control'], { encoding: 'utf8' }).trim();
    expect(a.congestionControl).toBe(system);
    expect(b.congestionControl).toBe(system);
  });

  it('fails a connection whose algorithm the kernel refuses, with the kernel’s reason, and goes on', async () => {
    const err = await transportWith({ congestionControl: 'nosuchcc' })
      .connect({ host: '127.0.0.1', port: 9 })
      .catch((e: unknown) => e);
    // Port 9 refuses before the option matters; a listener that exists shows the refusal itself.
    expect(err).toBeInstanceOf(Error);

    const good = transportWith({});
    const listener = (await good.listen({ host: '127.0.0.1', port: 0 })) as MpaTcpListener;
    try {
      const e = await transportWith({ congestionControl: 'nosuchcc' })
        .connect(listener.address)
        .catch((x: unknown) => x);
      expect(e).toBeInstanceOf(CapabilityError);
      expect((e as CapabilityError).code).toBe('ERR_LLP_CAPABILITY');
      expect((e as Error).message).toMatch(/nosuchcc.*ENOENT/);
    } finally {
      await listener.close();
    }

    // A listener that names it: the accepted socket is reset and reported; the listener keeps accepting.
    const refusing = (await transportWith({ congestionControl: 'nosuchcc' }).listen({
      host: '127.0.0.1',
      port: 0,
    })) as MpaTcpListener;
    try {
      const reported = firstValueFrom(refusing.errors$);
      const e = await good.connect(refusing.address, { timeoutMs: 2000 }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(Error);
      const r = await reported;
      expect(r).toBeInstanceOf(CapabilityError);
      expect(r.message).toMatch(/ENOENT/);
    } finally {
      await refusing.close();
    }
  });

  it('refuses a malformed name when the transport is made', () => {
    for (const bad of ['', 'Cubic', 'a'.repeat(16), 'cu bic', 7])
      expect(() => transportWith({ congestionControl: bad as string })).toThrow(InvalidArgumentError);
  });
});
