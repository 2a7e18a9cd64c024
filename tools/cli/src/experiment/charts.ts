/**
 * The experiment's plots, with the CLI's charting (d3-scale, d3-shape; the palette and text metrics of
 * ../charts/line-chart.ts): the latency tail per mapping (1 − CDF on a log axis against log latency, so
 * p99 and p99.9 are visible), per-flow latency over time with every dropped packet of measured data
 * drawn as a vertical mark, and the waits (stall, sender wait, own loss, …) stacked per mapping. Every
 * series is a `<path class="series" data-series="…">`, every mark a `<line class="loss-event">`, every
 * stacked part a `<rect class="part" data-part="…">`, and every plot has a caption saying what the run was.
 */
import { scaleLinear, scaleLog } from 'd3-scale';
import { line } from 'd3-shape';
import { CHART_COLORS, lineChartSvg, textWidth } from '../charts/line-chart.js';
import type { LatencyParts, Sample } from './analysis.js';

export interface PlotSeries {
  readonly label: string;
  readonly points: readonly { x: number; y: number }[];
}

interface Plot {
  readonly title: string;
  /** What the run was (flows, rate, size, loss, delay, seed): a line under the title. */
  readonly caption?: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly xLog?: boolean;
  /** y on a log scale from yMin to yMax (1 − CDF). */
  readonly yLog?: { readonly min: number; readonly max: number };
  readonly yMax?: number;
  readonly series: readonly PlotSeries[];
  /** x positions of vertical marks (loss events), with their legend label. */
  readonly marks?: { label: string; xs: readonly number[] };
}

const W = 860;
/** Loss marks: grey, a colour no series takes. */
const MARK_COLOR = '#555555';
const PLOT_H = 320;
const FONT = 12;

