/** The UDP LLP's own wire format (docs/UDP-LLP.md "Wire format"): header, setup body, CRC32c trailer. */
import { crc32c } from '@node-rs/crc32';
import { describe, expect, it } from 'vitest';
import {
  CRC_LENGTH,
  DatagramType,
  datagramParts,
  decodeSetupBody,
  encodeSetupBody,
  HEADER_LENGTH,
  parseDatagram,
} from '../src/index.js';
import { pattern } from './helpers.js';

const header = { type: DatagramType.Data, crc: true, streamId: 0x1234, dst: 0xdeadbeef, src: 7, seq: 0xfffffffe };

describe('UDP LLP wire format', () => {
  it('header: version 1, type, C bit, stream id, both connection ids and the sequence number, big-endian', () => {
    const body = pattern(5, 3);
    const parts = datagramParts(header, [body]);
    const d = Buffer.concat(parts);
    expect(d.byteLength).toBe(HEADER_LENGTH + 5 + CRC_LENGTH);
    expect([...d.subarray(0, HEADER_LENGTH)]).toEqual([
      0x14, 0x80, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xfe,
    ]);
    const r = parseDatagram(d);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.datagram.header).toEqual(header);
    expect([...r.datagram.body]).toEqual([...body]);
  });

  it('RFC 5041 §3 ("digest at least as strong as CRC32c"): the trailer is the CRC32c of header and body', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283); // the CRC32c check value
    const body = pattern(300, 5);
    const whole = Buffer.concat(datagramParts(header, [body]));
    const split = Buffer.concat(
      datagramParts(header, [body.subarray(0, 7), body.subarray(7, 200), body.subarray(200)]),
    );
    expect(split).toEqual(whole); // computed over the parts, as if over their join
    const end = whole.byteLength - CRC_LENGTH;
    expect(whole.readUInt32BE(end)).toBe(crc32c(whole.subarray(0, end)) >>> 0);
  });

  it('every single-bit error in a datagram with C = 1 is refused, except clearing C itself (then C = 0 is seen)', () => {
    const d = Buffer.concat(datagramParts(header, [pattern(40, 9)]));
    for (let bit = 0; bit < d.byteLength * 8; bit++) {
      const bad = Buffer.from(d);
      bad[bit >> 3] = (bad[bit >> 3] as number) ^ (1 << (bit & 7));
      const r = parseDatagram(bad);
      // Octet 1's top bit is C: cleared, the datagram parses as one without a trailer. A connection that uses
      // CRC32c drops datagrams with C = 0 (transport.test.ts), and setup datagrams always need C = 1.
      if (bit === 15) expect(r.ok && r.datagram.header.crc).toBe(false);
      else expect(r.ok, `bit ${bit}`).toBe(false);
    }
  });

  it('C = 0: no trailer; short, unknown-version and unknown-type datagrams are refused', () => {
    const d = Buffer.concat(datagramParts({ ...header, crc: false }, [pattern(3)]));
    expect(d.byteLength).toBe(HEADER_LENGTH + 3);
    const r = parseDatagram(d);
    expect(r.ok && r.datagram.body.byteLength).toBe(3);
    expect(parseDatagram(d.subarray(0, 15))).toEqual({ ok: false, reason: 'short' });
    const v2 = Buffer.from(d);
    v2[0] = 0x24;
    expect(parseDatagram(v2)).toEqual({ ok: false, reason: 'version' });
    const t0 = Buffer.from(d);
    t0[0] = 0x10;
    expect(parseDatagram(t0)).toEqual({ ok: false, reason: 'type' });
  });

  it('payload parts are handed to the socket as they are, never joined (one sendmsg iovec each)', () => {
    const a = pattern(10, 1);
    const b = pattern(20, 2);
    const parts = datagramParts(header, [a, b]);
    expect(parts).toHaveLength(4);
    expect(parts[1]).toBe(a);
    expect(parts[2]).toBe(b);
  });

  it('setup body: streams, datagram size, window, C, private data; malformed lengths refused', () => {
    const s = { streams: 3, datagramSize: 1400, window: 64, crc: true, privateData: pattern(17, 4) };
    const b = encodeSetupBody(s);
    expect(b.byteLength).toBe(12 + 17);
    expect(decodeSetupBody(b)).toEqual(s);
    expect(decodeSetupBody(b.subarray(0, 11))).toBeUndefined();
    expect(decodeSetupBody(b.subarray(0, 20))).toBeUndefined(); // private data length says 17
  });
});
