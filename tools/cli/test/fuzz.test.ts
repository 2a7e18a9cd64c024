/**
 * Bounded fuzzing in CI (`pnpm fuzz --minutes N` runs longer): MPA's FPDU reader and frames, and the
 * RDMAP/DDP receive path, fed mutated, re-split input. RFC 5042 §5: a peer must not be able to write
 * outside a registered region with the right access, or crash or hang the stack.
 */
import { describe, expect, it } from 'vitest';
import { FuzzFailure, fuzz, mpaFpdu, mpaFrames, rdmap, rdmapStats, rdmapTarget } from '../src/fuzz/targets.js';

describe('fuzzing (bounded)', () => {
  it('RFC 5044 §4, §8: the FPDU reader never throws, never delivers after an error, never delivers an altered ULPDU', () => {
    const rep = fuzz(mpaFpdu, 1, 4000, 20_000);
    expect(rep.inputs).toBeGreaterThan(1000);
  }, 30_000);

  it('RFC 5044 §7.1.1: MPA Request/Reply decoding only ever fails with typed errors', () => {
    expect(fuzz(mpaFrames, 1, 3000, 50_000).inputs).toBeGreaterThan(1000);
  }, 30_000);

  it('RFC 5040 §7, RFC 5041 §7, RFC 5042: no write outside the right regions, at most one Terminate, errors answered', () => {
    rdmapStats.terminates = 0;
    rdmapStats.placedWrites = 0;
    const rep = fuzz(rdmap, 1, 6000, 8000);
    expect(rep.inputs).toBeGreaterThan(500);
    // The corpus reaches both the placement path and the error paths.
    expect(rdmapStats.placedWrites).toBeGreaterThan(100);
    expect(rdmapStats.terminates).toBeGreaterThan(100);
  }, 30_000);

  it('the invariants catch a planted access-check bug (the fuzzer can fail)', () => {
    expect(() => fuzz(rdmapTarget(true), 1, 10_000, 20_000)).toThrow(FuzzFailure);
  }, 30_000);
});
