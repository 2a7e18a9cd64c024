/**
 * Hostile arguments (issue 34, "native code that cannot be steered"): every function of the binding is
 * called, in a child process (a crash shows as a signal), with views of each other, detached, shared and
 * resizable arrays, proxies, truncating, huge, negative, NaN and fractional numbers and wrong types, and
 * with spans another thread rewrites during the call. Each call must end in a clean TypeError / RangeError
 * or in the CRC32c a JavaScript reference computes, writing exactly what the reference writes and nothing
 * outside (each array sits between guard octets that must not change). `hostile-args.child.cjs` makes
 * the calls; the fuzz is seeded, so every run makes the same calls. Skipped where the optional build is
 * absent, unless RDDP_REQUIRE_ISAL=1 (CI).
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const isal: unknown = (() => {
  try {
    return createRequire(import.meta.url)('../index.cjs');
  } catch {
    return undefined;
  }
})();
const required = process.env.RDDP_REQUIRE_ISAL === '1';
if (!isal && !required)
  console.warn('@rddp/crc32c-isal not built (no ISA-L headers): its hostile-argument tests are skipped');

const child = fileURLToPath(new URL('./hostile-args.child.cjs', import.meta.url));

interface Run {
  readonly signal: NodeJS.Signals | null;
  readonly status: number | null;
  readonly failures: string[];
  /** The call that was running when the child ended (the one that crashed, when it did). */
  readonly lastCase: string;
  readonly stats: Record<string, number>;
  readonly calls: number;
  readonly stderr: string;
}

function run(...args: string[]): Run {
  const r = spawnSync(process.execPath, [child, ...args], {
    encoding: 'utf8',
    timeout: 30_000,
    maxBuffer: 64 << 20,
  });
  const lines = (r.stdout ?? '').split('\n');
  const cases = lines.filter((l) => l.startsWith('case '));
  const stats = lines.find((l) => l.startsWith('stats '));
  const done = lines.find((l) => l.startsWith('done '));
  return {
    signal: r.signal,
    status: r.status,
    failures: lines.filter((l) => l.startsWith('fail ')),
    lastCase: cases.at(-1)?.slice(5) ?? '(none)',
    stats: stats ? JSON.parse(stats.slice(6)) : {},
    calls: done ? Number(done.slice(5)) : 0,
    stderr: `${r.error?.message ?? ''}${r.stderr ?? ''}`,
  };
}

/** No signal, no wrong outcome, every call made. */
function expectClean(r: Run, calls: number): void {
  expect(r.signal, `the child ended by ${r.signal} during: ${r.lastCase}`).toBeNull();
  expect(r.failures).toEqual([]);
  expect(r.status, r.stderr).toBe(0);
  expect(r.calls).toBe(calls);
}

describe.skipIf(!isal && !required)('@rddp/crc32c-isal with hostile arguments (in a child process)', () => {
  it("attack (issue 34): crcFrames with spans a view of bytes, frame 0's CRC landing on frame 1's end — refused, nothing written", () => {
    expectClean(run('attack-spans-alias'), 1);
  });

  it('crcFrames with spans in a SharedArrayBuffer that another thread rewrites: the checked copy is what is used', () => {
    const r = run('race', '1', '4000');
    expectClean(r, 4000);
  });

  it('seeded fuzz of calculate, calculateMarked, copyMarked, crcFrames: bad numbers, wrong types, aliased, detached, shared arrays', () => {
    for (const seed of ['1', '2', '3']) {
      const r = run('fuzz', seed, '2000');
      expectClean(r, 2000);
      expect(r.stats.computed, `seed ${seed}`).toBeGreaterThan(500); // not degenerate: both kinds of outcome
      expect(r.stats.refused, `seed ${seed}`).toBeGreaterThan(500);
    }
  });
});
