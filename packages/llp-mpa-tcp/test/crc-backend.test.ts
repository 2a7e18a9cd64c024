import { crc32c as nodeRs } from '@node-rs/crc32';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { copyMarked, copyMarkedJs, crc32cMarked, crcFrames, markersIn, readCrc } from '../src/crc.js';
import { chooseCrc32cBackend, crc32cRange } from '../src/index.js';
import { marked } from './helpers.js';

describe(`RFC 5044 §4.4 CRC32c (long runs via ${chooseCrc32cBackend()})`, () => {
  // The CRC32c itself, its backends and their choice are @rddp/crc32c's and tested there; here, MPA's uses.
  it('incremental over any split, on both sides of every threshold, equals one pass', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 0, maxLength: 5000 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (data, cuts) => {
          const points = [...new Set(cuts.map((c) => (data.length ? c % (data.length + 1) : 0)))].sort((a, b) => a - b);
          let crc = 0;
          let at = 0;
          for (const p of [...points, data.length]) {
            crc = crc32cRange(data, at, p, crc);
            at = p;
          }
          expect(crc).toBe(nodeRs(Buffer.from(data), 0));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("RFC 5044 §4.4: crcFrames fills each frame's CRC field with the CRC32c of its span (every backend)", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 4000 }),
        fc.array(fc.nat({ max: 300 }), { minLength: 1, maxLength: 12 }),
        (data, lengths) => {
          // Frames back to back, each `length` octets of `data` and a 4-octet CRC field.
          const starts = lengths.map((_, i) => lengths.slice(0, i).reduce((n, l) => n + l + 4, 0));
          const bytes = Uint8Array.from(
            { length: starts.at(-1)! + lengths.at(-1)! + 4 },
            (_, i) => data[i % data.length]!,
          );
          crcFrames(bytes, Int32Array.from(starts.flatMap((s, i) => [s, s + lengths[i]!])), lengths.length);
          starts.forEach((s, i) => {
            const span = bytes.subarray(s, s + lengths[i]!);
            expect(readCrc(bytes, s + span.length)).toBe(nodeRs(Buffer.from(span), 0));
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it('RFC 5044 §4.3, §4.4: the CRC over a part with the Markers that split it equals the CRC of the octets on the wire', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.integer({ min: 0, max: 508 }),
        fc.integer({ min: 0, max: 0xffff }),
        fc.nat({ max: 0xffff_ffff }),
        (data, room, ptr, crc) => {
          const w = marked(data, room, ptr);
          expect(crc32cMarked(data, 0, data.length, crc, room, ptr)).toBe(crc32cRange(w, 0, w.length, crc));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe.each([
  ['the backend in use', copyMarked],
  ['JavaScript (no ISA-L)', copyMarkedJs],
])('RFC 5044 §4.3, §4.4: copyMarked through %s', (_, copy) => {
  it('copies a part with its Markers where they fall, touches nothing around it, and returns the CRC of what it wrote', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.integer({ min: 0, max: 508 }),
        fc.integer({ min: 0, max: 0xfff0 }),
        fc.nat({ max: 0xffff_ffff }),
        fc.nat({ max: 64 }),
        (data, room, ptr, crc, off) => {
          const want = marked(data, room, ptr);
          expect(want.length).toBe(data.length + 4 * markersIn(data.length, room));
          const dst = new Uint8Array(off + want.length + 8).fill(0xee);
          const src = new Uint8Array(data.length + 6).fill(0x55);
          src.set(data, 3);
          const got = copy(dst, off, src, 3, 3 + data.length, crc, room, ptr);
          expect(Buffer.from(dst.subarray(off, off + want.length)).equals(Buffer.from(want))).toBe(true);
          expect(dst.subarray(0, off).every((x) => x === 0xee)).toBe(true);
          expect(dst.subarray(off + want.length).every((x) => x === 0xee)).toBe(true);
          expect(got).toBe(crc32cRange(want, 0, want.length, crc));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a destination too small for the copy and its Markers is a RangeError, and nothing is written', () => {
    const data = new Uint8Array(1000).fill(1);
    const dst = new Uint8Array(1000 + 4).fill(0xee); // two Markers fall in 1000 octets from room 0
    expect(() => copy(dst, 0, data, 0, 1000, 0, 0, 0)).toThrow(RangeError);
    expect(dst.every((x) => x === 0xee)).toBe(true);
  });
});
