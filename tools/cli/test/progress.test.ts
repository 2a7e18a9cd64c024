/**
 * Long runs say how far they are (issue 17 point 10): plain progress lines when stderr is not a
 * terminal (as here), a bar when it is; the demo names its CRC32c backend and ends with a verdict;
 * rping's ends say what they did; bench refuses --rounds 0 and gives the connection figure a baseline.
 */
import { crc32cBackend } from '@rddp/llp-mpa-tcp';
import { describe, expect, it } from 'vitest';
import { connectionFigure, runBench } from '../src/commands/bench.js';
import { runDemo } from '../src/commands/demo.js';
import { perfLoopback } from '../src/commands/perf.js';
import { runExperiment } from '../src/commands/sctp-experiment.js';
import { startProgress } from '../src/progress.js';
import { UsageError } from '../src/transports.js';
import { freePort, run } from './procs.js';

/** A stderr that is not a terminal, and a line per tenth (no pause between lines). */
function plain(): { out: { isTTY: false; write(s: string): boolean }; lines(): string[]; everyMs: number } {
  let text = '';
  return {
    out: {
      isTTY: false,
      write(s) {
        text += s;
        return true;
      },
    },
    lines: () => text.split('\n').filter((l) => l !== ''),
    everyMs: 0,
  };
}

/** "label: 40% (x of y, 1.2 s)" lines, each tenth once, in order, ending at 100%. */
function expectTenths(lines: readonly string[], label: string): void {
  const re = new RegExp(`^${label.replace(/[()]/g, '\\$&')}: (\\d+)% \\((.+) of (.+), (\\d+\\.\\d) s\\)$`);
  const pct = lines.map((l) => {
    const m = re.exec(l);
    expect(m, l).not.toBeNull();
    return Number(m?.[1]);
  });
  expect(pct.length).toBeGreaterThanOrEqual(3);
  expect(pct.every((p, i) => p % 10 === 0 && (i === 0 || p > (pct[i - 1] as number)))).toBe(true);
  expect(pct.at(-1)).toBe(100);
}

