/**
 * Field values of RFC 5040 (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA), RFC 6581 (enhanced MPA) and RFC 7306
 * (RDMA extensions), with the RFCs' names. Written from the RFC text alone.
 */

/** RFC 5044 §7.1: the 16-octet keys that open an MPA Request and an MPA Reply. */
export const MPA_REQUEST_KEY = 'MPA ID Req Frame';
export const MPA_REPLY_KEY = 'MPA ID Rep Frame';
export const MPA_KEY_LENGTH = 16;
/** Key (16) + M/C/R/Res (1) + Rev (1) + PD_Length (2): RFC 5044 §7.1. */
export const MPA_FRAME_HEADER_LENGTH = 20;
/** RFC 5044 §7.1: Private Data is at most 512 octets. */
export const MPA_MAX_PRIVATE_DATA = 512;
/** RFC 5044 §7.1 flag octet. */
export const MPA_FLAG_M = 0x80;
export const MPA_FLAG_C = 0x40;
export const MPA_FLAG_R = 0x20;
export const MPA_FLAG_RES = 0x1f;
/** The top Res bit at Rev 2: RFC 6581 enhanced connection data present (Linux siw MPA_RR_FLAG_ENHANCED). */
export const MPA_FLAG_ENHANCED = 0x10;
/** RFC 6581 §5 IRD/ORD words (the first 4 octets of a Rev 2 frame's Private Data). */
export const MPA_V2_PEER_TO_PEER = 0x8000; // IRD word, bit 0
export const MPA_V2_ZERO_LENGTH_SEND_RTR = 0x4000; // IRD word, bit 1
export const MPA_V2_ZERO_LENGTH_WRITE_RTR = 0x8000; // ORD word, bit 0
export const MPA_V2_ZERO_LENGTH_READ_RTR = 0x4000; // ORD word, bit 1
export const MPA_V2_IRD_ORD_MASK = 0x3fff;

/** RFC 5044 §4.3: one Marker every 512 octets of TCP stream. §4.2: 16 reserved bits, 16-bit FPDUPTR. */
export const MARKER_INTERVAL = 512;
export const MARKER_LENGTH = 4;
/** RFC 5044 §4.1: ULPDU_Length (2) and CRC (4). */
export const FPDU_OVERHEAD = 6;
/** RFC 5044 §3 (MULPDU): no ULPDU is longer than 64768 octets. */
export const MULPDU_MAX = 64768;

/** RFC 5041 §4.2/§4.3 header lengths, RFC 5041 §4.2 control bits. */
export const DDP_TAGGED_HEADER_LENGTH = 14;
export const DDP_UNTAGGED_HEADER_LENGTH = 18;
export const DDP_T_BIT = 0x80;
export const DDP_L_BIT = 0x40;
export const DDP_RSVD_BITS = 0x3c;
export const DDP_DV_MASK = 0x03;
/** RFC 5041 §4.2: DDP Version 01b (00b is the RDMA Consortium's DDP 1.0). */
export const DDP_VERSION = 1;
/** RFC 5040 §4.1: RDMA Version 01b (00b is the RDMA Consortium's RDMAP 1.0). */
export const RDMAP_VERSION = 1;

/** RDMA OpCode (RFC 5040 §4.1 Figure 4; 1000b–1011b assigned by RFC 7306 §8, the rest reserved). */
export const Opcode = {
  RdmaWrite: 0x0,
  RdmaReadRequest: 0x1,
  RdmaReadResponse: 0x2,
  Send: 0x3,
  SendWithInvalidate: 0x4,
  SendWithSolicitedEvent: 0x5,
  SendWithSolicitedEventAndInvalidate: 0x6,
  Terminate: 0x7,
  ImmediateData: 0x8,
  ImmediateDataWithSolicitedEvent: 0x9,
  AtomicRequest: 0xa,
  AtomicResponse: 0xb,
} as const;

export const OPCODE_NAMES: Readonly<Record<number, string>> = {
  0: 'RDMA Write',
  1: 'RDMA Read Request',
  2: 'RDMA Read Response',
  3: 'Send',
  4: 'Send with Invalidate',
  5: 'Send with Solicited Event',
  6: 'Send with Solicited Event and Invalidate',
  7: 'Terminate',
  8: 'Immediate Data',
  9: 'Immediate Data with Solicited Event',
  10: 'Atomic Request',
  11: 'Atomic Response',
};

