/**
 * DDP header codec (RFC 5041 §4). Octet 0 is the DDP Control Field (§4.1, Figure 3): T (0x80), L (0x40),
 * Rsvd (0x3c, zero on transmit, not checked on receive) and DV (0x03).
 */
import {
  DDP_TAGGED_HEADER_LENGTH,
  DDP_UNTAGGED_HEADER_LENGTH,
  type DdpHeader,
  type DdpTaggedHeader,
  type DdpUntaggedHeader,
  type DdpVersion,
} from './api.js';

export const DDP_T_FLAG = 0x80;
export const DDP_L_FLAG = 0x40;
export const DDP_DV_MASK = 0x03;
const TWO_32 = 0x1_0000_0000;
/** Largest 40-bit RsvdULP value (§4.3). */
export const MAX_UNTAGGED_RSVDULP = 2 ** 40 - 1;

/** Writes a tagged header (§4.2, Figure 4) into `out` at `offset`; returns `out`. */
export function encodeTaggedHeader(
  h: Omit<DdpTaggedHeader, 'tagged'>,
  out: Uint8Array = new Uint8Array(DDP_TAGGED_HEADER_LENGTH),
  offset = 0,
): Uint8Array {
  const v = new DataView(out.buffer, out.byteOffset + offset, DDP_TAGGED_HEADER_LENGTH);
  v.setUint8(0, DDP_T_FLAG | (h.last ? DDP_L_FLAG : 0) | (h.dv & DDP_DV_MASK));
  v.setUint8(1, h.rsvdUlp & 0xff);
  v.setUint32(2, h.stag >>> 0);
  v.setBigUint64(6, BigInt.asUintN(64, h.to));
  return out;
}

/** Writes an untagged header (§4.3, Figure 5) into `out` at `offset`; returns `out`. */
export function encodeUntaggedHeader(
  h: Omit<DdpUntaggedHeader, 'tagged'>,
  out: Uint8Array = new Uint8Array(DDP_UNTAGGED_HEADER_LENGTH),
  offset = 0,
): Uint8Array {
  const v = new DataView(out.buffer, out.byteOffset + offset, DDP_UNTAGGED_HEADER_LENGTH);
  v.setUint8(0, (h.last ? DDP_L_FLAG : 0) | (h.dv & DDP_DV_MASK));
  v.setUint8(1, Math.floor(h.rsvdUlp / TWO_32) & 0xff);
  v.setUint32(2, (h.rsvdUlp % TWO_32) >>> 0);
  v.setUint32(6, h.qn >>> 0);
  v.setUint32(10, h.msn >>> 0);
  v.setUint32(14, h.mo >>> 0);
  return out;
}

export function encodeHeader(h: DdpHeader): Uint8Array {
  return h.tagged ? encodeTaggedHeader(h) : encodeUntaggedHeader(h);
}

/** Header length for a segment whose first octet is `control`. */
export function headerLength(control: number): number {
  return control & DDP_T_FLAG ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH;
}

/** Decodes a header from the start of `b`; undefined when `b` is shorter than the header its T bit announces. */
export function decodeHeader(b: Uint8Array): DdpHeader | undefined {
  if (b.length < 1) return undefined;
  const c = b[0] as number;
  const need = headerLength(c);
  if (b.length < need) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, need);
  const last = (c & DDP_L_FLAG) !== 0;
  const dv = (c & DDP_DV_MASK) as DdpVersion;
  if (c & DDP_T_FLAG)
    return { tagged: true, last, dv, rsvdUlp: v.getUint8(1), stag: v.getUint32(2), to: v.getBigUint64(6) };
  return {
    tagged: false,
    last,
    dv,
    rsvdUlp: v.getUint8(1) * TWO_32 + v.getUint32(2),
    qn: v.getUint32(6),
    msn: v.getUint32(10),
    mo: v.getUint32(14),
  };
}

/**
 * Copies the first `n` octets of a ULPDU given as chunks into `scratch` (headers may straddle LLP chunks)
 * and returns the filled view; returns a view of the first chunk itself when it holds them all.
 */
export function gatherPrefix(chunks: readonly Uint8Array[], n: number, scratch: Uint8Array): Uint8Array {
  const first = chunks[0];
  if (first && first.length >= n) return first.subarray(0, n);
  let got = 0;
  for (const c of chunks) {
    if (got >= n) break;
    const take = Math.min(c.length, n - got);
    scratch.set(c.subarray(0, take), got);
    got += take;
  }
  return scratch.subarray(0, got);
}
