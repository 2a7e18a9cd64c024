/**
 * Every chart the tools write, rendered to PNG (resvg) and looked at: the PNG has the SVG's size and
 * real content (each series' colour drawn), nothing is drawn outside the canvas (the legend is not
 * clipped), the y ticks are "nice" numbers, and the x axis has no more ticks than points. perf -a, soak
 * and sctp-experiment run as processes with `--out DIR`; the bench chart is drawn from its figures.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import { afterAll, describe, expect, it } from 'vitest';
import { type Series, toSvgChart } from '../src/bench/report.js';
import { lineChartSvg } from '../src/charts/line-chart.js';
import { perfChart } from '../src/charts/tool-charts.js';
import type { PerfResult } from '../src/perf/engine.js';
import { run } from './procs.js';

const dir = mkdtempSync(path.join(tmpdir(), 'rddp-charts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];

interface Looked {
  width: number;
  height: number;
  /** Pixels that are not the white background. */
  inked: number;
  /** Pixels of each colour asked for. */
  colored: Map<string, number>;
  /** Bounding box of everything drawn but the background. */
  bbox: { x: number; y: number; width: number; height: number };
  yTicks: string[];
  xTicks: string[];
  legend: string[];
}

const texts = (svg: string, cls: string) =>
  [...svg.matchAll(new RegExp(`<text class="${cls}"[^>]*>([^<]*)</text>`, 'g'))].map((m) => m[1] as string);

function look(svg: string): Looked {
  const attr = (name: string) => Number(new RegExp(`<svg[^>]* ${name}="(\\d+)"`).exec(svg)?.[1]);
  const image = new Resvg(svg, { font: { loadSystemFonts: true } }).render();
  const png = image.asPng();
  // PNG signature, then IHDR: width and height, big-endian, at octets 16 and 20.
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(png.subarray(12, 16).toString('latin1')).toBe('IHDR');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  expect([width, height]).toEqual([attr('width'), attr('height')]);
  const px = image.pixels;
  let inked = 0;
  const colored = new Map(COLORS.map((c) => [c, 0]));
  const rgb = COLORS.map(
    (c) =>
      [
        c,
        Number.parseInt(c.slice(1, 3), 16),
        Number.parseInt(c.slice(3, 5), 16),
        Number.parseInt(c.slice(5, 7), 16),
      ] as const,
  );
  for (let i = 0; i < px.length; i += 4) {
    const [r, g, b] = [px[i] as number, px[i + 1] as number, px[i + 2] as number];
    if (r < 250 || g < 250 || b < 250) inked++;
    for (const [c, R, G, B] of rgb)
      if (Math.abs(r - R) < 8 && Math.abs(g - G) < 8 && Math.abs(b - B) < 8) colored.set(c, (colored.get(c) ?? 0) + 1);
  }
  // Everything drawn, background left out: text is laid out with the system fonts, as a viewer would.
  const bare = svg.replace(/<rect class="background"[^>]*\/>|<rect width="\d+" height="\d+" fill="white"\/>/, '');
  const bb = new Resvg(bare, { font: { loadSystemFonts: true } }).getBBox();
  expect(bb).toBeDefined();
  return {
    width,
    height,
    inked,
    colored,
    bbox: { x: bb?.x ?? 0, y: bb?.y ?? 0, width: bb?.width ?? 0, height: bb?.height ?? 0 },
    yTicks: texts(svg, 'y-tick'),
    xTicks: texts(svg, 'x-tick'),
    legend: texts(svg, 'legend'),
  };
}

/** Ticks called nice: evenly spaced by 1, 2, 2.5 or 5 times a power of ten, each a multiple of the step. */
function expectNiceTicks(labels: readonly string[]): void {
  const v = labels.map((l) => Number(l.replace(/,/g, '')));
  expect(v.every(Number.isFinite), `ticks ${labels.join(' ')}`).toBe(true);
  expect(v.length).toBeGreaterThanOrEqual(3);
  const step = (v[1] as number) - (v[0] as number);
  const mantissa = step / 10 ** Math.floor(Math.log10(step));
  expect(
    [1, 2, 2.5, 5].some((m) => Math.abs(mantissa - m) < 1e-9),
    `step ${step} of ${labels.join(' ')}`,
  ).toBe(true);
  for (const [i, x] of v.entries()) {
    expect(Math.abs(x - (v[0] as number) - i * step)).toBeLessThan(step * 1e-9);
    expect(Math.abs(x / step - Math.round(x / step))).toBeLessThan(1e-9);
  }
}

