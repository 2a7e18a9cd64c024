import { crc32c as nodeRs } from '@node-rs/crc32';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32cMarked, crcFrames, readCrc } from '../src/crc.js';
import { crc32cBackend, crc32cRange } from '../src/index.js';

describe(`RFC 5044 §4.4 CRC32c (long runs via ${crc32cBackend})`, () => {
  it('RFC 3720 B.4 check value: CRC32c("123456789") = 0xE3069283', () => {
    const v = new TextEncoder().encode('123456789');
    expect(crc32cRange(v, 0, v.length, 0)).toBe(0xe3069283);
    const long = new Uint8Array(4096).fill(7);
    expect(crc32cRange(long, 0, long.length, 0)).toBe(nodeRs(Buffer.from(long), 0));
  });

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
      fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 1, maxLength: 12 }), (frames) => {
        const bytes = new Uint8Array(frames.reduce((n, f) => n + f.length + 4, 0));
        const spans = new Int32Array(2 * frames.length);
        let at = 0;
        frames.forEach((f, i) => {
          bytes.set(f, at);
          spans[2 * i] = at;
          spans[2 * i + 1] = at + f.length;
          at += f.length + 4;
        });
        crcFrames(bytes, spans, frames.length);
        at = 0;
        for (const f of frames) {
          expect(readCrc(bytes, at + f.length)).toBe(nodeRs(Buffer.from(f), 0));
          at += f.length + 4;
        }
      }),
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
          const wire: number[] = [];
          let r = room;
          let p = ptr;
          for (const x of data) {
            if (r === 0) {
              wire.push(0, 0, (p >>> 8) & 0xff, p & 0xff);
              p += 4;
              r = 508;
            }
            wire.push(x);
            r--;
            p++;
          }
          const w = Uint8Array.from(wire);
          expect(crc32cMarked(data, 0, data.length, crc, room, ptr)).toBe(crc32cRange(w, 0, w.length, crc));
        },
      ),
      { numRuns: 300 },
    );
  });
});
