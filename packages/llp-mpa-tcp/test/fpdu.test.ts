/**
 * FPDU framing (RFC 5044 §4.1), Markers (§4.2–4.3), CRC (§4.4), MULPDU (§4.5, §3): byte vectors, and the
 * incremental receiver over every way of cutting the stream into chunks.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  crc32c,
  encodeRtr,
  FpduReader,
  FpduWriter,
  INLINE_DEFAULT,
  INLINE_MAX,
  MpaCrcError,
  MpaProtocolError,
  mpaTcp,
  mulpduForEmss,
  padLength,
} from '../src/index.js';
import { markerChunk, writeMarker } from '../src/markers.js';
import { pattern } from './helpers.js';

const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Bit-at-a-time CRC32c (Castagnoli, reflected 0x82F63B78): an independent reference for the table/native code. */
function referenceCrc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return ~c >>> 0;
}

function wire(w: FpduWriter, parts: Uint8Array[]): Buffer {
  const out: Uint8Array[] = [];
  const length = parts.reduce((n, p) => n + p.byteLength, 0);
  const n = w.frame(parts, length, out);
  const b = Buffer.concat(out);
  expect(b.byteLength).toBe(n);
  return b;
}

interface Got {
  ulpdus: Uint8Array[];
  chunks: Uint8Array[][];
  errors: Error[];
}
function reader(opts: { crc: boolean; markers: boolean }): [FpduReader, Got] {
  const got: Got = { ulpdus: [], chunks: [], errors: [] };
  const r = new FpduReader(
    opts,
    (length, chunks) => {
      got.chunks.push(chunks);
      got.ulpdus.push(Buffer.concat(chunks));
      expect(chunks.reduce((n, c) => n + c.byteLength, 0)).toBe(length);
    },
    (e) => got.errors.push(e),
  );
  return [r, got];
}

describe('CRC32c (RFC 5044 §4.4)', () => {
  it('RFC 5044 §4.4: CRC32c of "123456789" is 0xE3069283 (the iSCSI check value), table and native paths alike', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    const big = pattern(5000, 1);
    expect(crc32c(big)).toBe(referenceCrc32c(big));
    // Incremental over arbitrary cuts equals one pass.
    expect(crc32c(big.subarray(3000), crc32c(big.subarray(17, 3000), crc32c(big.subarray(0, 17))))).toBe(
      referenceCrc32c(big),
    );
  });
});

