import { describe, expect, it } from 'vitest';
import { QpLine } from '../src/perf/qps.js';

describe('perf -q: the line every queue pair waits at (once per size)', () => {
  it('all pass when the last arrives, and the line serves the next round', async () => {
    const line = new QpLine(3);
    const passed: string[] = [];
    const round = (r: number) => [0, 1, 2].map((qp) => line.arrive().then(() => passed.push(`${r}:${qp}`)));
    const first = [0, 1].map((qp) => line.arrive().then(() => passed.push(`1:${qp}`)));
    await new Promise((r) => setTimeout(r, 10));
    expect(passed).toEqual([]); // two of three arrived: nobody passes
    const last = line.arrive().then(() => passed.push('1:2'));
    await Promise.all([...first, last]);
    expect(passed.sort()).toEqual(['1:0', '1:1', '1:2']);
    await Promise.all(round(2));
    expect(passed.filter((p) => p.startsWith('2:'))).toHaveLength(3);
  });

  it('one failure releases every QP waiting now and every later arrival, with its error', async () => {
    const line = new QpLine(3);
    const waiting = line.arrive();
    const boom = new Error('QP 2 failed');
    line.fail(boom);
    await expect(waiting).rejects.toBe(boom);
    await expect(line.arrive()).rejects.toBe(boom);
  });
});
