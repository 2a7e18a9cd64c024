/**
 * `rddp experiment`, CI-sized: the real command builds its two namespaces and veth, runs 4 flows under
 * all four mappings at 0 % and 2 % loss (kernel nftables) with delay, jitter and reordering from the
 * user-space relay, and writes --out. Checked from outside: the exit code and table, results.json
 * (every flow verified, seeds, mappings, drops, the capture's evidence), samples.csv, every SVG rendered
 * to PNG (resvg) with its expected series — and the measure itself: the two control mappings, whose
 * flows cannot hold each other (`sctp-assocs`, `tcp-conns`), read ≈ 0 head-of-line stall under loss,
 * while one shared TCP connection (`tcp-shared`) reads a large one. Two experiments also run at once.
 * Needs root, ip netns, nft, tc and dumpcap: fails in CI without them, skips visibly elsewhere.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import { afterAll, describe, expect, it } from 'vitest';
import { topologyUnavailable } from '../src/experiment/topology.js';

const RDDP_JS = path.resolve(__dirname, '../dist/main.js');
const MAPPINGS = ['sctp-streams', 'sctp-assocs', 'tcp-conns', 'tcp-shared'];
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];

const why = topologyUnavailable();
if (why && process.env.CI) throw new Error(`rddp experiment test cannot run in CI: ${why}`);
if (why) console.warn(`rddp experiment tests skipped: ${why}`);

const dir = mkdtempSync(path.join(tmpdir(), 'rddp-experiment-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function rddp(args: string[], opts: { uid?: number } = {}) {
  const child = spawn(process.execPath, [RDDP_JS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, out, err };
}

/** Renders `svg` to PNG and counts what is drawn. */
function render(svg: string) {
  const attr = (name: string) => Number(new RegExp(`<svg[^>]* ${name}="(\\d+)"`).exec(svg)?.[1]);
  const image = new Resvg(svg, { font: { loadSystemFonts: true } }).render();
  const png = image.asPng();
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  expect([width, height]).toEqual([attr('width'), attr('height')]);
  const px = image.pixels;
  let inked = 0;
  const colored = new Map(COLORS.map((c) => [c, 0]));
  for (let i = 0; i < px.length; i += 4) {
    const [r, g, b] = [px[i] as number, px[i + 1] as number, px[i + 2] as number];
    if (r < 250 || g < 250 || b < 250) inked++;
    for (const c of COLORS) {
      const [R, G, B] = [1, 3, 5].map((k) => Number.parseInt(c.slice(k, k + 2), 16)) as [number, number, number];
      if (Math.abs(r - R) < 8 && Math.abs(g - G) < 8 && Math.abs(b - B) < 8) colored.set(c, (colored.get(c) ?? 0) + 1);
    }
  }
  return { width, height, inked, colored, pngBytes: png.length };
}

const seriesOf = (svg: string) => [...svg.matchAll(/<path class="series" data-series="([^"]*)" d="([^"]*)"/g)];

