/**
 * The Terminate Header (RFC 5040 §4.8, Figures 7–10): codec, the Terminate Control values, and which
 * headers a Terminate carries for each cause (Figure 10, §7.1).
 */
import { copyPayload, DDP_TAGGED_HEADER_LENGTH } from '@rddp/ddp';
import type { Ulpdu } from '@rddp/llp';
import { TerminateFormatError } from './errors.js';
import { READ_REQUEST_HEADER_LENGTH } from './header.js';
import { RdmaErrorType, TerminateLayer } from './terminate-codes.js';

/** A decoded (or to-be-encoded) Terminate Header. */
export interface TerminateHeader {
  readonly layer: number;
  readonly errorType: number;
  readonly errorCode: number;
  /** M: DDP Segment Length valid. */
  readonly m: boolean;
  /** D: DDP Header included. */
  readonly d: boolean;
  /** R: RDMAP (Read Request) Header included. */
  readonly r: boolean;
  /** DDP Segment Length (present when M or D is set). */
  readonly ddpSegmentLength?: number;
  /** Terminated DDP Header: 14 octets (tagged) or 18 (untagged), present when D is set. */
  readonly ddpHeader?: Uint8Array;
  /** Terminated RDMA Header: the 28-octet Read Request Header, present when R is set. */
  readonly rdmaHeader?: Uint8Array;
}

/** Terminate Control (19 bits) + Reserved (13 bits). */
export const TERMINATE_CONTROL_LENGTH = 4;
/** The longest Terminate Header: control, segment length, untagged DDP header, Read Request header. */
export const MAX_TERMINATE_HEADER_LENGTH = TERMINATE_CONTROL_LENGTH + 2 + 18 + READ_REQUEST_HEADER_LENGTH;
/**
 * Size of the receive buffer RDMAP posts on the Terminate queue (QN 2, RFC 5040 §5.4): room for the
 * longest Terminate Header and for peers that pad it; trailing octets are ignored when decoding.
 */
export const TERMINATE_RECEIVE_BUFFER_LENGTH = 128;

const M_BIT = 0x80;
const D_BIT = 0x40;
const R_BIT = 0x20;

/** The DDP header length its first octet implies (T flag, RFC 5041 §4.2/§4.3). */
function ddpHeaderLength(firstOctet: number): number {
  return firstOctet & 0x80 ? 14 : 18;
}

/**
 * Encodes Figure 7. Terminate Control (Figure 8) is Layer (4 bits), EType (4), Error Code (8), HdrCt
 * M/D/R (3), then 13 reserved bits. The DDP Segment Length follows when M or D is set (it "MUST be
 * present when the D bit is set"), the Terminated DDP Header when D is set, the 28-octet Terminated
 * RDMA Header when R is set. Fields a bit says are absent are left out, as Linux siw and Wireshark do.
 */
export function encodeTerminate(t: TerminateHeader): Uint8Array {
  if (t.layer < 0 || t.layer > 0xf || t.errorType < 0 || t.errorType > 0xf)
    throw new RangeError('Layer/EType are 4 bits');
  if (t.errorCode < 0 || t.errorCode > 0xff) throw new RangeError('Error Code is 8 bits');
  const hasLen = t.m || t.d;
  if (t.d && (t.ddpHeader === undefined || (t.ddpHeader.byteLength !== 14 && t.ddpHeader.byteLength !== 18)))
    throw new RangeError('D set: the Terminated DDP Header must be 14 or 18 octets');
  if (t.r && t.rdmaHeader?.byteLength !== READ_REQUEST_HEADER_LENGTH)
    throw new RangeError('R set: the Terminated RDMA Header must be 28 octets');
  const len =
    TERMINATE_CONTROL_LENGTH +
    (hasLen ? 2 : 0) +
    (t.d ? (t.ddpHeader as Uint8Array).byteLength : 0) +
    (t.r ? READ_REQUEST_HEADER_LENGTH : 0);
  const out = new Uint8Array(len);
  out[0] = (t.layer << 4) | t.errorType;
  out[1] = t.errorCode;
  out[2] = (t.m ? M_BIT : 0) | (t.d ? D_BIT : 0) | (t.r ? R_BIT : 0);
  out[3] = 0;
  let off = TERMINATE_CONTROL_LENGTH;
  if (hasLen) {
    const n = t.m ? (t.ddpSegmentLength ?? 0) : 0;
    out[off] = (n >>> 8) & 0xff;
    out[off + 1] = n & 0xff;
    off += 2;
  }
  if (t.d) {
    out.set(t.ddpHeader as Uint8Array, off);
    off += (t.ddpHeader as Uint8Array).byteLength;
  }
  if (t.r) out.set(t.rdmaHeader as Uint8Array, off);
  return out;
}

