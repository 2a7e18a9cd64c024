/**
 * RFC 5043 (DDP adaptation for SCTP) wire format, in one place.
 *
 * The full RFC text was not available while this was written. Every constant below is marked either
 * QUOTED (confirmed from a public source: IANA registries as mirrored by Wireshark and others) or
 * READING (our best reading of RFC 5043, to be checked against the RFC text). docs/SCTP.md lists the
 * READING points; correcting one means editing this file only.
 */
import { LlpProtocolError } from '@rddp/llp';

/** QUOTED: SCTP Payload Protocol Identifier 16, "DDP Segment Chunk" (IANA, RFC 5043 §5.2). */
export const PPID_DDP_SEGMENT = 16;
/** QUOTED: SCTP Payload Protocol Identifier 17, "DDP Stream Session Control" (IANA, RFC 5043 §5.2). */
export const PPID_DDP_STREAM_SESSION_CONTROL = 17;

/** QUOTED: Adaptation Layer Indication parameter type (RFC 5061 §4.2.6; Wireshark ADAP_LAYER_INDICATION 0xC006). */
export const ADAPTATION_LAYER_INDICATION_TYPE = 0xc006;
/** QUOTED: the parameter is type(2) length(2) Adaptation Code Point(4): 8 octets (RFC 5061 §4.2.6). */
export const ADAPTATION_LAYER_INDICATION_LENGTH = 8;
/** QUOTED: IANA SCTP Adaptation Code Point 1 = DDP (RFC 5043 §5.1). */
export const ADAPTATION_CODE_POINT_DDP = 1;

/** The Adaptation Layer Indication parameter carried in INIT and INIT ACK (RFC 5043 §5.1, RFC 5061 §4.2.6). */
export function encodeAdaptationLayerIndication(codePoint: number = ADAPTATION_CODE_POINT_DDP): Buffer {
  const b = Buffer.alloc(ADAPTATION_LAYER_INDICATION_LENGTH);
  b.writeUInt16BE(ADAPTATION_LAYER_INDICATION_TYPE, 0);
  b.writeUInt16BE(ADAPTATION_LAYER_INDICATION_LENGTH, 2);
  b.writeUInt32BE(codePoint >>> 0, 4);
  return b;
}

/** Why an INIT or INIT ACK is refused, and the RFC 4960 §3.3.10 error cause the refusing ABORT carries. */
export interface AdaptationRefusal {
  /** "Missing Mandatory Parameter" (§3.3.10.2, naming 0xC006) or "Protocol Violation" (§3.3.10.13). */
  readonly cause: 'missing-mandatory-parameter' | 'protocol-violation';
  readonly text: string;
}

/**
 * READING: an association whose INIT or INIT ACK lacks the Adaptation Layer Indication with the DDP code
 * point is refused (the "an association without it refused"), by an ABORT carrying "Missing
 * Mandatory Parameter" naming 0xC006 when the parameter is absent, or "Protocol Violation" when it
 * announces another code point. Returns null for an acceptable code point.
 */
export function adaptationRefusal(codePoint: number | null, chunk: 'INIT' | 'INIT ACK'): AdaptationRefusal | null {
  if (codePoint === ADAPTATION_CODE_POINT_DDP) return null;
  if (codePoint === null) {
    return {
      cause: 'missing-mandatory-parameter',
      text: `${chunk} without the Adaptation Layer Indication for DDP (RFC 5043 §5.1)`,
    };
  }
  return {
    cause: 'protocol-violation',
    text: `${chunk} announces adaptation code point ${codePoint}, not DDP (${ADAPTATION_CODE_POINT_DDP}) (RFC 5043 §5.1)`,
  };
}

/**
 * READING: DDP Stream Session Control function codes (RFC 5043 §5.2.2). The four functions are named by
 * the RFC; their numeric values 1..4 are our reading.
 */
export const SessionFunction = {
  Initiate: 1,
  Accept: 2,
  Reject: 3,
  Terminate: 4,
} as const;
export type SessionFunction = (typeof SessionFunction)[keyof typeof SessionFunction];

