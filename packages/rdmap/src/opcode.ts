/**
 * RDMA Message opcodes and their use of DDP fields (RFC 5040 §4.1 Figure 4, §4.2 Figure 5), the three
 * untagged queues (§3.1) and the RDMAP Version per profile (§4.1 bits 24–25).
 */
import type { DdpProfile } from '@rddp/ddp';
import { codesByKey } from '@rddp/llp';

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

/**
 * The untagged queue RFC 7306 adds (IANA "RDMAP DDP Untagged Queue Numbers"): the requester's Atomic
 * Response buffers. Atomic Requests share QN 1 with RDMA Read Requests and their IRD buffers.
 */
export const ATOMIC_RESPONSE_QUEUE = 3;
/** Number of untagged queues a DDP Stream carries once RFC 7306 atomics are enabled. */
export const RDMAP_EXTENDED_QUEUE_COUNT = 4;

/** The RFC 7306 extensions a stream can enable: both ends must agree (RFC 7306 §1.1, §4). */
export type RdmapExtension = 'atomics' | 'immediate';

/** The receive handler RDMAP runs for a message of an opcode once DDP Delivers (or, for Writes, places) it. */
export type RdmapReceiveHandler =
  | 'write'
  | 'read-request'
  | 'read-response'
  | 'send'
  | 'terminate'
  | 'immediate-data'
  | 'atomic-request'
  | 'atomic-response';

/**
 * One row of RDMAP's opcode table: what RFC 5040 Figure 4 and Figure 5 (and RFC 7306 §4.1 for opcodes
 * 1000b–1011b) say about the opcode, the DDP model its messages use, and the receive handler that takes
 * them — as Linux siw's `iwarp_pktinfo[]`. Adding an opcode is adding a row.
 */
export interface OpcodeInfo {
  readonly opcode: number;
  /** The opcode's name in `RdmapOpcode` (RFC 5040) or `ExtensionOpcode` (RFC 7306). */
  readonly key: string;
  /** The message type's name in the RFCs' words. */
  readonly name: string;
  /** DDP Tagged flag (Figure 4): the tagged or the untagged buffer model. */
  readonly tagged: boolean;
  /** Queue Number for untagged messages (Figure 4); undefined for tagged ones. */
  readonly qn: number | undefined;
  /** Whether the Invalidate STag field is valid (Figure 4). */
  readonly invalidateStag: boolean;
  /** RDMA header carried after the DDP header (Figure 5; RFC 7306's headers are the whole payload). */
  readonly rdmaHeader: 'none' | 'read-request' | 'terminate' | 'immediate-data' | 'atomic-request' | 'atomic-response';
  /** For RFC 7306 messages: the exact length of the message (its header). */
  readonly headerLength: number | undefined;
  /** Whether a ULP Message may be carried (Figure 5). */
  readonly ulpPayload: boolean;
  /** Send types and Immediate Data that ask for a Solicited Event (§5.3, RFC 7306). */
  readonly solicitedEvent: boolean;
  /** RFC 7306: the extension a stream must enable to send or accept the message; undefined for RFC 5040's. */
  readonly extension: RdmapExtension | undefined;
  readonly receive: RdmapReceiveHandler;
}

/** An RFC 7306 row: untagged, with an extension and an exact length. */
export type ExtensionOpcodeInfo = OpcodeInfo & {
  readonly opcode: ExtensionOpcode;
  readonly tagged: false;
  readonly qn: number;
  readonly extension: RdmapExtension;
  readonly headerLength: number;
};

const row = <const C extends number, const K extends string>(
  opcode: C,
  key: K,
  name: string,
  ddp: 'tagged' | 'untagged',
  qn: number | undefined,
  rdmaHeader: OpcodeInfo['rdmaHeader'],
  receive: RdmapReceiveHandler,
  more: Partial<
    Pick<OpcodeInfo, 'invalidateStag' | 'ulpPayload' | 'solicitedEvent' | 'extension' | 'headerLength'>
  > = {},
): OpcodeInfo & { readonly opcode: C; readonly key: K } => ({
  opcode,
  key,
  name,
  tagged: ddp === 'tagged',
  qn,
  invalidateStag: more.invalidateStag ?? false,
  rdmaHeader,
  headerLength: more.headerLength,
  ulpPayload: more.ulpPayload ?? false,
  solicitedEvent: more.solicitedEvent ?? false,
  extension: more.extension,
  receive,
});

