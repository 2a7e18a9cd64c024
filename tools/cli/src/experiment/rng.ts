/** Seeded pseudo-random numbers for the experiment (flow phases, relay jitter): a run repeats with its seed. */

/** A 32-bit mix (the murmur3 finalizer). */
export function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** mulberry32, uniform in [0, 1): the project's one seeded PRNG (@rddp/llp). */
export { seededRandom } from '@rddp/llp';