const FUNCTION_NAMES: Readonly<Record<number, string>> = {
  1: 'Session Initiate',
  2: 'Session Accept',
  3: 'Session Reject',
  4: 'Session Terminate',
};

/** The name of a session control function, for messages and logs. */
export function sessionFunctionName(fn: number): string {
  return FUNCTION_NAMES[fn] ?? `function 0x${fn.toString(16)}`;
}

/**
 * READING: a DDP Stream Session Control message (the whole SCTP user message, PPID 17) is
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |         Function Code         |      Private Data Length      |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |                 ULP Private Data (PDLength octets)            |
 *
 * with the length equal to the octets that follow (checked on receipt).
 */
export const SESSION_CONTROL_HEADER_LENGTH = 4;
/** The most private data the 16-bit Private Data Length can describe. */
export const SESSION_CONTROL_MAX_PRIVATE_DATA = 0xffff;

/**
 * READING: which SCTP stream carries which session control message. Initiate, Accept and Reject set up the
 * session of every DDP Stream of the association at once and travel on SCTP stream 0; Terminate ends one
 * DDP Stream and travels on that DDP Stream's own SCTP stream, after the data sent on it (ordered delivery).
 */
export const SESSION_SETUP_STREAM = 0;

/** READING: DDP Stream k is SCTP stream k of the association (RFC 5043 §4: one DDP Stream per SCTP stream). */
export function sctpStreamOf(ddpStream: number): number {
  return ddpStream;
}

/**
 * READING: DDP Segments and session control messages travel as ordered SCTP user messages (DATA U bit
 * clear, RFC 4960 §3.3.1). This LLP declares itself ordered to DDP (RFC 5041 §3), and the sctp package
 * cannot mix ordered and unordered messages on one stream (docs/SCTP.md, defect "ordering"), so a DATA
 * chunk with the U bit set is refused: ABORT with a Protocol Violation cause.
 */
export const UNORDERED_DATA_ACCEPTED = false;

export interface SessionControlMessage {
  readonly fn: SessionFunction;
  readonly privateData: Uint8Array;
}

export function encodeSessionControl(fn: SessionFunction, privateData: Uint8Array = new Uint8Array(0)): Buffer {
  if (privateData.byteLength > SESSION_CONTROL_MAX_PRIVATE_DATA) {
    throw new RangeError(
      `private data of ${privateData.byteLength} octets exceeds ${SESSION_CONTROL_MAX_PRIVATE_DATA}`,
    );
  }
  const b = Buffer.alloc(SESSION_CONTROL_HEADER_LENGTH + privateData.byteLength);
  b.writeUInt16BE(fn, 0);
  b.writeUInt16BE(privateData.byteLength, 2);
  b.set(privateData, SESSION_CONTROL_HEADER_LENGTH);
  return b;
}

/** Decodes a PPID 17 message; throws `LlpProtocolError` on a short message, a length mismatch or an unknown function. */
export function decodeSessionControl(message: Uint8Array): SessionControlMessage {
  if (message.byteLength < SESSION_CONTROL_HEADER_LENGTH) {
    throw new LlpProtocolError(
      `DDP Stream Session Control message of ${message.byteLength} octets is shorter than its ${SESSION_CONTROL_HEADER_LENGTH}-octet header (RFC 5043 §5.2.2)`,
    );
  }
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
  const fn = view.getUint16(0);
  const pdLength = view.getUint16(2);
  if (FUNCTION_NAMES[fn] === undefined) {
    throw new LlpProtocolError(`unknown DDP Stream Session Control function code ${fn} (RFC 5043 §5.2.2)`);
  }
  if (pdLength !== message.byteLength - SESSION_CONTROL_HEADER_LENGTH) {
    throw new LlpProtocolError(
      `${sessionFunctionName(fn)} says ${pdLength} octets of private data but carries ${message.byteLength - SESSION_CONTROL_HEADER_LENGTH} (RFC 5043 §5.2.2)`,
    );
  }
  const privateData = new Uint8Array(pdLength);
  privateData.set(message.subarray(SESSION_CONTROL_HEADER_LENGTH));
  return { fn: fn as SessionFunction, privateData };
}
