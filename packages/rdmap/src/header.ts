/**
 * RDMAP header codec (RFC 5040 §4): the RDMAP Control Field carried in DDP's RsvdULP, the Invalidate
 * STag of the untagged RsvdULP, and the RDMA Read Request Header. The Terminate Header is in
 * `terminate.ts`.
 */
import { MAX_U64, TWO_32 } from '@rddp/ddp';
import type { RdmapVersion } from './opcode.js';

/** The RDMAP Control Field (§4.1 Figure 3): RV (2 bits), Rsv (2 bits), OpCode (4 bits). */
export interface RdmapControl {
  readonly rv: number;
  /** Bits 26–27: zero on transmit, ignored on receive (§4.1). */
  readonly reserved: number;
  readonly opcode: number;
}

/** The control octet for `opcode` at RDMAP Version `rv` (Rsv zero, §4.1). */
export function encodeControl(rv: RdmapVersion, opcode: number): number {
  return ((rv & 0b11) << 6) | (opcode & 0x0f);
}

export function decodeControl(octet: number): RdmapControl {
  return { rv: (octet >>> 6) & 0b11, reserved: (octet >>> 4) & 0b11, opcode: octet & 0x0f };
}

/**
 * The 40-bit untagged RsvdULP (§4.1): the control octet, then the Invalidate STag (zero unless the
 * message is a Send with Invalidate or Send with SE and Invalidate).
 */
export function encodeUntaggedRsvdUlp(control: number, invalidateStag = 0): number {
  return (control & 0xff) * TWO_32 + (invalidateStag >>> 0);
}

/** Splits a 40-bit untagged RsvdULP into its control octet and Invalidate STag. */
export function decodeUntaggedRsvdUlp(rsvdUlp: number): { control: number; invalidateStag: number } {
  return { control: Math.floor(rsvdUlp / TWO_32) & 0xff, invalidateStag: (rsvdUlp % TWO_32) >>> 0 };
}

/** The RDMAP Control octet of any DDP header's RsvdULP (8 bits tagged, 40 bits untagged). */
export function controlOf(header: { readonly tagged: boolean; readonly rsvdUlp: number }): number {
  return header.tagged ? header.rsvdUlp & 0xff : decodeUntaggedRsvdUlp(header.rsvdUlp).control;
}

/** RDMA Read Request Header (§4.4 Figure 6). */
export interface ReadRequestHeader {
  /** Data Sink STag: copied without interpretation into the Read Response. */
  readonly sinkStag: number;
  /** Data Sink Tagged Offset. */
  readonly sinkTo: bigint;
  /** RDMA Read Message Size: 0 to 2^32-1 octets. */
  readonly size: number;
  /** Data Source STag. */
  readonly srcStag: number;
  /** Data Source Tagged Offset. */
  readonly srcTo: bigint;
}

/** Length of the RDMA Read Request Header: 224 bits (§4.4, §4.8). */
export const READ_REQUEST_HEADER_LENGTH = 28;

/** Encodes Figure 6 into `out` (28 octets, allocated when absent). */
export function encodeReadRequest(h: ReadRequestHeader, out = new Uint8Array(READ_REQUEST_HEADER_LENGTH)): Uint8Array {
  if (out.byteLength < READ_REQUEST_HEADER_LENGTH) throw new RangeError('Read Request Header needs 28 octets');
  if (h.sinkTo < 0n || h.sinkTo > MAX_U64 || h.srcTo < 0n || h.srcTo > MAX_U64)
    throw new RangeError('Tagged Offsets are 64-bit unsigned');
  const v = new DataView(out.buffer, out.byteOffset, READ_REQUEST_HEADER_LENGTH);
  v.setUint32(0, h.sinkStag >>> 0);
  v.setBigUint64(4, h.sinkTo);
  v.setUint32(12, h.size >>> 0);
  v.setUint32(16, h.srcStag >>> 0);
  v.setBigUint64(20, h.srcTo);
  return out;
}

/** Decodes Figure 6 from the first 28 octets of `bytes`. */
export function decodeReadRequest(bytes: Uint8Array): ReadRequestHeader {
  if (bytes.byteLength < READ_REQUEST_HEADER_LENGTH) throw new RangeError('Read Request Header needs 28 octets');
  const v = new DataView(bytes.buffer, bytes.byteOffset, READ_REQUEST_HEADER_LENGTH);
  return {
    sinkStag: v.getUint32(0),
    sinkTo: v.getBigUint64(4),
    size: v.getUint32(12),
    srcStag: v.getUint32(16),
    srcTo: v.getBigUint64(20),
  };
}
