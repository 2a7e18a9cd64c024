/**
 * The kit's own wire codec (written from the RFC text): known-answer vectors and round trips.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  crc32c,
  decodeMpaFrame,
  decodeTerminate,
  decodeUlpdu,
  encodeAtomicRequest,
  encodeFpdu,
  encodeMpaReply,
  encodeMpaRequest,
  encodeReadRequest,
  encodeTerminate,
  FpduReader,
  MARKER_INTERVAL,
  mpaAgreement,
  Opcode,
  padLength,
  readMpaCrc,
  taggedSegment,
  untaggedSegment,
  writeMpaCrc,
} from '../src/index.js';

const hex = (s: string) => Uint8Array.from(s.match(/../g)!.map((h) => Number.parseInt(h, 16)));

describe('CRC32c (RFC 3720 §B.4 test vectors)', () => {
  const wire = (data: Uint8Array) => {
    const b = new Uint8Array(4);
    writeMpaCrc(b, 0, crc32c(data));
    return Buffer.from(b).toString('hex');
  };
  it('32 octets of zeros: aa 36 91 8a', () => expect(wire(new Uint8Array(32))).toBe('aa36918a'));
  it('32 octets of ones: 43 ab a8 62', () => expect(wire(new Uint8Array(32).fill(0xff))).toBe('43aba862'));
  it('32 incrementing octets: 4e 79 dd 46', () =>
    expect(wire(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe('4e79dd46'));
  it('32 decrementing octets: 5c db 3f 11', () =>
    expect(wire(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe('5cdb3f11'));
  it('an iSCSI Read PDU: 56 3a 96 d9', () => {
    const pdu = hex(
      '01c00000000000000000000000000000' + '14000000000004000000001400000018' + '28000000000000000200000000000000',
    );
    expect(wire(pdu)).toBe('563a96d9');
  });
  it('over pieces equals over the whole', () =>
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(300), (data, cut) => {
        const k = Math.min(cut, data.byteLength);
        expect(crc32c(data.subarray(0, k), data.subarray(k))).toBe(crc32c(data));
        const b = new Uint8Array(4);
        writeMpaCrc(b, 0, crc32c(data));
        expect(readMpaCrc(b, 0)).toBe(crc32c(data));
      }),
    ));
});

describe('MPA Request/Reply frames (RFC 5044 §7.1, RFC 6581)', () => {
  it('round-trips every field', () =>
    fc.assert(
      fc.property(
        fc.record({
          markers: fc.boolean(),
          crc: fc.boolean(),
          reject: fc.boolean(),
          rev: fc.constantFrom(1, 2),
          pd: fc.uint8Array({ maxLength: 508 }),
          ird: fc.nat(0x3fff),
          ord: fc.nat(0x3fff),
          p2p: fc.boolean(),
          s: fc.boolean(),
          w: fc.boolean(),
          r: fc.boolean(),
          reply: fc.boolean(),
        }),
        (f) => {
          const enhanced =
            f.rev === 2
              ? { peerToPeer: f.p2p, ird: f.ird, ord: f.ord, sendRtr: f.s, writeRtr: f.w, readRtr: f.r }
              : undefined;
          const fields = {
            markers: f.markers,
            crc: f.crc,
            reject: f.reply && f.reject,
            rev: f.rev,
            privateData: f.pd,
            ...(enhanced ? { enhanced } : {}),
          };
          const bytes = f.reply ? encodeMpaReply(fields) : encodeMpaRequest(fields);
          const d = decodeMpaFrame(bytes);
          if (d.status !== 'ok') throw new Error(d.status);
          expect(d.frame.kind).toBe(f.reply ? 'reply' : 'request');
          expect(d.frame.markers).toBe(f.markers);
          expect(d.frame.crc).toBe(f.crc);
          expect(d.frame.reject).toBe(f.reply && f.reject);
          expect(d.frame.rev).toBe(f.rev);
          expect(d.frame.length).toBe(bytes.byteLength);
          expect([...d.frame.ulpData]).toEqual([...f.pd]);
          expect(d.frame.enhanced).toEqual(enhanced);
          expect(d.frame.violations).toEqual([]);
          // Every proper prefix asks for more.
          for (const k of [0, 5, 16, 19, bytes.byteLength - 1])
            if (k < bytes.byteLength) expect(decodeMpaFrame(bytes.subarray(0, k)).status).toBe('need-more');
        },
      ),
    ));

  it('lays out the key, the M/C/R bits, Rev and PD_Length as RFC 5044 §7.1 draws them', () => {
    const b = encodeMpaRequest({ markers: true, crc: false, rev: 1, privateData: Uint8Array.of(9, 9) });
    expect(Buffer.from(b.subarray(0, 16)).toString('latin1')).toBe('MPA ID Req Frame');
    expect([...b.subarray(16)]).toEqual([0x80, 1, 0, 2, 9, 9]);
    const e = encodeMpaReply({
      markers: false,
      crc: true,
      rev: 2,
      enhanced: { peerToPeer: true, ird: 5, ord: 7, sendRtr: false, writeRtr: false, readRtr: true },
    });
    expect([...e.subarray(16)]).toEqual([0x40, 2, 0, 4, 0x80, 5, 0x40, 7]);
  });

  it('rejects a wrong key, PD_Length over 512 and flags reserved bits and other revisions', () => {
    const bad = encodeMpaRequest({ markers: false, crc: false, rev: 1, key: 'MPA ID Xeq Frame' });
    expect(decodeMpaFrame(bad)).toMatchObject({
      status: 'error',
      violation: { code: 'mpa-key', clause: 'RFC 5044 §7.1' },
    });
    const big = encodeMpaRequest({ markers: false, crc: false, rev: 1, pdLength: 513 });
    expect(decodeMpaFrame(big)).toMatchObject({ status: 'error', violation: { code: 'mpa-pd-length' } });
    const res = decodeMpaFrame(encodeMpaRequest({ markers: false, crc: false, rev: 3, res: 1 }));
    if (res.status !== 'ok') throw new Error('decode');
    expect(res.frame.violations.map((v) => v.code).sort()).toEqual(['mpa-res', 'mpa-rev']);
    const rep = decodeMpaFrame(encodeMpaRequest({ markers: false, crc: false, rev: 1 }), 'reply');
    expect(rep.status).toBe('error');
  });

  it('works out CRC and Markers per direction and checks the RFC 6581 RTR choice', () => {
    const dec = (b: Uint8Array) => {
      const d = decodeMpaFrame(b);
      if (d.status !== 'ok') throw new Error('decode');
      return d.frame;
    };
    const q = dec(
      encodeMpaRequest({
        markers: true,
        crc: true,
        rev: 2,
        enhanced: { peerToPeer: true, ird: 1, ord: 1, sendRtr: true, writeRtr: false, readRtr: true },
      }),
    );
    const p = dec(
      encodeMpaReply({
        markers: false,
        crc: false,
        rev: 2,
        enhanced: { peerToPeer: true, ird: 1, ord: 1, sendRtr: false, writeRtr: true, readRtr: false },
      }),
    );
    const a = mpaAgreement(q, p);
    expect(a.markersToInitiator).toBe(true);
    expect(a.markersToResponder).toBe(false);
    expect(a.violations.map((v) => v.code).sort()).toEqual(['mpa-crc-bit', 'mpa-rtr-choice']);
  });
});

/** Splits `bytes` at the given cut points. */
function chop(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(bytes.subarray(prev, p));
    prev = p;
  }
  out.push(bytes.subarray(prev));
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}