describe('FPDU transmit (RFC 5044 §4.1, §4.4)', () => {
  it('RFC 5044 §4.1: ULPDU_Length, ULPDU, pad to 4, CRC least significant octet first (siw put_unaligned_le32)', () => {
    const w = new FpduWriter({ crc: true, markers: false });
    const b = wire(w, [Uint8Array.of(0xde, 0xad, 0xbe)]);
    const crc = referenceCrc32c(Uint8Array.of(0x00, 0x03, 0xde, 0xad, 0xbe, 0x00, 0x00, 0x00));
    const le = Buffer.alloc(4);
    le.writeUInt32LE(crc);
    expect(toHex(b)).toBe(`0003deadbe000000${le.toString('hex')}`);
  });

  it('RFC 5044 §7.1.1 C: with CRCs off the CRC field is sent as zero', () => {
    const w = new FpduWriter({ crc: false, markers: false });
    expect(toHex(wire(w, [Uint8Array.of(1, 2)]))).toBe('0002010200000000');
  });

  it('RFC 6581: the zero-length RDMA Write RTR FPDU is the one siw sends (DDP/RDMAP v1, STag 1, TO 0)', () => {
    const w = new FpduWriter({ crc: false, markers: false });
    expect(toHex(wire(w, [encodeRtr('write')]))).toBe('000e' + 'c140' + '00000001' + '0000000000000000' + '00000000');
  });

  it('RFC 5044 §4.1: pad brings ULPDU_Length + ULPDU to a multiple of 4 for every length', () => {
    for (let n = 0; n < 12; n++) expect((2 + n + padLength(n)) % 4).toBe(0);
    expect([0, 1, 2, 3].map(padLength)).toEqual([2, 1, 0, 3]);
  });

  it('never concatenates payload above the inline threshold: parts go out as the same objects', () => {
    const w = new FpduWriter({ crc: true, markers: false });
    const p1 = pattern(100, 1);
    const p2 = pattern(300, 2);
    const out: Uint8Array[] = [];
    w.frame([p1, p2], 400, out);
    expect(out[1]).toBe(p1);
    expect(out[2]).toBe(p2);
    // A short first part (a DDP header) is framed with ULPDU_Length; the payload still goes by reference.
    const hdr = pattern(18, 3);
    const body = pattern(1000, 4);
    const out2: Uint8Array[] = [];
    w.frame([hdr, body], 1018, out2);
    expect(out2).toHaveLength(3);
    expect(out2[1]).toBe(body);
    expect(toHex(out2[0] as Uint8Array)).toBe(toHex(Buffer.concat([Buffer.from([0x03, 0xfa]), hdr])));
  });

  it(`RFC 5044 §4.1, §4.4: ULPDUs up to the inline threshold (default ${INLINE_DEFAULT}) leave as one chunk, octet for octet the same FPDU (length, pad, CRC)`, () => {
    for (const crc of [true, false])
      for (let length = 0; length <= 300; length += length < 140 ? 1 : 37) {
        const parts = length > 18 ? [pattern(18, length), pattern(length - 18, 7)] : [pattern(length, 5)];
        const inline = new FpduWriter({ crc, markers: false });
        const chunked = new FpduWriter({ crc, markers: false, inline: 0 });
        const a: Uint8Array[] = [];
        const b: Uint8Array[] = [];
        inline.frame(parts, length, a);
        chunked.frame(parts, length, b);
        expect(toHex(Buffer.concat(a))).toBe(toHex(Buffer.concat(b)));
        if (length <= INLINE_DEFAULT) expect(a).toHaveLength(1);
        else expect(a.length).toBeGreaterThan(1);
      }
    // The inline copy is a snapshot: the FPDU does not change when the caller reuses its buffer afterwards.
    const w = new FpduWriter({ crc: true, markers: false });
    const msg = pattern(64, 9);
    const out: Uint8Array[] = [];
    w.frame([msg], 64, out);
    const before = toHex(out[0] as Uint8Array);
    msg.fill(0);
    expect(toHex(out[0] as Uint8Array)).toBe(before);
    const [r, got] = reader({ crc: true, markers: false });
    r.push(Buffer.from(out[0] as Uint8Array));
    expect(toHex(got.ulpdus[0] as Uint8Array)).toBe(toHex(pattern(64, 9)));
  });

  it('inlineThreshold is checked: a bad value is an InvalidArgumentError', () => {
    for (const v of [-1, 1.5, INLINE_MAX + 1, '64'])
      expect(() => mpaTcp({ inlineThreshold: v as number })).toThrow(/inlineThreshold/);
    expect(() => mpaTcp({ inlineThreshold: 0 })).not.toThrow();
  });

  it('markerFraming is checked: anything but gather or copy is an InvalidArgumentError', () => {
    for (const v of ['zero-copy', '', 1, true])
      expect(() => mpaTcp({ markerFraming: v as 'copy' })).toThrow(/markerFraming must be 'gather' or 'copy'/);
    for (const v of ['gather', 'copy', undefined] as const) expect(() => mpaTcp({ markerFraming: v })).not.toThrow();
  });
});

describe('FPDU transmit with deferCrc (one CRC call per batch)', () => {
  it('RFC 5044 §4.4: inline FPDUs get their CRC at seal(), octet for octet what an undeferred writer frames, across slabs', () => {
    for (const crc of [true, false]) {
      const deferred = new FpduWriter({ crc, markers: false, deferCrc: true });
      const plain = new FpduWriter({ crc, markers: false });
      const a: Uint8Array[] = [];
      const b: Uint8Array[] = [];
      // 700 small FPDUs (more than one 16 KiB slab and more than one span list), and large ones between.
      for (let i = 0; i < 700; i++) {
        const parts = i % 97 === 0 ? [pattern(18, i), pattern(2000, i)] : [pattern(18, i), pattern(i % 90, i + 1)];
        const len = parts.reduce((n, p) => n + p.byteLength, 0);
        deferred.frame(parts, len, a);
        plain.frame(parts, len, b);
      }
      deferred.seal();
      expect(toHex(Buffer.concat(a))).toBe(toHex(Buffer.concat(b)));
    }
  });

  it('before seal() the CRC field of an inline FPDU is not yet written; after it, the reader accepts the FPDU', () => {
    const w = new FpduWriter({ crc: true, markers: false, deferCrc: true });
    const out: Uint8Array[] = [];
    w.frame([pattern(64, 3)], 64, out);
    const f = out[0] as Uint8Array;
    const crcField = () => toHex(f.subarray(f.byteLength - 4));
    f.fill(0xaa, f.byteLength - 4); // what the slab held there
    expect(crcField()).toBe('aaaaaaaa');
    w.seal();
    expect(crcField()).not.toBe('aaaaaaaa');
    const [r, got] = reader({ crc: true, markers: false });
    r.push(Buffer.from(f));
    expect(got.errors).toEqual([]);
    expect(toHex(got.ulpdus[0] as Uint8Array)).toBe(toHex(pattern(64, 3)));
  });
});

