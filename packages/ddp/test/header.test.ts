import { describe, expect, it } from 'vitest';
import { gatherPrefix } from '../src/header.js';
import { decodeHeader, encodeTaggedHeader, encodeUntaggedHeader } from '../src/index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('RFC 5041 §4 header layouts, vectors computed by hand from Figures 3–5', () => {
  it('§4.2 Figure 4: tagged, L=1, DV=1, RsvdULP 0x41, STag 0x12345678, TO 0x0102030405060708', () => {
    // Control: T=1 (0x80) | L=1 (0x40) | Rsvd 0 | DV=01 → 0xc1
    const b = encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x41, stag: 0x12345678, to: 0x0102030405060708n });
    expect(hex(b)).toBe('c1' + '41' + '12345678' + '0102030405060708');
    expect(b.length).toBe(14);
    expect(decodeHeader(b)).toEqual({
      tagged: true,
      last: true,
      dv: 1,
      rsvdUlp: 0x41,
      stag: 0x12345678,
      to: 0x0102030405060708n,
    });
  });

  it('§4.2: tagged, L=0, DV=0 (RDMA Consortium), TO at 2^64-1 keeps all 64 bits', () => {
    const b = encodeTaggedHeader({ last: false, dv: 0, rsvdUlp: 0, stag: 0xffffffff, to: 0xffff_ffff_ffff_ffffn });
    expect(hex(b)).toBe('80' + '00' + 'ffffffff' + 'ffffffffffffffff');
    expect(decodeHeader(b)).toMatchObject({ tagged: true, last: false, dv: 0, to: 18446744073709551615n });
  });

  it('§4.2: a TO above 2^53 survives the round trip exactly', () => {
    const to = 2n ** 53n + 1n;
    const h = decodeHeader(encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0, stag: 1, to }));
    expect(h?.tagged && h.to).toBe(to);
  });

  it('§4.3 Figure 5: untagged, L=1, DV=1, RsvdULP 0x41_0000_1234 (40 bits), QN 1, MSN 2, MO 0x10000', () => {
    // Control: T=0 | L=1 (0x40) | DV=01 → 0x41; RsvdULP 5 octets; QN, MSN, MO 4 octets each
    const b = encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: 0x41_0000_1234, qn: 1, msn: 2, mo: 0x10000 });
    expect(hex(b)).toBe('41' + '4100001234' + '00000001' + '00000002' + '00010000');
    expect(b.length).toBe(18);
    expect(decodeHeader(b)).toEqual({
      tagged: false,
      last: true,
      dv: 1,
      rsvdUlp: 0x41_0000_1234,
      qn: 1,
      msn: 2,
      mo: 0x10000,
    });
  });

  it('§4.3: untagged, L=0, DV=0, max RsvdULP, max QN/MSN/MO', () => {
    const b = encodeUntaggedHeader({
      last: false,
      dv: 0,
      rsvdUlp: 2 ** 40 - 1,
      qn: 0xffffffff,
      msn: 0xffffffff,
      mo: 0xffffffff,
    });
    expect(hex(b)).toBe(`00${'ff'.repeat(17)}`);
    expect(decodeHeader(b)).toMatchObject({ rsvdUlp: 2 ** 40 - 1, qn: 0xffffffff, msn: 0xffffffff, mo: 0xffffffff });
  });

  it('§4.1: Rsvd bits of the control field are ignored on receive; DV is read as sent', () => {
    const b = encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0, stag: 1, to: 0n });
    b[0] = (b[0] as number) | 0x3c;
    expect(decodeHeader(b)).toMatchObject({ tagged: true, last: true, dv: 1 });
    const u = encodeUntaggedHeader({ last: false, dv: 1, rsvdUlp: 0, qn: 0, msn: 1, mo: 0 });
    u[0] = 0x03; // DV = 3: decoded as is, the stream's check reports it
    expect(decodeHeader(u)?.dv).toBe(3);
  });

  it('a header shorter than its T bit announces does not decode', () => {
    expect(decodeHeader(new Uint8Array(13).fill(0x80))).toBeUndefined();
    expect(decodeHeader(new Uint8Array(17))).toBeUndefined();
    expect(decodeHeader(new Uint8Array(0))).toBeUndefined();
  });

  it('headers straddling LLP chunks are gathered; a first chunk holding it all is used as is', () => {
    const b = encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: 7, qn: 2, msn: 3, mo: 4 });
    const scratch = new Uint8Array(18);
    const g = gatherPrefix([b.subarray(0, 5), b.subarray(5, 6), b.subarray(6)], 18, scratch);
    expect(hex(g)).toBe(hex(b));
    expect(gatherPrefix([b], 18, scratch).buffer).toBe(b.buffer);
  });
});
