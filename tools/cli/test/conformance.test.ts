/**
 * `rddp conformance` against this project's own tools, each a separate process: `rping -s -P` and
 * `perf --persistent` servers (the kit as client) and `rping -c` clients (the kit as server), in every
 * MPA mode rping runs; all PASS or SKIP. The planted-bug control (`rping --plant-bug terminate-code`)
 * must make the matching case FAIL, and the command's exit status say so.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { type RunSummary, runKit } from '@rddp/conformance';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, listening, run } from './procs.js';

const MAIN = path.resolve(__dirname, '../dist/main.js');
const LOOP = path.resolve(__dirname, 'fixtures/rping-client-loop.mjs');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** `node dist/main.js …` and its output (tools/rddp without its rebuild check: the first test built it). */
function direct(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const c = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(c);
  let out = '';
  let err = '';
  c.stdout?.on('data', (d) => (out += d));
  c.stderr?.on('data', (d) => (err += d));
  return new Promise((resolve) => c.once('exit', (code) => resolve({ code, out, err })));
}

/** `node dist/main.js …` (tools/rddp without its rebuild check: the first test's `run` built it). */
function node(args: string[]): ChildProcess {
  const c = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(c);
  return c;
}

const MODES = [1, 2].flatMap((rev) =>
  [true, false].flatMap((crc) => [true, false].map((markers) => ({ rev, crc, markers }))),
);
type M = (typeof MODES)[number];
/** MPA Rev 0, the RDMA Consortium profile (RFC 5044 Appendix C): CRCs and Markers always, DDP/RDMAP version 0. */
const REV0: M = { rev: 0, crc: true, markers: true };
const label = (m: M) => `MPA rev ${m.rev}, CRC ${m.crc ? 'on' : 'off'}, Markers ${m.markers ? 'on' : 'off'}`;
const rpingFlags = (m: M) =>
  m.rev === 0
    ? ['--mpa-rev', '0']
    : ['--mpa-rev', String(m.rev), m.crc ? '--crc' : '--no-crc', ...(m.markers ? ['--markers'] : [])];
const kitMode = (m: M) => (m.rev === 0 ? { mpaRev: '0' } : { mpaRev: String(m.rev), crc: m.crc, markers: m.markers });

function failures(s: RunSummary): string[] {
  return s.results.filter((r) => r.verdict === 'FAIL').map((r) => `${r.name}: ${r.evidence}`);
}

describe('rddp conformance --target: the kit as client of `rping -s -P`', () => {
  it('builds the tools and lists the cases', async () => {
    const r = await run(['conformance', '--list']).done;
    expect(r.code).toBe(0);
    expect(r.out).toContain('ddp.tagged.invalid-stag');
    expect(r.out).toContain('RFC 5041 §7.2');
  }, 120_000);

  it.concurrent.each([...MODES, REV0])('every case PASSes or SKIPs with a reason: %o', async (m) => {
    const port = await freePort();
    const server = node(['rping', '-s', '-P', '-p', String(port), ...rpingFlags(m)]);
    await listening(server);
    const s = await runKit({ target: `127.0.0.1:${port}`, ...kitMode(m) });
    server.kill('SIGTERM');
    expect(failures(s), label(m)).toEqual([]);
    expect(s.passed).toBeGreaterThan(25);
    for (const r of s.results.filter((x) => x.verdict === 'SKIP')) expect(r.evidence.length).toBeGreaterThan(5);
    // The mode's own checks ran: CRCs, Markers and RFC 6581 where the mode has them.
    const verdict = (n: string) => s.results.find((r) => r.name === n)?.verdict;
    expect(verdict('mpa.crc')).toBe(m.crc ? 'PASS' : 'SKIP');
    expect(verdict('mpa.markers')).toBe(m.markers ? 'PASS' : 'SKIP');
    expect(verdict('mpa.rev2.rtr-read')).toBe(m.rev === 2 ? 'PASS' : 'SKIP');
    expect(verdict('ddp.tagged.invalid-stag')).toBe('PASS');
    // Rev 0 (RFC 5044 Appendix C): the RDMAC startup and version checks in the Rev 0 mode; in the others,
    // the permissive server answers a Rev 0 Request with a Rev 0 Reply and serves a ping at version 0.
    for (const n of ['mpa.rev0.startup', 'mpa.rev0.crc-markers', 'ddp.rev0.tagged-version-1', 'rdmap.rev0.version-1'])
      expect(verdict(n), n).toBe(m.rev === 0 ? 'PASS' : 'SKIP');
    expect(verdict('mpa.rev0.request')).toBe(m.rev === 0 ? 'SKIP' : 'PASS');
  }, 60_000);
});

/**
 * Keeps `n` `rping -c` clients connecting to the kit until it is done (one connection per case): one
 * separate process running the CLI's rping client again and again (fixtures/rping-client-loop.mjs).
 */
function clientPump(port: number, m: M, n = 2): { stop(): void } {
  const c = spawn(
    process.execPath,
    [LOOP, String(n), '-a', '127.0.0.1', '-p', String(port), '-C', '1', ...rpingFlags(m)],
    { stdio: 'ignore' },
  );
  children.push(c);
  return {
    stop() {
      c.kill('SIGKILL');
    },
  };
}

async function listenRun(m: M, only?: string): Promise<RunSummary> {
  let pump: { stop(): void } | undefined;
  try {
    return await runKit({
      listen: '0',
      ...kitMode(m),
      // Each case waits for the next `rping -c` connection: generous on a loaded CI machine.
      wait: '10000',
      caseTimeout: '30000',
      ...(only ? { only } : {}),
      onListening: (port) => {
        pump = clientPump(port, m);
      },
    });
  } finally {
    pump?.stop();
  }
}

