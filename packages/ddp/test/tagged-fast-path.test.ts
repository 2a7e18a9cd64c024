/**
 * The tagged receive fast path (header read in place, TO in numbers) must behave exactly as the general
 * path (RFC 5041 §7.1 checks on a decoded header): the same octets placed, the same placement and
 * delivery events, the same §7.2 error. A stream with a ULP check that accepts everything always takes
 * the general path; one without takes the fast path where it can. Both are fed the same segments.
 */
import { FakeLlpStream } from '@rddp/llp/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Access, DdpStream, encodeTaggedHeader, StagTable } from '../src/index.js';

interface Seen {
  events: unknown[];
  buffers: Uint8Array[];
}

type Mode = 'general' | 'fast' | 'ulp-general' | 'ulp-fast';

/** A ULP check that refuses RsvdULP 0x41, and its accept table that takes 0x40 (in a writable region) only. */
const ulpCheck = (h: { rsvdUlp: number }) =>
  h.rsvdUlp === 0x41 ? { layer: 'rdmap' as const, type: 2, code: 5, message: 'refused by the ULP' } : undefined;
const ulpAccepts = { tagged: new Uint8Array(256), untagged: [] };
ulpAccepts.tagged[0x40] = Access.RemoteWrite;

function run(
  segments: { stagPick: number; to: bigint; len: number; last: boolean; dv: number; rsvdUlp: number }[],
  mode: Mode,
) {
  const llp = new FakeLlpStream();
  const stags = new StagTable();
  const bufs = [new Uint8Array(300), new Uint8Array(300), new Uint8Array(300)];
  const regions = [
    stags.register({ pdId: 1, buffer: bufs[0] as Uint8Array, access: Access.RemoteWrite }),
    stags.register({ pdId: 1, buffer: bufs[1] as Uint8Array, access: Access.RemoteWrite, baseTo: 0x1_0000_0000n }),
    stags.register({ pdId: 2, buffer: bufs[2] as Uint8Array, access: Access.RemoteWrite }),
  ];
  const invalid = stags.register({ pdId: 1, buffer: new Uint8Array(300), access: Access.RemoteWrite });
  stags.invalidate(invalid.stag);
  const stagsToUse = [...regions.map((r) => r.stag), invalid.stag, 0x12345600];
  const options =
    mode === 'general'
      ? { ulpCheck: () => undefined }
      : mode === 'ulp-general'
        ? { ulpCheck }
        : mode === 'ulp-fast'
          ? { ulpCheck, ulpAccepts }
          : {};
  const ddp = new DdpStream(llp, { pdId: 1, stags, ...options });
  const seen: Seen = { events: [], buffers: bufs };
  // STags are random per table (RFC 5040 §8): events name them by their place in `stagsToUse`.
  const name = (v: unknown): unknown => {
    if (typeof v === 'number') {
      const k = stagsToUse.indexOf(v);
      return k < 0 ? v : `stag#${k}`;
    }
    if (typeof v === 'string')
      return stagsToUse.reduce((m, st, k) => m.replaceAll(st.toString(16).padStart(8, '0'), `stag#${k}`), v);
    if (v && Object.getPrototypeOf(v) === Object.prototype)
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, name(x)]));
    return v;
  };
  ddp.placement$.subscribe((e) => seen.events.push({ placement: name(e) }));
  // The completing segment's chunks differ between the two tables' runs (STag octets): compare the rest.
  ddp.delivery$.subscribe(({ segment: _, ...e }) => seen.events.push({ delivery: name(e) }));
  ddp.error$.subscribe((e) => seen.events.push({ error: name({ type: e.type, code: e.code, message: e.message }) }));
  let n = 0;
  for (const s of segments) {
    const seg = new Uint8Array(14 + s.len);
    encodeTaggedHeader(
      {
        last: s.last,
        dv: s.dv as 1,
        rsvdUlp: s.rsvdUlp,
        stag: stagsToUse[s.stagPick % stagsToUse.length] as number,
        to: s.to,
      },
      seg,
    );
    for (let i = 0; i < s.len; i++) seg[14 + i] = (n + i) & 0xff;
    n += s.len;
    llp.feed({ length: seg.length, chunks: [seg] });
  }
  return seen;
}

describe('RFC 5041 §7.1: the tagged fast path and the general path agree (with and without a ULP check)', () => {
  it('same placement, delivery, errors and memory for random segments (valid, out of bounds, bad STag, bad DDP version, TO near 2^53 and 2^64)', () => {
    // Region edges (300 octets at TO 0 and at 2^32) are hit on purpose: one octet either side of the bounds.
    const edge = fc.constantFrom(
      0n,
      179n,
      180n,
      181n,
      299n,
      300n,
      0x1_0000_0000n - 1n,
      0x1_0000_0000n + 180n,
      0x1_0000_0000n + 181n,
    );
    const to = fc.oneof(
      edge,
      fc.bigInt({ min: 0n, max: 400n }),
      fc.bigInt({ min: 0x1_0000_0000n - 10n, max: 0x1_0000_0000n + 400n }),
      fc.bigInt({ min: 2n ** 53n - 300n, max: 2n ** 53n + 300n }),
      fc.bigInt({ min: 2n ** 64n - 300n, max: 2n ** 64n - 1n }),
    );
    const segment = fc.record({
      stagPick: fc.oneof(fc.constantFrom(0, 1), fc.nat()), // mostly the two valid regions
      to,
      len: fc.oneof(fc.constantFrom(0, 1, 120), fc.nat({ max: 120 })),
      last: fc.boolean(),
      dv: fc.constantFrom(1, 1, 1, 0),
      rsvdUlp: fc.constantFrom(0x40, 0x40, 0x41),
    });
    fc.assert(
      // Short runs: after the first error DDP drops every later segment (§7.1), so long runs test little.
      fc.property(fc.array(segment, { minLength: 1, maxLength: 3 }), (segments) => {
        const fast = run(segments, 'fast');
        const general = run(segments, 'general');
        expect(fast.events).toEqual(general.events);
        expect(fast.buffers).toEqual(general.buffers);
        // With a ULP check: its shortcut changes nothing either.
        const ulpFast = run(segments, 'ulp-fast');
        const ulpGeneral = run(segments, 'ulp-general');
        expect(ulpFast.events).toEqual(ulpGeneral.events);
        expect(ulpFast.buffers).toEqual(ulpGeneral.buffers);
      }),
      { numRuns: 1200 },
    );
  });
});
