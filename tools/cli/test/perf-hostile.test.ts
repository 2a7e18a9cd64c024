/**
 * `rddp perf` servers against raw clients whose HELLO asks for what the server must not give: every
 * field is checked against server-side limits, a bad HELLO is answered with REFUSED and the connection
 * closed, the server's memory stays put, and honest clients are served afterwards.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endsWithin, freePort, outputMatches, run } from './procs.js';
import { closedWithin, rawMpaPeer, rssOf, sendFpdu, ulpdus } from './raw-rdmap.js';

async function waitForListening(server: ChildProcess): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    server.stderr?.on('data', (d) => {
      seen += d;
      if (seen.includes('listening')) resolve();
    });
    server.once('exit', (c) => reject(new Error(`server exited ${c}: ${seen}`)));
  });
}

const honest = { test: 'read_bw', sizes: [4096], iters: 10, txDepth: 16, verify: true };
function hello(params: Record<string, unknown>, top: Record<string, unknown> = {}): string {
  return JSON.stringify({
    type: 'hello',
    version: 2,
    params: { ...honest, ...params },
    addr: '139637976727552',
    rkey: 1,
    ...top,
  });
}

/** Sends one HELLO from a raw peer; resolves with the server's answer (a Send's JSON) once it closed. */
async function sendHello(port: number, text: string): Promise<{ answer: unknown; fin: boolean }> {
  const raw = await rawMpaPeer(port);
  raw.socket.write(sendFpdu(1, new TextEncoder().encode(text)));
  try {
    const closed = await closedWithin(raw, 10_000);
    const sends = ulpdus(raw.received()).filter((f) => f.opcode === 0x3);
    expect(sends.length, 'the server answered with one Send').toBe(1);
    return { answer: JSON.parse(sends[0]?.payload.toString() ?? ''), fin: closed.fin };
  } finally {
    raw.socket.destroy();
  }
}

