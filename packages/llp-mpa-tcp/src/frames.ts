/**
 * MPA Request and Reply frames (RFC 5044 §7.1.1) and the RFC 6581 enhanced connection data carried
 * at the start of their Private Data.
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |                Key: "MPA ID Req Frame" / "MPA ID Rep Frame"   |  16 octets
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |M|C|R|E|  Res  |     Rev       |          PD_Length            |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |                Private Data (PD_Length octets, ≤ 512)         |
 *
 * E is the enhanced-connection flag of Rev 2 (RFC 6581; `MPA_RR_FLAG_ENHANCED` in Linux siw,
 * `MPA_ENHANCED_RDMA_CONN` in cxgb4): the first 4 Private Data octets are then
 *
 *   |P|S|          IRD (14)         |W|R|          ORD (14)         |
 *
 * P = peer-to-peer connection model, S/W/R = zero-length Send / RDMA Write / RDMA Read as the
 * Ready-To-Receive (RTR) message (siw iwarp.h: MPA_V2_PEER_TO_PEER, MPA_V2_ZERO_LENGTH_RTR,
 * MPA_V2_RDMA_WRITE_RTR, MPA_V2_RDMA_READ_RTR).
 */

/** "MPA ID Req Frame" (RFC 5044 §7.1.1). */
export const MPA_KEY_REQ: Uint8Array = new TextEncoder().encode('MPA ID Req Frame');
/** "MPA ID Rep Frame" (RFC 5044 §7.1.1). */
export const MPA_KEY_REP: Uint8Array = new TextEncoder().encode('MPA ID Rep Frame');
export const MPA_KEY_LENGTH = 16;
/** Key, flags, Rev and PD_Length. */
export const MPA_FRAME_HEADER_LENGTH = 20;
/** RFC 5044 §7.1.1: Private Data is 0 to 512 octets. */
export const MPA_MAX_PD_LENGTH = 512;
/** RFC 6581: the IRD/ORD words that open the Private Data of an enhanced Rev 2 frame. */
export const MPA_ENHANCED_DATA_LENGTH = 4;

export const MPA_FLAG_M = 0x80;
export const MPA_FLAG_C = 0x40;
export const MPA_FLAG_R = 0x20;
/** RFC 6581 enhanced connection establishment (siw MPA_RR_FLAG_ENHANCED = be16 0x1000). */
export const MPA_FLAG_ENHANCED = 0x10;
/** Bits of the flags octet we neither set nor act on (siw puts its GSO_EXP hint at 0x08). */
export const MPA_FLAG_RES = 0x0f;

/** RFC 6581 IRD/ORD word bits. */
export const MPA_V2_PEER_TO_PEER = 0x8000; // IRD word
export const MPA_V2_SEND_RTR = 0x4000; // IRD word (siw: MPA_V2_ZERO_LENGTH_RTR)
export const MPA_V2_WRITE_RTR = 0x8000; // ORD word
export const MPA_V2_READ_RTR = 0x4000; // ORD word
export const MPA_V2_IRD_ORD_MASK = 0x3fff;

export type MpaFrameKind = 'request' | 'reply';

/** One MPA Request or Reply frame, decoded. `privateData` is the whole Private Data field as on the wire. */
export interface MpaFrame {
  readonly kind: MpaFrameKind;
  /** M: markers required in FPDUs sent *to* the sender of this frame (RFC 5044 §7.1.1). */
  readonly markers: boolean;
  /** C: CRC wanted; used both ways if either frame sets it (RFC 5044 §7.1.1). */
  readonly crc: boolean;
  /** R: connection rejected (Reply only; sent as 0 and ignored in a Request). */
  readonly reject: boolean;
  /** E: RFC 6581 enhanced connection data present (Rev 2). */
  readonly enhanced: boolean;
  /** The reserved bits of the flags octet as received (sent as 0). */
  readonly reserved: number;
  readonly revision: number;
  readonly privateData: Uint8Array;
}

/** RFC 6581 enhanced connection data: IRD, ORD, connection model and RTR types. */
export interface EnhancedData {
  readonly ird: number;
  readonly ord: number;
  readonly p2p: boolean;
  readonly send: boolean;
  readonly write: boolean;
  readonly read: boolean;
}

/** What is wrong with a frame header, when something is. */
export type FrameHeaderProblem = { readonly problem: 'bad-key' | 'pd-length'; readonly detail: string };

export interface FrameHeader {
  readonly kind: MpaFrameKind;
  readonly flags: number;
  readonly revision: number;
  readonly pdLength: number;
}

function keyMatches(bytes: Uint8Array, key: Uint8Array): boolean {
  for (let i = 0; i < MPA_KEY_LENGTH; i++) if (bytes[i] !== key[i]) return false;
  return true;
}

/**
 * Decodes the 20-octet header of a frame of the `expected` kind. RFC 5044 §7.1.1: a receiver that finds
 * another key, or a PD_Length over 512, closes the connection and reports an error locally.
 */
export function decodeFrameHeader(bytes: Uint8Array, expected: MpaFrameKind): FrameHeader | FrameHeaderProblem {
  if (bytes.byteLength < MPA_FRAME_HEADER_LENGTH) throw new RangeError('an MPA frame header is 20 octets');
  const key = expected === 'request' ? MPA_KEY_REQ : MPA_KEY_REP;
  if (!keyMatches(bytes, key)) {
    const got = Buffer.from(bytes.subarray(0, MPA_KEY_LENGTH)).toString('hex');
    return { problem: 'bad-key', detail: `expected the "${new TextDecoder().decode(key)}" key, got ${got}` };
  }
  const pdLength = ((bytes[18] as number) << 8) | (bytes[19] as number);
  if (pdLength > MPA_MAX_PD_LENGTH)
    return { problem: 'pd-length', detail: `PD_Length ${pdLength} exceeds 512 (RFC 5044 §7.1.1)` };
  return { kind: expected, flags: bytes[16] as number, revision: bytes[17] as number, pdLength };
}

