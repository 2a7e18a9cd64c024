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
import { describe, expect, it } from 'vitest';
import { childRunner, expectClean, loadOptional } from '../../../test/support/native-child.js';

const isal = loadOptional(import.meta.url, '../index.cjs');
const required = process.env.RDDP_REQUIRE_ISAL === '1';
if (!isal && !required)
  console.warn('@rddp/crc32c-isal not built (no ISA-L headers): its hostile-argument tests are skipped');

const run = childRunner(import.meta.url, './hostile-args.child.cjs');

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
