/** A small seedable mutational fuzzer: a corpus of valid inputs, mutated, concatenated and re-split. */
import { seededRandom } from '@rddp/llp';

export type Rng = () => number;

/** The fuzzer's seeded PRNG (mulberry32, @rddp/llp's `seededRandom`). */
export const rng: (seed: number) => Rng = seededRandom;

export const int = (r: Rng, n: number) => Math.floor(r() * n);
const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x40, 0x41, 0xc0, 0xc1, 0x10, 0x20];

/** One to four mutations: bit flips, interesting octets, truncation, extension, duplication of a span. */
export function mutate(r: Rng, input: Uint8Array): Uint8Array {
  let b = Uint8Array.from(input);
  const n = 1 + int(r, 4);
  for (let i = 0; i < n; i++) {
    const op = int(r, 6);
    if (b.length === 0 && op < 3) continue;
    switch (op) {
      case 0:
        b[int(r, b.length)] ^= 1 << int(r, 8);
        break;
      case 1:
        b[int(r, b.length)] = INTERESTING[int(r, INTERESTING.length)] as number;
        break;
      case 2: {
        const at = int(r, b.length);
        for (let k = 0; k < 4 && at + k < b.length; k++) b[at + k] = int(r, 2) ? 0xff : 0;
        break;
      }
      case 3:
        b = b.subarray(0, int(r, b.length + 1));
        break;
      case 4: {
        const extra = new Uint8Array(int(r, 64));
        for (let k = 0; k < extra.length; k++) extra[k] = int(r, 256);
        const c = new Uint8Array(b.length + extra.length);
        c.set(b);
        c.set(extra, b.length);
        b = c;
        break;
      }
      default: {
        if (b.length === 0) break;
        const s = int(r, b.length);
        const e = s + int(r, b.length - s + 1);
        const c = new Uint8Array(b.length + (e - s));
        c.set(b.subarray(0, e));
        c.set(b.subarray(s, e), e);
        c.set(b.subarray(e), e + (e - s));
        b = c;
      }
    }
  }
  return b;
}

/** Splits `b` into chunks at random points (1 to 8 cuts). */
export function split(r: Rng, b: Uint8Array): Uint8Array[] {
  if (b.length < 2) return [b];
  const cuts = new Set<number>();
  const k = 1 + int(r, 8);
  for (let i = 0; i < k; i++) cuts.add(1 + int(r, b.length - 1));
  const points = [0, ...[...cuts].sort((x, y) => x - y), b.length];
  const out: Uint8Array[] = [];
  for (let i = 0; i + 1 < points.length; i++) out.push(b.subarray(points[i], points[i + 1]));
  return out;
}
