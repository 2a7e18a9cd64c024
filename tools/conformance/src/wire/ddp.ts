/**
 * DDP segment headers (RFC 5041 §4):
 *   tagged   (§4.3): T L Rsvd DV | RsvdULP(8) | STag(32) | TO(64)                          14 octets
 *   untagged (§4.4): T L Rsvd DV | RsvdULP(8) | RsvdULP(32) | QN(32) | MSN(32) | MO(32)    18 octets
 * For RDMAP the 8-bit RsvdULP is the RDMAP control octet and the 32-bit one the Invalidate STag
 * (RFC 5040 §4.1, §4.2).
 */
import {
  DDP_DV_MASK,
  DDP_L_BIT,
  DDP_RSVD_BITS,
  DDP_T_BIT,
  DDP_TAGGED_HEADER_LENGTH,
  DDP_UNTAGGED_HEADER_LENGTH,
} from './constants.js';

interface DdpCommon {
  /** L: last segment of the DDP message. */
  readonly last: boolean;
  /** DV: DDP version (1: RFC 5041). */
  readonly dv: number;
  /** The 4 reserved bits after L. */
  readonly rsvd: number;
  /** The 8-bit RsvdULP: the RDMAP control octet. */
  readonly rsvdUlp: number;
}

export interface DdpTaggedHeader extends DdpCommon {
  readonly tagged: true;
  readonly stag: number;
  readonly to: bigint;
}

export interface DdpUntaggedHeader extends DdpCommon {
  readonly tagged: false;
  /** The 32-bit RsvdULP (RDMAP: Invalidate STag). */
  readonly rsvdUlp2: number;
  readonly qn: number;
  readonly msn: number;
  readonly mo: number;
}

export type DdpHeader = DdpTaggedHeader | DdpUntaggedHeader;

export function ddpHeaderLength(tagged: boolean): number {
  return tagged ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH;
}

export type DdpHeaderFields =
  | (Omit<DdpTaggedHeader, 'dv' | 'rsvd'> & { readonly dv?: number; readonly rsvd?: number })
  | (Omit<DdpUntaggedHeader, 'dv' | 'rsvd' | 'rsvdUlp2'> & {
      readonly dv?: number;
      readonly rsvd?: number;
      readonly rsvdUlp2?: number;
    });

export function encodeDdpHeader(h: DdpHeaderFields): Uint8Array {
  const out = new Uint8Array(ddpHeaderLength(h.tagged));
  const v = new DataView(out.buffer);
  out[0] =
    (h.tagged ? DDP_T_BIT : 0) |
    (h.last ? DDP_L_BIT : 0) |
    (((h.rsvd ?? 0) << 2) & DDP_RSVD_BITS) |
    ((h.dv ?? 1) & DDP_DV_MASK);
  out[1] = h.rsvdUlp & 0xff;
  if (h.tagged) {
    v.setUint32(2, h.stag >>> 0);
    v.setBigUint64(6, BigInt.asUintN(64, h.to));
  } else {
    v.setUint32(2, (h.rsvdUlp2 ?? 0) >>> 0);
    v.setUint32(6, h.qn >>> 0);
    v.setUint32(10, h.msn >>> 0);
    v.setUint32(14, h.mo >>> 0);
  }
  return out;
}

/** The DDP header at the start of `b`, or undefined when `b` is shorter than its header (RFC 5041 §4). */
export function decodeDdpHeader(b: Uint8Array): DdpHeader | undefined {
  if (b.byteLength < 1) return undefined;
  const c = b[0] as number;
  const tagged = (c & DDP_T_BIT) !== 0;
  if (b.byteLength < ddpHeaderLength(tagged)) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const common = {
    last: (c & DDP_L_BIT) !== 0,
    dv: c & DDP_DV_MASK,
    rsvd: (c & DDP_RSVD_BITS) >>> 2,
    rsvdUlp: b[1] as number,
  };
  if (tagged) return { tagged: true, ...common, stag: v.getUint32(2), to: v.getBigUint64(6) };
  return {
    tagged: false,
    ...common,
    rsvdUlp2: v.getUint32(2),
    qn: v.getUint32(6),
    msn: v.getUint32(10),
    mo: v.getUint32(14),
  };
}
