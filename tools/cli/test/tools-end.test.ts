/**
 * How `tools/rddp` processes end: every fatal error ends the process within 5 s with a non-zero status
 * and one line on stderr (bad flags: status 2); a closed stdout ends a command quietly (status 0); a peer
 * that ends the connection in mid-run is named as such, not by the operation it flushed.
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { endsWithin, freePort, outputMatches, startedProcesses } from './procs.js';

const { run } = startedProcesses();

const lines = (s: string) => s.split('\n').filter((l) => l !== '');

/** Numeric flags out of range, one per command: each is a usage error, exit 2, one line, at once. */
const badFlags: [string, string[], RegExp][] = [
  ['demo --max-size 99999999999', ['demo', '--max-size', '99999999999'], /--max-size/],
  ['demo -C 0', ['demo', '-C', '0'], /-C, --pings/],
  ['demo -C abc', ['demo', '-C', 'abc'], /-C, --pings/],
  ['demo --max-size 0', ['demo', '--max-size', '0'], /--max-size/],
  ['demo --max-size 1', ['demo', '--max-size', '1'], /--max-size/],
  ['demo --max-size abc', ['demo', '--max-size', 'abc'], /--max-size/],
  ['rping -c -C abc', ['rping', '-c', '-C', 'abc'], /-C <count>/],
  ['rping -c -S 1e99', ['rping', '-c', '-S', '1e99'], /-S <size>/],
  ['rping -s -p 70000', ['rping', '-s', '-p', '70000'], /-p <port>/],
  ['rping -s --max-ulpdu 70000', ['rping', '-s', '--max-ulpdu', '70000'], /--max-ulpdu/],
  ['perf write_bw --max-ulpdu 1000', ['perf', 'write_bw', '--max-ulpdu', '1000'], /--max-ulpdu/],
  ['attack --seconds 0', ['attack', '--seconds', '0'], /--seconds/],
  ['perf write_bw -n 0', ['perf', 'write_bw', '127.0.0.1', '-n', '0'], /-n, --iters/],
  ['perf write_bw -D abc', ['perf', 'write_bw', '127.0.0.1', '-D', 'abc'], /-D, --duration/],
  ['perf write_bw -s 99999999999', ['perf', 'write_bw', '-s', '99999999999'], /-s, --size/],
  ['perf write_bw --outstanding 0', ['perf', 'write_bw', '--loopback', '--outstanding', '0'], /--outstanding/],
  ['bench --rounds 0', ['bench', '--rounds', '0'], /--rounds/],
  ['bench --warmup abc', ['bench', '--warmup', 'abc'], /--warmup/],
  ['soak --minutes abc', ['soak', '--minutes', 'abc'], /--minutes/],
  ['fuzz --seed abc', ['fuzz', '--seed', 'abc'], /--seed/],
  ['sctp-experiment -s 99999999999', ['sctp-experiment', '-s', '99999999999'], /-s, --size/],
  ['sctp-experiment --streams 1,x', ['sctp-experiment', '--streams', '1,x'], /--streams/],
];

describe('numeric flags: a value out of range is a usage error (exit 2, one line) before anything runs', () => {
  for (const [name, args, flag] of badFlags) {
    it(name, async () => {
      const r = await endsWithin(run(args));
      expect(r.code).toBe(2);
      expect(lines(r.err)).toHaveLength(1);
      expect(r.err).toMatch(/^rddp: /);
      expect(r.err).toMatch(flag);
      expect(r.err).toMatch(/is invalid/);
      expect(r.out).toBe('');
    }, 30_000);
  }
});

describe('a server that refuses a run: both ends end, the client with one line saying why', () => {
  it('rping -c -S 67108865 against a server that follows clients up to 64 MiB: a Terminate, both exit 1', async () => {
    const port = String(await freePort());
    const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', port, '-d']);
    await outputMatches(server.child, 'stderr', /listening on/);
    const client = run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-C', '1', '-S', '67108865']);
    const [c, s] = await Promise.all([endsWithin(client, 15_000), endsWithin(server, 15_000)]);
    expect(s.code).toBe(1);
    expect(s.err).toContain('client advertised 67108865 octets, over');
    expect(c.code).toBe(1);
    // The client says the server ended the connection (RFC 5040 §5.4 Terminate), not which receive it flushed.
    expect(lines(c.err)).toEqual([
      'rddp: the peer terminated the connection: RDMA: Remote Operation Error: Unspecified Error (ERR_RDDP_PEER_TERMINATED)',
    ]);
  }, 40_000);
});

describe('a peer killed in mid-run is reported as gone, not as a flushed operation', () => {
  it('rping -c: the server killed (SIGKILL) while pinging; the client exits 1 within 5 s, one line', async () => {
    const port = String(await freePort());
    const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', port, '-d']);
    await outputMatches(server.child, 'stderr', /listening on/);
    const client = run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-S', '4096']); // pings forever
    await outputMatches(server.child, 'stderr', /ping 20: done/);
    server.child.kill('SIGKILL');
    const c = await endsWithin(client);
    expect(c.code).toBe(1);
    expect(lines(c.err)).toHaveLength(1);
    expect(c.err).toMatch(
      /^rddp: the peer (reset|closed) the connection in mid-run.* \((ERR_RDDP_PEER_RESET|ERR_RDDP_PEER_CLOSED)\)\n$/,
    );
    expect(c.err).not.toContain('flushed');
  }, 60_000);

  it('perf client: the server killed (SIGKILL) during a -D 30 run; the client exits 1 within 5 s, one line', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port]);
    await outputMatches(server.child, 'stderr', /listening/);
    const client = run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-D', '30', '-s', '4096']);
    await outputMatches(client.child, 'stdout', /#bytes/);
    await new Promise((r) => setTimeout(r, 500)); // in the run: HELLO answered, Writes flowing
    server.child.kill('SIGKILL');
    const c = await endsWithin(client);
    expect(c.code).toBe(1);
    expect(lines(c.err)).toHaveLength(1);
    expect(c.err).toMatch(/^rddp: the peer (reset|closed) the connection in mid-run/);
  }, 60_000);
});