describe('progress on long runs', () => {
  it('the demo: CRC32c backend in the header, the sweep in tenths on stderr, a closing verdict line', async () => {
    const p = plain();
    const printed: string[] = [];
    const ok = await runDemo({ pings: 20, maxSize: 65_536, quick: true }, (s) => printed.push(s), p);
    expect(ok).toBe(true);
    expect(printed[1]).toBe(`CRC32c backend: ${crc32cBackend}`);
    expectTenths(p.lines(), 'write_bw sweep');
    expect(p.lines().at(-1)).toMatch(/^write_bw sweep: 100% \(25\.0 MiB of 25\.0 MiB, /); // 300 × (64 + 256 + … + 65536)
    expect(printed.at(-1)).toMatch(
      /^demo: PASSED: 20 pings validated, 6 sizes written and verified \(25\.0 MiB\) in \d+\.\d s$/,
    );
    // The table itself stays on stdout, whole.
    expect(printed.filter((l) => /^ \d+ +300 /.test(l))).toHaveLength(6);
  }, 60_000);

  it('perf over SCTP with several streams: the octets of every stream count', async () => {
    const p = plain();
    const base = { port: '0', size: '4096', iters: '50', txDepth: '8', verify: true, transport: 'sctp', streams: '4' };
    const r = await perfLoopback('write_bw', base, () => {}, p);
    expect(r[0]?.verified).toBe(true);
    expectTenths(p.lines(), 'write_bw, 4 streams');
    expect(p.lines().at(-1)).toMatch(/: 100% \(800\.0 KiB of 800\.0 KiB, /); // 4 × 50 × 4096
  }, 60_000);

  it('perf latency tests: every round trip counts, so the sweep reaches 100 %', async () => {
    for (const test of ['send_lat', 'write_lat', 'read_lat'] as const) {
      const p = plain();
      const base = { port: '0', size: '4096', iters: '300', txDepth: '1', verify: true, transport: 'loopback' };
      const r = await perfLoopback(test, base, () => {}, p);
      expect(r[0]?.verified).toBe(true);
      expectTenths(p.lines(), test);
      expect(p.lines().at(-1), test).toMatch(/: 100% \(1\.2 MiB of 1\.2 MiB, /); // 300 × 4096
    }
  }, 60_000);

  it('sctp-experiment: the bulk Writes of every row', async () => {
    const p = plain();
    await runExperiment([1, 2], { size: 4096, iters: 20, pings: 5 }, () => {}, p);
    expectTenths(p.lines(), 'sctp-experiment');
    expect(p.lines().at(-1)).toMatch(/: 100% \(240\.0 KiB of 240\.0 KiB, /); // (1 + 2) × 20 × 4096
  }, 60_000);

  it('plain lines wait: none in the first seconds (a short run or a pipe stays quiet)', () => {
    const p = plain();
    const bar = startProgress({ label: 'quiet', total: 10, out: p.out });
    for (let i = 1; i <= 10; i++) bar.update(i);
    bar.stop();
    expect(p.lines()).toEqual([]);
  });

  it('on a terminal: a bar, and a line printed through it is not overwritten when it stops', () => {
    let text = '';
    const out = {
      isTTY: true,
      columns: 100,
      write(s: string) {
        text += s;
        return true;
      },
      on() {},
      removeListener() {},
    };
    const bar = startProgress({ label: 'bar', total: 100, out });
    bar.update(50);
    bar.interrupt(() => {
      text += 'ROW\n';
    });
    bar.update(100);
    bar.stop();
    expect(text).toMatch(/bar \[=+-+\] 50% \| 50 of 100/);
    // The bar steps aside (ESC 8 returns to its own line and clears it) before the row, and comes back after.
    const row = text.indexOf('ROW\n');
    expect(text.lastIndexOf('\x1b8', row)).toBeGreaterThan(-1);
    expect(text.indexOf('\x1b7', row)).toBeGreaterThan(row);
    expect(text.slice(row)).toMatch(/100% \| 100 of 100/);
  });
});

describe('rping ends say what they did', () => {
  it('client: "N pings of S octets, validated, in T ms" on stdout; server: "served N pings" on stderr', async () => {
    const port = String(await freePort());
    const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', port]); // no -d: no listening line
    let c: Awaited<ReturnType<typeof run>['done']> | undefined;
    for (let i = 0; i < 50; i++) {
      c = await run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-C', '30', '-S', '1024', '-V']).done;
      if (c.code === 0) break;
      await new Promise((r) => setTimeout(r, 100)); // the server is still starting
    }
    const s = await server.done;
    expect(c?.code).toBe(0);
    expect(c?.err).toBe('');
    expect(c?.out).toMatch(/^30 pings of 1024 octets, validated, in \d+ ms\n$/);
    expect(s.code).toBe(0);
    expect(s.err).toBe('rping: served 30 pings\n');
  }, 60_000);
});

describe('bench', () => {
  it('--rounds 0 is a usage error, not 9 rounds', async () => {
    const lines: string[] = [];
    await expect(runBench({ rounds: '0', warmup: '0', quick: true }, (s) => lines.push(s))).rejects.toThrow(UsageError);
    await expect(runBench({ rounds: '0', warmup: '0', quick: true }, () => {})).rejects.toThrow(
      /--rounds must be an integer in 1\.\.1000 \(got 0\)/,
    );
    expect(lines).toEqual([]);
    const cli = await run(['bench', '--rounds', '0']).done;
    expect(cli.code).toBe(2);
  }, 10_000);

  it('connection setup has a baseline: as many raw TCP connections held by one net.Server', async () => {
    const f = await connectionFigure({ rounds: 1, warmupSeconds: 0 }, 100);
    expect(f.name).toBe('set up 100 MPA/TCP connections held by one server');
    expect(f.note).toMatch(/100 raw TCP connections held by one net\.Server/);
    expect(f.value).toBeGreaterThan(0);
    expect(f.baseline).toBeGreaterThan(0);
    expect(f.baseline).not.toBe(f.value);
    expect(f.ratio).toBeCloseTo(f.baseline / f.value, 9); // ms: lower is better
  }, 60_000);
});