/** Text renders (resvg with the system fonts; .ci/run installs fonts-dejavu-core), so its extent is checked. */
function expectFonts(): void {
  const svg =
    '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"><text x="4" y="30" font-family="DejaVu Sans, sans-serif" font-size="24">rddp</text></svg>';
  const px = new Resvg(svg, { font: { loadSystemFonts: true } }).render().pixels;
  let ink = 0;
  for (let i = 3; i < px.length; i += 4) if ((px[i] as number) > 0) ink++;
  expect(ink, 'no font renders: install fonts-dejavu-core').toBeGreaterThan(100);
}

/** The checks every chart passes: size, ink, each series drawn, nothing clipped, nice ticks. */
function expectGoodChart(svg: string, series: number, points: number): Looked {
  expectFonts();
  const l = look(svg);
  expect(l.width).toBeGreaterThanOrEqual(600);
  expect(l.height).toBeGreaterThanOrEqual(300);
  expect(l.inked).toBeGreaterThan(0.02 * l.width * l.height);
  // Each series' colour: its legend swatch (14 × 14) at least, and its line and points.
  for (const c of COLORS.slice(0, series)) expect(l.colored.get(c), `pixels of ${c}`).toBeGreaterThan(150);
  // Nothing outside the canvas: the legend and the last tick label fit.
  expect(l.bbox.x).toBeGreaterThanOrEqual(0);
  expect(l.bbox.y).toBeGreaterThanOrEqual(0);
  expect(l.bbox.x + l.bbox.width).toBeLessThanOrEqual(l.width);
  expect(l.bbox.y + l.bbox.height).toBeLessThanOrEqual(l.height);
  expectNiceTicks(l.yTicks);
  expect(l.xTicks.length).toBeGreaterThanOrEqual(Math.min(2, points));
  expect(l.xTicks.length).toBeLessThanOrEqual(points);
  expect(l.legend).toHaveLength(series);
  return l;
}

/** The canvas width of `svg` and, for each legend label, its x and the extent resvg gives its text alone. */
function legendBoxes(svg: string): { width: number; boxes: { label: string; x: number; y: number; right: number }[] } {
  const root = /<svg[^>]*>/.exec(svg)?.[0] as string;
  const width = Number(/ width="(\d+)"/.exec(root)?.[1]);
  const boxes = [...svg.matchAll(/<text class="legend" x="([\d.]+)" y="([\d.]+)">([^<]*)<\/text>/g)].map((m) => {
    const bb = new Resvg(`${root}${m[0]}</svg>`, { font: { loadSystemFonts: true } }).getBBox();
    expect(bb, `legend "${m[3]}" drew nothing`).toBeDefined();
    return { label: m[3] as string, x: Number(m[1]), y: Number(m[2]), right: (bb?.x ?? 0) + (bb?.width ?? 0) };
  });
  return { width, boxes };
}

/** Every legend label ends inside the canvas and before the next swatch on its row. */
function expectLegendFits(svg: string): void {
  const { width, boxes } = legendBoxes(svg);
  for (const [i, b] of boxes.entries()) {
    expect(b.right, `"${b.label}" ends past the canvas (${width})`).toBeLessThanOrEqual(width);
    const next = boxes[i + 1];
    // The next item's swatch starts 20 px before its text.
    if (next && next.y === b.y) expect(b.right, `"${b.label}" runs into "${next.label}"`).toBeLessThan(next.x - 20);
  }
}

/** Pixels of colour `c` (within 8 per channel) in the rows above `yMax`: the plot, not the legend. */
function plotPixels(svg: string, c: string, yMax: number): number {
  const image = new Resvg(svg, { font: { loadSystemFonts: true } }).render();
  const [R, G, B] = [1, 3, 5].map((i) => Number.parseInt(c.slice(i, i + 2), 16)) as [number, number, number];
  const px = image.pixels;
  let n = 0;
  for (let i = 0; i < image.width * yMax * 4; i += 4)
    if (
      Math.abs((px[i] as number) - R) < 8 &&
      Math.abs((px[i + 1] as number) - G) < 8 &&
      Math.abs((px[i + 2] as number) - B) < 8
    )
      n++;
  return n;
}

