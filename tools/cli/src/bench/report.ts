/** Benchmark results: one JSON object per figure, a Markdown table, an SVG chart. */
import { humanSize, lineChartSvg } from '../charts/line-chart.js';

export { humanSize };

export interface Figure {
  readonly name: string;
  readonly unit: string;
  /** Median of the rounds for the subject. */
  readonly value: number;
  /** Median of the rounds for the baseline, measured alternately in the same run. */
  readonly baseline: number;
  /** value / baseline for "higher is better" units, baseline / value for "lower is better" ones. */
  readonly ratio: number;
  /** The target ratio, when the project sets one. */
  readonly target?: number;
  /** Message size in octets, for bandwidth figures (drawn on the chart). */
  readonly size?: number;
  readonly note?: string;
}

const LOWER_IS_BETTER = new Set(['us', 'ms', 'MiB']);

export function makeFigure(
  name: string,
  unit: string,
  value: number,
  baseline: number,
  extra: Partial<Pick<Figure, 'target' | 'size' | 'note'>> = {},
): Figure {
  // Lower-is-better figures: a value under the unit's resolution (e.g. RSS growth of 0 MiB) counts as 1 unit,
  // so the ratio stays finite (JSON has no Infinity).
  const ratio = LOWER_IS_BETTER.has(unit) ? baseline / Math.max(value, unit === 'MiB' ? 1 : 1e-9) : value / baseline;
  return { name, unit, value, baseline, ratio, ...extra };
}

export function toJsonLines(figures: readonly Figure[]): string {
  return figures
    .map((f) =>
      JSON.stringify({
        name: f.name,
        unit: f.unit,
        value: round(f.value),
        baseline: round(f.baseline),
        ratio: round(f.ratio, 3),
        ...(f.target !== undefined ? { target: f.target } : {}),
        ...(f.note ? { note: f.note } : {}),
      }),
    )
    .join('\n');
}

function round(v: number, digits = 2): number {
  const m = 10 ** digits;
  return Math.round(v * m) / m;
}

export function toMarkdown(figures: readonly Figure[]): string {
  const lines = ['| figure | unit | rddp | baseline | ratio | target | |', '|---|---|---:|---:|---:|---:|---|'];
  for (const f of figures) {
    const met = f.target === undefined ? '' : f.ratio >= f.target ? 'met' : 'MISSED';
    lines.push(
      `| ${f.name} | ${f.unit} | ${round(f.value)} | ${round(f.baseline)} | ${round(f.ratio, 3)} | ${f.target ?? ''} | ${met} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

export interface Series {
  readonly label: string;
  readonly points: readonly { readonly size: number; readonly value: number }[];
}

/** RDMA Write bandwidth against message size (log2 x) as a standalone SVG, drawn by the charts module. */
export function toSvgChart(title: string, yLabel: string, series: readonly Series[]): string {
  return lineChartSvg({
    title,
    xLabel: 'message size (octets)',
    yLabel,
    xScale: 'log2',
    xFormat: humanSize,
    series: series.map((s) => ({ label: s.label, points: s.points.map((p) => ({ x: p.size, y: p.value })) })),
  });
}