/** Builds the frame from a decoded header and its Private Data. */
export function frameFromHeader(header: FrameHeader, privateData: Uint8Array): MpaFrame {
  const f = header.flags;
  return {
    kind: header.kind,
    markers: (f & MPA_FLAG_M) !== 0,
    crc: (f & MPA_FLAG_C) !== 0,
    reject: (f & MPA_FLAG_R) !== 0,
    enhanced: (f & MPA_FLAG_ENHANCED) !== 0,
    reserved: f & MPA_FLAG_RES,
    revision: header.revision,
    privateData,
  };
}

/** Decodes a whole frame held in one buffer (tests, tools). */
export function decodeFrame(bytes: Uint8Array, expected: MpaFrameKind): MpaFrame | FrameHeaderProblem {
  const h = decodeFrameHeader(bytes, expected);
  if ('problem' in h) return h;
  if (bytes.byteLength !== MPA_FRAME_HEADER_LENGTH + h.pdLength)
    throw new RangeError(`frame is ${bytes.byteLength} octets, PD_Length says ${MPA_FRAME_HEADER_LENGTH + h.pdLength}`);
  return frameFromHeader(h, bytes.subarray(MPA_FRAME_HEADER_LENGTH));
}

export interface FrameFields {
  readonly kind: MpaFrameKind;
  readonly markers: boolean;
  readonly crc: boolean;
  readonly reject?: boolean;
  readonly enhanced?: boolean;
  readonly revision: number;
  /** The whole Private Data field (enhanced data first, when `enhanced`). */
  readonly privateData: Uint8Array;
}

/** Encodes a Request or Reply frame. Res bits are sent as zero (RFC 5044 §7.1.1). */
export function encodeFrame(fields: FrameFields): Uint8Array {
  const pd = fields.privateData;
  if (pd.byteLength > MPA_MAX_PD_LENGTH)
    throw new RangeError(`Private Data of ${pd.byteLength} octets exceeds 512 (RFC 5044 §7.1.1)`);
  if (!Number.isInteger(fields.revision) || fields.revision < 0 || fields.revision > 255)
    throw new RangeError(`Rev ${fields.revision} does not fit the 8-bit Rev field`);
  const out = new Uint8Array(MPA_FRAME_HEADER_LENGTH + pd.byteLength);
  out.set(fields.kind === 'request' ? MPA_KEY_REQ : MPA_KEY_REP, 0);
  out[16] =
    (fields.markers ? MPA_FLAG_M : 0) |
    (fields.crc ? MPA_FLAG_C : 0) |
    (fields.reject ? MPA_FLAG_R : 0) |
    (fields.enhanced ? MPA_FLAG_ENHANCED : 0);
  out[17] = fields.revision;
  out[18] = pd.byteLength >>> 8;
  out[19] = pd.byteLength & 0xff;
  out.set(pd, MPA_FRAME_HEADER_LENGTH);
  return out;
}

/** Encodes RFC 6581 enhanced connection data (4 octets). IRD and ORD are 14-bit fields. */
export function encodeEnhancedData(d: EnhancedData): Uint8Array {
  for (const [name, v] of [
    ['IRD', d.ird],
    ['ORD', d.ord],
  ] as const)
    if (!Number.isInteger(v) || v < 0 || v > MPA_V2_IRD_ORD_MASK)
      throw new RangeError(`${name} ${v} does not fit 14 bits (RFC 6581)`);
  const irdWord = d.ird | (d.p2p ? MPA_V2_PEER_TO_PEER : 0) | (d.send ? MPA_V2_SEND_RTR : 0);
  const ordWord = d.ord | (d.write ? MPA_V2_WRITE_RTR : 0) | (d.read ? MPA_V2_READ_RTR : 0);
  return new Uint8Array([irdWord >>> 8, irdWord & 0xff, ordWord >>> 8, ordWord & 0xff]);
}

/** Decodes RFC 6581 enhanced connection data from the start of a Private Data field (≥ 4 octets). */
export function decodeEnhancedData(pd: Uint8Array): EnhancedData {
  if (pd.byteLength < MPA_ENHANCED_DATA_LENGTH) throw new RangeError('enhanced connection data is 4 octets');
  const irdWord = ((pd[0] as number) << 8) | (pd[1] as number);
  const ordWord = ((pd[2] as number) << 8) | (pd[3] as number);
  return {
    ird: irdWord & MPA_V2_IRD_ORD_MASK,
    ord: ordWord & MPA_V2_IRD_ORD_MASK,
    p2p: (irdWord & MPA_V2_PEER_TO_PEER) !== 0,
    send: (irdWord & MPA_V2_SEND_RTR) !== 0,
    write: (ordWord & MPA_V2_WRITE_RTR) !== 0,
    read: (ordWord & MPA_V2_READ_RTR) !== 0,
  };
}

/** Private Data without the enhanced connection data when the frame carries it: what the ULP sees. */
export function ulpPrivateData(frame: MpaFrame): Uint8Array {
  return frame.enhanced && frame.privateData.byteLength >= MPA_ENHANCED_DATA_LENGTH
    ? frame.privateData.subarray(MPA_ENHANCED_DATA_LENGTH)
    : frame.privateData;
}