describe('the chart layout, measured', () => {
  it('legend: every label fits, on one row or wrapped, even one wider than the default canvas', () => {
    expectFonts();
    const pts = [1, 2, 4].map((x) => ({ x, y: x * 10 }));
    const labels = [
      ['rddp MPA/TCP (no CRC)', 'rddp MPA/TCP (CRC)', 'rddp MPA/TCP (CRC + markers)', 'raw Node TCP'],
      ['WWWWWWWWWWWWWWWWWWWWWWWWWWWWWW', 'MMMMMMMMMMMMMMMMMMMMMMMMM', 'mmmmmmmmmmmmmmmmmmmmmmmmmmmm', 'W'],
      [`one label wider than the canvas: ${'WM'.repeat(40)}`, 'short'],
    ];
    for (const set of labels) {
      const svg = lineChartSvg({
        title: 't',
        xLabel: 'x',
        yLabel: 'y',
        xScale: 'log2',
        series: set.map((label) => ({ label, points: pts })),
      });
      expect(legendBoxes(svg).boxes.map((b) => b.label)).toEqual(set);
      expectLegendFits(svg);
      expectGoodChart(svg, Math.min(set.length, 4), 3);
    }
  });

  it('y ticks are nice (1, 2, 2.5 or 5 × 10^k apart) whatever the largest value', () => {
    for (const top of [0.37, 1, 7.3, 97, 410, 1409, 2015, 2048, 12_345, 987_654]) {
      const svg = lineChartSvg({
        title: `top ${top}`,
        xLabel: 'x',
        yLabel: 'y',
        xScale: 'linear',
        series: [{ label: 's', points: [0, 1, 2].map((x) => ({ x, y: (top * x) / 2 })) }],
      });
      const ticks = texts(svg, 'y-tick');
      expectNiceTicks(ticks);
      // The top tick holds the largest value: nothing is drawn above the axis.
      expect(Number((ticks.at(-1) as string).replace(/,/g, ''))).toBeGreaterThanOrEqual(top);
    }
  });

  it('perf: the title is the caller’s; an average equal to the peak and the peak are both visible', () => {
    expectFonts();
    const rows: PerfResult[] = [2, 64, 4096, 65536].map((bytes, i) => ({
      kind: 'bw',
      verified: true,
      row: { bytes, iterations: 100, peakMBps: 100 * (i + 1), avgMBps: 100 * (i + 1), msgRateMpps: 1 },
    }));
    const title = 'rddp perf write_bw, one process, MPA/TCP on 127.0.0.1';
    const svg = perfChart('write_bw', 'tcp', rows, title);
    expect(texts(svg, 'title')).toEqual([title]);
    expect(texts(perfChart('write_bw', 'tcp', rows), 'title')).toEqual(['rddp perf write_bw over tcp']);
    // Above the legend: the peak's colour shows in the dashed average's gaps, the average's in its dashes.
    const legendY = Number(/<text class="legend" x="[\d.]+" y="([\d.]+)"/.exec(svg)?.[1]) - 14;
    const avg = plotPixels(svg, '#1f77b4', legendY);
    const peak = plotPixels(svg, '#ff7f0e', legendY);
    expect(avg, 'average (dashed, on top)').toBeGreaterThan(150);
    expect(peak, 'peak (under the average)').toBeGreaterThan(150);
    // Control: with the average solid and drawn first, as before, the peak hides it.
    const before = lineChartSvg({
      title,
      xLabel: 'x',
      yLabel: 'y',
      xScale: 'log2',
      series: [
        {
          label: 'BW average',
          points: rows.map((r) => ({ x: r.row.bytes, y: (r.row as { avgMBps: number }).avgMBps })),
        },
        {
          label: 'BW peak',
          points: rows.map((r) => ({ x: r.row.bytes, y: (r.row as { peakMBps: number }).peakMBps })),
        },
      ],
    });
    expect(plotPixels(before, '#1f77b4', legendY)).toBeLessThan(avg / 4);
  });
});

