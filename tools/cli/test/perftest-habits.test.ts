/**
 * Issue 37: `rddp perf` and `rddp rping` take perftest's and rping's habits (flags, ib_send_lat's columns,
 * a header naming what decides the figure), `rddp doctor` shows the backends, and a pinned backend that
 * is missing is an error. Each runs the CLI as a separate process.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_MEMORY_BUDGET } from '@rddp/llp';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../src/index.js';
import { type Ended, freePort, nodeWith, outputMatches, startedProcesses } from './procs.js';

const MAIN = path.resolve(__dirname, '../dist/main.js');

const procs = startedProcesses();

/** `node dist/main.js args…` with `env` added (and the missing-modules fake where `missing` names some). */
function cli(
  args: string[],
  env: Record<string, string> = {},
  missing?: string,
): { child: ChildProcess; done: Promise<Ended> } {
  const p = nodeWith([MAIN, ...args], { env, ...(missing ? { missing } : {}) });
  procs.track(p.child);
  return p;
}

beforeAll(async () => {
  // tools/rddp rebuilds dist when a source is newer; dist/main.js is run directly below.
  const r = procs.run(['--version']);
  expect((await r.done).code).toBe(0);
}, 180_000);

describe('rddp perf: perftest flags (issue 37)', () => {
  it('`perf write_bw <server> -d siw0 -F -R -e --report_gbits` runs and reports Gb/sec and the device', async () => {
    const port = String(await freePort());
    const server = procs.run(['perf', 'write_bw', '-p', port, '-n', '200', '-d', 'siw0', '-F', '-R', '--events']);
    await outputMatches(server.child, 'stderr', /listening/);
    const client = await procs.run([
      'perf',
      'write_bw',
      '127.0.0.1',
      '-p',
      port,
      '-n',
      '200',
      '-d',
      'siw0',
      '-F',
      '-R',
      '-e',
      '--report_gbits',
    ]).done;
    expect(client.code, client.err).toBe(0);
    // perftest's -e line, where perftest prints it: right under the title.
    const events = " Test with events: rddp's completions always arrive as events (-e changes nothing)";
    expect(client.out.split('\n')[2]).toBe(events);
    expect(client.out).toMatch(/Device\s+: siw0/);
    expect(client.out).toContain('BW peak[Gb/sec]    BW average[Gb/sec]');
    expect(client.out).toMatch(/Data ex\. method: .*-R/);
    // Everything that decides the figure: MPA revision, CRC and its backend, send path, congestion, QPs, streams.
    expect(client.out).toMatch(/MPA revision\s+: 1/);
    expect(client.out).toMatch(/CRC\s+: on \((@rddp\/crc32c-isal|sse4_crc32|@node-rs\/crc32)\)/);
    expect(client.out).toMatch(/Send path\s+: (direct \(sendmsg via @rddp\/writev\)|Node's socket)/);
    expect(client.out).toMatch(/Congestion\s+: \S+/);
    expect(client.out).toMatch(/Number of qps\s+: 1\s+Streams: 1/);
    const row = client.out.split('\n').find((l) => /^ 65536\s/.test(l));
    const [, , peak, avg] = (row ?? '').trim().split(/\s+/).map(Number);
    // Gb/sec: 10^9 bits a second, so 64 KiB Writes on loopback are well under 1000 of them.
    expect(peak).toBeGreaterThan(0);
    expect(avg).toBeLessThan(1000);
    const served = await server.done;
    expect(served.code, served.err).toBe(0);
    expect(served.out).toMatch(/Device\s+: siw0/);
    expect(served.out).toContain('BW peak[MB/sec]'); // the server was not given --report_gbits
    expect(served.out).toContain(events);
  }, 60_000);

  /** A -b pair of processes; resolves with both ends once they exited 0. */
  async function bothWays(test: string, args: string[], clientArgs: string[] = []): Promise<[Ended, Ended]> {
    const port = String(await freePort());
    const server = procs.run(['perf', test, '-p', port, '-b', ...args]);
    await outputMatches(server.child, 'stderr', /listening/);
    const client = await procs.run(['perf', test, '127.0.0.1', '-p', port, '-b', ...args, ...clientArgs]).done;
    expect(client.code, client.err).toBe(0);
    const served = await server.done;
    expect(served.code, served.err).toBe(0);
    for (const out of [client.out, served.out]) expect(out).toContain(' Bidirectional BW Test (rddp)');
    return [client, served];
  }
  const line = (out: string, size: number) => out.split('\n').find((l) => l.startsWith(` ${size} `));

  it('-b on both ends: read_bw and atomic_bw run both ways; both ends print the line of both directions', async () => {
    for (const [test, size] of [
      ['read_bw', 4096],
      ['atomic_bw', 8],
    ] as const) {
      const [client, served] = await bothWays(test, ['-n', '100', '-s', '4096']);
      // The server's own operations towards the client, verified (a failed check would say so).
      expect(served.err).toContain(`rddp perf: -b: 100 operations of ${size} octets towards the client\n`);
      expect(line(client.out, size), test).toMatch(new RegExp(`^ ${size}\\s+100\\s+\\d`));
      expect(line(served.out, size), test).toBe(line(client.out, size));
    }
    // perftest: "Bidirectional is only available in BW test"; send_bw's credits run one way here.
    for (const test of ['send_lat', 'send_bw']) {
      const bad = await cli(['perf', test, '--loopback', '-b']).done;
      expect(bad.code, test).toBe(2);
      expect(bad.err, test).toMatch(/^rddp: -b (applies to the bandwidth tests|runs write_bw, read_bw, atomic_bw)/);
    }
  }, 90_000);

  it('-b write_bw -D 1 --warm-up: both ends measure from one signal (the GO), so the two directions start together', async () => {
    // 8 MiB: filling a source this large takes tens of ms, so a server that filled it (or warmed up) after
    // START, rather than before answering it with GO, would start measuring visibly later than the client.
    const size = 8 << 20;
    const [client, served] = await bothWays('write_bw', ['-D', '1', '-s', String(size), '--debug'], ['--warm-up', '5']);
    // --debug: each end's measured span on this host's clock.
    const span = (err: string) => {
      const m = new RegExp(`-b: ${size} octets: this end's direction measured from ([\\d.]+) to ([\\d.]+)`).exec(err);
      expect(m, err).not.toBe(null);
      return [Number(m?.[1]), Number(m?.[2])] as const;
    };
    const [cFrom, cTo] = span(client.err);
    const [sFrom, sTo] = span(served.err);
    const overlap = Math.min(cTo, sTo) - Math.max(cFrom, sFrom);
    expect(overlap).toBeGreaterThan(0.5 * Math.min(cTo - cFrom, sTo - sFrom));
    // The server starts once its GO is sent, the client once it arrived: the server's start is no later
    // (a few ms of scheduling aside on a loaded machine), and the two are close: within 5 % of the span, or 40 ms.
    expect(sFrom, `server ${sFrom}, client ${cFrom}`).toBeLessThanOrEqual(cFrom + 20);
    const gap = Math.abs(cFrom - sFrom);
    expect(gap).toBeLessThan(Math.max(0.05 * Math.min(cTo - cFrom, sTo - sFrom), 40));
    expect(served.err).toMatch(new RegExp(`rddp perf: -b: \\d+ operations of ${size} octets towards the client\n`));
    expect(line(served.out, size)).toBe(line(client.out, size));
  }, 60_000);

  it('-b given to one end only, or -b with another -o than the server: refused with the reason', async () => {
    const port = String(await freePort());
    const server = procs.run(['perf', 'read_bw', '-p', port, '-b', '--persistent']);
    await outputMatches(server.child, 'stderr', /listening/);
    try {
      const client = (more: string[]) => procs.run(['perf', 'read_bw', '127.0.0.1', '-p', port, '-n', '10', ...more]);
      const [one, outs] = await Promise.all([client([]).done, client(['-b', '-o', '16']).done]);
      expect(one.code).toBe(1);
      expect(one.err).toBe(
        'rddp: server refused: this server runs -b (bidirectional), the client asked for one direction (ERR_PERF_SERVER_REFUSED)\n',
      );
      expect(outs.code).toBe(1);
      expect(outs.err).toBe(
        "rddp: server refused: this server's Reads and atomics run -o 128 under -b, the client asked for -o 16: give the same -o to both ends (ERR_PERF_SERVER_REFUSED)\n",
      );
    } finally {
      server.child.kill();
      await server.done;
    }
  }, 60_000);

  it("`--debug` is rddp perf's debug; -d takes a device name", async () => {
    const r = await cli(['perf', 'write_bw', '--loopback', '--transport', 'loopback', '-n', '10', '--debug']).done;
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('rddp perf: connected over');
    const bad = await cli(['perf', 'write_bw', '--loopback', '-d']).done;
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^rddp: option '-d, --ib-dev <dev>' argument missing/);
  }, 30_000);

  it("send_lat prints ib_send_lat's columns in ib_send_lat's order, with stdev, 99 % and 99.9 %", async () => {
    const r = await cli(['perf', 'send_lat', '--loopback', '-n', '300', '-s', '64']).done;
    expect(r.code, r.err).toBe(0);
    const lines = r.out.split('\n');
    const head = lines.find((l) => l.includes('#bytes')) ?? '';
    // perftest's RESULT_FMT_LAT, in its order.
    const columns = [
      '#bytes',
      '#iterations',
      't_min[usec]',
      't_max[usec]',
      't_typical[usec]',
      't_avg[usec]',
      't_stdev[usec]',
      '99% percentile[usec]',
      '99.9% percentile[usec]',
    ];
    expect(head.trim().replace(/\s+/g, ' ')).toBe(columns.join(' '));
    const row = lines[lines.indexOf(head) + 1] ?? '';
    const [bytes, iters, min, max, typical, avg, stdev, p99, p999] = row.trim().split(/\s+/).map(Number);
    expect([bytes, iters]).toEqual([64, 300]);
    for (const v of [min, max, typical, avg, stdev, p99, p999]) expect(Number.isFinite(v)).toBe(true);
    expect(min).toBeLessThanOrEqual(typical as number);
    expect(typical).toBeLessThanOrEqual(p99 as number);
    expect(p99).toBeLessThanOrEqual(p999 as number);
    expect(p999).toBeLessThanOrEqual(max as number);
    expect(stdev).toBeGreaterThanOrEqual(0);
  }, 30_000);

  it('`perf --loopback --out --report_gbits`: the saved table is the printed one, MPA lines too; the chart in Gb/sec', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'rddp-out-'));
    try {
      const r = await cli(['perf', 'write_bw', '--loopback', '-n', '50', '--out', dir, '--report_gbits']).done;
      expect(r.code, r.err).toBe(0);
      const svg = await readFile(path.join(dir, 'write_bw.svg'), 'utf8');
      expect(svg).toContain('rddp perf write_bw over tcp, both ends in one process (--loopback)');
      const table = await readFile(path.join(dir, 'write_bw.txt'), 'utf8');
      expect(table).toMatch(/Device\s+: rddp0/);
      // The header a two-process client prints: the MPA lines and the congestion control in Transport.
      for (const line of [/MPA revision\s+: 1\s+Markers: /, /CRC\s+: on \(/, /Send path\s+: /, /Congestion\s+: /])
        expect(table).toMatch(line);
      expect(table).toBe(r.out);
      // The chart in the table's unit: its axis and its highest tick (d3's nice bound over the peak) in Gb/sec.
      expect(svg).toContain('Gb/sec (10^9 bits per second)');
      expect(svg).not.toContain('MB/sec');
      const ticks = [...svg.matchAll(/class="y-tick"[^>]*>([^<]*)</g)].map((m) => Number(m[1]?.replace(/,/g, '')));
      const peak = Number(
        table
          .split('\n')
          .find((l) => /^ 65536\s/.test(l))
          ?.trim()
          .split(/\s+/)[2],
      );
      expect(peak).toBeGreaterThan(0);
      expect(Math.max(...ticks)).toBeGreaterThanOrEqual(peak);
      expect(Math.max(...ticks)).toBeLessThan(peak * 3);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('the client prints no table header when the server refuses its run', async () => {
    const port = String(await freePort());
    const server = procs.run(['perf', 'write_bw', '-p', port, '-s', '4096']);
    await outputMatches(server.child, 'stderr', /listening/);
    const client = await procs.run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-s', '8192']).done;
    expect(client.code).not.toBe(0);
    expect(client.err).toMatch(/server refused.*\(ERR_PERF_SERVER_REFUSED\)/);
    expect(client.out).not.toContain('Test (rddp)');
    expect(client.out).not.toContain('#bytes');
    await server.done;
  }, 30_000);
});

describe('rddp rping: rping flags (issue 37)', () => {
  it('-I names the client source address; -d prints the CRC backend and send path the connection runs', async () => {
    const port = String(await freePort());
    const server = procs.run(['rping', '-s', '-a', '127.0.0.1', '-p', port, '-d']);
    await outputMatches(server.child, 'stderr', /listening/);
    const client = await procs.run(['rping', '-c', '-a', '127.0.0.1', '-I', '127.0.0.1', '-p', port, '-C', '3', '-d'])
      .done;
    expect(client.code, client.err).toBe(0);
    expect(client.err).toMatch(/rping: running CRC on \(\S+\), send path (direct|Node's socket)/);
    expect(client.err).not.toContain('-I 127.0.0.1: connected from');
    const served = await server.done;
    expect(served.err).toMatch(/rping: running CRC on/);
    // perf's header says the same of its connection, in the same words (one function makes both).
    const perf = await cli(['perf', 'write_bw', '--loopback', '-n', '10']).done;
    const field = (name: string) => new RegExp(`^ ${name}\\s+: (.*)$`, 'm').exec(perf.out)?.[1];
    expect(client.err).toContain(
      `rping: running CRC ${field('CRC')}, send path ${field('Send path')}, congestion ${field('Congestion')}\n`,
    );
  }, 30_000);

  it('-I with an address this host does not have, or on the server, is a usage error', async () => {
    const r = await cli(['rping', '-c', '-I', '203.0.113.9', '-C', '1']).done;
    expect(r.code).toBe(2);
    expect(r.err.trim()).toBe('rddp: -I 203.0.113.9 is not an address of this host (ERR_RDDP_USAGE)');
    const s = await cli(['rping', '-s', '-I', '127.0.0.1']).done;
    expect(s.code).toBe(2);
    expect(s.err).toContain('-I applies to the client (-c)');
  }, 30_000);
});

describe('rddp doctor and missing backends (issue 37)', () => {
  it('`rddp doctor` prints one line for each thing it looks at and exits 0', async () => {
    const r = await cli(['doctor']).done;
    expect(r.code, r.err).toBe(0);
    const names = r.out
      .trim()
      .split('\n')
      .map((l) => l.split(':')[0]);
    expect(names).toEqual(['crc32c', 'isa-l', 'send path', 'tshark', 'ip netns', 'nft', 'tc netem', 'tcp congestion']);
    expect(r.out).toMatch(/^crc32c:\s+\S+ \(available: isal (yes|no), sse4_crc32 (yes|no), node-rs yes\)$/m);
  }, 30_000);

  it('doctor names what is missing and how to get it (apt packages)', async () => {
    const r = await cli(['doctor', '--json'], {}, '@rddp/writev,@rddp/crc32c-isal').done;
    expect(r.code, r.err).toBe(0);
    const lines = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { name: string; ok: boolean; get?: string });
    expect(lines.find((l) => l.name === 'isa-l')).toMatchObject({
      ok: false,
      get: expect.stringContaining('libisal-dev'),
    });
    expect(lines.find((l) => l.name === 'send path')).toMatchObject({
      ok: false,
      get: expect.stringContaining('build-essential'),
    });
  }, 30_000);

  it('RDDP_CRC32C naming a backend this install lacks fails with one line and a stable code', async () => {
    const r = await cli(['perf', 'write_bw', '--loopback', '-n', '10'], { RDDP_CRC32C: 'isal' }, '@rddp/crc32c-isal')
      .done;
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(
      /^rddp: RDDP_CRC32C=isal pins @rddp\/crc32c-isal, which does not load here: apt-get install libisal-dev.*\(ERR_LLP_CRC32C_BACKEND_MISSING\)\n$/,
    );
    const unknown = await cli(['demo'], { RDDP_CRC32C: 'fastest' }).done;
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(
      /^rddp: RDDP_CRC32C=fastest names no CRC32c backend .*\(ERR_LLP_CRC32C_BACKEND_UNKNOWN\)\n$/,
    );
    // doctor still runs, and reports the pin it cannot honour (exit 1).
    const doctor = await cli(['doctor'], { RDDP_CRC32C: 'isal' }, '@rddp/crc32c-isal').done;
    expect(doctor.code).toBe(1);
    expect(doctor.out).toMatch(/^crc32c:\s+MISSING RDDP_CRC32C=isal pins @rddp\/crc32c-isal/m);
  }, 30_000);

  it('--send-path direct without @rddp/writev fails with one line and a stable code (no silent fallback)', async () => {
    const r = await cli(['perf', 'write_bw', '--loopback', '-n', '10', '--send-path', 'direct'], {}, '@rddp/writev')
      .done;
    expect(r.code).toBe(1);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(
      /^rddp: directSend needs the @rddp\/writev native build.*\(ERR_MPA_DIRECT_SEND_UNAVAILABLE\)\n$/,
    );
    // Unasked, the transport still sends through Node's socket where the binding is missing (and says so).
    const ok = await cli(['perf', 'write_bw', '--loopback', '-n', '10'], {}, '@rddp/writev').done;
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toMatch(/Send path\s+: Node's socket/);
  }, 30_000);
});

describe('rddp start-up: only the command that runs is loaded (issue 37)', () => {
  it('`rddp --help`, loading no command, prints what the whole program prints', async () => {
    const r = await cli(['--help'], { NODE_DEBUG: 'module' }).done;
    expect(r.code).toBe(0);
    expect(r.out).toBe(buildProgram().helpInformation());
    // NODE_DEBUG=module traces CommonJS loads: the stack's native addons (rddp doctor shows them) are not among them.
    expect(r.err).not.toMatch(/crc32c|writev/);
    const doctor = await cli(['doctor'], { NODE_DEBUG: 'module' }).done;
    expect(doctor.err).toMatch(/crc32c/);
  }, 30_000);

  it("`rddp <command> --help` from the light registration equals the whole program's, perftest flags included", async () => {
    const full = buildProgram();
    for (const name of ['perf', 'rping', 'demo', 'soak', 'doctor', 'fuzz']) {
      const r = await cli([name, '--help']).done;
      expect(r.code, name).toBe(0);
      // helpInformation() is the help without its addHelpText (Examples), which follow it.
      const own = full.commands.find((c) => c.name() === name)?.helpInformation() ?? '(none)';
      expect(r.out.slice(0, own.length), name).toBe(own);
    }
    const perf = await cli(['perf', '--help']).done;
    for (const flag of [
      '-d, --ib-dev <dev>',
      '-R, --rdma_cm',
      '-b, --bidirectional',
      '-e, --events',
      '-F, --CPU-freq',
      '--report_gbits',
      '--debug',
    ])
      expect(perf.out).toContain(flag);
    const rping = await cli(['help', 'rping']).done;
    expect(rping.code).toBe(0);
    expect(rping.out).toContain('-I <addr>');
  }, 60_000);

  it("`fuzz --help` names the fuzzer's targets without loading them: the ones it runs", async () => {
    const help = await cli(['fuzz', '--help']).done;
    const named = /only this target \(([^)]*)\)/.exec(help.out.replace(/\s+/g, ' '))?.[1]?.split(', ');
    const ran = await cli(['fuzz', '--json', '--minutes', '0.005']).done;
    expect(ran.code, ran.err).toBe(0);
    const targets = ran.out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { target: string }).target);
    expect(named).toEqual(targets);
  }, 30_000);

  it("--memory-budget: help shows @rddp/llp's default; a bad size is still a usage error (checked once @rddp/llp loads)", async () => {
    const help = await cli(['perf', '--help']).done;
    expect(help.out.replace(/\s+/g, ' ')).toContain(
      `(default ${DEFAULT_MEMORY_BUDGET / 1024 ** 3}g, or RDDP_MEMORY_BUDGET)`,
    );
    for (const bad of ['12', 'lots']) {
      const r = await cli(['perf', 'write_bw', '--loopback', '-n', '10', '--memory-budget', bad]).done;
      expect(r.code, bad).toBe(2);
      expect(r.err).toBe(
        `rddp: option '--memory-budget <size>' argument '${bad}' is invalid. must be a size of at least 1m (octets, or with a k/m/g suffix). (run with --help for usage)\n`,
      );
    }
  }, 30_000);
});
