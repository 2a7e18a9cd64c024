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
export const TWO_32 = 0x1_0000_0000;
/** 2^64: the size of the Tagged Offset space (RFC 5041 §4.2); a TO + length beyond it wraps (§7.1). */
export const TWO_64 = 1n << 64n;
/** 2^64 − 1: the largest Tagged Offset (§4.2) and the largest 64-bit RDMAP field. */
export const MAX_U64 = TWO_64 - 1n;
/** An STag as the RFCs' figures print it: `0x` and eight hex digits. */
export function stagHex(stag: number): string {
  return `0x${(stag >>> 0).toString(16).padStart(8, '0')}`;
}
/** TOs up to 2^53 - 1 are exact as numbers: the hot paths take them without bigint arithmetic. */
export const MAX_SAFE_TO = BigInt(Number.MAX_SAFE_INTEGER);
/** Largest 40-bit RsvdULP value (§4.3). */
export const MAX_UNTAGGED_RSVDULP = 2 ** 40 - 1;

/** Writes a tagged header (§4.2, Figure 4) into `out` at `offset`; returns `out`. */
export function encodeTaggedHeader(
  h: Omit<DdpTaggedHeader, 'tagged'>,
  out: Uint8Array = new Uint8Array(DDP_TAGGED_HEADER_LENGTH),
  offset = 0,
): Uint8Array {
  const to = BigInt.asUintN(64, h.to);
  writeTagged(out, offset, h.last, h.dv, h.rsvdUlp, h.stag, Number(to >> 32n), Number(to & 0xffff_ffffn));
  return out;
}

function put32(out: Uint8Array, o: number, v: number): void {
  out[o] = v >>> 24;
  out[o + 1] = (v >>> 16) & 0xff;
  out[o + 2] = (v >>> 8) & 0xff;
  out[o + 3] = v & 0xff;
}

/** Reads a big-endian 32-bit field. */
export function get32(b: Uint8Array, o: number): number {
  return (
    (((b[o] as number) << 24) | ((b[o + 1] as number) << 16) | ((b[o + 2] as number) << 8) | (b[o + 3] as number)) >>> 0
  );
}

/** The transmit path's form: TO as its high and low 32-bit halves, so no bigint is made per segment. */
export function writeTagged(
  out: Uint8Array,
  o: number,
  last: boolean,
  dv: DdpVersion,
  rsvdUlp: number,
  stag: number,
  toHi: number,
  toLo: number,
): void {
  out[o] = DDP_T_FLAG | (last ? DDP_L_FLAG : 0) | (dv & DDP_DV_MASK);
  out[o + 1] = rsvdUlp & 0xff;
  put32(out, o + 2, stag >>> 0);
  put32(out, o + 6, toHi >>> 0);
  put32(out, o + 10, toLo >>> 0);
}

/** Writes an untagged header (§4.3, Figure 5) into `out` at `offset`; returns `out`. */
export function encodeUntaggedHeader(
  h: Omit<DdpUntaggedHeader, 'tagged'>,
  out: Uint8Array = new Uint8Array(DDP_UNTAGGED_HEADER_LENGTH),
  offset = 0,
): Uint8Array {
  const o = offset;
  out[o] = (h.last ? DDP_L_FLAG : 0) | (h.dv & DDP_DV_MASK);
  out[o + 1] = Math.floor(h.rsvdUlp / TWO_32) & 0xff;
  put32(out, o + 2, (h.rsvdUlp % TWO_32) >>> 0);
  put32(out, o + 6, h.qn >>> 0);
  put32(out, o + 10, h.msn >>> 0);
  put32(out, o + 14, h.mo >>> 0);
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
  const last = (c & DDP_L_FLAG) !== 0;
  const dv = (c & DDP_DV_MASK) as DdpVersion;
  if (c & DDP_T_FLAG) {
    const hi = get32(b, 6);
    const lo = get32(b, 10);
    // Below 2^53 the TO is made from a number (cheaper than shifting bigints); above, exactly with bigints.
    const to = hi < 0x20_0000 ? BigInt(hi * TWO_32 + lo) : (BigInt(hi) << 32n) | BigInt(lo);
    return { tagged: true, last, dv, rsvdUlp: b[1] as number, stag: get32(b, 2), to };
  }
  return {
    tagged: false,
    last,
    dv,
    rsvdUlp: (b[1] as number) * TWO_32 + get32(b, 2),
    qn: get32(b, 6),
    msn: get32(b, 10),
    mo: get32(b, 14),
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
