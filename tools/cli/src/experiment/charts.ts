/**
 * The experiment's plots, with the CLI's charting (d3-scale, d3-shape; the palette and text metrics of
 * ../charts/line-chart.ts): a latency CDF per mapping (log x), and per-flow latency over time with the
 * loss events nftables reported drawn as vertical marks. Every series is a `<path class="series"
 * data-series="…">` and every mark a `<line class="loss-event">`, so the SVG says what it shows.
 */
import { scaleLinear, scaleLog } from 'd3-scale';
import { line } from 'd3-shape';
import { CHART_COLORS, lineChartSvg, textWidth } from '../charts/line-chart.js';
import { quantile, type Sample } from './analysis.js';

export interface PlotSeries {
  readonly label: string;
  readonly points: readonly { x: number; y: number }[];
}

interface Plot {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly xLog?: boolean;
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

export function plotSvg(p: Plot): string {
  const pts = p.series.flatMap((s) => s.points).filter((q) => Number.isFinite(q.x) && Number.isFinite(q.y));
  const xs = pts.map((q) => q.x);
  const ys = pts.map((q) => q.y);
  const xLo = xs.length ? xs.reduce((a, b) => Math.min(a, b)) : 1;
  const xHi = xs.length ? xs.reduce((a, b) => Math.max(a, b)) : 2;
  const yHi = p.yMax ?? (ys.length ? ys.reduce((a, b) => Math.max(a, b)) : 1);
  const y = scaleLinear()
    .domain([0, yHi > 0 ? yHi : 1])
    .nice(6);
  const yTicks = y.ticks(6);
  const yFmt = y.tickFormat(6);
  const left = 16 + FONT + 10 + Math.max(0, ...yTicks.map((t) => textWidth(yFmt(t)))) + 8;
  const right = 30;
  const top = 44;
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
  const path = line<{ x: number; y: number }>(
    (q) => r1(x(q.x)),
    (q) => r1(y(Math.min(q.y, y.domain()[1] as number))),
  );
  p.series.forEach((s, i) => {
    const color = CHART_COLORS[i % CHART_COLORS.length] as string;
    const ok = s.points.filter((q) => Number.isFinite(q.x) && Number.isFinite(q.y) && (!p.xLog || q.x > 0));
    out.push(
      `<path class="series" data-series="${esc(s.label)}" d="${path(ok) ?? ''}" fill="none" stroke="${color}" stroke-width="1.5"/>`,
    );
  });
  for (const it of items) {
    const ly = legendTop + it.row * 20;
    out.push(
      `<rect x="${it.x}" y="${ly}" width="14" height="14" fill="${it.color}"/>`,
      `<text class="legend" x="${it.x + 20}" y="${ly + 11}">${esc(it.label)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** Latency CDF points (ms, fraction), at most `n` quantiles. */
export function cdfPoints(latUs: readonly number[], n = 400): { x: number; y: number }[] {
  const s = [...latUs].sort((a, b) => a - b);
  if (!s.length) return [];
  const out: { x: number; y: number }[] = [];
  const steps = Math.min(n, s.length);
  for (let i = 1; i <= steps; i++) {
    const q = i / steps;
    out.push({ x: Math.max(quantile(s, q), 1) / 1000, y: q });
  }
  return out;
}

/** One CDF per mapping (all flows' messages together). */
export function cdfChart(title: string, byMapping: readonly { label: string; latUs: readonly number[] }[]): string {
  return plotSvg({
    title,
    xLabel: 'one-way message latency (ms, log scale)',
    yLabel: 'fraction of messages',
    xLog: true,
    yMax: 1,
    series: byMapping.map((m) => ({ label: m.label, points: cdfPoints(m.latUs) })),
  });
}

/** Per-flow latency against time (the first `maxFlows` flows), loss events marked. */
export function timelineChart(
  title: string,
  samples: readonly Sample[],
  startUs: number,
  lossesUs: readonly number[],
  maxFlows = 8,
): string {
  const flows = [...new Set(samples.map((s) => s.flow))].sort((a, b) => a - b).slice(0, maxFlows);
  return plotSvg({
    title,
    xLabel: 'time since start (s)',
    yLabel: 'one-way message latency (ms)',
    series: flows.map((f) => ({
      label: `flow ${f}`,
      points: samples
        .filter((s) => s.flow === f)
        .map((s) => ({ x: (s.scheduledUs - startUs) / 1e6, y: s.latencyUs / 1000 })),
    })),
    marks: { label: `packet dropped by nftables (${lossesUs.length})`, xs: lossesUs.map((t) => (t - startUs) / 1e6) },
  });
}

/** A sweep's measure (p99, stall) against loss, one series per mapping: the CLI's line chart. */
export function sweepChart(title: string, yLabel: string, series: readonly PlotSeries[]): string {
  return lineChartSvg({ title, xLabel: 'packet loss per direction (%)', yLabel, xScale: 'linear', series });
}
