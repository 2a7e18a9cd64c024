import { describe, expect, it } from 'vitest';
import {
  DdpWireErrorType,
  decodeTerminate,
  describeTerminate,
  encodeTerminate,
  MAX_TERMINATE_HEADER_LENGTH,
  RDMA_ERROR_CODES,
  RdmaErrorCode,
  RdmaErrorType,
  rdmaErrorCodeName,
  TerminateFormatError,
  TerminateLayer,
  terminateFor,
} from '../src/index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const bytes = (h: string) => new Uint8Array(Buffer.from(h.replace(/\s+/g, ''), 'hex'));

// An untagged DDP header (RFC 5041 Figure 4): T=0 L=1 DV=1, RDMAP ctrl RV=1 Read Request, RsvdULP 0,
// QN 1, MSN 5, MO 0.
const RR_DDP = bytes('41 41 00000000 00000001 00000005 00000000');
// A tagged DDP header (RFC 5041 Figure 3): T=1 L=1 DV=1, RDMA Write, STag 0x00001234, TO 0x10.
const WRITE_DDP = bytes('c1 40 00001234 0000000000000010');
// A Read Request Header (RFC 5040 Figure 6).
const RR = bytes('0000a001 0000000000000000 00000100 0000b001 0000000000000020');

describe('RFC 5040 §4.8 Terminate Header (Figures 7, 8)', () => {
  it('RFC 5040 Figure 8: Layer, EType, Error Code, then HdrCt M/D/R in bits 16–18, 13 reserved bits', () => {
    const t = encodeTerminate({
      layer: 0x1,
      errorType: 0x2,
      errorCode: 0x02,
      m: true,
      d: true,
      r: false,
      ddpSegmentLength: 46,
      ddpHeader: RR_DDP,
    });
    expect(hex(t.subarray(0, 4))).toBe('12' + '02' + 'c0' + '00');
    expect(
      hex(
        encodeTerminate({
          layer: 0,
          errorType: 1,
          errorCode: 0,
          m: true,
          d: true,
          r: true,
          ddpSegmentLength: 46,
          ddpHeader: RR_DDP,
          rdmaHeader: RR,
        }).subarray(0, 4),
      ),
    ).toBe('0100e000');
    expect(hex(encodeTerminate({ layer: 0, errorType: 0, errorCode: 0, m: false, d: false, r: false }))).toBe(
      '00000000',
    );
  });

  it('RFC 5040 Figure 7: DDP Segment Length, then the Terminated DDP Header, then the Terminated RDMA Header', () => {
    const t = encodeTerminate({
      layer: TerminateLayer.Rdma,
      errorType: RdmaErrorType.RemoteProtection,
      errorCode: RdmaErrorCode.InvalidStag,
      m: true,
      d: true,
      r: true,
      ddpSegmentLength: 46,
      ddpHeader: RR_DDP,
      rdmaHeader: RR,
    });
    expect(hex(t)).toBe(`0100e000002e${hex(RR_DDP)}${hex(RR)}`);
    expect(t.byteLength).toBe(MAX_TERMINATE_HEADER_LENGTH);
    expect(MAX_TERMINATE_HEADER_LENGTH).toBe(4 + 2 + 18 + 28);
  });

  it('RFC 5040 §4.8: a tagged Terminated DDP Header is 112 bits, an untagged one 144 bits', () => {
    const t = encodeTerminate({
      layer: 1,
      errorType: 1,
      errorCode: 0,
      m: true,
      d: true,
      r: false,
      ddpSegmentLength: 0x0400,
      ddpHeader: WRITE_DDP,
    });
    expect(hex(t)).toBe(`11 00 c0 00 0400 ${hex(WRITE_DDP)}`.replace(/ /g, ''));
    const d = decodeTerminate(t);
    expect(d.ddpHeader?.byteLength).toBe(14);
    expect(d.ddpSegmentLength).toBe(0x400);
    expect(
      decodeTerminate(
        encodeTerminate({
          layer: 1,
          errorType: 2,
          errorCode: 1,
          m: true,
          d: true,
          r: false,
          ddpSegmentLength: 18,
          ddpHeader: RR_DDP,
        }),
      ).ddpHeader?.byteLength,
    ).toBe(18);
  });

  it('RFC 5040 §4.8: decode is the inverse of encode; reserved bits are ignored on receive', () => {
    const h = {
      layer: 0,
      errorType: 1,
      errorCode: 4,
      m: true,
      d: true,
      r: true,
      ddpSegmentLength: 46,
      ddpHeader: RR_DDP,
      rdmaHeader: RR,
    };
    expect(decodeTerminate(encodeTerminate(h))).toEqual(h);
    const withReserved = encodeTerminate(h);
    withReserved[2] = (withReserved[2] as number) | 0x1f;
    withReserved[3] = 0xff;
    expect(decodeTerminate(withReserved)).toEqual(h);
    expect(decodeTerminate(bytes('27ff0000'))).toEqual({
      layer: 2,
      errorType: 7,
      errorCode: 0xff,
      m: false,
      d: false,
      r: false,
    });
  });

  it('RFC 5040 §4.8: a Terminate too short for what its HdrCt bits announce is refused', () => {
    expect(() => decodeTerminate(bytes('000000'))).toThrow(TerminateFormatError);
    expect(() => decodeTerminate(bytes('10004000'))).toThrow(/DDP Segment Length/);
    expect(() => decodeTerminate(bytes('100040000012'))).toThrow(/Terminated DDP Header/);
    expect(() => decodeTerminate(bytes(`10004000 0012 ${hex(RR_DDP).slice(0, 20)}`))).toThrow(/shorter than 18/);
    expect(() => decodeTerminate(bytes(`0100e000 002e ${hex(RR_DDP)} 0000`))).toThrow(/28 octets/);
    try {
      decodeTerminate(bytes('00'));
    } catch (e) {
      expect((e as TerminateFormatError).code).toBe('ERR_RDMAP_TERMINATE_FORMAT');
    }
  });

  it('TerminateFormatError names the Figure 7 field cut short, its length and the octets left for it', () => {
    expect(() => decodeTerminate(bytes('0000'))).toThrow(
      expect.objectContaining({ field: 'Terminate Control', fieldLength: 4, available: 2 }),
    );
    expect(() => decodeTerminate(bytes(`10004000 0012 ${hex(RR_DDP).slice(0, 20)}`))).toThrow(
      expect.objectContaining({ field: 'Terminated DDP Header', fieldLength: 18, available: 10 }),
    );
    expect(() => decodeTerminate(bytes(`0100e000 002e ${hex(RR_DDP)} 0000`))).toThrow(
      expect.objectContaining({ field: 'Terminated RDMA Header', fieldLength: 28, available: 2 }),
    );
  });

  it('RFC 5040 §4.8: encode refuses a D bit without a 14/18-octet header, an R bit without 28 octets', () => {
    expect(() => encodeTerminate({ layer: 1, errorType: 1, errorCode: 0, m: true, d: true, r: false })).toThrow(
      RangeError,
    );
    expect(() =>
      encodeTerminate({
        layer: 1,
        errorType: 1,
        errorCode: 0,
        m: true,
        d: true,
        r: false,
        ddpHeader: new Uint8Array(16),
      }),
    ).toThrow(RangeError);
    expect(() => encodeTerminate({ layer: 0, errorType: 1, errorCode: 0, m: false, d: false, r: true })).toThrow(
      RangeError,
    );
    expect(() => encodeTerminate({ layer: 16, errorType: 0, errorCode: 0, m: false, d: false, r: false })).toThrow(
      RangeError,
    );
    expect(() => encodeTerminate({ layer: 0, errorType: 0, errorCode: 256, m: false, d: false, r: false })).toThrow(
      RangeError,
    );
  });
});

