/**
 * One line chart for every tool that draws (bench, perf -a, soak, sctp-experiment): scales and "nice"
 * ticks from d3-scale, lines from d3-shape, and a layout sized from its text so nothing is clipped —
 * the legend wraps in rows under the plot and the canvas grows to hold it. A dashed series is drawn
 * after the solid ones, so a line equal to another (a perf run's average under its peak) stays visible.
 */
import { type ScaleContinuousNumeric, scaleLinear, scaleLog } from 'd3-scale';
import { line } from 'd3-shape';

export interface ChartPoint {
  readonly x: number;
  readonly y: number;
}

export interface ChartSeries {
  readonly label: string;
  readonly points: readonly ChartPoint[];
  /** Draw the line dashed and on top of the solid lines (its legend swatch is dashed too). */
  readonly dashed?: boolean;
}

export interface LineChart {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  /** log2: message sizes or counts that double (ticks at the values drawn); linear: time (nice ticks). */
  readonly xScale: 'log2' | 'linear';
  /** Tick labels on x (default: d3's format for the ticks). */
  readonly xFormat?: (v: number) => string;
  /** Start y at 0 (default); false fits y to the values (RSS over time). */
  readonly yFromZero?: boolean;
  readonly series: readonly ChartSeries[];
  /** Canvas width in px (default 760; grows if the title needs it). */
  readonly width?: number;
}

/** Tableau 10, d3's schemeCategory10. */
export const CHART_COLORS = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];

const FONT = 12;
const TITLE_FONT = 15;
const PLOT_HEIGHT = 280;
/**
 * Advance widths of DejaVu Sans (the charts' first font; .ci/run installs it) for U+0020..U+007E, in
 * thousandths of an em, read from the font's hmtx table. Other characters count as 1 em, its widest.
 */
const DEJAVU_ADVANCE = [
  318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636, 636,
  636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863,
  748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635,
  615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636,
  337, 636, 838,
];
/** Headroom over the DejaVu advances, for a viewer that falls back to a wider sans-serif. */
const TEXT_SLACK = 1.05;
/** At most this many x ticks; never more than the distinct x values drawn. */
const MAX_X_TICKS = 10;
/** Side of a legend swatch, px. */
const LEGEND_SWATCH = 14;
/** A dashed series' stroke: dashes and gaps long enough that a solid line under it shows in the gaps. */
const DASH = '8 5';

/** Width in px that `s` takes in DejaVu Sans at `size` px, with a little headroom. */
export function textWidth(s: string, size = FONT): number {
  let em = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    em += (c >= 0x20 && c <= 0x7e ? (DEJAVU_ADVANCE[c - 0x20] as number) : 1000) / 1000;
  }
  return Math.ceil(em * size * TEXT_SLACK);
}