export function opcodeName(op: number): string {
  return OPCODE_NAMES[op] ?? `Reserved (0x${op.toString(16)})`;
}

/** Whether an opcode travels in a tagged DDP segment (RFC 5040 §4.1 Figure 4: Write, Read Response). */
export function opcodeIsTagged(op: number): boolean {
  return op === Opcode.RdmaWrite || op === Opcode.RdmaReadResponse;
}

/** Untagged queue numbers (RFC 5040 §3.1; QN 3 by RFC 7306 §8.3). */
export const Queue = { Send: 0, ReadRequest: 1, Terminate: 2, AtomicResponse: 3 } as const;

/** The untagged queue each untagged opcode is sent on (RFC 5040 §4.1 Figure 4, RFC 7306 §5). */
export function queueOfOpcode(op: number): number | undefined {
  switch (op) {
    case Opcode.Send:
    case Opcode.SendWithInvalidate:
    case Opcode.SendWithSolicitedEvent:
    case Opcode.SendWithSolicitedEventAndInvalidate:
    case Opcode.ImmediateData:
    case Opcode.ImmediateDataWithSolicitedEvent:
      return Queue.Send;
    case Opcode.RdmaReadRequest:
    case Opcode.AtomicRequest:
      return Queue.ReadRequest;
    case Opcode.Terminate:
      return Queue.Terminate;
    case Opcode.AtomicResponse:
      return Queue.AtomicResponse;
    default:
      return undefined;
  }
}

/** RFC 5040 §4.4: the RDMA Read Request Header, 28 octets. */
export const READ_REQUEST_HEADER_LENGTH = 28;
/** RFC 7306 §5: Atomic Request Header 52 octets, Atomic Response Header 12, Immediate Data 8. */
export const ATOMIC_REQUEST_HEADER_LENGTH = 52;
export const ATOMIC_RESPONSE_HEADER_LENGTH = 12;
export const IMMEDIATE_DATA_LENGTH = 8;
/** RFC 7306 §5.2.1 Atomic Operation Codes. */
export const ATOMIC_OPCODE_NAMES: Readonly<Record<number, string>> = { 0: 'FetchAdd', 2: 'CmpSwap' };

/** RFC 5040 §4.8 Terminate Control: Layer. */
export const TerminateLayer = { Rdma: 0x0, Ddp: 0x1, Llp: 0x2 } as const;
/** RFC 5040 §4.8: the Terminate Header's M, D and R bits (octet 4 of the Terminate Control). */
export const TERM_M_BIT = 0x80;
export const TERM_D_BIT = 0x40;
export const TERM_R_BIT = 0x20;

/** One row of the Terminate error table (RFC 5040 §4.8 Figure 9 / §7.2; RFC 5041 §7.2; RFC 5044 §8; RFC 6581). */
export interface TerminateCodeRow {
  readonly layer: number;
  readonly etype: number;
  readonly code: number;
  readonly name: string;
  readonly clause: string;
}

const row = (layer: number, etype: number, code: number, name: string, clause: string): TerminateCodeRow => ({
  layer,
  etype,
  code,
  name,
  clause,
});

