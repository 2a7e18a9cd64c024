/** `rddp soak` as users run it (`pnpm soak --minutes N` runs it longer): the command line, its JSON lines and exit status. */
import { describe, expect, it } from 'vitest';
import { endsWithin, startedProcesses } from './procs.js';

const { run } = startedProcesses();

describe('rddp soak (pnpm soak --minutes N runs it longer)', () => {
  it('a short soak over MPA/TCP moves verified data round after round and samples RSS every second', async () => {
    const r = await endsWithin(
      run(['soak', '--minutes', '0.1', '--budget', '64', '--transport', 'tcp', '--json']),
      60_000,
    );
    expect(r.code, r.err).toBe(0);
    const lines = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number | boolean>);
    const summary = lines.at(-1) ?? {};
    const samples = lines.slice(0, -1);
    expect(samples.length).toBeGreaterThanOrEqual(5);
    for (const s of samples) expect(s.rssMiB).toBeGreaterThan(0);
    expect(samples.at(-1)?.rounds).toBeGreaterThan(4);
    expect(summary).toMatchObject({ budgetMiB: 64, ok: true });
    expect(summary.rounds).toBe(samples.at(-1)?.rounds);
  }, 90_000);
});