/** A standalone SVG document of `c`. */
export function lineChartSvg(c: LineChart): string {
  const series = c.series.map((s, i) => ({
    label: s.label,
    dashed: s.dashed === true,
    color: CHART_COLORS[i % CHART_COLORS.length] as string,
    points: s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).sort((a, b) => a.x - b.x),
  }));
  const all = series.flatMap((s) => s.points);
  const xsDistinct = [...new Set(all.map((p) => p.x))].sort((a, b) => a - b);

  // y: d3's nice domain and ticks (1, 2 or 5 times a power of ten).
  const ys = all.map((p) => p.y);
  const yHi = ys.length ? Math.max(...ys) : 1;
  const yLo = c.yFromZero === false && ys.length ? Math.min(...ys) : 0;
  const y = scaleLinear()
    .domain(yLo === yHi ? [yLo, yLo + 1] : [yLo, yHi])
    .nice(6);
  const yTicks = y.ticks(6);
  const yFmt = y.tickFormat(6);
  const yTickLabels = yTicks.map(yFmt);

  // x: log2 for sizes (positive values), linear for time.
  const xLog = c.xScale === 'log2' && xsDistinct.every((v) => v > 0);
  const [xMin, xMax] = xsDistinct.length ? [xsDistinct[0] as number, xsDistinct.at(-1) as number] : [1, 2];
  const x: ScaleContinuousNumeric<number, number> = xLog
    ? scaleLog()
        .base(2)
        .domain(xMin === xMax ? [xMin / 2, xMax * 2] : [xMin, xMax])
    : scaleLinear()
        .domain(xMin === xMax ? [xMin - 1, xMax + 1] : [xMin, xMax])
        .nice();

  // Margins from the text they hold.
  const left = 16 + FONT + 10 + Math.max(0, ...yTickLabels.map((s) => textWidth(s))) + 8;
  const xFmtOf = (ticks: number[]) => c.xFormat ?? (xLog ? (v: number) => String(v) : x.tickFormat(ticks.length));
  const provisional = pickXTicks(x, xLog, xsDistinct, 300, c.xFormat);
  const lastLabel = xFmtOf(provisional)(provisional.at(-1) ?? 0);
  const right = 20 + Math.ceil(textWidth(lastLabel) / 2);
  const legendW = (label: string) => LEGEND_SWATCH + 6 + textWidth(label) + 22;
  // Wide enough for the title, a plot of 200 px, and the widest legend item on a row of its own.
  const W = Math.max(
    c.width ?? 760,
    textWidth(c.title, TITLE_FONT) + 40,
    left + right + 200,
    left + Math.max(0, ...series.map((s) => legendW(s.label))) + 12,
  );
  const top = 44;
  const plotW = W - left - right;
  x.range([left, left + plotW]);
  y.range([top + PLOT_HEIGHT, top]);
  const xTicks = pickXTicks(x, xLog, xsDistinct, plotW, c.xFormat);
  const xFmt = xFmtOf(xTicks);

  // Legend under the x axis label, wrapped in rows within the canvas.
  const legendTop = top + PLOT_HEIGHT + 62;
  const rowH = 20;
  const items: { label: string; x: number; row: number; color: string; dashed: boolean }[] = [];
  let cx = left;
  let row = 0;
  for (const s of series) {
    const w = legendW(s.label);
    if (cx > left && cx + w > W - 12) {
      row++;
      cx = left;
    }
    items.push({ label: s.label, x: cx, row, color: s.color, dashed: s.dashed });
    cx += w;
  }
  const H = legendTop + (series.length ? (row + 1) * rowH : 0) + 12;

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="${FONT}">`,
    `<rect class="background" width="${W}" height="${H}" fill="white"/>`,
    `<text class="title" x="${W / 2}" y="26" text-anchor="middle" font-size="${TITLE_FONT}">${esc(c.title)}</text>`,
  ];
  // y grid, ticks and labels
  for (const [i, t] of yTicks.entries()) {
    const py = r1(y(t));
    out.push(
      `<line x1="${left}" y1="${py}" x2="${left + plotW}" y2="${py}" stroke="#e0e0e0"/>`,
      `<line x1="${left - 4}" y1="${py}" x2="${left}" y2="${py}" stroke="black"/>`,
      `<text class="y-tick" x="${left - 8}" y="${r1(py + 4)}" text-anchor="end">${esc(yTickLabels[i] as string)}</text>`,
    );
  }
  // x ticks and labels
  const axisY = top + PLOT_HEIGHT;
  for (const t of xTicks) {
    const px = r1(x(t));
    out.push(
      `<line x1="${px}" y1="${axisY}" x2="${px}" y2="${axisY + 4}" stroke="black"/>`,
      `<text class="x-tick" x="${px}" y="${axisY + 18}" text-anchor="middle">${esc(xFmt(t))}</text>`,
    );
  }
  out.push(
    `<line x1="${left}" y1="${axisY}" x2="${left + plotW}" y2="${axisY}" stroke="black"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${axisY}" stroke="black"/>`,
    `<text class="x-label" x="${r1(left + plotW / 2)}" y="${axisY + 40}" text-anchor="middle">${esc(c.xLabel)}</text>`,
    `<text class="y-label" x="${16 + FONT - 2}" y="${r1(top + PLOT_HEIGHT / 2)}" transform="rotate(-90 ${16 + FONT - 2} ${r1(top + PLOT_HEIGHT / 2)})" text-anchor="middle">${esc(c.yLabel)}</text>`,
  );
  // series
  const path = line<ChartPoint>(
    (p) => r1(x(p.x)),
    (p) => r1(y(p.y)),
  );
  // Solid lines first, dashed ones on top; points (solid series: discs, dashed: rings) over all lines.
  const order = [...series.filter((s) => !s.dashed), ...series.filter((s) => s.dashed)];
  for (const s of order)
    if (s.points.length > 1)
      out.push(
        `<path class="series" d="${path(s.points) ?? ''}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ` stroke-dasharray="${DASH}"` : ''}/>`,
      );
  for (const s of order)
    if (s.points.length <= 40)
      for (const p of s.points)
        out.push(
          s.dashed
            ? `<circle cx="${r1(x(p.x))}" cy="${r1(y(p.y))}" r="4" fill="none" stroke="${s.color}" stroke-width="2"/>`
            : `<circle cx="${r1(x(p.x))}" cy="${r1(y(p.y))}" r="3" fill="${s.color}"/>`,
        );
  // legend: a filled swatch for a solid line, a dashed stroke for a dashed one
  for (const it of items) {
    const ly = legendTop + it.row * rowH;
    out.push(
      it.dashed
        ? `<line x1="${it.x}" y1="${ly + 7}" x2="${it.x + LEGEND_SWATCH}" y2="${ly + 7}" stroke="${it.color}" stroke-width="4" stroke-dasharray="5 2"/>`
        : `<rect x="${it.x}" y="${ly}" width="${LEGEND_SWATCH}" height="${LEGEND_SWATCH}" fill="${it.color}"/>`,
      `<text class="legend" x="${it.x + LEGEND_SWATCH + 6}" y="${ly + 11}">${esc(it.label)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * x ticks: on a log2 axis the values drawn (thinned to every k-th so their labels do not overlap), on a
 * linear axis d3's nice ticks; either way never more than MAX_X_TICKS nor more than the values drawn.
 */
function pickXTicks(
  x: ScaleContinuousNumeric<number, number>,
  log: boolean,
  values: readonly number[],
  plotW: number,
  format?: (v: number) => string,
): number[] {
  const n = Math.max(1, values.length);
  const fits = (ticks: number[], fmt: (v: number) => string) => {
    if (ticks.length <= 1) return true;
    const widest = Math.max(...ticks.map((t) => textWidth(fmt(t))));
    return plotW / (ticks.length - 1) >= widest + 10;
  };
  if (log) {
    const fmt = format ?? String;
    for (let k = 1; ; k++) {
      const ticks = values.filter((_, i) => i % k === 0);
      if ((ticks.length <= MAX_X_TICKS && fits(ticks, fmt)) || ticks.length <= 2) return ticks;
    }
  }
  for (let count = Math.min(MAX_X_TICKS, n); ; count--) {
    const ticks = x.ticks(count);
    if ((ticks.length <= Math.min(MAX_X_TICKS, n) && fits(ticks, format ?? x.tickFormat(count))) || count <= 1)
      return ticks.slice(0, Math.min(MAX_X_TICKS, n));
  }
}

/** Sizes as perftest prints them on charts: 64, 4K, 1M. */
export function humanSize(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)}M`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024}K`;
  return String(n);
}

function r1(v: number): number {
  return Math.round(v * 10) / 10;
}

function esc(s: string): string {
  return s.replace(/[<>&"]/g, (ch) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[ch] as string);
}