describe('Markers (RFC 5044 §4.2–4.3)', () => {
  it('RFC 5044 §4.3: the first FPDU opens with a Marker of FPDUPTR 0, then one every 512 octets pointing back to the header', () => {
    const w = new FpduWriter({ crc: false, markers: true });
    const b = wire(w, [pattern(1200, 3)]);
    // Marker at 0 (FPDUPTR 0), header at 4, Markers at 512 and 1024 pointing back to offset 4.
    expect(toHex(b.subarray(0, 4))).toBe('00000000');
    expect(b.readUInt16BE(4)).toBe(1200);
    expect(b.readUInt32BE(512)).toBe(512 - 4);
    expect(b.readUInt32BE(1024)).toBe(1024 - 4);
    // 4 + 2 + 1200 + 2 pad + 4 CRC + two more Markers
    expect(b.byteLength).toBe(4 + 2 + 1200 + 2 + 4 + 8);
  });

  it('RFC 5044 §4.3: Markers follow TCP sequence space across FPDUs, including one between pad and CRC', () => {
    const w = new FpduWriter({ crc: true, markers: true });
    // First FPDU: Marker + 2 + 498 + pad 0 = 504, CRC at 504..507, next Marker is at 512.
    const a = wire(w, [pattern(498, 1)]);
    expect(a.byteLength).toBe(508);
    // Second FPDU starts at 508: header 508..509, ULPDU 510..511, then the 512 Marker inside it (FPDUPTR 4).
    const b = wire(w, [pattern(6, 2)]);
    expect(b.readUInt32BE(4)).toBe(4);
    // A ULPDU ending exactly where a Marker is due puts the Marker between pad and CRC.
    const w2 = new FpduWriter({ crc: true, markers: true });
    const c = wire(w2, [pattern(506, 4)]); // 4 + 2 + 506 = 512: pad 0, Marker at 512, CRC after it
    expect(c.byteLength).toBe(4 + 2 + 506 + 4 + 4);
    expect(c.readUInt32BE(512)).toBe(508);
    // The CRC covers everything before it, both Markers included.
    const crc = referenceCrc32c(c.subarray(0, 516));
    expect(c.readUInt32LE(516)).toBe(crc);
  });

  it('RFC 5044 §4.2: Markers come from one shared read-only table, each value the Marker writeMarker frames', () => {
    for (let ptr = 0; ptr <= 0xfffc; ptr += 4) {
      const m = markerChunk(ptr) as Buffer;
      const ref = new Uint8Array(4);
      writeMarker(ref, 0, ptr);
      if (toHex(m) !== toHex(ref)) expect(toHex(m)).toBe(toHex(ref));
      if (markerChunk(ptr) !== m) expect(markerChunk(ptr)).toBe(m); // one view per value, shared
    }
    expect(Buffer.isBuffer(markerChunk(512))).toBe(true); // the socket takes it as it is
    // FPDUPTR is 16 bits with its two low bits zero (§4.2): anything else is not in the table.
    for (const bad of [2, 0x10000, -4]) expect(markerChunk(bad)).toBeUndefined();
    // A 64 KiB ULPDU in two writers' FPDUs: the Markers are the table's views, and the FPDU is octet for
    // octet the one a reference framing gives (RESERVED 0, FPDUPTR back to ULPDU_Length, CRC over all).
    const w = new FpduWriter({ crc: true, markers: true });
    const chunks: Uint8Array[] = [];
    w.frame([pattern(64_000, 9)], 64_000, chunks);
    const fromTable = chunks.filter((c) => c.byteLength === 4 && markerChunk(Buffer.from(c).readUInt32BE(0)) === c);
    const b = Buffer.concat(chunks);
    // Every Marker but the one opening the FPDU (framed with ULPDU_Length) is a table view here.
    expect(fromTable.length).toBe(Math.ceil(b.byteLength / 512) - 1);
    for (let at = 512; at < b.byteLength - 4; at += 512) expect(b.readUInt32BE(at)).toBe(at - 4);
    expect(b.readUInt32LE(b.byteLength - 4)).toBe(referenceCrc32c(b.subarray(0, b.byteLength - 4)));
  });

  it("RFC 5044 §4.1-§4.4: markerFraming 'copy' puts octet for octet what 'gather' puts on the wire, one chunk per FPDU (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 9000 }), fc.nat()), { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        (ulpdus, crc) => {
          const gather = new FpduWriter({ crc, markers: true });
          const copy = new FpduWriter({ crc, markers: true, markerFraming: 'copy' });
          for (const [i, [n, cut]] of ulpdus.entries()) {
            const u = pattern(n, i);
            const c = n ? cut % (n + 1) : 0;
            const parts = [u.subarray(0, c), u.subarray(c)];
            const chunks: Uint8Array[] = [];
            copy.frame(parts, n, chunks);
            expect(chunks).toHaveLength(1);
            expect(toHex(chunks[0] as Uint8Array)).toBe(toHex(wire(gather, parts)));
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it("markerFraming 'copy' copies the ULPDU: changing it after framing changes nothing framed", () => {
    const w = new FpduWriter({ crc: true, markers: true, markerFraming: 'copy' });
    const u = pattern(3000, 5);
    const chunks: Uint8Array[] = [];
    w.frame([u], u.byteLength, chunks);
    const before = toHex(chunks[0] as Uint8Array);
    u.fill(0);
    expect(toHex(chunks[0] as Uint8Array)).toBe(before);
  });

  it("markerFraming 'copy' frames into a written slab again only once every batch holding its octets is written", () => {
    const w = new FpduWriter({ crc: false, markers: true, markerFraming: 'copy' });
    const u = pattern(60_000, 1);
    const bufs: ArrayBufferLike[] = [];
    const frameOne = (): void => {
      const chunks: Uint8Array[] = [];
      w.frame([u], u.byteLength, chunks);
      bufs.push((chunks[0] as Uint8Array).buffer);
    };
    // Batch 1: enough FPDUs to fill two slabs; none is written yet, so every slab is new.
    for (let i = 0; i < 10; i++) frameOne();
    const batch1 = new Set(bufs);
    expect(batch1.size).toBeGreaterThanOrEqual(3);
    const sent = w.batch++;
    for (let i = 0; i < 10; i++) frameOne();
    expect(bufs.slice(10).some((b) => batch1.has(b) && b !== bufs[9])).toBe(false); // nothing of batch 1 reused
    w.written(sent);
    const before = bufs.length;
    for (let i = 0; i < 10; i++) frameOne();
    expect(bufs.slice(before).some((b) => batch1.has(b) && b !== bufs[9])).toBe(true); // batch 1's slabs reused
  });

  it('RFC 5044 §4.5: MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4), within [128, 64768] (§3)', () => {
    expect(mulpduForEmss(1460, true)).toBe(1460 - (6 + 12 + 0));
    expect(mulpduForEmss(1460, false)).toBe(1454);
    expect(mulpduForEmss(1462, false)).toBe(1462 - 6 - 2);
    expect(mulpduForEmss(65483, false)).toBe(64768);
    expect(mulpduForEmss(100, false)).toBe(128);
  });
});

describe('FPDU receive (RFC 5044 §4, §6)', () => {
  const modes = [
    { crc: true, markers: false },
    { crc: false, markers: false },
    { crc: true, markers: true },
    { crc: false, markers: true },
  ];
  for (const mode of modes)
    it(`RFC 5044 §6: every cut of the stream yields the same ULPDUs (CRC ${mode.crc}, Markers ${mode.markers})`, () => {
      const w = new FpduWriter(mode);
      const sent = [0, 1, 2, 3, 4, 5, 100, 506, 507, 508, 509, 510, 1020, 3000, 64768].map((n, i) => pattern(n, i));
      const stream = Buffer.concat(sent.map((u) => wire(w, [u])));
      let seed = 7;
      for (const maxCut of [1, 2, 3, 5, 64, 700, 70_000]) {
        const [r, got] = reader(mode);
        let off = 0;
        while (off < stream.byteLength) {
          seed = (seed * 1103515245 + 12345) >>> 0;
          const n = 1 + (seed % maxCut);
          r.push(stream.subarray(off, off + n));
          off += n;
        }
        expect(got.errors).toEqual([]);
        expect(got.ulpdus.map(toHex)).toEqual(sent.map(toHex));
        expect(r.atBoundary).toBe(true);
      }
    });

  it('keeps references to the socket chunks: delivered ULPDU chunks are views of the pushed buffers', () => {
    const w = new FpduWriter({ crc: true, markers: false });
    const stream = Buffer.concat([wire(w, [pattern(3000, 1)]), wire(w, [pattern(10, 2)])]);
    const pushed = [Buffer.from(stream.subarray(0, 1000)), Buffer.from(stream.subarray(1000))];
    const [r, got] = reader({ crc: true, markers: false });
    for (const p of pushed) r.push(p);
    expect(got.chunks[0]?.map((c) => c.buffer)).toEqual([pushed[0]?.buffer, pushed[1]?.buffer]);
    expect(got.chunks[1]?.[0]?.buffer).toBe(pushed[1]?.buffer);
  });

  it('RFC 5044 §8 code 2: a bad CRC is never delivered; the reader stops with MpaCrcError', () => {
    const w = new FpduWriter({ crc: true, markers: false });
    const good = wire(w, [pattern(20, 1)]);
    const bad = wire(w, [pattern(40, 2)]);
    bad[bad.byteLength - 1] ^= 0x01;
    const after = wire(w, [pattern(8, 3)]);
    for (const cut of [1, 1000]) {
      const [r, got] = reader({ crc: true, markers: false });
      const all = Buffer.concat([good, bad, after]);
      for (let o = 0; o < all.byteLength; o += cut) r.push(all.subarray(o, o + cut));
      expect(got.ulpdus.length).toBe(1);
      expect(got.errors[0]).toBeInstanceOf(MpaCrcError);
      expect(got.errors[0]).toMatchObject({ code: 'ERR_LLP_DIGEST', mpaErrorCode: 2 });
      expect(r.failed).toBe(true);
    }
  });

  it('RFC 5044 §8 code 3: a Marker whose FPDUPTR disagrees with ULPDU_Length stops the reader', () => {
    const w = new FpduWriter({ crc: false, markers: true });
    const b = wire(w, [pattern(1000, 1)]);
    b.writeUInt16BE(500, 514); // Marker at 512 must say 508
    const [r, got] = reader({ crc: false, markers: true });
    r.push(b);
    expect(got.errors[0]).toBeInstanceOf(MpaProtocolError);
    expect(got.errors[0]).toMatchObject({ violation: 'marker', mpaErrorCode: 3 });
    const [r2, got2] = reader({ crc: false, markers: true });
    const first = Buffer.from(wire(new FpduWriter({ crc: false, markers: true }), [pattern(8, 1)]));
    first.writeUInt16BE(4, 2); // the opening Marker must carry 0
    r2.push(first);
    expect(got2.errors[0]).toMatchObject({ violation: 'marker' });
    expect(r2.failed).toBe(true);
  });

  it('RFC 5044 §3: a ULPDU_Length over 64768 is refused before buffering anything', () => {
    const [r, got] = reader({ crc: true, markers: false });
    r.push(Buffer.from([0xff, 0xff, 0, 0]));
    expect(got.errors[0]).toMatchObject({ violation: 'ulpdu-length' });
  });

  it('a stopped reader holds what arrives and resumes in order', () => {
    const w = new FpduWriter({ crc: true, markers: true });
    const sent = [pattern(600, 1), pattern(5, 2), pattern(900, 3)];
    const stream = Buffer.concat(sent.map((u) => wire(w, [u])));
    const got: Uint8Array[] = [];
    const r: FpduReader = new FpduReader(
      { crc: true, markers: true },
      (_n, chunks) => {
        got.push(Buffer.concat(chunks));
        r.setStopped(true);
      },
      (e) => {
        throw e;
      },
    );
    r.push(stream.subarray(0, 1000));
    r.push(stream.subarray(1000));
    expect(got.length).toBe(1);
    expect(r.heldOctets).toBeGreaterThan(0);
    r.setStopped(false);
    expect(got.length).toBe(2);
    r.setStopped(false);
    expect(got.map(toHex)).toEqual(sent.map(toHex));
  });
});