describe('a closed stdout ends a command quietly, as Unix tools do', () => {
  it('perf -a | head -3: exit 0, no EPIPE on stderr', async () => {
    const p = run(['perf', 'write_bw', '--loopback', '--transport', 'loopback', '-a', '-n', '200']);
    // head -3: read the first lines, then close the pipe while the tool is still printing.
    await outputMatches(p.child, 'stdout', /#bytes/);
    p.child.stdout?.destroy();
    const r = await endsWithin(p, 30_000);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
  }, 60_000);

  it('the same through a shell pipeline into head -3', async () => {
    const { spawn } = await import('node:child_process');
    const { RDDP } = await import('./procs.js');
    const sh = spawn(
      'bash',
      ['-c', `set -o pipefail; "${RDDP}" perf write_bw --loopback --transport loopback -a -n 200 | head -3`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    sh.stdout.on('data', (d) => (out += d));
    sh.stderr.on('data', (d) => (err += d));
    const [code] = await once(sh, 'exit');
    expect(lines(out)).toHaveLength(3);
    expect(err).toBe('');
    expect(code).toBe(0);
  }, 60_000);
});

describe('perf: the server refuses a run other than its own flags fix (perftest exchanges its parameters)', () => {
  for (const [name, serverFlags, clientFlags, reason] of [
    [
      '-s 4096 against a client -s 65536',
      ['-s', '4096'],
      ['-s', '65536'],
      'this server runs -s 4096, the client asked for -s 65536',
    ],
    ['-s 4096 against a client -a', ['-s', '4096'], ['-a'], 'this server runs -s 4096, the client asked for -a'],
    [
      '-n 100 against a client -n 1000',
      ['-n', '100'],
      ['-n', '1000'],
      'this server runs -n 100, the client asked for -n 1000',
    ],
  ] as const) {
    it(`${name}: REFUSED with the reason, both ends exit 1 with one line`, async () => {
      const port = String(await freePort());
      const server = run(['perf', 'write_bw', '-p', port, ...serverFlags]);
      await outputMatches(server.child, 'stderr', /listening/);
      const client = run(['perf', 'write_bw', '127.0.0.1', '-p', port, ...clientFlags]);
      const [c, s] = await Promise.all([endsWithin(client, 15_000), endsWithin(server, 15_000)]);
      expect(c.code).toBe(1);
      expect(lines(c.err)).toEqual([`rddp: server refused: ${reason} (ERR_PERF_SERVER_REFUSED)`]);
      expect(s.code).toBe(1);
      expect(lines(s.err).filter((l) => !l.includes('listening'))).toEqual([
        `rddp: refused a client's HELLO: ${reason} (ERR_PERF_HELLO_REFUSED)`,
      ]);
      expect(s.out).not.toContain('BW Test');
    }, 40_000);
  }

  it('--persistent -s 4096: a client -s 65536 is refused, a client -s 4096 served; defaults follow the client', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port, '-s', '4096', '--persistent']);
    await outputMatches(server.child, 'stderr', /listening/);
    const other = await endsWithin(run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-n', '50']), 15_000);
    expect(other.code).toBe(1);
    const same = await endsWithin(run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-s', '4096', '-n', '50']), 15_000);
    expect(same.code).toBe(0);
    server.child.kill('SIGINT');
    const s = await endsWithin(server);
    expect(s.code).toBe(0);
    expect(s.err).toContain('this server runs -s 4096, the client asked for -s 65536');
    expect(s.out).toMatch(/^ 4096 +50 /m); // the served client's run (-n from the client: the server gave none)
    expect(s.out).not.toMatch(/^ 65536 /m);
  }, 40_000);

  it('--bind_source_ip: the server says where it listens and accepts there only', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port, '--bind_source_ip', '127.0.0.1']);
    const start = await outputMatches(server.child, 'stderr', /listening/);
    expect(start).toContain(`listening on 127.0.0.1:${port}`);
    // 127.0.0.2 is a loopback address too, but not the bound one.
    const elsewhere = await endsWithin(run(['perf', 'write_bw', '127.0.0.2', '-p', port, '-n', '10']), 20_000);
    expect(elsewhere.code).toBe(1);
    const here = await endsWithin(run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-n', '10']), 15_000);
    expect(here.code).toBe(0);
    expect((await endsWithin(server, 15_000)).code).toBe(0);
  }, 60_000);

  it('without --bind_source_ip the server says it listens on 0.0.0.0; --persistent ends at SIGINT with 0', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port, '--persistent']);
    const start = await outputMatches(server.child, 'stderr', /listening/);
    expect(start).toContain(`listening on 0.0.0.0:${port}`);
    server.child.kill('SIGINT'); // Ctrl-C
    expect((await endsWithin(server)).code).toBe(0);
  }, 30_000);
});