describe.skipIf(why !== undefined)(`rddp experiment on a real impaired link${why ? ` (skipped: ${why})` : ''}`, () => {
  it('4 flows, 4 mappings, 0 % and 2 % loss, relay delay/jitter/reorder: verified runs, JSON, CSV and plots', async () => {
    const out = path.join(dir, 'ci');
    const r = await rddp([
      'experiment',
      '--flows', '4',
      '--loss', '0,2',
      '--delay', '2',
      '--jitter', '1',
      '--reorder', '1',
      '--rate', '200',
      '-D', '1',
      '--seed', '4242',
      '--out', out,
    ]); // biome-ignore format: flag pairs
    expect(r.err).toBe('');
    // Exit 1 is a run that did not verify: the table and the flows' lines say which and why.
    expect(r.code, r.out.slice(-4000)).toBe(0);
    expect(r.out).toContain('seed 4242 (repeat with --seed 4242)');
    expect(r.out).toContain('kernel nftables');
    expect(r.out).toContain('user-space packet relay');
    for (const m of MAPPINGS) expect(r.out).toMatch(new RegExp(`\\n ${m}\\s+4\\s+2\\.0\\s.*\\syes\\n`));

    const json = JSON.parse(readFileSync(path.join(out, 'results.json'), 'utf8'));
    expect(json.seed).toBe(4242);
    expect(json.runs).toHaveLength(8);
    expect(new Set(json.runs.map((x: { mapping: string }) => x.mapping))).toEqual(new Set(MAPPINGS));
    const expected = Math.floor(1 * 200);
    let messages = 0;
    for (const run of json.runs) {
      expect(run.verified).toBe(true);
      expect(Number.isInteger(run.seed)).toBe(true);
      expect(run.perFlow).toHaveLength(4);
      for (const f of run.perFlow) {
        expect(f).toMatchObject({ verified: true, messages: expected });
        expect(f.p50Us).toBeGreaterThan(0);
        expect(f.p99Us).toBeGreaterThanOrEqual(f.p50Us);
        expect(f.maxUs).toBeGreaterThanOrEqual(f.p999Us);
        messages += f.messages;
      }
      expect(run.impairments.join(' ')).toContain('user-space packet relay');
      if (run.loss > 0) {
        expect(run.drops).toBeGreaterThan(0); // nftables really dropped packets
        expect(run.lossEvents).toBeGreaterThan(0); // and `nft monitor trace` reported them
      } else expect(run.drops).toBe(0);
    }
    // Same seed, same point: the same per-point seed.
    const seeds = new Map<string, number>();
    for (const run of json.runs) seeds.set(`${run.mapping}/${run.loss}`, run.seed);
    expect(seeds.size).toBe(8);

    const csv = readFileSync(path.join(out, 'samples.csv'), 'utf8').trim().split('\n');
    expect(csv[0]).toMatch(
      /^mapping,flows,loss,delay_ms,seed,flow,seq,.*latency_us,rtt_us,post_wait_us,sender_wait_us,transit_us,own_loss_us,order_wait_us,stall_us,pause_us,process_us,unattributed_us$/,
    );
    expect(csv.length - 1).toBe(messages);

    // The measure (docs/EXPERIMENTS.md "Measures"): the capture found every message, and placed the drops.
    const run = (m: string, loss: number) =>
      json.runs.find((x: { mapping: string; loss: number }) => x.mapping === m && x.loss === loss);
    for (const x of json.runs) {
      expect(x.wire.messagesFound, `${x.mapping} ${x.loss} %`).toBe(4 * expected);
      expect(x.wire.unmatchedDrops, `${x.mapping} ${x.loss} %`).toBe(0);
      expect(x.wire.lostByCapture, `${x.mapping} ${x.loss} %`).toBe(0);
      if (x.loss === 0) expect(x.stallTotalUs).toBe(0);
      else expect(x.wire.dropped, `${x.mapping}: dropped packets found in the capture`).toBe(x.drops);
    }
    const shared = run('tcp-shared', 2);
    expect(shared.stalledMessages, "tcp-shared stalls behind other flows' losses").toBeGreaterThanOrEqual(10);
    expect(shared.stallTotalUs).toBeGreaterThan(50_000);
    for (const control of ['sctp-assocs', 'tcp-conns']) {
      const c = run(control, 2);
      // ≈ 0: at most a coincidence or two (under 1 % of messages), and under 5 % of the shared connection's.
      expect(c.stalledMessages, `${control} is a control: its flows cannot stall each other`).toBeLessThanOrEqual(
        4 * expected * 0.01,
      );
      expect(c.stallTotalUs, `${control} stall`).toBeLessThan(Math.max(5_000, shared.stallTotalUs * 0.05));
    }

    const svgs = readdirSync(out).filter((f) => f.endsWith('.svg'));
    expect(svgs.filter((f) => f.startsWith('tail-')).sort()).toEqual([
      'tail-flows4-loss0-delay2.svg',
      'tail-flows4-loss2-delay2.svg',
    ]);
    expect(svgs.filter((f) => f.startsWith('waits-')).sort()).toEqual([
      'waits-flows4-loss0-delay2.svg',
      'waits-flows4-loss2-delay2.svg',
    ]);
    expect(svgs.filter((f) => f.startsWith('timeline-'))).toHaveLength(8);
    for (const f of svgs) {
      const svg = readFileSync(path.join(out, f), 'utf8');
      const look = render(svg);
      expect(look.width).toBeGreaterThanOrEqual(600);
      expect(look.height).toBeGreaterThanOrEqual(400);
      expect(look.width).toBeLessThanOrEqual(2000);
      expect(look.height).toBeLessThanOrEqual(1200);
      expect(look.inked).toBeGreaterThan(look.width * look.height * 0.01);
      // Every plot says what the run was.
      expect(svg).toMatch(
        /class="caption"[^>]*>4 flows × 200 Sends\/s × 1024 octets, 1 s; loss [02] %\/direction, delay 2 ms \+ U\(0, 1\) ms, reorder 1 %; seed \d+</,
      );
      const series = seriesOf(svg);
      if (f.startsWith('waits-')) {
        // One stacked bar per mapping; under loss, tcp-shared's bar has a stall part.
        const parts = [...svg.matchAll(/class="part" data-bar="([^"]+)" data-part="([^"]+)"/g)];
        expect(new Set(parts.map((p) => p[1]))).toEqual(new Set(MAPPINGS));
        if (f.includes('-loss2-')) expect(parts.some((p) => p[1] === 'tcp-shared' && p[2] === 'stallUs')).toBe(true);
        continue;
      }
      if (f.startsWith('tail-')) {
        expect(series.map((m) => (m[1] as string).split(' ')[0])).toEqual(MAPPINGS);
        expect(svg).toContain('1 − CDF, log');
      } else {
        expect(series.map((m) => m[1])).toEqual(['flow 0', 'flow 1', 'flow 2', 'flow 3']);
        const marks = (svg.match(/class="loss-event"/g) ?? []).length;
        if (f.includes('-loss2-')) expect(marks).toBeGreaterThan(0);
        else expect(marks).toBe(0);
      }
      // Every series has a line of many points, and its colour is on the PNG.
      for (const [i, m] of series.entries()) {
        expect((m[2] as string).split('L').length).toBeGreaterThan(20);
        expect(look.colored.get(COLORS[i] as string)).toBeGreaterThan(50);
      }
    }
  }, 320_000);

  it('two experiments at once on one host: each in namespaces of its own, both verified, none left behind', async () => {
    const args = (seed: string) => [
      'experiment',
      '--flows',
      '2',
      '--loss',
      '1',
      '--rate',
      '100',
      '-D',
      '1',
      '--seed',
      seed,
    ];
    // The second one also runs the I-DATA mapping, after half a second of warm-up (not measured).
    const outB = path.join(dir, 'warm');
    const [a, b] = await Promise.all([
      rddp([...args('1'), '--mappings', 'tcp-conns']),
      rddp([...args('2'), '--mappings', 'tcp-shared,sctp-idata', '--warm-up', '0.5', '--out', outB]),
    ]);
    for (const r of [a, b]) {
      expect(r.code, r.out.slice(-3000) + r.err).toBe(0);
      expect(r.out).toMatch(/topology: namespaces rddp-x\d+-[0-9a-f]{4}-a/);
    }
    expect(b.out).toContain('per flow for 1 s after 0.5 s of warm-up');
    const warm = JSON.parse(readFileSync(path.join(outB, 'results.json'), 'utf8'));
    for (const run of warm.runs) {
      // measured: the 1 s after the warm-up; on the wire (and verified): all 1.5 s of it
      for (const f of run.perFlow) expect(f).toMatchObject({ verified: true, messages: 100 });
      expect(run.wire.messagesFound, run.mapping).toBe(2 * 150);
    }
    const ns = (r: { out: string }) => /namespaces (rddp-x\S+)/.exec(r.out)?.[1];
    expect(ns(a)).not.toBe(ns(b));
    const left = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    for (const r of [a, b]) expect(left).not.toContain((ns(r) as string).slice(0, -2));
  }, 320_000);
});

