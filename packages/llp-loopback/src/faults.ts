/** Fault injection for the loopback LLP: what a test can make the "network" do. */
import { seededRandom } from '@rddp/llp';

export interface LoopbackFaults {
  /**
   * Deliver each ULPDU in several chunks: a seeded random split (chunks of 1..maxChunk octets), or a
   * function returning the chunk lengths for a ULPDU of `length` octets (they must sum to `length`).
   */
  readonly chunking?: { readonly seed?: number; readonly maxChunk?: number } | ((length: number) => number[]);
  /** Delay every delivery by this many milliseconds. */
  readonly delayMs?: number;
  /** Abort the connection (both sides see an abortive close) once this many ULPDUs have been delivered. */
  readonly abortAfterUlpdus?: number;
  /** Deliver ULPDUs out of order within a window (declares `ordered: false`). */
  readonly reorder?: { readonly seed?: number; readonly window?: number };
  /** Deliver some ULPDUs twice (declares `reliable: false`). */
  readonly duplicate?: { readonly seed?: number; readonly probability: number };
  /** Lose some ULPDUs (declares `reliable: false`). */
  readonly drop?: { readonly seed?: number; readonly probability: number };
}

/** Splits `length` octets into chunk lengths per the chunking fault (one chunk when none). */
export function makeChunker(chunking: LoopbackFaults['chunking']): (length: number) => number[] {
  if (chunking === undefined) return (length) => [length];
  if (typeof chunking === 'function') return chunking;
  const rnd = seededRandom(chunking.seed ?? 1);
  const max = Math.max(1, chunking.maxChunk ?? 64);
  return (length) => {
    if (length === 0) return [0];
    const out: number[] = [];
    let left = length;
    while (left > 0) {
      const n = Math.min(left, 1 + Math.floor(rnd() * max));
      out.push(n);
      left -= n;
    }
    return out;
  };
}