/** Every Layer/EType/Error Code the RFCs define. */
export const TERMINATE_CODES: readonly TerminateCodeRow[] = [
  row(0, 0, 0x00, 'RDMAP: Local Catastrophic Error', 'RFC 5040 §4.8'),
  row(0, 1, 0x00, 'RDMAP: Remote Protection Error: Invalid STag', 'RFC 5040 §4.8'),
  row(0, 1, 0x01, 'RDMAP: Remote Protection Error: Base or bounds violation', 'RFC 5040 §4.8'),
  row(0, 1, 0x02, 'RDMAP: Remote Protection Error: Access rights violation', 'RFC 5040 §4.8'),
  row(0, 1, 0x03, 'RDMAP: Remote Protection Error: STag not associated with RDMAP Stream', 'RFC 5040 §4.8'),
  row(0, 1, 0x04, 'RDMAP: Remote Protection Error: TO wrap', 'RFC 5040 §4.8'),
  row(0, 1, 0x09, 'RDMAP: Remote Protection Error: STag cannot be invalidated', 'RFC 5040 §4.8'),
  row(0, 1, 0xff, 'RDMAP: Remote Protection Error: Unspecified Error', 'RFC 5040 §4.8'),
  row(0, 2, 0x05, 'RDMAP: Remote Operation Error: Invalid RDMAP version', 'RFC 5040 §4.8'),
  row(0, 2, 0x06, 'RDMAP: Remote Operation Error: Unexpected OpCode', 'RFC 5040 §4.8'),
  row(0, 2, 0x07, 'RDMAP: Remote Operation Error: Catastrophic error, localized to RDMAP Stream', 'RFC 5040 §4.8'),
  row(0, 2, 0x08, 'RDMAP: Remote Operation Error: Catastrophic error, global', 'RFC 5040 §4.8'),
  row(0, 2, 0x09, 'RDMAP: Remote Operation Error: STag cannot be invalidated', 'RFC 5040 §4.8'),
  row(0, 2, 0xff, 'RDMAP: Remote Operation Error: Unspecified Error', 'RFC 5040 §4.8'),
  row(1, 0, 0x00, 'DDP: Local Catastrophic Error', 'RFC 5041 §7.2'),
  row(1, 1, 0x00, 'DDP: Tagged Buffer Error: Invalid STag', 'RFC 5041 §7.2'),
  row(1, 1, 0x01, 'DDP: Tagged Buffer Error: Base or bounds violation', 'RFC 5041 §7.2'),
  row(1, 1, 0x02, 'DDP: Tagged Buffer Error: STag not associated with DDP Stream', 'RFC 5041 §7.2'),
  row(1, 1, 0x03, 'DDP: Tagged Buffer Error: TO wrap', 'RFC 5041 §7.2'),
  row(1, 1, 0x04, 'DDP: Tagged Buffer Error: Invalid DDP version', 'RFC 5041 §7.2'),
  row(1, 2, 0x01, 'DDP: Untagged Buffer Error: Invalid QN', 'RFC 5041 §7.2'),
  row(1, 2, 0x02, 'DDP: Untagged Buffer Error: Invalid MSN - no buffer available', 'RFC 5041 §7.2'),
  row(1, 2, 0x03, 'DDP: Untagged Buffer Error: Invalid MSN - MSN range is not valid', 'RFC 5041 §7.2'),
  row(1, 2, 0x04, 'DDP: Untagged Buffer Error: Invalid MO', 'RFC 5041 §7.2'),
  row(1, 2, 0x05, 'DDP: Untagged Buffer Error: DDP Message too long for available buffer', 'RFC 5041 §7.2'),
  row(1, 2, 0x06, 'DDP: Untagged Buffer Error: Invalid DDP version', 'RFC 5041 §7.2'),
  row(2, 0, 0x01, 'MPA: TCP connection closed, terminated or lost', 'RFC 5044 §8'),
  row(2, 0, 0x02, 'MPA: MPA CRC Error', 'RFC 5044 §8'),
  row(2, 0, 0x03, "MPA: MPA Marker and ULPDU pointers don't match", 'RFC 5044 §8'),
  row(2, 0, 0x04, 'MPA: Invalid MPA Request/Reply frame', 'RFC 5044 §8'),
  row(2, 0, 0x05, 'MPA: Local catastrophic error', 'RFC 5044 §8'),
  row(2, 0, 0x06, 'MPA: Insufficient IRD resources', 'RFC 6581 §10'),
  row(2, 0, 0x07, 'MPA: No matching RTR model', 'RFC 6581 §10'),
];

/** The RFC name of a Terminate's Layer/EType/Error Code, or undefined when no RFC defines it. */
export function terminateCodeRow(layer: number, etype: number, code: number): TerminateCodeRow | undefined {
  return TERMINATE_CODES.find((r) => r.layer === layer && r.etype === etype && r.code === code);
}

export function describeTerminateCode(layer: number, etype: number, code: number): string {
  const r = terminateCodeRow(layer, etype, code);
  if (r) return r.name;
  const hex = (n: number) => `0x${n.toString(16).padStart(2, '0')}`;
  return `undefined (layer ${layer}, etype ${etype}, code ${hex(code)})`;
}