/** Why user `uid` cannot load the built CLI from this checkout (a clone in a mode-700 folder), or undefined. */
function unreadableBy(uid: number): string | undefined {
  const probe = 'const fs = require("fs"); for (const p of process.argv.slice(1)) fs.accessSync(p, fs.constants.R_OK);';
  const files = [RDDP_JS, path.resolve(__dirname, '../../../node_modules/.pnpm')];
  const r = spawnSync(process.execPath, ['-e', probe, ...files], { uid, encoding: 'utf8', timeout: 10_000 });
  if (r.status === 0) return undefined;
  return `user ${uid} cannot read the checkout (${/EACCES[^\n]*/.exec(r.stderr)?.[0] ?? `exit ${r.status}`}): make it world-readable to run this test`;
}

describe('rddp experiment without privileges', () => {
  it('stops with one line and exit 1 when it cannot build namespaces', async (ctx) => {
    if (process.getuid?.() !== 0) {
      const r = await rddp(['experiment', '--flows', '1', '--loss', '0']);
      expect(r).toMatchObject({ code: 1, out: '' });
      expect(r.err).toMatch(/^rddp: experiment needs root \(network namespaces, nftables, tc\)\n$/);
      return;
    }
    // As root: run it as nobody, who must be able to read the checkout (not so in a `mktemp -d` clone).
    const unreadable = unreadableBy(65534);
    if (unreadable) {
      console.warn(`rddp experiment without privileges skipped: ${unreadable}`);
      ctx.skip(unreadable);
    }
    const r = await rddp(['experiment', '--flows', '1', '--loss', '0'], { uid: 65534 });
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toMatch(/^rddp: experiment needs root \(network namespaces, nftables, tc\)\n$/);
  }, 30_000);
});