describe('FPDUs (RFC 5044 §4)', () => {
  it('pads ULPDU_Length + ULPDU to 4 octets', () => {
    expect([0, 1, 2, 3, 4, 18].map(padLength)).toEqual([2, 1, 0, 3, 2, 0]);
  });

  it('round-trips any ULPDUs in any segment layout, with and without CRC and Markers', () =>
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 1500 }), { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        fc.boolean(),
        fc.array(fc.nat(20000), { maxLength: 12 }),
        (ulpdus, crc, markers, cuts) => {
          let off = 0;
          const wire: Uint8Array[] = [];
          for (const u of ulpdus) {
            const f = encodeFpdu(u, { crc, markers, streamOffset: off });
            off += f.byteLength;
            wire.push(f);
          }
          const reader = new FpduReader({ crc, markers });
          const got = chop(concat(wire), cuts).flatMap((c) => reader.push(c));
          expect(got.map((f) => [...f.ulpdu])).toEqual(ulpdus.map((u) => [...u]));
          for (const f of got) {
            expect(f.violations).toEqual([]);
            expect(f.crcVerdict).toBe(crc ? 'good' : 'off');
          }
          expect(got.map((f) => f.wireLength)).toEqual(wire.map((w) => w.byteLength));
          expect(reader.buffered).toBe(0);
          if (markers) {
            // One Marker at every 512th octet of the stream.
            const all = got.flatMap((f) => f.markers.map((m) => m.streamOffset));
            expect(all).toEqual(
              Array.from({ length: Math.ceil(off / MARKER_INTERVAL) }, (_, i) => i * MARKER_INTERVAL),
            );
          }
        },
      ),
      { numRuns: 150 },
    ));

  it('opens the stream with a Marker (FPDUPTR 0) and points later Markers back at ULPDU_Length', () => {
    const f = encodeFpdu(new Uint8Array(600), { crc: false, markers: true, streamOffset: 0 });
    expect([...f.subarray(0, 6)]).toEqual([0, 0, 0, 0, 0x02, 0x58]);
    // The next Marker sits at stream offset 512, 508 octets after ULPDU_Length (at offset 4).
    expect([...f.subarray(512, 516)]).toEqual([0, 0, 0x01, 0xfc]);
  });

  it('flags a bad CRC, a misplaced Marker, an over-long ULPDU and non-zero pad', () => {
    const read = (bytes: Uint8Array, crc: boolean, markers: boolean) =>
      new FpduReader({ crc, markers }).push(bytes).flatMap((f) => f.violations.map((v) => `${v.code} ${v.clause}`));
    const u = new Uint8Array(700).fill(7);
    expect(read(encodeFpdu(u, { crc: true, markers: false, crcXor: 1 }), true, false)).toEqual([
      'mpa-crc RFC 5044 §4.4',
    ]);
    expect(
      read(encodeFpdu(u, { crc: true, markers: true, markerPtr: (i, r) => (i === 1 ? r + 4 : r) }), true, true),
    ).toEqual(['mpa-marker RFC 5044 §4.3']);
    expect(read(encodeFpdu(new Uint8Array(64769), { crc: true, markers: false }), true, false)).toEqual([
      'mpa-ulpdu-too-long RFC 5044 §3 (MULPDU)',
    ]);
    const padded = encodeFpdu(new Uint8Array(1), { crc: false, markers: false });
    padded[3] = 1;
    expect(read(padded, false, false)).toEqual(['mpa-pad-not-zero RFC 5044 §4.1']);
  });

  it('names a wrong pad length as RFC 5044 §4.1 (its CRC good where the sender’s pad ends), not a CRC error', () => {
    for (const markers of [false, true])
      for (const [n, sent] of [
        [20, 4], // 2 + 20 is 2 short of 24: two are due; four sent (pad to the ULPDU alone, plus 4)
        [20, 0], // none sent
        [16, 4], // 18: two due
        [18, 4], // 20: aligned, none due
      ] as const) {
        const u = new Uint8Array(n).fill(9);
        const bad = encodeFpdu(u, { crc: true, markers, padOverride: sent });
        const next = encodeFpdu(new Uint8Array(40), { crc: true, markers, streamOffset: bad.byteLength });
        const both = new Uint8Array(bad.byteLength + next.byteLength);
        both.set(bad);
        both.set(next, bad.byteLength);
        const fs = new FpduReader({ crc: true, markers }).push(both);
        expect(fs.length, `${n}/${sent}`).toBe(2);
        const first = fs[0]?.violations.map((v) => `${v.code} ${v.clause}`) ?? [];
        expect(first[0], `${n}/${sent} markers ${markers}`).toBe('mpa-pad-length RFC 5044 §4.1');
        expect(first).not.toContain('mpa-crc RFC 5044 §4.4');
        expect(fs[0]?.ulpduLength).toBe(n);
        expect(fs[1]?.ulpduLength).toBe(40);
      }
  });

  it('a short pad is named even when its FPDU is the last thing sent, or arrives octet by octet', () => {
    for (const markers of [false, true]) {
      const bad = encodeFpdu(new Uint8Array(20).fill(3), { crc: true, markers, padOverride: 0 }); // 2 due
      const whole = new FpduReader({ crc: true, markers }).push(bad);
      expect(whole.map((f) => f.violations[0]?.code)).toEqual(['mpa-pad-length']);
      const r = new FpduReader({ crc: true, markers });
      const got = [...bad].flatMap((b) => r.push(Uint8Array.of(b)));
      expect(got.map((f) => f.violations[0]?.code)).toEqual(['mpa-pad-length']);
      expect(r.buffered).toBe(0);
    }
  });

  it('holds at most one FPDU however many octets a peer sends', () => {
    const r = new FpduReader({ crc: true, markers: true });
    // ULPDU_Length 0xffff, then never the rest.
    r.push(Uint8Array.of(0, 0, 0, 0, 0xff, 0xff));
    for (let i = 0; i < 100; i++) r.push(new Uint8Array(1000));
    expect(r.buffered).toBeLessThan(70_000);
  });
});