const Q = RdmapQueue;
const send = { ulpPayload: true } as const;
/** RFC 5040 Figure 4 / Figure 5, indexed by opcode. */
const RFC5040_ROWS = [
  row(0b0000, 'RdmaWrite', 'RDMA Write', 'tagged', undefined, 'none', 'write', send),
  row(0b0001, 'RdmaReadRequest', 'RDMA Read Request', 'untagged', Q.ReadRequest, 'read-request', 'read-request'),
  row(0b0010, 'RdmaReadResponse', 'RDMA Read Response', 'tagged', undefined, 'none', 'read-response', send),
  row(0b0011, 'Send', 'Send', 'untagged', Q.Send, 'none', 'send', send),
  row(0b0100, 'SendWithInvalidate', 'Send with Invalidate', 'untagged', Q.Send, 'none', 'send', {
    ...send,
    invalidateStag: true,
  }),
  row(0b0101, 'SendWithSolicitedEvent', 'Send with SE', 'untagged', Q.Send, 'none', 'send', {
    ...send,
    solicitedEvent: true,
  }),
  row(
    0b0110,
    'SendWithSolicitedEventAndInvalidate',
    'Send with SE and Invalidate',
    'untagged',
    Q.Send,
    'none',
    'send',
    {
      ...send,
      invalidateStag: true,
      solicitedEvent: true,
    },
  ),
  row(0b0111, 'Terminate', 'Terminate', 'untagged', Q.Terminate, 'terminate', 'terminate'),
] as const;
/** RFC 7306 §4.1, from opcode 1000b on. */
const RFC7306_ROWS = [
  row(0b1000, 'ImmediateData', 'Immediate Data', 'untagged', Q.Send, 'immediate-data', 'immediate-data', {
    extension: 'immediate',
    headerLength: 8,
  }),
  row(
    0b1001,
    'ImmediateDataWithSolicitedEvent',
    'Immediate Data with SE',
    'untagged',
    Q.Send,
    'immediate-data',
    'immediate-data',
    { extension: 'immediate', headerLength: 8, solicitedEvent: true },
  ),
  row(0b1010, 'AtomicRequest', 'Atomic Request', 'untagged', Q.ReadRequest, 'atomic-request', 'atomic-request', {
    extension: 'atomics',
    headerLength: 52,
  }),
  row(
    0b1011,
    'AtomicResponse',
    'Atomic Response',
    'untagged',
    ATOMIC_RESPONSE_QUEUE,
    'atomic-response',
    'atomic-response',
    { extension: 'atomics', headerLength: 12 },
  ),
] as const;

/** RDMA OpCode, 4 bits (RFC 5040 §4.1 Figure 4). 1000b–1111b are reserved. */
export const RdmapOpcode = codesByKey(RFC5040_ROWS, 'opcode');
export type RdmapOpcode = (typeof RdmapOpcode)[keyof typeof RdmapOpcode];

/**
 * RDMA OpCodes RFC 7306 assigns from the range RFC 5040 reserved (RFC 7306 §4.1 table; IANA "RDMAP
 * Message Operation Codes"). Used only on a stream that enabled the extension (`extensions` option).
 */
export const ExtensionOpcode = codesByKey(RFC7306_ROWS, 'opcode');
export type ExtensionOpcode = (typeof ExtensionOpcode)[keyof typeof ExtensionOpcode];

/** RFC 5040 Figure 4 / Figure 5 and RFC 7306 §4.1, indexed by opcode (1100b–1111b are reserved). */
export const RDMAP_OPCODES: readonly OpcodeInfo[] = [...RFC5040_ROWS, ...RFC7306_ROWS];
/** RFC 5040's rows (opcodes 0000b–0111b). */
export const OPCODES: readonly OpcodeInfo[] = RFC5040_ROWS;
/** RFC 7306's rows (opcodes 1000b–1011b). */
export const EXTENSION_OPCODES = RFC7306_ROWS as readonly ExtensionOpcodeInfo[];

/** The RFC 5040 row of a defined opcode, or undefined for 1000b–1111b. */
export function opcodeInfo(opcode: number): OpcodeInfo | undefined {
  return opcode < 8 ? RDMAP_OPCODES[opcode] : undefined;
}

/** The RFC 7306 row of an extension opcode (1000b–1011b), or undefined. */
export function extensionOpcodeInfo(opcode: number): ExtensionOpcodeInfo | undefined {
  return opcode >= 8 ? (RDMAP_OPCODES[opcode] as ExtensionOpcodeInfo | undefined) : undefined;
}

/** The row of the opcode in a segment's RDMAP Control Field (§4.1: its low four bits), or undefined. */
export function opcodeRowOf(control: number): OpcodeInfo | undefined {
  return RDMAP_OPCODES[control & 0x0f];
}

/** True for the four Send Message Types (§5.3). */
export function isSendOpcode(opcode: number): boolean {
  return opcodeInfo(opcode)?.receive === 'send';
}
