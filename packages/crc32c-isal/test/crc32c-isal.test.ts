/**
 * The ISA-L binding computes CRC32c (RFC 3720 §B.4 / RFC 5044 §4.4) exactly as the bit-wise definition
 * does, over any byte range, incrementally. Skipped where the optional build is absent, unless
 * RDDP_REQUIRE_ISAL=1 (CI sets it: there the build must have happened).
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

type Isal = {
  calculate(b: Uint8Array, start: number, end: number, crc: number): number;
  calculateMarked(b: Uint8Array, start: number, end: number, crc: number, room: number, ptr: number): number;
  crcFrames(b: Uint8Array, spans: Int32Array, count: number): void;
  copyMarked(
    dst: Uint8Array,
    dstOff: number,
    src: Uint8Array,
    start: number,
    end: number,
    crc: number,
    room: number,
    ptr: number,
  ): number;
};
const isal: Isal | undefined = (() => {
  try {
    return createRequire(import.meta.url)('../index.cjs') as Isal;
  } catch {
    return undefined;
  }
})();
const required = process.env.RDDP_REQUIRE_ISAL === '1';
if (!isal && !required) console.warn('@rddp/crc32c-isal not built (no ISA-L headers): its tests are skipped');

/** Reference: CRC32c bit by bit, reflected polynomial 0x82F63B78. */
function reference(bytes: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return ~c >>> 0;
}

/** The wire octets: `room` octets, then a Marker and 508 octets, and so on; FPDUPTR from `ptr` (RFC 5044 §4.3). */
function marked(b: Uint8Array, room: number, ptr: number): Uint8Array {
  const out: number[] = [];
  let r = room;
  let p = ptr;
  for (const x of b) {
    if (r === 0) {
      out.push(0, 0, (p >>> 8) & 0xff, p & 0xff);
      p += 4;
      r = 508;
    }
    out.push(x);
    r--;
    p++;
  }
  return Uint8Array.from(out);
}