describe('DDP and RDMAP headers (RFC 5041 §4, RFC 5040 §4, RFC 7306)', () => {
  it('round-trips untagged and tagged segments', () =>
    fc.assert(
      fc.property(
        fc.constantFrom(Opcode.Send, Opcode.SendWithInvalidate, Opcode.SendWithSolicitedEvent),
        fc.nat(0xffffffff),
        fc.nat(0xffff),
        fc.boolean(),
        fc.uint8Array({ maxLength: 64 }),
        fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }),
        (opcode, msn, mo, last, payload, to) => {
          const u = decodeUlpdu(
            untaggedSegment({ opcode, msn, mo, last, invalidateStag: opcode === 4 ? 77 : 0 }, payload),
          );
          if ('error' in u) throw new Error(u.error.message);
          expect(u.ddp).toMatchObject({ tagged: false, last, dv: 1, qn: 0, msn, mo });
          expect(u.rdmap).toMatchObject({ rv: 1, opcode });
          expect([...u.payload]).toEqual([...payload]);
          expect(u.violations).toEqual([]);
          if (opcode === 4) expect(u.invalidateStag).toBe(77);
          const t = decodeUlpdu(taggedSegment({ opcode: Opcode.RdmaWrite, stag: msn, to, last }, payload));
          if ('error' in t) throw new Error(t.error.message);
          expect(t.ddp).toMatchObject({ tagged: true, stag: msn, to, last });
          expect(t.violations).toEqual([]);
        },
      ),
    ));

  it('decodes the Read Request, Immediate Data and Atomic headers', () => {
    const rr = decodeUlpdu(
      untaggedSegment(
        { opcode: Opcode.RdmaReadRequest, msn: 1 },
        encodeReadRequest({ sinkStag: 1, sinkTo: 2n, size: 3, srcStag: 4, srcTo: 5n }),
      ),
    );
    expect(rr).toMatchObject({
      readRequest: { sinkStag: 1, sinkTo: 2n, size: 3, srcStag: 4, srcTo: 5n },
      violations: [],
    });
    const im = decodeUlpdu(untaggedSegment({ opcode: Opcode.ImmediateData, msn: 1 }, hex('0102030405060708')));
    expect(im).toMatchObject({ immediateData: 0x0102030405060708n, rdmap: { name: 'Immediate Data' } });
    const at = decodeUlpdu(
      untaggedSegment(
        { opcode: Opcode.AtomicRequest, msn: 1 },
        encodeAtomicRequest({
          atomicOpcode: 2,
          requestId: 9,
          remoteStag: 3,
          remoteTo: 8n,
          addOrSwapData: 1n,
          addOrSwapMask: 2n,
          compareData: 3n,
          compareMask: 4n,
        }),
      ),
    );
    expect(at).toMatchObject({
      ddp: { qn: 1 },
      atomicRequest: { atomicOpcodeName: 'CmpSwap', requestId: 9, compareMask: 4n },
    });
  });

  it('flags what a receiver must reject, with its clause', () => {
    const codes = (b: Uint8Array) => {
      const d = decodeUlpdu(b);
      if ('error' in d) return [d.error.code];
      return d.violations.filter((v) => v.severity === 'reject').map((v) => v.code);
    };
    expect(codes(untaggedSegment({ opcode: Opcode.Send, msn: 1, dv: 2 }))).toEqual(['ddp-version']);
    expect(codes(untaggedSegment({ opcode: Opcode.Send, msn: 1, rv: 0 }))).toEqual(['rdmap-version']);
    expect(codes(untaggedSegment({ opcode: 0xc, msn: 1 }))).toEqual(['rdmap-opcode-reserved']);
    expect(codes(untaggedSegment({ opcode: Opcode.Send, msn: 1, qn: 7 }))).toEqual(['ddp-invalid-qn']);
    expect(codes(untaggedSegment({ opcode: Opcode.Send, msn: 1, qn: 1 }))).toEqual(['rdmap-queue']);
    expect(codes(untaggedSegment({ opcode: Opcode.RdmaWrite, msn: 1 }))).toEqual(['rdmap-opcode-t-bit']);
    expect(
      codes(
        untaggedSegment(
          { opcode: Opcode.RdmaReadRequest, msn: 1, last: false },
          encodeReadRequest({ sinkStag: 1, sinkTo: 0n, size: 1, srcStag: 2, srcTo: 0n }),
        ),
      ),
    ).toEqual(['rdmap-single-segment']);
    expect(codes(untaggedSegment({ opcode: Opcode.RdmaReadRequest, msn: 1 }, new Uint8Array(27)))).toEqual([
      'rdmap-read-request-length',
    ]);
    expect(codes(untaggedSegment({ opcode: Opcode.Send, msn: 1, mo: 0xffffffff }, new Uint8Array(2)))).toEqual([
      'ddp-invalid-mo',
    ]);
    expect(
      codes(taggedSegment({ opcode: Opcode.RdmaWrite, stag: 1, to: (1n << 64n) - 1n }, new Uint8Array(2))),
    ).toEqual(['ddp-to-wrap']);
    expect(codes(new Uint8Array(0))).toEqual(['ddp-short-segment']);
    expect(codes(new Uint8Array(17))).toEqual(['ddp-short-segment']);
  });
});

