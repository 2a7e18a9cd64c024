/** Benchmark results: one JSON object per figure, a Markdown table, an SVG chart. */

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

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

/** A log2(size) × bandwidth line chart as a standalone SVG. */
export function toSvgChart(title: string, yLabel: string, series: readonly Series[]): string {
  const W = 720;
  const H = 420;
  const L = 70;
  const R = 180;
  const T = 40;
  const B = 60;
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}"/>`;
  const xs = all.map((p) => Math.log2(p.size));
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs, xMin + 1);
  const yMax = Math.max(...all.map((p) => p.value)) * 1.1 || 1;
  const px = (size: number) => L + ((Math.log2(size) - xMin) / (xMax - xMin)) * (W - L - R);
  const py = (v: number) => H - B - (v / yMax) * (H - T - B);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2 - R / 2}" y="24" text-anchor="middle" font-size="15">${escapeXml(title)}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/>`,
    `<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="black"/>`,
    `<text x="18" y="${(H - B + T) / 2}" transform="rotate(-90 18 ${(H - B + T) / 2})" text-anchor="middle">${escapeXml(yLabel)}</text>`,
    `<text x="${(W - R + L) / 2}" y="${H - 15}" text-anchor="middle">message size (octets)</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const v = (yMax / 5) * i;
    out.push(
      `<line x1="${L - 4}" y1="${py(v)}" x2="${W - R}" y2="${py(v)}" stroke="#ddd"/>`,
      `<text x="${L - 8}" y="${py(v) + 4}" text-anchor="end">${v >= 100 ? v.toFixed(0) : v.toFixed(1)}</text>`,
    );
  }
  for (let e = Math.ceil(xMin); e <= Math.floor(xMax); e++) {
    const size = 2 ** e;
    out.push(
      `<text x="${px(size)}" y="${H - B + 18}" text-anchor="middle">${humanSize(size)}</text>`,
      `<line x1="${px(size)}" y1="${H - B}" x2="${px(size)}" y2="${H - B + 4}" stroke="black"/>`,
    );
  }
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = [...s.points].sort((a, b) => a.size - b.size);
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${px(p.size).toFixed(1)},${py(p.value).toFixed(1)}`).join(' ')}"/>`,
    );
    for (const p of pts) out.push(`<circle cx="${px(p.size)}" cy="${py(p.value)}" r="3" fill="${color}"/>`);
    out.push(
      `<rect x="${W - R + 15}" y="${T + i * 20}" width="12" height="12" fill="${color}"/>`,
      `<text x="${W - R + 32}" y="${T + i * 20 + 10}">${escapeXml(s.label)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

export function humanSize(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n >> 20}M`;
  if (n >= 1024 && n % 1024 === 0) return `${n >> 10}K`;
  return String(n);
}

function escapeXml(s: string): string {
  return s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c] as string);
}
