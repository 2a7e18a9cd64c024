/**
 * The Ready-To-Receive (RTR) messages of RFC 6581 peer-to-peer mode: the zero-length RDMA Write,
 * RDMA Read Request or Send that the Initiator sends as its first FPDU, and the zero-length RDMA Read
 * Response that answers a Read RTR. They are DDP/RDMAP messages (RFC 5041 §4, RFC 5040 §4), built here
 * because MPA startup owns them: the LLP sends and consumes them, the ULP never sees them.
 *
 * Octets follow what Linux siw puts on the wire (siw_qp_mpa_rts → siw_qp_tx): DDP version 1, RDMAP
 * version 1, Last flag set; the Write and the Read's Data Source use STag 1 ("some HW may treat STag 0
 * special"), the Read's Data Sink STag 0, every TO 0, and MSN 1 on the untagged queue used
 * (QN 1 for the Read Request, QN 0 for the Send) — so the ULP's first MSN on that queue is 2.
 */
import type { RtrType } from './negotiation.js';

const T = 0x80; // DDP Tagged flag
const L = 0x40; // DDP Last flag
const DV1 = 0x01; // DDP version 1
const RV1 = 0x40; // RDMAP version 1
const OP_WRITE = 0x0;
const OP_READ_REQUEST = 0x1;
const OP_READ_RESPONSE = 0x2;
const OP_SEND = 0x3;

/** Tagged header (14 octets) / untagged header (18 octets), RFC 5041 §4.2–4.3. */
export const TAGGED_HEADER_LENGTH = 14;
export const UNTAGGED_HEADER_LENGTH = 18;
/** Untagged header + the RDMA Read Request's 28 octets (RFC 5040 §4.4). */
export const READ_REQUEST_LENGTH = 46;
/** STag used where siw puts a non-zero "don't care" STag. */
export const RTR_STAG = 1;

function u32(out: Uint8Array, off: number, v: number): void {
  out[off] = v >>> 24;
  out[off + 1] = (v >>> 16) & 0xff;
  out[off + 2] = (v >>> 8) & 0xff;
  out[off + 3] = v & 0xff;
}
function rd32(b: Uint8Array, off: number): number {
  return (
    (((b[off] as number) << 24) |
      ((b[off + 1] as number) << 16) |
      ((b[off + 2] as number) << 8) |
      (b[off + 3] as number)) >>>
    0
  );
}

/** The ULPDU of the RTR message of this type. */
export function encodeRtr(type: RtrType): Uint8Array {
  if (type === 'write') {
    const b = new Uint8Array(TAGGED_HEADER_LENGTH);
    b[0] = T | L | DV1;
    b[1] = RV1 | OP_WRITE;
    u32(b, 2, RTR_STAG); // Data Sink STag; TO stays 0
    return b;
  }
  if (type === 'read') {
    const b = new Uint8Array(READ_REQUEST_LENGTH);
    b[0] = L | DV1;
    b[1] = RV1 | OP_READ_REQUEST;
    u32(b, 6, 1); // QN 1: RDMA Read Request queue
    u32(b, 10, 1); // MSN 1
    // MO 0; Data Sink STag 0, TO 0; RDMA Read Message Size 0
    u32(b, 34, RTR_STAG); // Data Source STag; TO 0
    return b;
  }
  const b = new Uint8Array(UNTAGGED_HEADER_LENGTH);
  b[0] = L | DV1;
  b[1] = RV1 | OP_SEND;
  u32(b, 10, 1); // QN 0, MSN 1, MO 0
  return b;
}

/** A received RTR, checked against the negotiated type; `sink` is what a Read Response must target. */
export type RtrCheck =
  | { readonly ok: true; readonly sinkStag?: number; readonly sinkTo?: Uint8Array }
  | { readonly ok: false; readonly reason: string };

/** Checks that `ulpdu` is the zero-length RTR of `type` (RFC 6581). */
export function checkRtr(ulpdu: Uint8Array, type: RtrType): RtrCheck {
  const n = ulpdu.byteLength;
  const c0 = ulpdu[0] ?? 0;
  const c1 = ulpdu[1] ?? 0;
  const opcode = c1 & 0x0f;
  const tagged = (c0 & T) !== 0;
  const last = (c0 & L) !== 0;
  if (type === 'write') {
    if (n !== TAGGED_HEADER_LENGTH || !tagged || !last || opcode !== OP_WRITE)
      return { ok: false, reason: `expected a zero-length RDMA Write RTR, got ${describe(ulpdu)}` };
    return { ok: true };
  }
  if (type === 'read') {
    if (n !== READ_REQUEST_LENGTH || tagged || !last || opcode !== OP_READ_REQUEST || rd32(ulpdu, 6) !== 1)
      return { ok: false, reason: `expected a zero-length RDMA Read Request RTR, got ${describe(ulpdu)}` };
    if (rd32(ulpdu, 30) !== 0) return { ok: false, reason: `RDMA Read RTR asks for ${rd32(ulpdu, 30)} octets, not 0` };
    return { ok: true, sinkStag: rd32(ulpdu, 18), sinkTo: ulpdu.slice(22, 30) };
  }
  if (n !== UNTAGGED_HEADER_LENGTH || tagged || !last || opcode !== OP_SEND || rd32(ulpdu, 6) !== 0)
    return { ok: false, reason: `expected a zero-length Send RTR, got ${describe(ulpdu)}` };
  return { ok: true };
}

/** The zero-length RDMA Read Response answering a Read RTR (RFC 5040 §4.5: Data Sink STag and TO of the request). */
export function encodeReadResponse(sinkStag: number, sinkTo: Uint8Array): Uint8Array {
  const b = new Uint8Array(TAGGED_HEADER_LENGTH);
  b[0] = T | L | DV1;
  b[1] = RV1 | OP_READ_RESPONSE;
  u32(b, 2, sinkStag);
  b.set(sinkTo.subarray(0, 8), 6);
  return b;
}

/** Checks that `ulpdu` is a zero-length RDMA Read Response (the answer to this side's Read RTR). */
export function checkReadResponse(ulpdu: Uint8Array): RtrCheck {
  const c0 = ulpdu[0] ?? 0;
  if (
    ulpdu.byteLength !== TAGGED_HEADER_LENGTH ||
    (c0 & (T | L)) !== (T | L) ||
    ((ulpdu[1] ?? 0) & 0x0f) !== OP_READ_RESPONSE
  )
    return { ok: false, reason: `expected the zero-length RDMA Read Response to the Read RTR, got ${describe(ulpdu)}` };
  return { ok: true };
}

function describe(u: Uint8Array): string {
  if (u.byteLength < 2) return `a ${u.byteLength}-octet ULPDU`;
  const tagged = ((u[0] as number) & T) !== 0;
  return `a ${u.byteLength}-octet ${tagged ? 'tagged' : 'untagged'} ULPDU with RDMAP opcode ${(u[1] as number) & 0x0f}`;
}