describe('rddp conformance --listen: the kit as server of `rping -c` clients', () => {
  it('every server-role case PASSes or SKIPs (MPA rev 1, CRC on)', async () => {
    const s = await listenRun({ rev: 1, crc: true, markers: false });
    expect(failures(s)).toEqual([]);
    expect(s.passed).toBeGreaterThan(25);
  }, 240_000);

  it.each(MODES.slice(1))('startup, the honest ping and a Terminate in every mode: %o', async (m) => {
    const s = await listenRun(m, 'mpa.startup,liveness,ddp.tagged.invalid-stag');
    expect(failures(s), label(m)).toEqual([]);
    expect(s.results.find((r) => r.name === 'liveness.rping')?.verdict).toBe('PASS');
  }, 60_000);

  it('MPA Rev 0 (RDMAC profile): startup, CRCs and Markers, version 0 and the version-1 Terminates', async () => {
    const s = await listenRun(REV0, 'mpa.startup,mpa.rev0,liveness,ddp.tagged.invalid-stag,ddp.rev0,rdmap.rev0');
    expect(failures(s)).toEqual([]);
    const verdict = (n: string) => s.results.find((r) => r.name === n)?.verdict;
    for (const n of [
      'mpa.rev0.startup',
      'mpa.rev0.crc-markers',
      'ddp.rev0.tagged-version-1',
      'ddp.rev0.untagged-version-1',
      'rdmap.rev0.version-1',
    ])
      expect(verdict(n), n).toBe('PASS');
  }, 120_000);

  it('a Rev 0 Reply to a Rev 1 client: the non-permissive client closes', async () => {
    const s = await listenRun(MODES[0] as M, 'mpa.rev0.reply');
    expect(s.results.find((r) => r.name === 'mpa.rev0.reply')?.evidence).toContain('closed the connection');
  }, 60_000);
});

describe('rddp conformance against perf servers', () => {
  it('read_bw (and IRD at Rev 2) and RFC 7306 atomic_bw PASS; what a server does not run is a SKIP', async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    const read = node(['perf', 'read_bw', '--persistent', '-p', String(p1), '--mpa-rev', '2']);
    const atomic = node(['perf', 'atomic_bw', '--persistent', '-p', String(p2)]);
    await Promise.all([listening(read), listening(atomic)]);
    const a = await runKit({ target: `127.0.0.1:${p1}`, app: 'perf', mpaRev: '2' });
    const b = await runKit({ target: `127.0.0.1:${p2}`, app: 'perf' });
    read.kill('SIGTERM');
    atomic.kill('SIGTERM');
    const v = (s: RunSummary, n: string) => s.results.find((r) => r.name === n);
    expect(failures(a)).toEqual([]);
    expect(failures(b)).toEqual([]);
    expect(v(a, 'perf.read_bw')?.verdict).toBe('PASS');
    expect(v(a, 'rdmap.ird-perf')?.verdict).toBe('PASS');
    expect(v(a, 'perf.write_bw')?.evidence).toContain('does not run write_bw');
    expect(v(b, 'rfc7306.atomic-fetch-add')?.verdict).toBe('PASS');
  }, 60_000);
});

describe('the planted-bug control and the exit status', () => {
  it('rping --plant-bug terminate-code makes ddp.tagged.invalid-stag FAIL, exit 1; the honest server exits 0', async () => {
    const [bad, good] = [await freePort(), await freePort()];
    const planted = node(['rping', '-s', '-P', '-p', String(bad), '--plant-bug', 'terminate-code']);
    const honest = node(['rping', '-s', '-P', '-p', String(good)]);
    await Promise.all([listening(planted), listening(honest)]);
    const only = ['--only', 'ddp.tagged.invalid-stag,ddp.untagged.too-long'];
    const [r1, r2] = await Promise.all([
      direct(['conformance', '--target', `127.0.0.1:${bad}`, ...only, '--json', '-']),
      direct(['conformance', '--target', `127.0.0.1:${good}`, ...only]),
    ]);
    planted.kill('SIGTERM');
    honest.kill('SIGTERM');
    expect(r1.code).toBe(1);
    const s = JSON.parse(r1.out) as RunSummary;
    const hit = s.results.find((r) => r.name === 'ddp.tagged.invalid-stag');
    expect(hit?.verdict).toBe('FAIL');
    expect(hit?.evidence).toContain('Base or bounds violation');
    // Only the planted error is wrong: the other Terminate is still right.
    expect(s.results.find((r) => r.name === 'ddp.untagged.too-long')?.verdict).toBe('PASS');
    expect(r2.code).toBe(0);
    expect(r2.out).toMatch(/2 passed, 0 failed/);
  }, 60_000);

  it('usage errors exit 2 with one line', async () => {
    const none = await direct(['conformance']);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/^rddp: give exactly one of --target/);
    const unknown = await direct(['conformance', '--target', '127.0.0.1:1', '--only', 'no.such.case']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("no case is named or checks a clause matching 'no.such.case'");
    const rev = await direct(['conformance', '--target', '127.0.0.1:1', '--mpa-rev', '3']);
    expect(rev.code).toBe(2);
    const rdmac = await direct(['conformance', '--target', '127.0.0.1:1', '--mpa-rev', '0', '--no-markers']);
    expect(rdmac.code).toBe(2);
    expect(rdmac.err).toContain('always has CRCs and Markers');
  }, 60_000);
});