function esc(s: string): string {
  return s.replace(/[<>&"]/g, (ch) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[ch] as string);
}
const r1 = (v: number) => Math.round(v * 10) / 10;

/** A legend's swatches and labels, one row every 20 px from `top`. */
function legendSvg(items: readonly { label: string; x: number; row: number; color: string }[], top: number): string[] {
  return items.flatMap((it) => {
    const ly = top + it.row * 20;
    return [
      `<rect x="${it.x}" y="${ly}" width="14" height="14" fill="${it.color}"/>`,
      `<text class="legend" x="${it.x + 20}" y="${ly + 11}">${esc(it.label)}</text>`,
    ];
  });
}

export function plotSvg(p: Plot): string {
  const pts = p.series.flatMap((s) => s.points).filter((q) => Number.isFinite(q.x) && Number.isFinite(q.y));
  const xs = pts.map((q) => q.x);
  const ys = pts.map((q) => q.y);
  const xLo = xs.length ? xs.reduce((a, b) => Math.min(a, b)) : 1;
  const xHi = xs.length ? xs.reduce((a, b) => Math.max(a, b)) : 2;
  const yHi = p.yMax ?? (ys.length ? ys.reduce((a, b) => Math.max(a, b)) : 1);
  const y = p.yLog
    ? scaleLog().base(10).domain([p.yLog.min, p.yLog.max])
    : scaleLinear()
        .domain([0, yHi > 0 ? yHi : 1])
        .nice(6);
  const yTicks = p.yLog
    ? y.ticks().filter((t) => Math.abs(Math.log10(t) - Math.round(Math.log10(t))) < 1e-9)
    : y.ticks(6);
  const yFmt = p.yLog ? (v: number) => String(v) : y.tickFormat(6);
  const left = 16 + FONT + 10 + Math.max(0, ...yTicks.map((t) => textWidth(yFmt(t)))) + 8;
  const right = 30;
  const top = p.caption ? 62 : 44;
  const plotW = W - left - right;
  const x = p.xLog
    ? scaleLog()
        .base(10)
        .domain([Math.max(xLo, 1e-3), Math.max(xHi, xLo * 10, 1e-2)])
        .nice()
    : scaleLinear()
        .domain(xLo === xHi ? [xLo - 1, xHi + 1] : [xLo, xHi])
        .nice();
  x.range([left, left + plotW]);
  y.range([top + PLOT_H, top]);
  const xTicks = p.xLog
    ? x.ticks().filter((t) => Math.abs(Math.log10(t) - Math.round(Math.log10(t))) < 1e-9)
    : x.ticks(8);
  const xFmt = p.xLog ? (v: number) => String(v) : x.tickFormat(8);
  const axisY = top + PLOT_H;
  // Legend rows under the axis label.
  const labels = [...p.series.map((s) => s.label), ...(p.marks ? [p.marks.label] : [])];
  const legendTop = axisY + 62;
  const items: { label: string; x: number; row: number; color: string }[] = [];
  let cx = left;
  let row = 0;
  labels.forEach((label, i) => {
    const w = 20 + textWidth(label) + 22;
    if (cx > left && cx + w > W - 12) {
      row++;
      cx = left;
    }
    const color = p.marks && i === labels.length - 1 ? MARK_COLOR : (CHART_COLORS[i % CHART_COLORS.length] as string);
    items.push({ label, x: cx, row, color });
    cx += w;
  });
  const H = legendTop + (labels.length ? (row + 1) * 20 : 0) + 12;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="${FONT}">`,
    `<rect class="background" width="${W}" height="${H}" fill="white"/>`,
    `<text class="title" x="${W / 2}" y="26" text-anchor="middle" font-size="15">${esc(p.title)}</text>`,
  ];
  if (p.caption)
    out.push(`<text class="caption" x="${W / 2}" y="44" text-anchor="middle" font-size="11">${esc(p.caption)}</text>`);
  for (const t of yTicks) {
    const py = r1(y(t));
    out.push(
      `<line x1="${left}" y1="${py}" x2="${left + plotW}" y2="${py}" stroke="#e0e0e0"/>`,
      `<text class="y-tick" x="${left - 8}" y="${r1(py + 4)}" text-anchor="end">${esc(yFmt(t))}</text>`,
    );
  }
  for (const t of xTicks) {
    const px = r1(x(t));
    out.push(
      `<line x1="${px}" y1="${axisY}" x2="${px}" y2="${axisY + 4}" stroke="black"/>`,
      `<text class="x-tick" x="${px}" y="${axisY + 18}" text-anchor="middle">${esc(xFmt(t))}</text>`,
    );
  }
  // Loss marks under the series: faint dashed lines across the plot.
  if (p.marks)
    for (const mx of p.marks.xs) {
      const px = r1(x(mx));
      if (px < left || px > left + plotW) continue;
      out.push(
        `<line class="loss-event" x1="${px}" y1="${top}" x2="${px}" y2="${axisY}" stroke="${MARK_COLOR}" stroke-opacity="0.35" stroke-dasharray="3 3"/>`,
      );
    }
  out.push(
    `<line x1="${left}" y1="${axisY}" x2="${left + plotW}" y2="${axisY}" stroke="black"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${axisY}" stroke="black"/>`,
    `<text class="x-label" x="${r1(left + plotW / 2)}" y="${axisY + 40}" text-anchor="middle">${esc(p.xLabel)}</text>`,
    `<text class="y-label" x="${16 + FONT - 2}" y="${r1(top + PLOT_H / 2)}" transform="rotate(-90 ${16 + FONT - 2} ${r1(top + PLOT_H / 2)})" text-anchor="middle">${esc(p.yLabel)}</text>`,
  );
  const [yLo, yTop] = y.domain() as [number, number];
  const path = line<{ x: number; y: number }>(
    (q) => r1(x(q.x)),
    (q) => r1(y(Math.max(Math.min(q.y, yTop), yLo))),
  );
  p.series.forEach((s, i) => {
    const color = CHART_COLORS[i % CHART_COLORS.length] as string;
    const ok = s.points.filter(
      (q) => Number.isFinite(q.x) && Number.isFinite(q.y) && (!p.xLog || q.x > 0) && (!p.yLog || q.y > 0),
    );
    out.push(
      `<path class="series" data-series="${esc(s.label)}" d="${path(ok) ?? ''}" fill="none" stroke="${color}" stroke-width="1.5"/>`,
    );
  });
  out.push(...legendSvg(items, legendTop), '</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * The latency tail: (latency ms, 1 − F) at every message, F(x) = share of messages at or under x,
 * thinned to at most `n` points evenly spaced on the log of 1 − F (the tail keeps every point).
 */
export function tailPoints(latUs: readonly number[], n = 400): { x: number; y: number }[] {
  const s = [...latUs].sort((a, b) => a - b);
  const N = s.length;
  if (!N) return [];
  const out: { x: number; y: number }[] = [];
  let lastLog = Number.POSITIVE_INFINITY;
  const step = Math.log10(N) / n;
  for (let i = 0; i < N; i++) {
    // 1 − F just below message i: the share of messages at or over it.
    const y = (N - i) / N;
    const l = Math.log10(y);
    if (i > 0 && i < N - 1 && lastLog - l < step) continue;
    lastLog = l;
    out.push({ x: Math.max(s[i] as number, 1) / 1000, y });
  }
  return out;
}

/** The latency tail per mapping (all flows' messages together): 1 − CDF, both axes log. */
export function tailChart(
  title: string,
  caption: string,
  byMapping: readonly { label: string; latUs: readonly number[] }[],
): string {
  const most = Math.max(1, ...byMapping.map((m) => m.latUs.length));
  return plotSvg({
    title,
    caption,
    xLabel: 'one-way message latency (ms, log scale)',
    yLabel: 'share of messages slower (1 − CDF, log)',
    xLog: true,
    yLog: { min: 10 ** Math.floor(Math.log10(1 / most)), max: 1 },
    series: byMapping.map((m) => ({ label: m.label, points: tailPoints(m.latUs) })),
  });
}

/** Per-flow latency against time (the first `maxFlows` flows), loss events marked. */
export function timelineChart(
  title: string,
  caption: string,
  samples: readonly Sample[],
  startUs: number,
  lossesUs: readonly number[],
  maxFlows = 8,
): string {
  const flows = [...new Set(samples.map((s) => s.flow))].sort((a, b) => a - b).slice(0, maxFlows);
  return plotSvg({
    title,
    caption,
    xLabel: 'time since start (s)',
    yLabel: 'one-way message latency (ms)',
    series: flows.map((f) => ({
      label: `flow ${f}`,
      points: samples
        .filter((s) => s.flow === f)
        .map((s) => ({ x: (s.scheduledUs - startUs) / 1e6, y: s.latencyUs / 1000 })),
    })),
    marks: {
      label: `packet of measured data dropped (${lossesUs.length})`,
      xs: lossesUs.map((t) => (t - startUs) / 1e6),
    },
  });
}

/** A sweep's measure (p99, stall) against loss, one series per mapping: the CLI's line chart. */
export function sweepChart(title: string, yLabel: string, series: readonly PlotSeries[]): string {
  return lineChartSvg({ title, xLabel: 'packet loss per direction (%)', yLabel, xScale: 'linear', series });
}

/** The waits the breakdown chart stacks, in order, with their legend text. */
export const WAIT_PARTS = [
  ['stallUs', "head-of-line stall (other flows' loss)"],
  ['senderWaitUs', 'sender wait (posted → on the wire)'],
  ['ownLossUs', 'own loss repair'],
  ['orderWaitUs', 'own flow order'],
  ['postWaitUs', 'credit / initiator timer'],
  ['pauseUs', 'receiver paused'],
] as const satisfies readonly (readonly [keyof LatencyParts, string])[];

/** Per mapping, one horizontal bar: the time its messages spent in each wait, summed (s), stacked. */
export function waitsChart(
  title: string,
  caption: string,
  rows: readonly { readonly label: string; readonly parts: LatencyParts }[],
): string {
  const labelW = Math.max(...rows.map((r) => textWidth(r.label)), 40) + 16;
  const left = 16 + labelW;
  const right = 40;
  const top = 62;
  const barH = 40;
  const gap = 20;
  const plotW = W - left - right;
  const totals = rows.map((r) => WAIT_PARTS.reduce((a, [k]) => a + r.parts[k], 0) / 1e6);
  const x = scaleLinear()
    .domain([0, Math.max(...totals, 1e-3)])
    .nice(6)
    .range([left, left + plotW]);
  const axisY = top + rows.length * (barH + gap);
  const legendTop = axisY + 52;
  const items: { label: string; x: number; row: number; color: string; key: string }[] = [];
  let cx = left;
  let row = 0;
  WAIT_PARTS.forEach(([k, label], i) => {
    const w = 20 + textWidth(label) + 22;
    if (cx > left && cx + w > W - 12) {
      row++;
      cx = left;
    }
    items.push({ label, key: k, x: cx, row, color: CHART_COLORS[(i + 3) % CHART_COLORS.length] as string });
    cx += w;
  });
  const H = Math.max(400, legendTop + (row + 1) * 20 + 12);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="${FONT}">`,
    `<rect class="background" width="${W}" height="${H}" fill="white"/>`,
    `<text class="title" x="${W / 2}" y="26" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    `<text class="caption" x="${W / 2}" y="44" text-anchor="middle" font-size="11">${esc(caption)}</text>`,
  ];
  for (const t of x.ticks(6)) {
    const px = r1(x(t));
    out.push(
      `<line x1="${px}" y1="${top - 4}" x2="${px}" y2="${axisY}" stroke="#e0e0e0"/>`,
      `<text class="x-tick" x="${px}" y="${axisY + 18}" text-anchor="middle">${esc(x.tickFormat(6)(t))}</text>`,
    );
  }
  rows.forEach((r, i) => {
    const y = top + i * (barH + gap);
    out.push(
      `<text class="bar-label" x="${left - 8}" y="${r1(y + barH / 2 + 4)}" text-anchor="end">${esc(r.label)}</text>`,
    );
    let from = 0;
    for (const it of items) {
      const v = r.parts[it.key as keyof LatencyParts] / 1e6;
      if (v <= 0) continue;
      const x0 = x(from);
      const x1 = x(from + v);
      out.push(
        `<rect class="part" data-bar="${esc(r.label)}" data-part="${it.key}" data-seconds="${v.toFixed(6)}" x="${r1(x0)}" y="${y}" width="${Math.max(0.5, r1(x1 - x0))}" height="${barH}" fill="${it.color}"/>`,
      );
      from += v;
    }
    // Each bar's figures in words, since one mapping's waits can dwarf another's.
    const secs = (us: number) => (us / 1e6 < 0.01 ? `${(us / 1000).toFixed(1)} ms` : `${(us / 1e6).toFixed(2)} s`);
    const words = `stall ${secs(r.parts.stallUs)}, sender wait ${secs(r.parts.senderWaitUs)}, total ${secs(from * 1e6)}`;
    const tx = Math.min(x(from) + 8, left + plotW - textWidth(words));
    out.push(`<text class="bar-value" x="${r1(tx)}" y="${r1(y + barH / 2 + 4)}">${esc(words)}</text>`);
  });
  out.push(
    `<line x1="${left}" y1="${axisY}" x2="${left + plotW}" y2="${axisY}" stroke="black"/>`,
    `<text class="x-label" x="${r1(left + plotW / 2)}" y="${axisY + 38}" text-anchor="middle">time messages spent waiting, summed over the run (s)</text>`,
  );
  out.push(...legendSvg(items, legendTop), '</svg>');
  return `${out.join('\n')}\n`;
}
