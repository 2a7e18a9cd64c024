/**
 * The Terminate Header (RFC 5040 §4.8): Terminate Control = Layer (4 bits) | EType (4) | Error Code (8)
 * | M | D | R | Reserved (13); then DDP Segment Length (16 bits, when M or D), the terminated DDP
 * Header (14 or 18 octets, when D) and the terminated RDMA Header (the 28-octet Read Request Header,
 * when R). Which headers a Terminate must copy: RFC 5040 §7.1.
 */
import {
  describeTerminateCode,
  READ_REQUEST_HEADER_LENGTH,
  TERM_D_BIT,
  TERM_M_BIT,
  TERM_R_BIT,
  terminateCodeRow,
} from './constants.js';
import { reject, type Violation, warn } from './violation.js';

export interface TerminateMessage {
  readonly layer: number;
  readonly etype: number;
  readonly errorCode: number;
  /** M: DDP Segment Length valid. */
  readonly m: boolean;
  /** D: DDP Header included. */
  readonly d: boolean;
  /** R: RDMA Header included. */
  readonly r: boolean;
  /** The 13 reserved bits. */
  readonly reserved?: number;
  readonly ddpSegmentLength?: number;
  readonly ddpHeader?: Uint8Array;
  readonly rdmaHeader?: Uint8Array;
}

export interface DecodedTerminate extends TerminateMessage {
  /** The RFC name of Layer/EType/Error Code. */
  readonly name: string;
  readonly violations: readonly Violation[];
}

export function encodeTerminate(t: TerminateMessage): Uint8Array {
  const hasLen = t.m || t.d || t.ddpSegmentLength !== undefined;
  const parts: number[] = [
    ((t.layer & 0xf) << 4) | (t.etype & 0xf),
    t.errorCode & 0xff,
    (t.m ? TERM_M_BIT : 0) | (t.d ? TERM_D_BIT : 0) | (t.r ? TERM_R_BIT : 0) | (((t.reserved ?? 0) >>> 8) & 0x1f),
    (t.reserved ?? 0) & 0xff,
  ];
  if (hasLen) {
    const l = t.ddpSegmentLength ?? 0;
    parts.push((l >>> 8) & 0xff, l & 0xff);
  }
  const out = new Uint8Array(parts.length + (t.ddpHeader?.byteLength ?? 0) + (t.rdmaHeader?.byteLength ?? 0));
  out.set(parts, 0);
  let o = parts.length;
  if (t.ddpHeader) {
    out.set(t.ddpHeader, o);
    o += t.ddpHeader.byteLength;
  }
  if (t.rdmaHeader) out.set(t.rdmaHeader, o);
  return out;
}

/** Decodes a Terminate Header from an RDMAP Terminate message's payload. */
export function decodeTerminate(b: Uint8Array): DecodedTerminate | { readonly error: Violation } {
  if (b.byteLength < 4)
    return { error: reject('rdmap-terminate-short', 'RFC 5040 §4.8', `Terminate payload of ${b.byteLength} octets`) };
  const layer = (b[0] as number) >>> 4;
  const etype = (b[0] as number) & 0xf;
  const errorCode = b[1] as number;
  const flags = b[2] as number;
  const m = (flags & TERM_M_BIT) !== 0;
  const d = (flags & TERM_D_BIT) !== 0;
  const r = (flags & TERM_R_BIT) !== 0;
  const reserved = ((flags & 0x1f) << 8) | (b[3] as number);
  const violations: Violation[] = [];
  let o = 4;
  let ddpSegmentLength: number | undefined;
  let ddpHeader: Uint8Array | undefined;
  let rdmaHeader: Uint8Array | undefined;
  if (m || d) {
    if (b.byteLength < o + 2)
      return { error: reject('rdmap-terminate-short', 'RFC 5040 §4.8', 'M or D set and no DDP Segment Length') };
    ddpSegmentLength = ((b[o] as number) << 8) | (b[o + 1] as number);
    o += 2;
  }
  if (d) {
    const hl = b.byteLength > o && ((b[o] as number) & 0x80) !== 0 ? 14 : 18;
    if (b.byteLength < o + hl)
      return { error: reject('rdmap-terminate-short', 'RFC 5040 §4.8', 'D set and the DDP Header is cut short') };
    ddpHeader = b.slice(o, o + hl);
    o += hl;
  }
  if (r) {
    if (b.byteLength < o + READ_REQUEST_HEADER_LENGTH)
      return { error: reject('rdmap-terminate-short', 'RFC 5040 §4.8', 'R set and the RDMA Header is cut short') };
    rdmaHeader = b.slice(o, o + READ_REQUEST_HEADER_LENGTH);
    o += READ_REQUEST_HEADER_LENGTH;
  }
  if (reserved !== 0) violations.push(warn('rdmap-terminate-reserved', 'RFC 5040 §4.8', 'reserved bits not zero'));
  if (!terminateCodeRow(layer, etype, errorCode))
    violations.push(
      reject(
        'rdmap-terminate-code',
        'RFC 5040 §4.8',
        `Layer ${layer}, EType ${etype}, Error Code 0x${errorCode.toString(16)} is not defined`,
      ),
    );
  if (r && !d)
    violations.push(
      warn('rdmap-terminate-r-without-d', 'RFC 5040 §7.1', 'R set without D: RDMA Header with no DDP Header'),
    );
  return {
    layer,
    etype,
    errorCode,
    m,
    d,
    r,
    reserved,
    name: describeTerminateCode(layer, etype, errorCode),
    violations,
    ...(ddpSegmentLength !== undefined ? { ddpSegmentLength } : {}),
    ...(ddpHeader ? { ddpHeader } : {}),
    ...(rdmaHeader ? { rdmaHeader } : {}),
  };
}
