/**
 * `rddp rping -s` as librdmacm's rping server: `-P` serves clients concurrently until SIGINT/SIGTERM (a
 * failing client ends only its own connection), the README's rping walkthrough runs as written, and the
 * server's go-ahead and done Sends carry the 16 zero octets rping.c's never-formatted send buffer holds.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { endsWithin, freePort, startedProcesses, stderrMatches } from './procs.js';
import { closedWithin, rawMpaPeer, sendFpdu, ulpdus } from './raw-rdmap.js';

const { run } = startedProcesses();

describe("README: the rping walkthrough (the Tools section's `tools/rddp rping` lines) runs as written", () => {
  it('the server line, then every client line against it; Ctrl-C ends the server with status 0', async () => {
    const readme = readFileSync(path.resolve(__dirname, '../../../README.md'), 'utf8');
    const tools = readme.slice(readme.indexOf('## Tools'));
    const commands = tools
      .split('\n')
      .filter((l) => l.startsWith('tools/rddp rping '))
      .map((l) => (l.split('#')[0] as string).trim().split(/\s+/).slice(1));
    const [serverLine, ...clientLines] = commands;
    expect(serverLine).toContain('-s');
    expect(clientLines.length).toBeGreaterThanOrEqual(2);
    const server = run(serverLine as string[]);
    await stderrMatches(server.child, /listening on/);
    for (const line of clientLines) {
      const c = await endsWithin(run(line), 60_000);
      expect({ line: line.join(' '), code: c.code, err: c.err }).toEqual({ line: line.join(' '), code: 0, err: '' });
    }
    server.child.kill('SIGINT'); // Ctrl-C
    const s = await endsWithin(server);
    expect(s.code).toBe(0);
    const served = s.err.split('\n').filter((l) => / served \d+ pings$/.test(l));
    expect(served).toHaveLength(clientLines.length);
  }, 180_000);
});

describe('rping -s -P: a persistent server, every client on its own', () => {
  it('serves a client while another is connected and idle; a failing client ends only itself; SIGTERM: exit 0', async () => {
    const port = await freePort();
    const server = run(['rping', '-s', '-P', '-a', '127.0.0.1', '-p', String(port)]);
    await stderrMatches(server.child, /listening on/);
    // A client that connects and then says nothing: a one-client-at-a-time server would stall on it.
    const idle = await rawMpaPeer(port);
    const c1 = await endsWithin(run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '20', '-V']), 30_000);
    expect(c1.code).toBe(0);
    // The idle client now fails: a 4-octet advertisement gets the Terminate and the close (rping-hostile.test.ts).
    idle.socket.write(sendFpdu(1, new Uint8Array(4)));
    await closedWithin(idle, 10_000);
    idle.socket.destroy();
    expect(ulpdus(idle.received()).some((f) => f.opcode === 0x7)).toBe(true);
    // Three clients at once, then one more: all served, the server still up.
    const three = await Promise.all(
      [1, 2, 3].map(() =>
        endsWithin(run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '50', '-S', '4096', '-V']), 60_000),
      ),
    );
    expect(three.map((r) => r.code)).toEqual([0, 0, 0]);
    const big = await endsWithin(
      run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '1', '-S', '67108865']),
      30_000,
    );
    expect(big.code).toBe(1);
    const last = await endsWithin(run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '5']), 30_000);
    expect(last.code).toBe(0);
    server.child.kill('SIGTERM');
    const s = await endsWithin(server);
    expect(s.code).toBe(0);
    const perClient = s.err.split('\n').filter((l) => /^rping: 127\.0\.0\.1:\d+: /.test(l));
    expect(perClient.filter((l) => l.endsWith(': served 20 pings'))).toHaveLength(1);
    expect(perClient.filter((l) => l.endsWith(': served 50 pings'))).toHaveLength(3);
    expect(perClient.filter((l) => l.endsWith(': served 5 pings'))).toHaveLength(1);
    expect(
      perClient.filter((l) => l.endsWith(': failed: Received bogus data, size 4 (ERR_RPING_BOGUS_DATA)')),
    ).toHaveLength(1);
    expect(perClient.filter((l) => l.includes(': failed: client advertised 67108865 octets'))).toHaveLength(1);
    expect(perClient).toHaveLength(7); // one line per client, nothing else
  }, 240_000);

  it('--max-clients 1: a second client while one is served is refused; the server goes on', async () => {
    const port = await freePort();
    const server = run(['rping', '-s', '-P', '-p', String(port), '--max-clients', '1']);
    await stderrMatches(server.child, /listening on/);
    const idle = await rawMpaPeer(port);
    const refused = await endsWithin(run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '1']), 30_000);
    expect(refused.code).toBe(1);
    idle.socket.destroy();
    await stderrMatches(server.child, /served 0 pings/);
    const served = await endsWithin(run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '3']), 30_000);
    expect(served.code).toBe(0);
    server.child.kill('SIGINT');
    const s = await endsWithin(server);
    expect(s.code).toBe(0);
    expect(s.err).toMatch(/: refused: 1 clients served at once \(--max-clients 1\)/);
    expect(s.err).toMatch(/: served 3 pings/);
  }, 120_000);

  it('--max-memory: a client whose buffer does not fit gets a Terminate; a smaller one is served', async () => {
    const port = await freePort();
    // One source may hold all of it here (by default a quarter: rping-bounds.test.ts).
    const server = run([
      'rping',
      '-s',
      '-P',
      '-p',
      String(port),
      '--max-memory',
      '100000',
      '--max-memory-per-source',
      '100000',
    ]);
    await stderrMatches(server.child, /listening on/);
    const big = await endsWithin(
      run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '1', '-S', '200000']),
      30_000,
    );
    expect(big.code).toBe(1);
    expect(big.err).toMatch(/^rddp: the peer terminated the connection/);
    const small = await endsWithin(
      run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '2', '-S', '50000', '-V']),
      30_000,
    );
    expect(small.code).toBe(0);
    server.child.kill('SIGINT');
    const s = await endsWithin(server);
    expect(s.code).toBe(0);
    expect(s.err).toMatch(
      /failed: busy: a buffer of 200000 octets asked, \d+ of --max-memory 100000 in use \(ERR_RPING_SERVER_BUSY\)/,
    );
  }, 120_000);
});

describe("rping -s: the go-ahead and done Sends are rping.c's unformatted send buffer", () => {
  it('every Send from the server carries 16 zero octets (seen on the wire through a TCP relay)', async () => {
    const serverPort = await freePort();
    const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', String(serverPort), '-d']);
    await stderrMatches(server.child, /listening on/);
    const fromServer: Buffer[] = [];
    const relay = net.createServer((c) => {
      const u = net.connect(serverPort, '127.0.0.1');
      u.on('data', (d: Buffer) => fromServer.push(d));
      c.pipe(u);
      u.pipe(c);
      c.on('error', () => u.destroy());
      u.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const relayPort = (relay.address() as net.AddressInfo).port;
    try {
      const c = await endsWithin(
        run(['rping', '-c', '-a', '127.0.0.1', '-p', String(relayPort), '-C', '3', '-V']),
        30_000,
      );
      expect(c.code).toBe(0);
      expect((await endsWithin(server, 10_000)).code).toBe(0);
    } finally {
      relay.close();
    }
    // RFC 5040 §4.3: Sends are RDMAP opcode 0x3, untagged; two per ping (go-ahead, done).
    const sends = ulpdus(Buffer.concat(fromServer)).filter((f) => f.opcode === 0x3 && !f.tagged);
    expect(sends).toHaveLength(6);
    for (const s of sends) expect(s.payload.toString('hex')).toBe('00'.repeat(16));
  }, 60_000);
});
