/** Benchmark results: one JSON object per figure, a Markdown table, an SVG chart. */
import { humanSize, lineChartSvg } from '../charts/line-chart.js';
import { BENCH_TABLES, type BenchTable } from './limits.js';

export { BENCH_TABLES, type BenchTable, humanSize };

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
  /** What the baseline is ("baseline: …"). */
  readonly note?: string;
  /** The table it belongs to: the two-process headline, the in-process DDP figures, cost growth, SCTP. */
  readonly table?: BenchTable;
  /** Why the figure has no baseline in this run (e.g. "iperf3 not installed"). */
  readonly skipped?: string;
  /**
   * The lowest and highest ratio of one round's subject to the same round's baseline (runs next to each
   * other in time): how far single rounds spread on this machine around the medians' ratio.
   */
  readonly rounds?: readonly [number, number];
}

const TABLE_TITLES: Record<BenchTable, string> = {
  headline: 'Headline: `rddp perf` between two processes, through verbs, against two-process baselines',
  ddp: 'In-process DDP figures (both ends in one process, against raw TCP in one process)',
  cost: 'Cost growth with concurrent connections (`rddp perf write_bw -q N`, two processes)',
  sctp: 'SCTP: `rddp perf write_bw --transport sctp` between two processes against usrsctp (node-datachannel) and werift-sctp, two processes each',
};

/** What `--quick` prints instead of met/MISSED: its figures are not comparable with a full run's. */
export const QUICK_WARNING =
  'warning: --quick figures are not comparable with the targets (cold JIT, little data, few rounds), so no target is marked met or missed';

const LOWER_IS_BETTER = new Set(['us', 'ms', 'MiB', 'KiB', 'ms/MB']);

export function lowerIsBetter(f: Pick<Figure, 'unit'>): boolean {
  return LOWER_IS_BETTER.has(f.unit);
}

/** A ratio as printed: at most two decimals, no trailing zeros. */
function times(v: number): string {
  if (!Number.isFinite(v)) return '—';
  return v !== 0 && Math.abs(v) < 0.1 ? String(Number(v.toPrecision(2))) : String(round(v));
}

/** rddp against its baseline as printed: value / baseline, "0.42 ×" (lower-is-better units too). */
export function timesText(f: Figure): string {
  return Number.isFinite(f.baseline) && f.baseline !== 0 ? `${times(f.value / f.baseline)} ×` : '—';
}

/** The per-round ratios' range as printed ("rounds 0.81–0.93 ×"), empty without one. */
export function roundsText(f: Figure): string {
  if (f.rounds === undefined || f.skipped) return '';
  const [lo, hi] = f.rounds;
  return `rounds ${times(lo)}–${times(hi)} ×`;
}

/**
 * The range of per-round ratios `subject[i] / baseline[i]` (value over baseline, as `timesText` prints),
 * undefined when fewer than two rounds pair up.
 */
export function roundRange(subject: readonly number[], baseline: readonly number[]): [number, number] | undefined {
  const r: number[] = [];
  for (let i = 0; i < Math.min(subject.length, baseline.length); i++) {
    const v = (subject[i] as number) / (baseline[i] as number);
    if (Number.isFinite(v)) r.push(v);
  }
  return r.length < 2 ? undefined : [Math.min(...r), Math.max(...r)];
}

/** The target as printed, rounded: "≥ 0.9 ×" of the baseline, or "≤ 1.2 ×" for lower-is-better units. */
export function targetText(f: Figure): string {
  if (f.target === undefined) return '';
  return lowerIsBetter(f) ? `≤ ${times(1 / f.target)} ×` : `≥ ${times(f.target)} ×`;
}

/** met / MISSED against the target; nothing under --quick (not comparable) or without a baseline. */
export function status(f: Figure, quick = false): string {
  if (f.skipped) return f.skipped;
  if (f.target === undefined || quick || !Number.isFinite(f.ratio)) return '';
  return f.ratio >= f.target * (1 - 1e-9) ? 'met' : 'MISSED';
}

/** One line per figure as it is measured. */
export function figureLine(f: Figure, quick = false): string {
  const base = f.skipped ? f.skipped : `${f.baseline.toFixed(2)}`;
  const t = targetText(f);
  const st = status(f, quick);
  const spread = roundsText(f);
  return `${f.name}: ${f.value.toFixed(2)} ${f.unit} vs ${base} (${timesText(f)}${spread ? `, ${spread}` : ''}${t ? `, target ${t}` : ''}${st && !f.skipped ? `, ${st}` : ''}) — ${baselineText(f)}`;
}

function baselineText(f: Figure): string {
  return (f.note ?? '').replace(/^baseline: /, '');
}

export function makeFigure(
  name: string,
  unit: string,
  value: number,
  baseline: number,
  extra: Partial<Pick<Figure, 'target' | 'size' | 'note' | 'table' | 'skipped' | 'rounds'>> = {},
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
        ...(f.target !== undefined ? { target: f.target, targetText: targetText(f) } : {}),
        ...(f.note ? { note: f.note } : {}),
        ...(f.table ? { table: f.table } : {}),
        ...(f.skipped ? { skipped: f.skipped } : {}),
        ...(f.rounds && !f.skipped ? { rounds: [round(f.rounds[0], 3), round(f.rounds[1], 3)] } : {}),
      }),
    )
    .join('\n');
}

function round(v: number, digits = 2): number {
  const m = 10 ** digits;
  return Math.round(v * m) / m;
}

/**
 * The figures as Markdown, one table per BenchTable (figures without one: the in-process table). Each
 * row says what its baseline is; `quick`: a warning instead of met/MISSED.
 */
export function toMarkdown(figures: readonly Figure[], o: { quick?: boolean } = {}): string {
  const out: string[] = [];
  if (o.quick) out.push(`> ${QUICK_WARNING}`, '');
  for (const table of BENCH_TABLES) {
    const rows = figures.filter((f) => (f.table ?? 'ddp') === table);
    if (!rows.length) continue;
    out.push(
      `### ${TABLE_TITLES[table]}`,
      '',
      '| figure | unit | rddp | baseline | rddp / baseline | target | | baseline is |',
      '|---|---|---:|---:|---:|---:|---|---|',
    );
    for (const f of rows) {
      const spread = roundsText(f);
      out.push(
        `| ${f.name} | ${f.unit} | ${round(f.value)} | ${f.skipped ? '—' : round(f.baseline)} | ${timesText(f)}${spread ? ` (${spread})` : ''} | ${targetText(f)} | ${status(f, o.quick)} | ${baselineText(f)} |`,
      );
    }
    out.push('');
  }
  return out.join('\n');
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
