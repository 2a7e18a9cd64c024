/**
 * RDMA Message opcodes and their use of DDP fields (RFC 5040 §4.1 Figure 4, §4.2 Figure 5), the three
 * untagged queues (§3.1) and the RDMAP Version per profile (§4.1 bits 24–25).
 */
import type { DdpProfile } from '@rddp/ddp';

/** RDMA OpCode, 4 bits (RFC 5040 §4.1 Figure 4). 1000b–1111b are reserved. */
export const RdmapOpcode = {
  RdmaWrite: 0b0000,
  RdmaReadRequest: 0b0001,
  RdmaReadResponse: 0b0010,
  Send: 0b0011,
  SendWithInvalidate: 0b0100,
  SendWithSolicitedEvent: 0b0101,
  SendWithSolicitedEventAndInvalidate: 0b0110,
  Terminate: 0b0111,
} as const;
export type RdmapOpcode = (typeof RdmapOpcode)[keyof typeof RdmapOpcode];

/** Untagged Queue Numbers RDMAP uses (RFC 5040 §3.1). */
export const RdmapQueue = {
  /** Send, Send with Invalidate, Send with SE, Send with SE and Invalidate. */
  Send: 0,
  /** RDMA Read Request. */
  ReadRequest: 1,
  /** Terminate. */
  Terminate: 2,
} as const;
export type RdmapQueue = (typeof RdmapQueue)[keyof typeof RdmapQueue];
/** Number of untagged queues a DDP Stream must carry for RDMAP (RFC 5040 §3.1). */
export const RDMAP_QUEUE_COUNT = 3;

/** RDMA Version (RV): 01b for RFC 5040, 00b for the RDMA Consortium specification (RFC 5040 §4.1). */
export type RdmapVersion = 0 | 1;
export const RDMAP_VERSION: Readonly<Record<DdpProfile, RdmapVersion>> = { ietf: 1, rdmac: 0 };

/** What Figure 4 and Figure 5 say about one opcode. */
export interface OpcodeInfo {
  readonly opcode: RdmapOpcode;
  /** The message type's name in RFC 5040's words. */
  readonly name: string;
  /** DDP Tagged flag (Figure 4). */
  readonly tagged: boolean;
  /** Queue Number for untagged messages (Figure 4); undefined for tagged ones. */
  readonly qn: RdmapQueue | undefined;
  /** Whether the Invalidate STag field is valid (Figure 4). */
  readonly invalidateStag: boolean;
  /** RDMA header carried after the DDP header (Figure 5). */
  readonly rdmaHeader: 'none' | 'read-request' | 'terminate';
  /** Whether a ULP Message may be carried (Figure 5). */
  readonly ulpPayload: boolean;
  /** Send types that ask for a Solicited Event (§5.3). */
  readonly solicitedEvent: boolean;
}

const info = (
  opcode: RdmapOpcode,
  name: string,
  tagged: boolean,
  qn: RdmapQueue | undefined,
  invalidateStag: boolean,
  rdmaHeader: OpcodeInfo['rdmaHeader'],
  ulpPayload: boolean,
  solicitedEvent = false,
): OpcodeInfo => ({ opcode, name, tagged, qn, invalidateStag, rdmaHeader, ulpPayload, solicitedEvent });

/** RFC 5040 Figure 4 / Figure 5, indexed by opcode. */
export const OPCODES: readonly OpcodeInfo[] = [
  info(RdmapOpcode.RdmaWrite, 'RDMA Write', true, undefined, false, 'none', true),
  info(RdmapOpcode.RdmaReadRequest, 'RDMA Read Request', false, RdmapQueue.ReadRequest, false, 'read-request', false),
  info(RdmapOpcode.RdmaReadResponse, 'RDMA Read Response', true, undefined, false, 'none', true),
  info(RdmapOpcode.Send, 'Send', false, RdmapQueue.Send, false, 'none', true),
  info(RdmapOpcode.SendWithInvalidate, 'Send with Invalidate', false, RdmapQueue.Send, true, 'none', true),
  info(RdmapOpcode.SendWithSolicitedEvent, 'Send with SE', false, RdmapQueue.Send, false, 'none', true, true),
  info(
    RdmapOpcode.SendWithSolicitedEventAndInvalidate,
    'Send with SE and Invalidate',
    false,
    RdmapQueue.Send,
    true,
    'none',
    true,
    true,
  ),
  info(RdmapOpcode.Terminate, 'Terminate', false, RdmapQueue.Terminate, false, 'terminate', false),
];

