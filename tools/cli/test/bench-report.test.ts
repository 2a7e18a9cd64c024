import { describe, expect, it } from 'vitest';
import { figureLine, makeFigure, roundRange, toJsonLines, toMarkdown } from '../src/bench/report.js';

describe('bench report: how far single rounds spread', () => {
  it('roundRange pairs each round’s subject with the same round’s baseline', () => {
    // Medians 3 / 4 (0.75), but the rounds read 2/4, 3/3, 4/5: 0.5 … 1.
    expect(roundRange([2, 3, 4], [4, 3, 5])).toEqual([0.5, 1]);
    // Pairs only as far as both have rounds; one round (or none that pair up) gives no range.
    expect(roundRange([1, 2, 9], [2, 2])).toEqual([0.5, 1]);
    expect(roundRange([1], [2])).toBeUndefined();
    expect(roundRange([1, Number.NaN], [2, 3])).toBeUndefined();
  });

  it('the figure line, the Markdown row and the JSON carry the range next to the medians’ ratio', () => {
    const f = makeFigure('write 1 MiB', 'MB/s', 90, 100, {
      table: 'headline',
      note: 'baseline: raw',
      target: 0.9,
      rounds: [0.812, 0.934],
    });
    expect(figureLine(f)).toBe(
      'write 1 MiB: 90.00 MB/s vs 100.00 (0.9 ×, rounds 0.81–0.93 ×, target ≥ 0.9 ×, met) — raw',
    );
    expect(toMarkdown([f])).toContain(
      '| write 1 MiB | MB/s | 90 | 100 | 0.9 × (rounds 0.81–0.93 ×) | ≥ 0.9 × | met | raw |',
    );
    expect(JSON.parse(toJsonLines([f])).rounds).toEqual([0.812, 0.934]);
    // Latency (lower is better): the ratio printed is rddp over the baseline, the range the same way.
    const lat = makeFigure('send_lat', 'us', 12, 10, { rounds: [1.05, 1.31], target: 1 / 1.2 });
    expect(figureLine(lat)).toContain('(1.2 ×, rounds 1.05–1.31 ×, target ≤ 1.2 ×, met)');
    // Without a range (one round) nothing is added; a skipped baseline prints none either.
    expect(figureLine(makeFigure('x', 'MB/s', 1, 2))).toBe('x: 1.00 MB/s vs 2.00 (0.5 ×) — ');
    const skipped = makeFigure('y', 'MB/s', 1, Number.NaN, { skipped: 'iperf3 not installed', rounds: [1, 2] });
    expect(figureLine(skipped)).not.toContain('rounds');
    expect(JSON.parse(toJsonLines([skipped])).rounds).toBeUndefined();
  });
});
