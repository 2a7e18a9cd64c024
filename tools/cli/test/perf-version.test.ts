/**
 * The perf control protocol's version (issue 37): a perf client or server meeting a peer of another
 * version, or an rddp from before the version was sent (its HELLO, READY and REFUSED carry none), ends
 * with one line naming both versions. The CLI runs as a separate process; the old peers are played here,
 * over MPA/TCP as the CLI speaks it.
 */
import type { LlpConnection } from '@rddp/llp';
import { Access } from '@rddp/verbs';
import { firstValueFrom, take } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { PerfSession } from '../src/perf/session.js';
import { toolTransport } from '../src/transports.js';
import { freePort, listening, startedProcesses } from './procs.js';
import { closedWithin, rawMpaPeer, sendFpdu, ulpdus } from './raw-rdmap.js';

const procs = startedProcesses();

/** A HELLO as rddp sent it before the protocol had a version. */
const OLD_HELLO = JSON.stringify({
  type: 'hello',
  params: { test: 'write_bw', sizes: [4096], iters: 10, txDepth: 16, verify: true },
  addr: '139637976727552',
  rkey: 1,
});

/**
 * A perf server of another version over MPA/TCP: takes each client's HELLO and answers `answers[i]`
 * (an old READY, or a newer REFUSED), then waits for the client to end the connection.
 */
async function fakeServer(answers: object[]): Promise<{ port: number; hellos: Promise<unknown[]> }> {
  const tt = toolTransport({ transport: 'tcp' });
  const listener = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  const hellos = (async () => {
    const got: unknown[] = [];
    const conns: LlpConnection[] = [];
    listener.connections$.pipe(take(answers.length)).subscribe((c) => conns.push(c));
    for (const answer of answers) {
      while (conns.length === 0) await new Promise((r) => setTimeout(r, 10));
      const conn = conns.shift() as LlpConnection;
      const s = new PerfSession(conn, {
        profile: tt.profileOf(conn),
        rdmapFactory: tt.rdmapFactory,
        maxSendWr: 4,
        maxRecvWr: 4,
      });
      const rx = s.register(new Uint8Array(64 * 1024), Access.LocalWrite);
      s.repost(rx.sge());
      const r = await s.recv();
      got.push(JSON.parse(new TextDecoder().decode(rx.buffer.subarray(0, r.byteLength))));
      const out = s.register(new TextEncoder().encode(JSON.stringify(answer)), Access.LocalRead);
      await s.qp.send(out.sge());
      await firstValueFrom(conn.closed$).catch(() => {});
    }
    await listener.close();
    return got;
  })();
  return { port: listener.address.port as number, hellos };
}

describe('rddp perf: the control protocol has a version (issue 37)', () => {
  it('a server meeting an old HELLO (no version): REFUSED naming both versions, then one line and exit 1', async () => {
    const port = await freePort();
    const server = procs.run(['perf', 'write_bw', '-p', String(port)]);
    await listening(server.child);
    const raw = await rawMpaPeer(port);
    try {
      raw.socket.write(sendFpdu(1, new TextEncoder().encode(OLD_HELLO)));
      await closedWithin(raw, 10_000);
      const sends = ulpdus(raw.received()).filter((f) => f.opcode === 0x3);
      expect(sends.map((f) => JSON.parse(f.payload.toString()))).toEqual([
        { type: 'refused', version: 2, reason: 'the perf client speaks perf protocol 1, this server 2' },
      ]);
    } finally {
      raw.socket.destroy();
    }
    const s = await server.done;
    expect(s.code).toBe(1);
    expect(s.out).toBe('');
    expect(s.err.split('\n').filter((l) => l !== '' && !l.includes('listening'))).toEqual([
      'rddp: the perf client speaks perf protocol 1, this server 2 (ERR_PERF_VERSION)',
    ]);
  }, 60_000);

  it('a client meeting an old server (READY without a version) or a newer one: one line naming both, exit 1', async () => {
    const fake = await fakeServer([
      { type: 'ready', addr: '4096', rkey: 1, pid: 1 },
      { type: 'refused', version: 3, reason: 'the perf client speaks perf protocol 2, this server 3' },
      { type: 'refused', reason: 'busy: 4096 octets of buffers asked' },
    ]);
    const args = ['perf', 'write_bw', '127.0.0.1', '-p', String(fake.port), '-n', '10', '-s', '4096'];
    const said = [
      'the perf server speaks perf protocol 1, this client 2',
      // A REFUSED of another version says why, whatever the version.
      'the perf server speaks perf protocol 3, this client 2; it refused the run: the perf client speaks perf protocol 2, this server 3',
      'the perf server speaks perf protocol 1, this client 2; it refused the run: busy: 4096 octets of buffers asked',
    ];
    for (const line of said) {
      const c = await procs.run(args).done;
      expect(c.code).toBe(1);
      expect(c.out).not.toContain('#bytes');
      expect(c.err).toBe(`rddp: ${line} (ERR_PERF_VERSION)\n`);
    }
    // The client said its version in each HELLO.
    expect((await fake.hellos).map((h) => (h as { version?: unknown }).version)).toEqual([2, 2, 2]);
  }, 60_000);
});
