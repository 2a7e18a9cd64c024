import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from './procs.js';

const MAIN = path.resolve(__dirname, '../dist/main.js');

const HEADLINE_ROWS = [
  /`perf write_bw -s 65536` \(CRC\), two processes vs raw Node TCP .*\| ≥ 0\.9 × \|.*raw Node TCP bulk transfer between two processes.*both after [\d.]+ MiB unmeasured/,
  /`perf write_bw -s 65536` \(CRC\), two processes vs iperf3 -l 64K .*\| ≥ 0\.6 × \| iperf3 not installed \| iperf3 -l 65536/,
  /`perf write_bw -s 65536` \(CRC\), two processes, cold processes, vs raw Node TCP .*both timed from their first octet/,
  /`perf write_bw -s 1048576` \(CRC\), two processes vs raw Node TCP .*\| ≥ 0\.9 × \|.*1024 KiB writes.*both after [\d.]+ MiB unmeasured/,
  /`perf write_bw -s 1048576` \(CRC\), two processes vs iperf3 -l 1M .*\| ≥ 0\.6 × \| iperf3 not installed \|/,
  // Under CUBIC on every connection (subject, raw baseline, iperf3), no target: or skipped, saying why.
  /`perf write_bw -s 1048576` \(CRC\), two processes, --congestion cubic vs (raw Node TCP .*TCP cubic on every connection|.*no TCP congestion control to set here)/,
  /`perf read_bw -s 65536` \(CRC\), two processes vs raw Node TCP .*\| ≥ 0\.85 × \|.*raw Node TCP bulk.*both after [\d.]+ MiB unmeasured/,
  /`perf read_bw -s 65536` \(CRC\), two processes, cold processes, vs raw Node TCP .*both timed from their first octet/,
  /`perf send_lat -s 64`, typical half round trip \| us .*\| ≤ 1\.2 × \|.*raw Node TCP ping-pong .*median/,
  /`perf send_lat -s 64`, average \| us .*raw Node TCP ping-pong .*mean/,
  /`perf send_lat -s 64`, p99 \| us .*\| ≤ 1\.5 × \|.*ping-pong .*p99/,
  /`perf send_lat -s 64`, max \| us .*\| ≤ 2 × \|.*ping-pong .*max/,
  /`perf write_bw -s 64 -t 64`, message rate \| M msg\/s .*\| ≥ 1 × \|.*absolute target of 1 M messages\/s/,
  /`perf write_bw -s 65536 --markers` \(CRC\), two processes .*\| ≥ 0\.7 × \|.*without Markers/,
  /`perf write_bw -s 65536 --markers --marker-framing copy` \(CRC\), two processes .*\| ≥ 0\.7 × \|.*without Markers/,
  /`perf write_bw -s 65536 -q 8`, server `--workers 1` \(1 serving process\) .*\| ≥ 1 × \|.*1 QP, one server process/,
];
// Rows under CUBIC on every connection, where it can be set (Linux, @rddp/writev built).
const CUBIC_ROWS = [
  /`perf write_bw -s 65536 -q 8 --congestion cubic`, server `--workers 1` .*--congestion cubic`, 1 QP/,
];

describe('bench: the headline table is two-process rddp perf against two-process baselines', () => {
  it('--quick --tables headline: every headline row with its baseline and rounded target, a warning, no MISSED; no iperf3 said so', async () => {
    expect((await run(['--version']).done).code).toBe(0); // builds dist when stale
    // An empty PATH: iperf3 cannot be found, the bench must say so and go on (it runs node by its path).
    const empty = await mkdtemp(path.join(tmpdir(), 'rddp-bench-path-'));
    const child = spawn(
      process.execPath,
      [MAIN, 'bench', '--quick', '--tables', 'headline', '--scale', '0.002', '--rounds', '1', '--warmup', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: empty } },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const [code] = await once(child, 'exit');
    expect(code, err).toBe(0);
    expect(out).toContain('--quick figures are not comparable with the targets (cold JIT');
    expect(out).not.toContain('MISSED');
    expect(out).not.toMatch(/\| met \|/);
    expect(out).toContain('### Headline: `rddp perf` between two processes');
    const table = out.slice(out.indexOf('### Headline'));
    for (const row of HEADLINE_ROWS) expect(table).toMatch(row);
    if (!table.includes('no TCP congestion control to set here'))
      for (const row of CUBIC_ROWS) expect(table).toMatch(row);
    // One server process per core count up to the machine's: the last row names how many served.
    expect(table).toMatch(/-q 8`, server `--workers \d+` \(\d+ serving process/);
    // Every row of the table says what its baseline is.
    const rows = table.split('\n').filter((l) => l.startsWith('| `perf'));
    expect(rows.length).toBeGreaterThanOrEqual(HEADLINE_ROWS.length);
    for (const r of rows) expect(r.split('|').at(-2)?.trim().length, r).toBeGreaterThan(10);
  }, 300_000);

  it('the raw bulk baseline times only the octets after its warm-up, as the perf rows measure after theirs', async () => {
    const RAW = path.resolve(__dirname, '../dist/bench/raw-tcp.js');
    const child = spawn(process.execPath, [RAW, 'bulk', String(4 << 20), '65536', String(2 << 20)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    const j = JSON.parse(out.trim().split('\n').at(-1) as string) as { MBps: number; octets: number; warm: number };
    expect(j.warm).toBe(2 << 20);
    // Timed from the read that completed the warm-up: at most one read's octets past the measured ones.
    expect(j.octets).toBeGreaterThanOrEqual(2 << 20);
    expect(j.octets).toBeLessThanOrEqual(4 << 20);
    expect(j.MBps).toBeGreaterThan(0);
  }, 60_000);

  it.runIf(process.platform === 'linux')(
    'the raw bulk baseline runs the congestion control it is given on both sockets, or exits 1 with one line',
    async () => {
      const RAW = path.resolve(__dirname, '../dist/bench/raw-tcp.js');
      const bulk = async (cc: string) => {
        const child = spawn(process.execPath, [RAW, 'bulk', String(1 << 20), '65536', '0', cc], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (err += d));
        const [code] = await once(child, 'exit');
        return { code, out, err };
      };
      const ok = await bulk('reno');
      expect(ok.code, ok.err).toBe(0);
      expect(JSON.parse(ok.out.trim().split('\n').at(-1) as string)).toMatchObject({ congestion: 'reno' });
      const bad = await bulk('nosuchcc');
      expect(bad.code).toBe(1);
      expect(bad.err.trim().split('\n')).toHaveLength(1);
      expect(bad.err).toMatch(/congestion control nosuchcc/);
    },
    60_000,
  );
});
