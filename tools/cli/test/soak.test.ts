import { describe, expect, it } from 'vitest';
import { runSoak } from '../src/commands/soak.js';

describe('rddp soak (pnpm soak --minutes N runs it longer)', () => {
  it('a short soak over MPA/TCP moves verified data round after round and samples RSS every second', async () => {
    const samples: number[] = [];
    const res = await runSoak({ minutes: 0.1, budgetMiB: 64, transport: 'tcp' }, (s) => samples.push(s.rssMiB));
    expect(samples.length).toBeGreaterThanOrEqual(5);
    expect(res.samples.at(-1)?.rounds).toBeGreaterThan(4);
    expect(res.ok).toBe(true);
  }, 60_000);
});