describe('RFC 5040 Figure 9 Terminate Control Field values', () => {
  it('RFC 5040 Figure 9: Layer 0 RDMA, 1 DDP, 2 LLP; RDMA Error Types and Codes', () => {
    expect(TerminateLayer).toEqual({ Rdma: 0, Ddp: 1, Llp: 2 });
    expect(RdmaErrorType).toEqual({ LocalCatastrophic: 0, RemoteProtection: 1, RemoteOperation: 2 });
    expect(Object.values(RdmaErrorCode)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xff]);
  });

  it('RFC 5040 Figure 9: each RDMA-layer Error Code, its name and the Error Types it is defined under', () => {
    const P = RdmaErrorType.RemoteProtection;
    const O = RdmaErrorType.RemoteOperation;
    expect(RDMA_ERROR_CODES.map((c) => [c.code, c.name, c.types])).toEqual([
      [0x00, 'Invalid STag', [P]],
      [0x01, 'Base or bounds violation', [P]],
      [0x02, 'Access rights violation', [P]],
      [0x03, 'STag not associated with RDMAP Stream', [P]],
      [0x04, 'TO wrap', [P]],
      [0x05, 'Invalid RDMAP version', [O]],
      [0x06, 'Unexpected OpCode', [O]],
      [0x07, 'Catastrophic error, localized to RDMAP Stream', [O]],
      [0x08, 'Catastrophic error, global', [O]],
      [0x09, 'STag cannot be Invalidated', [P, O]],
      [0xff, 'Unspecified Error', [P, O]],
    ]);
    for (const c of RDMA_ERROR_CODES) expect(RdmaErrorCode[c.key as keyof typeof RdmaErrorCode]).toBe(c.code);
    expect(rdmaErrorCodeName(O, 0x09)).toBe('STag cannot be Invalidated');
    expect(rdmaErrorCodeName(P, 0x06)).toBeUndefined();
    expect(rdmaErrorCodeName(RdmaErrorType.LocalCatastrophic, 0x00)).toBeUndefined();
  });

  it('RFC 5041 §7.2: DDP Error Types on the wire are 0x1 Tagged Buffer and 0x2 Untagged Buffer', () => {
    expect(DdpWireErrorType.TaggedBuffer).toBe(1);
    expect(DdpWireErrorType.UntaggedBuffer).toBe(2);
  });

  it('RFC 5040 Figure 9: names of the values', () => {
    expect(describeTerminate({ layer: 0, errorType: 1, errorCode: 9 })).toBe(
      'RDMA: Remote Protection Error: STag cannot be Invalidated',
    );
    expect(describeTerminate({ layer: 0, errorType: 2, errorCode: 6 })).toBe(
      'RDMA: Remote Operation Error: Unexpected OpCode',
    );
    expect(describeTerminate({ layer: 0, errorType: 0, errorCode: 0x33 })).toBe('RDMA: Local Catastrophic Error');
    expect(describeTerminate({ layer: 1, errorType: 2, errorCode: 2 })).toBe(
      'DDP: Untagged Buffer Error: Invalid MSN - no buffer available',
    );
    expect(describeTerminate({ layer: 1, errorType: 1, errorCode: 1 })).toBe(
      'DDP: Tagged Buffer Error: Base or bounds violation',
    );
    expect(describeTerminate({ layer: 2, errorType: 0, errorCode: 2 })).toBe('LLP: EType 0, code 0x02');
  });
});