describe('charts rendered to PNG', () => {
  it('bench bandwidth.svg: legend inside the canvas, ticks 0, 500, 1,000…, one x tick per size', () => {
    // Figures as a bench run makes them (docs/bench/bench.md's magnitudes).
    const sizes = [4096, 65536, 1 << 20];
    const bw: Record<string, number[]> = {
      CRC: [470, 939, 1409],
      'no CRC': [782, 1862, 2015],
      'CRC + markers': [380, 479, 512],
    };
    const series: Series[] = Object.entries(bw).map(([mode, v]) => ({
      label: `rddp MPA/TCP (${mode})`,
      points: sizes.map((size, i) => ({ size, value: v[i] as number })),
    }));
    series.push({
      label: 'raw Node TCP',
      points: sizes.map((size, i) => ({ size, value: [958, 1067, 1503][i] as number })),
    });
    const svg = toSvgChart('RDMA Write bandwidth over MPA/TCP vs raw TCP', 'MB/s', series);
    const l = expectGoodChart(svg, 4, 3);
    expect(l.xTicks).toEqual(['4K', '64K', '1M']);
    expect(l.yTicks.slice(0, 3)).toEqual(['0', '500', '1,000']);
    expect(l.legend).toEqual(series.map((s) => s.label));
  });

  it('perf -a --out DIR: write_bw.txt and write_bw.svg (bandwidth), read_lat.svg (latency)', async () => {
    const out = path.join(dir, 'perf');
    for (const test of ['write_bw', 'read_lat']) {
      const r = await run(['perf', test, '--loopback', '--transport', 'loopback', '-a', '-n', '20', '--out', out]).done;
      expect(r.code).toBe(0);
      const table = readFileSync(path.join(out, `${test}.txt`), 'utf8');
      expect(table).toMatch(/#bytes/);
      expect(table.split('\n').filter((l) => /^ \d+ /.test(l))).toHaveLength(23); // 2 .. 8 MiB
      const l = expectGoodChart(readFileSync(path.join(out, `${test}.svg`), 'utf8'), 2, 23);
      expect(l.xTicks.length).toBeLessThanOrEqual(10);
      expect(l.xTicks[0]).toBe('2');
      expect(l.legend).toEqual(test === 'write_bw' ? ['BW average', 'BW peak'] : ['t_typical (median)', 't_p99']);
    }
  }, 120_000);

  it('soak --out DIR: soak.jsonl and soak-rss.svg, RSS against time', async () => {
    const out = path.join(dir, 'soak');
    // A budget this test does not judge (soak.test.ts does): the chart is what is looked at here.
    const r = await run(['soak', '--minutes', '0.1', '--budget', '4096', '--out', out]).done;
    expect(r.code).toBe(0);
    const samples = readFileSync(path.join(out, 'soak.jsonl'), 'utf8').trim().split('\n').slice(0, -1);
    expect(samples.length).toBeGreaterThanOrEqual(5);
    const l = expectGoodChart(readFileSync(path.join(out, 'soak-rss.svg'), 'utf8'), 1, samples.length);
    expect(l.legend).toEqual(['RSS (MiB)']);
    expectNiceTicks(l.xTicks);
  }, 60_000);

  it('sctp-experiment --out DIR: the table, the bandwidth chart and the latency chart', async () => {
    const out = path.join(dir, 'sctp');
    const r = await run(['sctp-experiment', '--streams', '1,2,4', '-n', '20', '--pings', '10', '--out', out]).done;
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(out, 'sctp-experiment.txt'), 'utf8')).toMatch(/#bulk[\s\S]* 4 /);
    const bw = expectGoodChart(readFileSync(path.join(out, 'sctp-bandwidth.svg'), 'utf8'), 3, 3);
    expect(bw.xTicks).toEqual(['1', '2', '4']);
    expect(bw.legend).toEqual(['aggregate', 'slowest stream', 'fastest stream']);
    const lat = expectGoodChart(readFileSync(path.join(out, 'sctp-latency.svg'), 'utf8'), 2, 3);
    expect(lat.legend).toEqual(['ping p50', 'ping p99']);
  }, 120_000);
});
