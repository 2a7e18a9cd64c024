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

const NAMES: Readonly<Record<RtrType, string>> = {
  write: 'zero-length RDMA Write',
  read: 'zero-length RDMA Read Request',
  send: 'zero-length Send',
};

/**
 * What is wrong with the control fields every RTR shares (RFC 5041 §4.2–4.3, RFC 5040 §4.1): the DDP
 * header type (T), Last, DDP version 1, RDMAP version 1, the opcode; `null` when they are right.
 */
function controlProblem(u: Uint8Array, tagged: boolean, opcode: number): string | null {
  const c0 = u[0] ?? 0;
  const c1 = u[1] ?? 0;
  if (((c0 & T) !== 0) !== tagged)
    return `T=${(c0 & T) >>> 7} (${tagged ? 'a tagged' : 'an untagged'} message expected)`;
  if ((c0 & L) === 0) return 'L=0 (a zero-length message is one DDP segment: L must be 1)';
  if ((c0 & 0x03) !== 1) return `DDP version ${c0 & 0x03}, not 1 (RFC 5041 §4.2 DV)`;
  if (c1 >>> 6 !== 1) return `RDMAP version ${c1 >>> 6}, not 1 (RFC 5040 §4.1 RV)`;
  if ((c1 & 0x0f) !== opcode) return `RDMAP opcode ${c1 & 0x0f}, not ${opcode}`;
  return null;
}

/**
 * Checks that `ulpdu` is exactly the zero-length RTR of `type` (RFC 6581): DV 1, RV 1, L 1, the opcode
 * negotiated; untagged ones on the right QN with MSN 1 and MO 0 (the queue's first message, RFC 5041
 * §5.1); no payload, and a Read Request asking for 0 octets. STags and TOs are not looked at.
 */
export function checkRtr(ulpdu: Uint8Array, type: RtrType): RtrCheck {
  const n = ulpdu.byteLength;
  const bad = (why: string): RtrCheck => ({ ok: false, reason: `expected the ${NAMES[type]} RTR: ${why}` });
  const size = type === 'write' ? TAGGED_HEADER_LENGTH : type === 'read' ? READ_REQUEST_LENGTH : UNTAGGED_HEADER_LENGTH;
  if (n < 2) return bad(`got ${describe(ulpdu)}`);
  const opcode = type === 'write' ? OP_WRITE : type === 'read' ? OP_READ_REQUEST : OP_SEND;
  const problem = controlProblem(ulpdu, type === 'write', opcode);
  if (problem) return bad(`${problem}, in ${describe(ulpdu)}`);
  if (n !== size)
    return bad(`${n - size > 0 ? `${n - size} octets of payload` : `${n} octets, too short`} (length must be zero)`);
  if (type === 'write') return { ok: true };
  const qn = rd32(ulpdu, 6);
  const msn = rd32(ulpdu, 10);
  const mo = rd32(ulpdu, 14);
  const wantQn = type === 'read' ? 1 : 0;
  if (qn !== wantQn) return bad(`QN ${qn}, not ${wantQn}`);
  if (msn !== 1) return bad(`MSN ${msn}, not 1 (the first message on QN ${wantQn}, RFC 5041 §5.1)`);
  if (mo !== 0) return bad(`MO ${mo}, not 0`);
  if (type === 'send') return { ok: true };
  const readSize = rd32(ulpdu, 30);
  if (readSize !== 0) return bad(`RDMA Read Message Size ${readSize}, not 0`);
  return { ok: true, sinkStag: rd32(ulpdu, 18), sinkTo: ulpdu.slice(22, 30) };
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

/** Checks that `ulpdu` is a zero-length RDMA Read Response, DV 1, RV 1, L 1 (the answer to this side's Read RTR). */
export function checkReadResponse(ulpdu: Uint8Array): RtrCheck {
  const problem = ulpdu.byteLength < 2 ? `got ${describe(ulpdu)}` : controlProblem(ulpdu, true, OP_READ_RESPONSE);
  if (problem !== null || ulpdu.byteLength !== TAGGED_HEADER_LENGTH)
    return {
      ok: false,
      reason: `expected the zero-length RDMA Read Response to the Read RTR: ${problem ?? `got ${describe(ulpdu)}`}`,
    };
  return { ok: true };
}

function describe(u: Uint8Array): string {
  if (u.byteLength < 2) return `a ${u.byteLength}-octet ULPDU`;
  const tagged = ((u[0] as number) & T) !== 0;
  return `a ${u.byteLength}-octet ${tagged ? 'tagged' : 'untagged'} ULPDU with RDMAP opcode ${(u[1] as number) & 0x0f}`;
}
