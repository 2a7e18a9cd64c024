import { describe, expect, it } from 'vitest';
import {
  controlOf,
  decodeControl,
  decodeReadRequest,
  decodeUntaggedRsvdUlp,
  EXTENSION_OPCODES,
  ExtensionOpcode,
  encodeControl,
  encodeReadRequest,
  encodeUntaggedRsvdUlp,
  isSendOpcode,
  OPCODES,
  opcodeInfo,
  RDMAP_OPCODES,
  RDMAP_VERSION,
  RdmapOpcode,
  RdmapQueue,
  READ_REQUEST_HEADER_LENGTH,
} from '../src/index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('RFC 5040 §4.1 RDMAP Control Field (Figure 3)', () => {
  it('RFC 5040 §4.1: RV is the two most significant bits, Rsv the next two, OpCode the low four', () => {
    // Figure 3 bits 8–15 of the DDP/RDMAP control pair: |RV|Rsv|Opcode|
    expect(encodeControl(1, RdmapOpcode.Send)).toBe(0b01_00_0011);
    expect(encodeControl(0, RdmapOpcode.Send)).toBe(0b00_00_0011);
    expect(encodeControl(1, RdmapOpcode.Terminate)).toBe(0x47);
    expect(encodeControl(1, RdmapOpcode.RdmaWrite)).toBe(0x40);
    expect(encodeControl(0, RdmapOpcode.RdmaReadResponse)).toBe(0x02);
    expect(decodeControl(0x76)).toEqual({ rv: 1, reserved: 3, opcode: 6 });
    expect(decodeControl(0xc8)).toEqual({ rv: 3, reserved: 0, opcode: 8 });
  });

  it('RFC 5040 §4.1: RV 01b is the IETF profile, 00b the RDMA Consortium profile', () => {
    expect(RDMAP_VERSION).toEqual({ ietf: 1, rdmac: 0 });
  });

  it('RFC 5040 §4.1: the Invalidate STag occupies RsvdULP octets 2–5 of an untagged header', () => {
    const rsvd = encodeUntaggedRsvdUlp(encodeControl(1, RdmapOpcode.SendWithInvalidate), 0x12345678);
    // 40 bits on the wire: 44 12 34 56 78
    expect(rsvd.toString(16)).toBe('4412345678');
    expect(decodeUntaggedRsvdUlp(rsvd)).toEqual({ control: 0x44, invalidateStag: 0x12345678 });
    expect(decodeUntaggedRsvdUlp(encodeUntaggedRsvdUlp(0x43))).toEqual({ control: 0x43, invalidateStag: 0 });
    expect(decodeUntaggedRsvdUlp(encodeUntaggedRsvdUlp(0xff, 0xffffffff))).toEqual({
      control: 0xff,
      invalidateStag: 0xffffffff,
    });
    expect(controlOf({ tagged: true, rsvdUlp: 0x42 })).toBe(0x42);
    expect(controlOf({ tagged: false, rsvdUlp: rsvd })).toBe(0x44);
  });
});

