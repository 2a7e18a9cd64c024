/**
 * Hostile arguments (issue 34, "native code that cannot be steered"): every function of the binding is
 * called, in a child process (a crash shows as a signal), with getters that change what was already
 * checked, proxies, detached, shared and resizable buffers, views of each other, truncating, huge, negative,
 * NaN and fractional numbers and wrong types. Each call must end in a clean TypeError / RangeError (or the
 * error a getter threw) or in exactly the octets its ranges named when it began — never a signal, never an
 * octet from outside a buffer. `hostile-args.child.cjs` makes the calls and judges them against a
 * JavaScript reference; the fuzz is seeded, so every run makes the same calls. Skipped where the optional
 * build is absent, unless RDDP_REQUIRE_WRITEV=1 (CI).
 */
import { describe, expect, it } from 'vitest';
import { childRunner, expectClean, loadOptional } from '../../../test/support/native-child.js';

const binding = loadOptional(import.meta.url, '../index.cjs');
const required = process.env.RDDP_REQUIRE_WRITEV === '1';
if (!binding && !required) console.warn('@rddp/writev not built here: its hostile-argument tests are skipped');

const run = childRunner(import.meta.url, './hostile-args.child.cjs');

describe.skipIf(!binding && !required)('@rddp/writev with hostile arguments (in a child process)', () => {
  it('attack (issue 34): a getter on buffers enlarges a checked 16-octet range to 4097 — the 16 octets go, no foreign heap', () => {
    expectClean(run('attack-enlarge'), 1);
  });

  it('attack: a getter on buffers moves a checked range to buffer 1e9 — no read through a stray index (SIGSEGV before)', () => {
    expectClean(run('attack-reindex'), 1);
  });

  it('attack: a getter on buffers[1] detaches buffers[0] after its range was checked — a RangeError, not freed memory sent', () => {
    expectClean(run('attack-detach'), 1);
  });

  it('ranges in a SharedArrayBuffer that another thread rewrites during the calls: what was checked is what goes', () => {
    expectClean(run('race', '1', '2000'), 2000);
  });

  it('seeded fuzz of writeRanges: getters, proxies, detached / shared / resizable buffers, aliased views, bad numbers', () => {
    for (const seed of ['1', '2', '3']) {
      const r = run('fuzz', seed, '600');
      expectClean(r, 600);
      // Not degenerate: calls that send, calls refused, getters that ran (and threw).
      expect(r.stats.sent, `seed ${seed}`).toBeGreaterThan(40);
      expect(r.stats.refused, `seed ${seed}`).toBeGreaterThan(200);
      expect(r.stats.getterRuns, `seed ${seed}`).toBeGreaterThan(80);
      expect(r.stats.getterThrew, `seed ${seed}`).toBeGreaterThan(0);
    }
  });

  it('congestionControl, openTun, watchTun: truncating numbers, strings cut short and wrong types are refused', () => {
    const r = run('others');
    expectClean(r, r.calls);
    expect(r.calls).toBeGreaterThan(50);
  });
});
