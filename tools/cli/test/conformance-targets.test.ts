/**
 * `rddp conformance` against targets as they are (issue 35), each a separate process: nothing listening
 * and a target that does not speak MPA (or rping) are one line and exit 2, a one-shot `rping -s`
 * restarted between cases completes under --reconnect, and --all runs every mode in one report.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, listening, startedProcesses } from './procs.js';

const MAIN = path.resolve(__dirname, '../dist/main.js');
const procs = startedProcesses();
const servers: net.Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
});

type Ended = { code: number | null; out: string; err: string; ms: number };

/** `node dist/main.js …` (tools/rddp without its rebuild check: the first test built it). */
function direct(args: string[]): Promise<Ended> {
  const t0 = Date.now();
  const c = procs.track(spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  c.stdout?.on('data', (d) => (out += d));
  c.stderr?.on('data', (d) => (err += d));
  return new Promise((resolve) => c.once('exit', (code) => resolve({ code, out, err, ms: Date.now() - t0 })));
}

function node(args: string[]): ChildProcess {
  return procs.track(spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] }));
}

/**
 * Until something listens on 127.0.0.1:`port` (a one-shot `rping -s` says nothing, and a probe
 * connection would be its one client): read from /proc/net/tcp, or a pause where there is none.
 */
async function portListening(port: number, ms = 20_000): Promise<void> {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')} `;
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    let table: string;
    try {
      table = readFileSync('/proc/net/tcp', 'latin1');
    } catch {
      await new Promise((r) => setTimeout(r, 2000));
      return;
    }
    // local_address rem_address st: 0A is LISTEN.
    if (table.split('\n').some((l) => l.includes(`0100007F${hex}`) && / 0A /.test(l))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on port ${port} after ${ms} ms`);
}

const lines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');

describe('rddp conformance: a target the kit cannot test is one line and exit 2', () => {
  it('builds the tools; --all with a mode flag is a usage error', async () => {
    const r = await procs.run(['conformance', '--target', '127.0.0.1:1', '--all', '--mpa-rev', '2']).done;
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--all runs every mode/);
  }, 120_000);

  it('nothing listens: one line naming it, exit 2, at once', async () => {
    const port = await freePort();
    const r = await direct(['conformance', '--target', `127.0.0.1:${port}`]);
    expect(r.code).toBe(2);
    expect(lines(r.err)).toEqual([expect.stringMatching(/nothing answers at 127\.0\.0\.1:\d+ .*ECONNREFUSED/)]);
    expect(r.out).toBe('');
    expect(r.ms).toBeLessThan(5000);
  }, 20_000);

  it('a server that answers the MPA Request with an HTTP reply: one line "does not speak MPA", exit 2', async () => {
    const server = net.createServer((s) => {
      s.on('error', () => {});
      s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    for (const extra of [[], ['--all']]) {
      const r = await direct(['conformance', '--target', `127.0.0.1:${port}`, ...extra]);
      expect(r.code, extra.join(' ')).toBe(2);
      const errs = lines(r.err).filter((l) => !l.startsWith('rddp conformance: mode '));
      expect(errs).toEqual([expect.stringMatching(/does not speak MPA: .*"HTTP\/1\.1 400 Bad Request/)]);
      expect(r.out).toBe('');
      expect(r.ms).toBeLessThan(10_000);
    }
  }, 30_000);

  it('an MPA server running another application (perf): one line "does not speak rping", exit 2', async () => {
    const port = await freePort();
    const perf = node(['perf', 'read_bw', '--persistent', '-p', String(port)]);
    await listening(perf);
    const r = await direct(['conformance', '--target', `127.0.0.1:${port}`]);
    perf.kill('SIGTERM');
    expect(r.code).toBe(2);
    expect(lines(r.err).filter((l) => !/^(PASS|SKIP) /.test(l))).toEqual([
      expect.stringMatching(/does not speak rping \(it speaks MPA\)/),
    ]);
    expect(r.out).toBe('');
  }, 30_000);

  it('a one-shot rping -s that is not restarted: the run stops with one line naming how many cases ran', async () => {
    const port = await freePort();
    node(['rping', '-s', '-p', String(port)]);
    await portListening(port);
    const r = await direct([
      'conformance',
      '--target',
      `127.0.0.1:${port}`,
      '--only',
      'mpa.startup,liveness.rping,ddp.tagged.invalid-stag,rdmap.read.invalid-stag',
    ]);
    expect(r.code).toBe(2);
    const stop = lines(r.err).filter((l) => !/^(PASS|FAIL|SKIP|WARN|INFO) /.test(l));
    expect(stop).toEqual([expect.stringMatching(/stopped answering after [12] of 4 cases ran .*--reconnect/)]);
    expect(r.out).toBe('');
  }, 30_000);
});

describe('rddp conformance against targets as they are', () => {
  it('--reconnect 5: a one-shot rping -s restarted between cases; the run completes', async () => {
    const port = await freePort();
    let stopped = false;
    let started = 0;
    const serve = () => {
      if (stopped) return;
      started++;
      node(['rping', '-s', '-p', String(port)]).once('exit', () => setTimeout(serve, 100));
    };
    serve();
    try {
      const r = await direct([
        'conformance',
        '--target',
        `127.0.0.1:${port}`,
        '--reconnect',
        '5',
        '--only',
        'mpa.startup,liveness.rping,ddp.tagged.invalid-stag',
        '--json',
        '-',
      ]);
      expect(r.code, r.err).toBe(0);
      const s = JSON.parse(r.out) as { passed: number; failed: number; results: { verdict: string }[] };
      expect(s.results.map((x) => x.verdict)).toEqual(['PASS', 'PASS', 'PASS']);
      // mpa.startup, liveness.rping, the error case and its liveness check: a server each.
      expect(started).toBeGreaterThanOrEqual(4);
    } finally {
      stopped = true;
    }
  }, 60_000);

  it("--all against rping -s -P: one report of every mode, one total line, exit 0; rddp's own server passes every case in every mode (issue 35)", async () => {
    const port = await freePort();
    const server = node(['rping', '-s', '-P', '-p', String(port)]);
    await listening(server);
    // One run: the table on stdout, the JSON report beside it (--json <file>).
    const dir = mkdtempSync(path.join(tmpdir(), 'rddp-conformance-all-'));
    const report = path.join(dir, 'report.json');
    let json = '';
    const r = await direct(['conformance', '--target', `127.0.0.1:${port}`, '--all', '--json', report]);
    try {
      json = readFileSync(report, 'utf8');
    } catch {
      // no report: the exit status below says why
    } finally {
      server.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
    expect(r.code, r.err).toBe(0);
    const heads = lines(r.out).filter((l) => l.startsWith('rddp conformance: target'));
    expect(heads).toHaveLength(5);
    expect(heads.join('\n')).toMatch(/MPA rev 2, CRC on, Markers on/);
    expect(heads.join('\n')).toMatch(/MPA rev 0, CRC on, Markers on/);
    const totals = lines(r.out).filter((l) => /\d+ passed, \d+ failed/.test(l));
    expect(totals).toEqual([expect.stringMatching(/^5 modes: \d+ passed, 0 failed/)]);
    const s = JSON.parse(json) as {
      failed: number;
      passed: number;
      modes: {
        mode: { mpaRev: number; markers: boolean };
        results: { name: string; verdict: string; evidence: string }[];
      }[];
    };
    expect(s.modes.map((m) => `${m.mode.mpaRev}${m.mode.markers ? 'M' : ''}`)).toEqual(['1', '2', '1M', '2M', '0M']);
    const bad = s.modes.flatMap((m) => m.results.filter((x) => x.verdict === 'FAIL' || x.verdict === 'WARN'));
    expect(bad).toEqual([]);
    expect(s.failed).toBe(0);
    expect(s.passed).toBeGreaterThan(150);
    const verdict = (i: number, n: string) => s.modes[i]?.results.find((x) => x.name === n)?.verdict;
    expect(verdict(2, 'mpa.markers')).toBe('PASS');
    expect(verdict(0, 'mpa.markers')).toBe('SKIP');
    expect(verdict(1, 'mpa.rev2.rtr-read')).toBe('PASS');
    expect(verdict(4, 'mpa.rev0.startup')).toBe('PASS');
  }, 180_000);

  it('perf --persistent passes every perf case in every mode (issue 35)', async () => {
    const perfPort = await freePort();
    const perf = node(['perf', 'read_bw', '-p', String(perfPort), '--persistent']);
    await listening(perf);
    const p = await direct([
      'conformance',
      '--target',
      `127.0.0.1:${perfPort}`,
      '--all',
      '--app',
      'perf',
      '--json',
      '-',
    ]);
    perf.kill('SIGTERM');
    expect(p.code, p.err).toBe(0);
    const ps = JSON.parse(p.out) as { failed: number; passed: number };
    expect(ps.failed).toBe(0);
    expect(ps.passed).toBeGreaterThanOrEqual(5);
  }, 240_000);
});