describe('RFC 5040 §4.1 Figure 4 and §4.2 Figure 5', () => {
  it('RFC 5040 Figure 4: Tagged flag, Queue Number and Invalidate STag per opcode', () => {
    const rows = OPCODES.map((o) => [o.opcode, o.tagged ? 1 : 0, o.qn ?? 'N/A', o.invalidateStag ? 'Valid' : 'N/A']);
    expect(rows).toEqual([
      [0b0000, 1, 'N/A', 'N/A'],
      [0b0001, 0, 1, 'N/A'],
      [0b0010, 1, 'N/A', 'N/A'],
      [0b0011, 0, 0, 'N/A'],
      [0b0100, 0, 0, 'Valid'],
      [0b0101, 0, 0, 'N/A'],
      [0b0110, 0, 0, 'Valid'],
      [0b0111, 0, 2, 'N/A'],
    ]);
    for (let op = 8; op < 16; op++) expect(opcodeInfo(op)).toBeUndefined();
  });

  it('RFC 5040 Figure 5: which RDMA header each message uses and which may carry a ULP Message', () => {
    expect(OPCODES.map((o) => [o.rdmaHeader, o.ulpPayload])).toEqual([
      ['none', true],
      ['read-request', false],
      ['none', true],
      ['none', true],
      ['none', true],
      ['none', true],
      ['none', true],
      ['terminate', false],
    ]);
  });

  it('RFC 5040 Figure 4, RFC 7306 §4.1: RdmapOpcode and ExtensionOpcode are the opcode table rows, by name', () => {
    expect(RDMAP_OPCODES.map((o) => [o.opcode, o.key, o.name])).toEqual([
      [0b0000, 'RdmaWrite', 'RDMA Write'],
      [0b0001, 'RdmaReadRequest', 'RDMA Read Request'],
      [0b0010, 'RdmaReadResponse', 'RDMA Read Response'],
      [0b0011, 'Send', 'Send'],
      [0b0100, 'SendWithInvalidate', 'Send with Invalidate'],
      [0b0101, 'SendWithSolicitedEvent', 'Send with SE'],
      [0b0110, 'SendWithSolicitedEventAndInvalidate', 'Send with SE and Invalidate'],
      [0b0111, 'Terminate', 'Terminate'],
      [0b1000, 'ImmediateData', 'Immediate Data'],
      [0b1001, 'ImmediateDataWithSolicitedEvent', 'Immediate Data with SE'],
      [0b1010, 'AtomicRequest', 'Atomic Request'],
      [0b1011, 'AtomicResponse', 'Atomic Response'],
    ]);
    for (const o of OPCODES) expect(RdmapOpcode[o.key as keyof typeof RdmapOpcode]).toBe(o.opcode);
    for (const o of EXTENSION_OPCODES) expect(ExtensionOpcode[o.key as keyof typeof ExtensionOpcode]).toBe(o.opcode);
    expect(Object.keys(RdmapOpcode)).toHaveLength(8);
    expect(Object.keys(ExtensionOpcode)).toHaveLength(4);
  });

  it('RFC 5040 §3.1: QN 0 Sends, QN 1 Read Requests, QN 2 Terminate', () => {
    expect(RdmapQueue).toEqual({ Send: 0, ReadRequest: 1, Terminate: 2 });
    expect([0, 1, 2, 3, 4, 5, 6, 7].filter(isSendOpcode)).toEqual([3, 4, 5, 6]);
    expect(OPCODES.filter((o) => o.solicitedEvent).map((o) => o.opcode)).toEqual([5, 6]);
  });
});

describe('RFC 5040 §4.4 RDMA Read Request Header (Figure 6)', () => {
  const header = {
    sinkStag: 0x11223344,
    sinkTo: 0x0102030405060708n,
    size: 0x00001000,
    srcStag: 0xaabbccdd,
    srcTo: 0xf1f2f3f4f5f6f7f8n,
  };
  const wire =
    '11223344' + // Data Sink STag
    '0102030405060708' + // Data Sink Tagged Offset
    '00001000' + // RDMA Read Message Size
    'aabbccdd' + // Data Source STag
    'f1f2f3f4f5f6f7f8'; // Data Source Tagged Offset

  it('RFC 5040 §4.4: 224 bits, fields in Figure 6 order, network byte order', () => {
    expect(READ_REQUEST_HEADER_LENGTH).toBe(28);
    expect(hex(encodeReadRequest(header))).toBe(wire);
    expect(decodeReadRequest(Buffer.from(wire, 'hex'))).toEqual(header);
  });

  it('RFC 5040 §4.4: RDMA Read Message Size spans 0 to 2^32-1', () => {
    const max = { ...header, size: 0xffffffff };
    expect(decodeReadRequest(encodeReadRequest(max)).size).toBe(0xffffffff);
    expect(decodeReadRequest(encodeReadRequest({ ...header, size: 0 })).size).toBe(0);
  });

  it('RFC 5040 §4.4: encodes into a caller buffer at an offset; refuses short buffers and bad TOs', () => {
    const big = new Uint8Array(40);
    encodeReadRequest(header, big.subarray(6, 34));
    expect(hex(big.subarray(6, 34))).toBe(wire);
    expect(() => encodeReadRequest(header, new Uint8Array(27))).toThrow(RangeError);
    expect(() => decodeReadRequest(new Uint8Array(27))).toThrow(RangeError);
    expect(() => encodeReadRequest({ ...header, srcTo: 1n << 64n })).toThrow(RangeError);
    expect(() => encodeReadRequest({ ...header, sinkTo: -1n })).toThrow(RangeError);
  });
});