/** Decodes Figure 7 from a received Terminate Message's payload. Extra trailing octets are ignored. */
export function decodeTerminate(bytes: Uint8Array): TerminateHeader {
  if (bytes.byteLength < TERMINATE_CONTROL_LENGTH)
    throw new TerminateFormatError('Terminate Control', TERMINATE_CONTROL_LENGTH, bytes.byteLength);
  const b0 = bytes[0] as number;
  const b2 = bytes[2] as number;
  const m = (b2 & M_BIT) !== 0;
  const d = (b2 & D_BIT) !== 0;
  const r = (b2 & R_BIT) !== 0;
  let off = TERMINATE_CONTROL_LENGTH;
  let ddpSegmentLength: number | undefined;
  let ddpHeader: Uint8Array | undefined;
  let rdmaHeader: Uint8Array | undefined;
  if (m || d) {
    if (bytes.byteLength < off + 2) throw new TerminateFormatError('DDP Segment Length', 2, bytes.byteLength - off);
    ddpSegmentLength = ((bytes[off] as number) << 8) | (bytes[off + 1] as number);
    off += 2;
  }
  if (d) {
    if (bytes.byteLength <= off) throw new TerminateFormatError('Terminated DDP Header', DDP_TAGGED_HEADER_LENGTH, 0);
    const n = ddpHeaderLength(bytes[off] as number);
    if (bytes.byteLength < off + n) throw new TerminateFormatError('Terminated DDP Header', n, bytes.byteLength - off);
    ddpHeader = bytes.slice(off, off + n);
    off += n;
  }
  if (r) {
    if (bytes.byteLength < off + READ_REQUEST_HEADER_LENGTH)
      throw new TerminateFormatError('Terminated RDMA Header', READ_REQUEST_HEADER_LENGTH, bytes.byteLength - off);
    rdmaHeader = bytes.slice(off, off + READ_REQUEST_HEADER_LENGTH);
  }
  return {
    layer: b0 >>> 4,
    errorType: b0 & 0x0f,
    errorCode: bytes[1] as number,
    m,
    d,
    r,
    ...(ddpSegmentLength !== undefined ? { ddpSegmentLength } : {}),
    ...(ddpHeader ? { ddpHeader } : {}),
    ...(rdmaHeader ? { rdmaHeader } : {}),
  };
}

/** The offending incoming segment, as far as it is known. */
/**
 * A received DDP Segment as a Terminate copies it (§4.8): its DDP header's octets (14 tagged, 18
 * untagged, copied out of the LLP's chunks) and its length; empty when there is none.
 */
export function segmentOf(u: Ulpdu | undefined): TerminatedSegment {
  if (u === undefined || u.length === 0) return { ddpHeader: new Uint8Array(0) };
  const first = u.chunks[0] as Uint8Array;
  const n = Math.min(u.length, ((first[0] as number) & 0x80) !== 0 ? 14 : 18);
  const ddpHeader = new Uint8Array(n);
  copyPayload(u.chunks, 0, ddpHeader, 0, n);
  return { ddpHeader, length: u.length };
}

export interface TerminatedSegment {
  /** The DDP header's octets (14 or 18), as received. */
  readonly ddpHeader: Uint8Array;
  /** The DDP Segment's length as handed up by the LLP (header + payload), when known. */
  readonly length?: number;
  /** For a Read Request: its 28-octet header (original, or updated per §4.8 once processing started). */
  readonly readRequest?: Uint8Array;
}

/** What went wrong, in Figure 9's terms, and on which incoming segment (none for §7.1 case 1). */
export interface TerminateCause {
  readonly layer: TerminateLayer;
  readonly errorType: number;
  readonly errorCode: number;
  readonly segment?: TerminatedSegment;
}

/**
 * The Terminate Header for a cause, per Figure 10 and §7.1: Local Catastrophic and LLP errors carry no
 * headers; DDP errors and RDMA Remote Protection/Operation errors carry the DDP Segment Length and the
 * DDP Header when the segment is known ("Yes, if possible"); only a Read Request's Remote Protection
 * error also carries the RDMA Header (§4.8: "only sent back if the terminate is associated with an
 * RDMA Read Request Message"). Errors not tied to an incoming message (§7.1 case 1) carry none.
 */
export function terminateFor(cause: TerminateCause): TerminateHeader {
  const base = { layer: cause.layer, errorType: cause.errorType, errorCode: cause.errorCode };
  const seg = cause.segment;
  const headersAllowed =
    cause.layer === TerminateLayer.Ddp ||
    (cause.layer === TerminateLayer.Rdma && cause.errorType !== RdmaErrorType.LocalCatastrophic);
  const ddpHeaderOk = seg !== undefined && (seg.ddpHeader.byteLength === 14 || seg.ddpHeader.byteLength === 18);
  if (!headersAllowed || !ddpHeaderOk) return { ...base, m: false, d: false, r: false };
  const withRdma =
    cause.layer === TerminateLayer.Rdma &&
    cause.errorType === RdmaErrorType.RemoteProtection &&
    seg.readRequest?.byteLength === READ_REQUEST_HEADER_LENGTH;
  return {
    ...base,
    m: seg.length !== undefined,
    d: true,
    r: withRdma,
    ...(seg.length !== undefined ? { ddpSegmentLength: seg.length & 0xffff } : {}),
    ddpHeader: seg.ddpHeader,
    ...(withRdma ? { rdmaHeader: seg.readRequest } : {}),
  };
}
