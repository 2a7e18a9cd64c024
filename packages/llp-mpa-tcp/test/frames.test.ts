/**
 * MPA Request/Reply codec (RFC 5044 §7.1.1) and RFC 6581 enhanced data, with byte vectors. The siw
 * vectors are what Linux siw_cm.c puts on the wire, worked out by reading siw_connect(),
 * siw_proc_mpareq(), siw_accept(), siw_reject() and iwarp.h (siw defaults: mpa_version 2,
 * crc_required/crc_strict/peer_to_peer/try_gso false; peer_to_peer on: rtr_type = READ|WRITE).
 */
import { describe, expect, it } from 'vitest';
import {
  buildReply,
  buildRequest,
  decodeEnhancedData,
  decodeFrame,
  encodeEnhancedData,
  encodeFrame,
  evaluateReply,
  evaluateRequest,
  INITIATOR_DEFAULTS,
  type MpaFrame,
  RESPONDER_DEFAULTS,
  resolveParams,
} from '../src/index.js';

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const REQ_KEY = '4d504120494420526571204672616d65'; // "MPA ID Req Frame"
const REP_KEY = '4d504120494420526570204672616d65'; // "MPA ID Rep Frame"

function frame(bytes: Uint8Array, kind: 'request' | 'reply'): MpaFrame {
  const f = decodeFrame(bytes, kind);
  if ('problem' in f) throw new Error(f.detail);
  return f;
}

describe('MPA Request/Reply frames (RFC 5044 §7.1.1)', () => {
  it('RFC 5044 §7.1.1: the keys are "MPA ID Req Frame" / "MPA ID Rep Frame", M C R bits, Rev, PD_Length big-endian', () => {
    const bytes = encodeFrame({
      kind: 'request',
      markers: true,
      crc: true,
      revision: 1,
      privateData: hex('0102030405'),
    });
    expect(toHex(bytes)).toBe(`${REQ_KEY}c00100050102030405`);
    const rep = encodeFrame({
      kind: 'reply',
      markers: false,
      crc: true,
      reject: true,
      revision: 1,
      privateData: new Uint8Array(0),
    });
    expect(toHex(rep)).toBe(`${REP_KEY}60010000`);
  });

  it('RFC 5044 §7.1.1: a frame decodes to the same fields; Res bits are reported, not acted on', () => {
    const f = frame(hex(`${REP_KEY}a9020002abcd`), 'reply');
    expect(f).toMatchObject({
      kind: 'reply',
      markers: true,
      crc: false,
      reject: true,
      enhanced: false,
      reserved: 0x09,
      revision: 2,
    });
    expect(toHex(f.privateData)).toBe('abcd');
  });

  it('RFC 5044 §7.1.1 Key: a Request key where a Reply is expected (and any other key) is refused', () => {
    expect(decodeFrame(hex(`${REQ_KEY}00010000`), 'reply')).toMatchObject({ problem: 'bad-key' });
    expect(decodeFrame(hex(`${REP_KEY}00010000`), 'request')).toMatchObject({ problem: 'bad-key' });
  });

  it('RFC 5044 §7.1.1 PD_Length: more than 512 octets is refused; 512 is fine', () => {
    expect(decodeFrame(hex(`${REQ_KEY}00010201`), 'request')).toMatchObject({ problem: 'pd-length' });
    const ok = encodeFrame({
      kind: 'request',
      markers: false,
      crc: false,
      revision: 1,
      privateData: new Uint8Array(512),
    });
    expect(frame(ok, 'request').privateData.byteLength).toBe(512);
    expect(() =>
      encodeFrame({ kind: 'request', markers: false, crc: false, revision: 1, privateData: new Uint8Array(513) }),
    ).toThrow(RangeError);
  });

  it('RFC 6581: IRD/ORD words carry P, S (Send RTR) / W (Write RTR), R (Read RTR) and 14-bit values', () => {
    const d = { ird: 0x3fff, ord: 5, p2p: true, send: true, write: false, read: true };
    expect(toHex(encodeEnhancedData(d))).toBe('ffff4005');
    expect(decodeEnhancedData(hex('ffff4005'))).toEqual(d);
    expect(decodeEnhancedData(hex('00108010'))).toEqual({
      ird: 16,
      ord: 16,
      p2p: false,
      send: false,
      write: true,
      read: false,
    });
    expect(() => encodeEnhancedData({ ...d, ird: 0x4000 })).toThrow(RangeError);
  });
});