const hostile: [string, string, RegExp][] = [
  [
    'sizes [2147483647]',
    hello({ sizes: [2147483647] }),
    /sizes\[0\] 2147483647 is over this server's --max-size 8388608/,
  ],
  ['sizes [1e12]', hello({ sizes: [1e12] }), /sizes\[0\] 1000000000000 is over this server's --max-size 8388608/],
  ['invalid JSON', '{"type":"hello","params":{"test":"read_bw","sizes":[4096', /HELLO of \d+ octets is not JSON/],
  ['a negative size', hello({ sizes: [-4096] }), /sizes\[0\] -4096 is under 1/],
  ['a fractional size', hello({ sizes: [4096.5] }), /sizes\[0\] 4096\.5 is not an integer/],
  ['sizes as a string', hello({ sizes: '4096' }), /sizes is not a non-empty array/],
  ['65 sizes', hello({ sizes: Array(65).fill(2) }), /65 sizes, over this server's 64/],
  ['negative iterations', hello({ iters: -5 }), /iters -5 is under 1/],
  ['fractional iterations', hello({ iters: 0.5 }), /iters 0\.5 is not an integer/],
  ['iterations 1e300', hello({ iters: 1e300 }), /iters 1e\+300 is over/],
  ['a tx-depth of 2^40', hello({ txDepth: 2 ** 40 }), /txDepth 1099511627776 is over this server's 4096/],
  ['durationS 0', hello({ durationS: 0 }), /durationS 0 is under 1/],
  ['verify "yes"', hello({ verify: 'yes' }), /verify "yes" is not a boolean/],
  ['an unknown test', hello({ test: 'rm -rf /' }), /unknown test "rm -rf \/"/],
  ['another test than the server runs', hello({ test: 'write_bw' }), /this server runs read_bw, not write_bw/],
  ['an addr that is no Tagged Offset', hello({}, { addr: '0x10' }), /addr "0x10" is not a 64-bit Tagged Offset/],
  ['an addr past 2^64', hello({}, { addr: '18446744073709551616' }), /addr .* is not a 64-bit Tagged Offset/],
  ['an rkey of -1', hello({}, { rkey: -1 }), /rkey -1 is under 0/],
  ['no params', JSON.stringify({ type: 'hello', version: 2 }), /HELLO without params/],
  ['a JSON array', '[1,2,3]', /the first message is not a HELLO/],
  ['bidirectional "yes"', hello({ bidirectional: 'yes' }), /bidirectional "yes" is not a boolean/],
  ['a -b HELLO without its back region', hello({ bidirectional: true }), /a -b HELLO without the back region/],
  [
    '-b to a server not given -b',
    hello({ bidirectional: true }, { back: { addr: '4096', rkey: 2 } }),
    /this server runs one direction, the client asked for -b/,
  ],
  ['outs 0', hello({ outs: 0 }), /outs 0 is under 1/],
  ['a warm-up of 2^40', hello({}, { warmUp: 2 ** 40 }), /warmUp 1099511627776 is over this server's 1000000/],
  ['8 MiB over a 4 MiB --max-memory', hello({ sizes: [8 << 20] }), /over this server's --max-memory 4194304/],
];

describe('rddp perf --persistent: hostile HELLOs are refused, honest clients served', () => {
  let port = 0;
  let server: ReturnType<typeof run>;
  let rss0 = 0;
  let stderr = '';

  beforeAll(async () => {
    port = await freePort();
    server = run(['perf', 'read_bw', '-p', String(port), '--persistent', '--max-memory', String(4 << 20)]);
    server.child.stderr?.on('data', (d) => (stderr += d));
    await waitForListening(server.child);
    rss0 = rssOf(server.child.pid as number);
  }, 30_000);

  afterAll(async () => {
    server.child.kill();
    await server.done;
  });

  for (const [name, text, reason] of hostile) {
    it(`${name}: REFUSED with the reason, the connection closed, the server's RSS steady`, async () => {
      const r = await sendHello(port, text);
      expect(r.answer).toMatchObject({ type: 'refused' });
      expect((r.answer as { reason: string }).reason).toMatch(reason);
      expect(r.fin).toBe(true);
      expect(rssOf(server.child.pid as number) - rss0).toBeLessThan(64 << 20);
    }, 30_000);
  }

  it('an honest client is served afterwards, twice; the server logged each refusal on one line', async () => {
    for (let i = 0; i < 2; i++) {
      const c = await run(['perf', 'read_bw', '127.0.0.1', '-p', String(port), '-n', '50', '-s', '4096']).done;
      expect(c.err).toBe('');
      expect(c.code).toBe(0);
      expect(c.out).toMatch(/\n 4096\s+50\s+\d/);
    }
    expect(server.child.exitCode).toBe(null);
    const refusals = (await until(() => stderr.split('\n').filter((l) => l.includes("refused a client's HELLO"))))
      .length;
    expect(refusals).toBe(hostile.length);
  }, 60_000);

  it('a real -b client: refused with the reason (this server was not given -b), and it says so on one line', async () => {
    const c = await run(['perf', 'read_bw', '127.0.0.1', '-p', String(port), '-n', '10', '-s', '4096', '-b']).done;
    expect(c.code).toBe(1);
    expect(c.out).toBe('');
    expect(c.err).toBe(
      'rddp: server refused: this server runs one direction, the client asked for -b (bidirectional): give -b to both ends (ERR_PERF_SERVER_REFUSED)\n',
    );
    expect(server.child.exitCode).toBe(null);
  }, 30_000);

  async function until(f: () => string[]): Promise<string[]> {
    for (let i = 0; i < 50 && f().length < hostile.length; i++) await new Promise((r) => setTimeout(r, 100));
    return f();
  }
});

describe('rddp perf, one-shot server: a refused HELLO ends it with one line', () => {
  it('a raw HELLO for 2 GiB: REFUSED, the close, the server exits 1 with one line, memory never allocated', async () => {
    const port = await freePort();
    const server = run(['perf', 'read_bw', '-p', String(port)]);
    await waitForListening(server.child);
    const rss0 = rssOf(server.child.pid as number);
    try {
      const r = await sendHello(port, hello({ sizes: [2147483647] }));
      expect(r.answer).toMatchObject({ type: 'refused' });
      expect(rssOf(server.child.pid as number) - rss0).toBeLessThan(64 << 20);
    } finally {
      const kill = setTimeout(() => server.child.kill(), 5000);
      server.done.finally(() => clearTimeout(kill));
    }
    const s = await server.done;
    expect(s.code).toBe(1);
    const lines = s.err.split('\n').filter((l) => l !== '' && !l.includes('listening'));
    expect(lines).toEqual([
      "rddp: refused a client's HELLO: sizes[0] 2147483647 is over this server's --max-size 8388608 (ERR_PERF_HELLO_REFUSED)",
    ]);
  }, 60_000);

  it('invalid JSON: REFUSED, the close, exit 1', async () => {
    const port = await freePort();
    const server = run(['perf', 'write_bw', '-p', String(port)]);
    await waitForListening(server.child);
    try {
      const r = await sendHello(port, '{"type":"hello",');
      expect(r.answer).toMatchObject({ type: 'refused', reason: 'HELLO of 16 octets is not JSON' });
    } finally {
      const kill = setTimeout(() => server.child.kill(), 5000);
      server.done.finally(() => clearTimeout(kill));
    }
    const s = await server.done;
    expect(s.code).toBe(1);
    expect(s.err).toContain('HELLO of 16 octets is not JSON (ERR_PERF_HELLO_REFUSED)');
  }, 60_000);

  it('a real client over --max-size prints "server refused: <reason>" and exits non-zero', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port, '--max-size', '4096']);
    await waitForListening(server.child);
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-s', '65536', '-n', '10']).done;
    const s = await server.done;
    expect(c.code).toBe(1);
    expect(c.err).toBe(
      "rddp: server refused: sizes[0] 65536 is over this server's --max-size 4096 (ERR_PERF_SERVER_REFUSED)\n",
    );
    expect(s.code).toBe(1);
  }, 60_000);
});

describe('rddp perf: a client that stops or dies in mid-run', () => {
  const lines = (s: string) => s.split('\n').filter((l) => l !== '' && !l.includes('listening'));

  it('-b: a client that sends its HELLO and then nothing: the wait for START is bounded, one line, the close', async () => {
    const port = await freePort();
    // RDDP_PERF_STEP_TIMEOUT_MS: the engine's hook for tests (30 s otherwise); set for this spawn only.
    process.env.RDDP_PERF_STEP_TIMEOUT_MS = '1000';
    let server: ReturnType<typeof run>;
    try {
      server = run(['perf', 'write_bw', '-p', String(port), '-b']);
    } finally {
      delete process.env.RDDP_PERF_STEP_TIMEOUT_MS;
    }
    await waitForListening(server.child);
    const raw = await rawMpaPeer(port);
    const kill = setTimeout(() => server.child.kill(), 15_000);
    try {
      raw.socket.write(
        sendFpdu(
          1,
          new TextEncoder().encode(
            hello({ test: 'write_bw', bidirectional: true }, { back: { addr: '4096', rkey: 2 } }),
          ),
        ),
      );
      await closedWithin(raw, 10_000);
      const sends = ulpdus(raw.received()).filter((f) => f.opcode === 0x3);
      expect(JSON.parse(sends[0]?.payload.toString() ?? '')).toMatchObject({ type: 'ready' });
      const s = await server.done;
      expect(s.code).toBe(1);
      expect(lines(s.err)).toEqual([
        "rddp: timed out after 1000 ms waiting for the -b client's START (ERR_PERF_STEP_TIMEOUT)",
      ]);
    } finally {
      clearTimeout(kill);
      raw.socket.destroy();
    }
  }, 30_000);

  it('write_lat: the client killed (SIGKILL) in mid-run: the server names the peer ending, not a failed Write back', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_lat', '-p', port]);
    await waitForListening(server.child);
    const client = run(['perf', 'write_lat', '127.0.0.1', '-p', port, '-D', '30', '-s', '4096']);
    const kill = setTimeout(() => server.child.kill(), 15_000);
    try {
      await outputMatches(client.child, 'stdout', /#bytes/);
      await new Promise((r) => setTimeout(r, 500)); // in the run: Writes and Writes back flowing
      client.child.kill('SIGKILL');
      const s = await endsWithin(server);
      expect(s.code).toBe(1);
      expect(lines(s.err)).toHaveLength(1);
      expect(s.err).toMatch(/^rddp: the peer (reset|closed) the connection in mid-run/m);
      expect(s.err).not.toContain('ERR_PERF_WRITE_BACK');
    } finally {
      clearTimeout(kill);
      client.child.kill();
    }
  }, 30_000);
});