/** Figure 4 row of a defined opcode, or undefined for the reserved 1000b–1111b. */
export function opcodeInfo(opcode: number): OpcodeInfo | undefined {
  return OPCODES[opcode];
}

/** True for the four Send Message Types (§5.3). */
export function isSendOpcode(opcode: number): boolean {
  return opcodeInfo(opcode)?.qn === RdmapQueue.Send;
}

/**
 * RDMA OpCodes RFC 7306 assigns from the range RFC 5040 reserved (RFC 7306 §4.1 table; IANA "RDMAP
 * Message Operation Codes"). Used only on a stream that enabled the extension (`extensions` option).
 */
export const ExtensionOpcode = {
  ImmediateData: 0b1000,
  ImmediateDataWithSolicitedEvent: 0b1001,
  AtomicRequest: 0b1010,
  AtomicResponse: 0b1011,
} as const;
export type ExtensionOpcode = (typeof ExtensionOpcode)[keyof typeof ExtensionOpcode];

/**
 * The untagged queue RFC 7306 adds (IANA "RDMAP DDP Untagged Queue Numbers"): the requester's Atomic
 * Response buffers. Atomic Requests share QN 1 with RDMA Read Requests and their IRD buffers.
 */
export const ATOMIC_RESPONSE_QUEUE = 3;
/** Number of untagged queues a DDP Stream carries once RFC 7306 atomics are enabled. */
export const RDMAP_EXTENDED_QUEUE_COUNT = 4;

/** The RFC 7306 extensions a stream can enable: both ends must agree (RFC 7306 §1.1, §4). */
export type RdmapExtension = 'atomics' | 'immediate';

/** RFC 7306's rows of the RFC 5040 Figure 4 table: every extension message is untagged. */
export interface ExtensionOpcodeInfo {
  readonly opcode: ExtensionOpcode;
  readonly name: string;
  readonly tagged: false;
  readonly qn: number;
  /** The extension a stream must enable to send or accept the message. */
  readonly extension: RdmapExtension;
  /** RDMA header the message carries (its whole DDP payload). */
  readonly rdmaHeader: 'immediate-data' | 'atomic-request' | 'atomic-response';
  /** Length of that header: the message's exact length. */
  readonly headerLength: number;
  readonly solicitedEvent: boolean;
}

const ext = (
  opcode: ExtensionOpcode,
  name: string,
  qn: number,
  extension: RdmapExtension,
  rdmaHeader: ExtensionOpcodeInfo['rdmaHeader'],
  headerLength: number,
  solicitedEvent = false,
): ExtensionOpcodeInfo => ({ opcode, name, tagged: false, qn, extension, rdmaHeader, headerLength, solicitedEvent });

/** RFC 7306 §4.1: the four extension messages, indexed by opcode − 8. */
export const EXTENSION_OPCODES: readonly ExtensionOpcodeInfo[] = [
  ext(ExtensionOpcode.ImmediateData, 'Immediate Data', RdmapQueue.Send, 'immediate', 'immediate-data', 8),
  ext(
    ExtensionOpcode.ImmediateDataWithSolicitedEvent,
    'Immediate Data with SE',
    RdmapQueue.Send,
    'immediate',
    'immediate-data',
    8,
    true,
  ),
  ext(ExtensionOpcode.AtomicRequest, 'Atomic Request', RdmapQueue.ReadRequest, 'atomics', 'atomic-request', 52),
  ext(ExtensionOpcode.AtomicResponse, 'Atomic Response', ATOMIC_RESPONSE_QUEUE, 'atomics', 'atomic-response', 12),
];

/** The RFC 7306 row of an extension opcode (1000b–1011b), or undefined. */
export function extensionOpcodeInfo(opcode: number): ExtensionOpcodeInfo | undefined {
  return opcode >= 8 ? EXTENSION_OPCODES[opcode - 8] : undefined;
}