describe.skipIf(!isal && !required)('@rddp/crc32c-isal', () => {
  const m = isal as Isal;

  it('is built (RDDP_REQUIRE_ISAL=1 makes a missing build a failure)', () => {
    expect(isal).toBeDefined();
  });

  it('RFC 3720 §B.4 check value: CRC32c("123456789") = 0xE3069283, and 32 zero octets = 0x8A9136AA', () => {
    const v = new TextEncoder().encode('123456789');
    expect(m.calculate(v, 0, v.length, 0)).toBe(0xe3069283);
    expect(m.calculate(new Uint8Array(32), 0, 32, 0)).toBe(0x8a9136aa);
  });

  it('any range, continued from any CRC, equals the bit-wise definition', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.nat(),
        fc.nat(),
        fc.nat({ max: 0xffff_ffff }),
        (b, x, y, crc) => {
          const s = b.length ? x % (b.length + 1) : 0;
          const e = s + (b.length - s ? y % (b.length - s + 1) : 0);
          expect(m.calculate(b, s, e, crc)).toBe(reference(b.subarray(s, e), crc));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a view into a larger buffer is read at its own offset', () => {
    const big = new Uint8Array(256).map((_, i) => i);
    const view = big.subarray(100, 200);
    expect(m.calculate(view, 10, 60, 0)).toBe(reference(big.subarray(110, 160)));
  });

  it('RFC 5044 §4.3, §4.4: calculateMarked is the CRC of the octets with a Marker (0x0000, FPDUPTR) every 512 on the wire', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.nat(),
        fc.integer({ min: 0, max: 508 }),
        fc.integer({ min: 0, max: 0xffff }),
        fc.nat({ max: 0xffff_ffff }),
        (b, x, room, ptr, crc) => {
          const s = b.length ? x % (b.length + 1) : 0;
          expect(m.calculateMarked(b, s, b.length, crc, room, ptr)).toBe(
            reference(marked(b.subarray(s), room, ptr), crc),
          );
        },
      ),
      { numRuns: 300 },
    );
    // Long parts: many 512-octet periods (the SSE4.2 path takes three at a time, then the rest one by one).
    fc.assert(
      fc.property(
        fc.integer({ min: 1500, max: 70_000 }),
        fc.integer({ min: 0, max: 508 }),
        fc.integer({ min: 0, max: 0xfffc }),
        fc.nat({ max: 0xffff_ffff }),
        (n, room, ptr, crc) => {
          const b = Uint8Array.from({ length: n }, (_, i) => (i * 131 + n) & 0xff);
          expect(m.calculateMarked(b, 0, n, crc, room, ptr)).toBe(reference(marked(b, room, ptr), crc));
        },
      ),
      { numRuns: 40 },
    );
    expect(() => m.calculateMarked(new Uint8Array(8), 0, 8, 0, 509, 0)).toThrow(RangeError);
    expect(() => m.calculateMarked(new Uint8Array(8), 0, 9, 0, 0, 0)).toThrow(RangeError);
  });

  it('bad arguments are TypeError / RangeError, never a read outside the array', () => {
    const b = new Uint8Array(8);
    expect(() => m.calculate(b, 0, 9, 0)).toThrow(RangeError);
    expect(() => m.calculate(b, 5, 4, 0)).toThrow(RangeError);
    expect(() => m.calculate(b, -1, 4, 0)).toThrow(RangeError);
    expect(() => m.calculate(new Uint16Array(4) as unknown as Uint8Array, 0, 1, 0)).toThrow(TypeError);
    expect(() => m.calculate('x' as unknown as Uint8Array, 0, 1, 0)).toThrow(TypeError);
  });

  it("RFC 5044 §4.4: crcFrames writes each span's CRC32c after it, least significant octet first", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 200 }), { minLength: 1, maxLength: 20 }), (frames) => {
        const total = frames.reduce((n, f) => n + f.length + 4, 0);
        const bytes = new Uint8Array(total + 7).fill(0xee);
        const spans = new Int32Array(2 * frames.length + 2).fill(-1); // more room than `count` uses
        let at = 3;
        frames.forEach((f, i) => {
          bytes.set(f, at);
          spans[2 * i] = at;
          spans[2 * i + 1] = at + f.length;
          at += f.length + 4;
        });
        m.crcFrames(bytes, spans, frames.length);
        at = 3;
        for (const f of frames) {
          const c = reference(f);
          expect([...bytes.subarray(at + f.length, at + f.length + 4)]).toEqual([
            c & 0xff,
            (c >>> 8) & 0xff,
            (c >>> 16) & 0xff,
            c >>> 24,
          ]);
          at += f.length + 4;
        }
        expect(bytes[at]).toBe(0xee); // nothing written past the last CRC field
      }),
      { numRuns: 200 },
    );
  });

  it('crcFrames checks every span before it writes: one outside the array changes nothing', () => {
    const b = new Uint8Array(16).fill(1);
    expect(() => m.crcFrames(b, new Int32Array([0, 4, 2, 13]), 2)).toThrow(RangeError); // 13 + 4 > 16
    expect([...b]).toEqual(new Array(16).fill(1));
    expect(() => m.crcFrames(b, new Int32Array([5, 4]), 1)).toThrow(RangeError);
    expect(() => m.crcFrames(b, new Int32Array([0, 4]), 2)).toThrow(RangeError); // count beyond the spans
    expect(() => m.crcFrames(b, new Uint32Array([0, 4]) as unknown as Int32Array, 1)).toThrow(TypeError);
    expect(() => m.crcFrames(new Uint16Array(8) as unknown as Uint8Array, new Int32Array([0, 4]), 1)).toThrow(
      TypeError,
    );
  });
  it('RFC 5044 §4.3, §4.4: copyMarked writes the octets with their Markers as the wire has them, and their CRC32c', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.integer({ min: 0, max: 508 }),
        fc.integer({ min: 0, max: 0xfff0 }),
        fc.nat({ max: 0xffff_ffff }),
        (data, room, ptr, crc) => {
          const wire = [...marked(data, room, ptr)];
          const dst = new Uint8Array(wire.length + 6).fill(0xee);
          expect(m.copyMarked(dst, 2, data, 0, data.length, crc, room, ptr)).toBe(
            reference(Uint8Array.from(wire), crc),
          );
          expect([...dst.subarray(2, 2 + wire.length)]).toEqual(wire);
          expect([...dst.subarray(0, 2), ...dst.subarray(2 + wire.length)]).toEqual([
            0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
          ]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('copyMarked checks before it writes: a destination too small, a bad room or a bad range changes nothing', () => {
    const src = new Uint8Array(1000).fill(1);
    const dst = new Uint8Array(1004).fill(0xee); // 1000 octets from room 0 take two Markers: 1008
    expect(() => m.copyMarked(dst, 0, src, 0, 1000, 0, 0, 0)).toThrow(RangeError);
    expect(() => m.copyMarked(dst, 0, src, 0, 1000, 0, 509, 0)).toThrow(RangeError);
    expect(() => m.copyMarked(dst, 0, src, 10, 1001, 0, 8, 0)).toThrow(RangeError);
    expect(() => m.copyMarked(dst, -1, src, 0, 10, 0, 8, 0)).toThrow(RangeError);
    expect(dst.every((x) => x === 0xee)).toBe(true);
  });
});