describe('Terminate (RFC 5040 §4.8)', () => {
  it('round-trips with each combination of M, D and R', () =>
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.boolean(), fc.nat(0xffff), (m, d, r) => {
        const ddpHeader = untaggedSegment({ opcode: Opcode.RdmaReadRequest, msn: 3 }).subarray(0, 18);
        const rdmaHeader = encodeReadRequest({ sinkStag: 1, sinkTo: 0n, size: 1, srcStag: 2, srcTo: 0n });
        const t = {
          layer: 1,
          etype: 2,
          errorCode: 1,
          m,
          d,
          r,
          ...(m || d ? { ddpSegmentLength: 46 } : {}),
          ...(d ? { ddpHeader } : {}),
          ...(r ? { rdmaHeader } : {}),
        };
        const got = decodeTerminate(encodeTerminate(t));
        if ('error' in got) throw new Error(got.error.message);
        expect(got).toMatchObject(t);
        expect(got.name).toBe('DDP: Untagged Buffer Error: Invalid QN');
      }),
    ));

  it('names every code of the RFC tables and flags an undefined one', () => {
    const t = decodeTerminate(encodeTerminate({ layer: 0, etype: 2, errorCode: 0x06, m: false, d: false, r: false }));
    expect(t).toMatchObject({ name: 'RDMAP: Remote Operation Error: Unexpected OpCode', violations: [] });
    const u = decodeTerminate(encodeTerminate({ layer: 0, etype: 2, errorCode: 0x42, m: false, d: false, r: false }));
    expect(u).toMatchObject({ violations: [{ code: 'rdmap-terminate-code', clause: 'RFC 5040 §4.8' }] });
    const mpa = decodeTerminate(encodeTerminate({ layer: 2, etype: 0, errorCode: 0x07, m: false, d: false, r: false }));
    expect(mpa).toMatchObject({ name: 'MPA: No matching RTR model' });
  });
});