describe('Rev 2 frames as Linux siw sends and accepts them (siw behaviour)', () => {
  const initiator = (p: Record<string, unknown>) => resolveParams(p, INITIATOR_DEFAULTS);
  const responder = (p: Record<string, unknown>) => resolveParams(p, RESPONDER_DEFAULTS);

  // siw_connect(): bits = ENHANCED | Rev 2 (be16 0x1002), pd_len = 4, v2_ctrl = htons(ird), htons(ord).
  const SIW_REQ = `${REQ_KEY} 1002 0004 0010 0010`;
  // peer_to_peer: ird |= PEER_TO_PEER (0x8000), ord |= READ_RTR | WRITE_RTR (0xc000).
  const SIW_P2P_REQ = `${REQ_KEY} 1002 0004 8010 c010`;

  it('RFC 6581: our Rev 2 Request equals siw_connect()’s default Request (ird 16, ord 16, no CRC, no private data)', () => {
    const sent = buildRequest(initiator({ revision: 2, crc: false, ird: 16, ord: 16 }), new Uint8Array(0));
    expect(toHex(encodeFrame(sent.frame))).toBe(SIW_REQ.replace(/\s+/g, ''));
  });

  it('RFC 6581: our peer-to-peer Request offering Write and Read RTRs equals siw’s peer_to_peer Request', () => {
    const sent = buildRequest(
      initiator({ revision: 2, crc: false, ird: 16, ord: 16, rtr: ['write', 'read'] }),
      new Uint8Array(0),
    );
    expect(toHex(encodeFrame(sent.frame))).toBe(SIW_P2P_REQ.replace(/\s+/g, ''));
    // siw_connect() raises ORD 0 to 1 in peer-to-peer mode (a Read RTR needs it): so do we.
    const zero = buildRequest(initiator({ revision: 2, crc: false, ird: 16, ord: 0, p2p: true }), new Uint8Array(0));
    expect(toHex(encodeFrame(zero.frame))).toBe(`${REQ_KEY}100200048010c001`);
  });

  it('RFC 6581: our Reply to siw’s default Request equals what siw_accept() sends (ird 16, ord 16, no CRC)', () => {
    const out = evaluateRequest(frame(hex(SIW_REQ), 'request'), responder({ crc: false, ird: 16, ord: 16 }));
    if (out.kind !== 'offer') throw new Error(out.kind);
    // siw echoes the Request's bits with the Rep key; v2_ctrl = params ird/ord.
    expect(toHex(encodeFrame(buildReply(out.offer, true, new Uint8Array(0))))).toBe(`${REP_KEY}1002000400100010`);
    expect(out.offer.negotiated).toMatchObject({
      revision: 2,
      enhanced: true,
      crc: false,
      p2p: false,
      rtr: false,
      ird: 16,
      ord: 16,
    });
  });

  it('RFC 6581: our Reply to siw’s peer-to-peer Request picks the Write RTR and echoes P, as siw_proc_mpareq() does', () => {
    const out = evaluateRequest(frame(hex(SIW_P2P_REQ), 'request'), responder({ crc: false, ird: 16, ord: 16 }));
    if (out.kind !== 'offer') throw new Error(out.kind);
    // siw: v2_ctrl.ird = ird | PEER_TO_PEER; v2_ctrl.ord = ord | WRITE_RTR (Write preferred over Read).
    expect(toHex(encodeFrame(buildReply(out.offer, true, hex('aa'))))).toBe(`${REP_KEY}1002000580108010aa`);
    expect(out.offer.negotiated).toMatchObject({ p2p: true, rtr: 'write' });
  });

  it('RFC 6581: siw’s Reply to our peer-to-peer Request is accepted (Write RTR, IRD/ORD as announced)', () => {
    const sent = buildRequest(
      initiator({ revision: 2, crc: false, ird: 16, ord: 16, rtr: ['write', 'read'] }),
      new Uint8Array(0),
    );
    // siw_accept() with ird = ord = 16: bits echoed (0x1002), ird 0x8010, ord 0x8010 (Write RTR).
    const out = evaluateReply(sent, frame(hex(`${REP_KEY}1002000480108010`), 'reply'));
    expect(out).toMatchObject({
      kind: 'accepted',
      negotiated: { revision: 2, p2p: true, rtr: 'write', ird: 16, ord: 16 },
    });
  });

  it('RFC 6581: siw’s Reply with CRC required (C echoed or set) turns CRC on for both directions', () => {
    const sent = buildRequest(initiator({ revision: 2, crc: false, ird: 16, ord: 16 }), new Uint8Array(0));
    const out = evaluateReply(sent, frame(hex(`${REP_KEY}5002000400100010`), 'reply'));
    expect(out).toMatchObject({ kind: 'accepted', negotiated: { crc: true } });
  });

  it('RFC 5044 §7.1.1 R: siw_reject()’s Reply (R set, IRD/ORD kept, then private data) yields the private data without the IRD/ORD words', () => {
    const sent = buildRequest(initiator({ revision: 2, crc: false, ird: 16, ord: 16 }), new Uint8Array(0));
    const out = evaluateReply(sent, frame(hex(`${REP_KEY}30020006 00100010 beef`), 'reply'));
    expect(out.kind).toBe('rejected');
    if (out.kind === 'rejected') expect(toHex(out.ulpPrivateData)).toBe('beef');
  });

  it('RFC 6581: our reject of a siw Request keeps siw’s layout (R | E, Rev 2, IRD/ORD first)', () => {
    const out = evaluateRequest(frame(hex(SIW_REQ), 'request'), responder({ crc: false, ird: 16, ord: 16 }));
    if (out.kind !== 'offer') throw new Error(out.kind);
    expect(toHex(encodeFrame(buildReply(out.offer, false, hex('beef'))))).toBe(`${REP_KEY}3002000600100010beef`);
  });

  it('RFC 6581: siw’s Rev 1 Request (mpa_version 1) is answered in Rev 1 without IRD/ORD data', () => {
    const out = evaluateRequest(frame(hex(`${REQ_KEY}00010000`), 'request'), responder({ crc: false }));
    if (out.kind !== 'offer') throw new Error(out.kind);
    expect(toHex(encodeFrame(buildReply(out.offer, true, new Uint8Array(0))))).toBe(`${REP_KEY}00010000`);
  });
});