describe('RFC 5040 Figure 10 Error Type to RDMA Message Mapping', () => {
  const segment = { ddpHeader: RR_DDP, length: 46, readRequest: RR };

  it('RFC 5040 Figure 10: a Local Catastrophic Error carries no DDP or RDMA header', () => {
    expect(terminateFor({ layer: 0, errorType: RdmaErrorType.LocalCatastrophic, errorCode: 0, segment })).toEqual({
      layer: 0,
      errorType: 0,
      errorCode: 0,
      m: false,
      d: false,
      r: false,
    });
  });

  it('RFC 5040 Figure 10: a Remote Protection Error on a Read Request carries the DDP header, its length and the RDMA header', () => {
    const t = terminateFor({ layer: 0, errorType: RdmaErrorType.RemoteProtection, errorCode: 0, segment });
    expect(t).toMatchObject({ m: true, d: true, r: true, ddpSegmentLength: 46 });
    expect(hex(encodeTerminate(t))).toBe(`0100e000002e${hex(RR_DDP)}${hex(RR)}`);
  });

  it('RFC 5040 §4.8: a Remote Protection Error on a Send with Invalidate carries no RDMA header (only Read Requests do)', () => {
    const send = bytes('41 44 0000abcd 00000000 00000001 00000000');
    const t = terminateFor({ layer: 0, errorType: 1, errorCode: 9, segment: { ddpHeader: send, length: 18 } });
    expect(t).toMatchObject({ m: true, d: true, r: false });
    expect(hex(encodeTerminate(t))).toBe(`0109c0000012${hex(send)}`);
  });

  it('RFC 5040 Figure 10: a Remote Operation Error carries the DDP header if possible and never the RDMA header', () => {
    const t = terminateFor({ layer: 0, errorType: RdmaErrorType.RemoteOperation, errorCode: 6, segment });
    expect(t).toMatchObject({ m: true, d: true, r: false });
    expect(terminateFor({ layer: 0, errorType: RdmaErrorType.RemoteOperation, errorCode: 6 })).toMatchObject({
      m: false,
      d: false,
      r: false,
    });
  });

  it('RFC 5040 Figure 10: DDP errors carry the DDP header and segment length, no RDMA header', () => {
    const t = terminateFor({
      layer: TerminateLayer.Ddp,
      errorType: 1,
      errorCode: 0,
      segment: { ddpHeader: WRITE_DDP, length: 1038 },
    });
    expect(hex(encodeTerminate(t))).toBe(`1100c000040e${hex(WRITE_DDP)}`);
    const noLen = terminateFor({
      layer: TerminateLayer.Ddp,
      errorType: 2,
      errorCode: 1,
      segment: { ddpHeader: RR_DDP },
    });
    expect(noLen).toMatchObject({ m: false, d: true, r: false });
    expect(hex(encodeTerminate(noLen))).toBe(`12014000 0000 ${hex(RR_DDP)}`.replace(/ /g, ''));
  });

  it('RFC 5040 Figure 10: LLP errors carry no headers', () => {
    expect(terminateFor({ layer: TerminateLayer.Llp, errorType: 0, errorCode: 2, segment })).toMatchObject({
      m: false,
      d: false,
      r: false,
    });
  });

  it('RFC 5040 §7.1 case 1: errors not tied to an incoming message carry no Terminated headers', () => {
    expect(hex(encodeTerminate(terminateFor({ layer: 0, errorType: 2, errorCode: 0xff })))).toBe('02ff0000');
  });
});
