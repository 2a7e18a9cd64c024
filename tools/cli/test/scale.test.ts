/**
 * Scale: 1 000 concurrent MPA/TCP connections doing small RDMA Writes and Sends against one server
 * process (both ends in this process: 2 000 sockets), every octet verified.
 */
import { execFileSync } from 'node:child_process';
import type { LlpConnection } from '@rddp/llp';
import { Access, type Mr } from '@rddp/verbs';
import { describe, expect, it } from 'vitest';
import { toolTransport } from '../src/index.js';

/** 1 000, unless this process may not open 2 000 sockets (then as many as the file limit allows). */
const N = (() => {
  const limit = Number(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
  return Number.isFinite(limit) && limit < 2300 ? Math.max(100, Math.floor((limit - 300) / 2)) : 1000;
})();

describe('scale', () => {
  it(`${N} concurrent MPA/TCP connections to one server each write, send and are verified`, async () => {
    const tt = toolTransport({ transport: 'tcp', mpaRev: '1', crc: true });
    const l = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
    // Each connection gets a queue pair on a device of its own, through the tool transport's stack.
    const queuePair = (c: LlpConnection) => {
      const pd = tt.stack.device().allocPd();
      return { pd, qp: tt.stack.queuePair(pd, c) };
    };
    const servers: { connection: LlpConnection; buf: Uint8Array; region: Mr; got: Promise<number> }[] = [];
    const accepted = new Promise<void>((resolve) => {
      l.connections$.subscribe((c: LlpConnection) => {
        const { pd, qp } = queuePair(c);
        const buf = new Uint8Array(64);
        const region = pd.registerMr(buf, Access.LocalWrite | Access.RemoteWrite);
        const got = qp.recv(pd.registerMr(new Uint8Array(16), Access.LocalWrite).sge()).then((wc) => wc.byteLen);
        servers.push({ connection: c, buf, region, got });
        if (servers.length === N) resolve();
      });
    });
    const clients: LlpConnection[] = [];
    for (let i = 0; i < N; i += 100)
      clients.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(100, N - i) }, () =>
            tt.transport.connect(l.address, { params: tt.connectParams }),
          ),
        )),
      );
    await accepted;
    await l.close();
    expect(clients).toHaveLength(N);
    // Pair each client with its server by exchanging nothing: the i-th accepted is some client; each client
    // writes its index into the region advertised by the server it is connected to (found by local port).
    const byPort = new Map(servers.map((s) => [s.connection.remoteAddress.port, s]));
    await Promise.all(
      clients.map(async (c, i) => {
        const peer = byPort.get(c.localAddress.port);
        if (!peer) throw new Error('no server side for a client');
        const { pd, qp } = queuePair(c);
        const data = pd.registerMr(new TextEncoder().encode(`client ${i}`.padEnd(16, '.')), 0);
        await qp.write(data.sge(), peer.region.remote());
        await qp.send(data.sge(0, 8));
      }),
    );
    const lengths = await Promise.all(servers.map((s) => s.got));
    expect(lengths.every((n) => n === 8)).toBe(true);
    for (const [i, c] of clients.entries()) {
      const peer = byPort.get(c.localAddress.port);
      expect(new TextDecoder().decode(peer?.buf.subarray(0, 16))).toBe(`client ${i}`.padEnd(16, '.'));
    }
    for (const c of clients) c.abort();
  }, 120_000);
});
