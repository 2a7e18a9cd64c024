/**
 * SCTP packet inspection below the sctp package (RFC 4960 §3), and the Adaptation Layer Indication shim:
 * the package parses parameter 0xC006 but has no way to send it, so every INIT and INIT ACK it emits is
 * extended here with the DDP code point, and every INIT and INIT ACK it receives is checked for it
 * (RFC 5043 §5.1, RFC 5061 §4.2.6).
 */
import { signSctpPacket } from './crc32c.js';
import {
  ADAPTATION_CODE_POINT_DDP,
  ADAPTATION_LAYER_INDICATION_LENGTH,
  ADAPTATION_LAYER_INDICATION_TYPE,
  encodeAdaptationLayerIndication,
} from './rfc5043.js';

/** RFC 4960 §3.2 chunk types used here. */
export const ChunkType = {
  DATA: 0,
  INIT: 1,
  INIT_ACK: 2,
  SACK: 3,
  ABORT: 6,
  SHUTDOWN: 7,
  SHUTDOWN_ACK: 8,
  ERROR: 9,
  COOKIE_ECHO: 10,
  SHUTDOWN_COMPLETE: 14,
} as const;

/** RFC 4960 §3.3.10 error cause codes used here. */
export const CauseCode = {
  INVALID_STREAM_IDENTIFIER: 1,
  MISSING_MANDATORY_PARAMETER: 2,
  PROTOCOL_VIOLATION: 13,
} as const;

export const COMMON_HEADER_LENGTH = 12;
/** INIT and INIT ACK: chunk header (4) + fixed part (16) before the optional parameters (RFC 4960 §3.3.2). */
const INIT_FIXED_LENGTH = 20;

export interface CommonHeader {
  readonly srcPort: number;
  readonly dstPort: number;
  readonly vTag: number;
}

export function commonHeader(packet: Uint8Array): CommonHeader | undefined {
  if (packet.byteLength < COMMON_HEADER_LENGTH) return undefined;
  const v = view(packet);
  return { srcPort: v.getUint16(0), dstPort: v.getUint16(2), vTag: v.getUint32(4) };
}

export interface ChunkInfo {
  readonly type: number;
  readonly flags: number;
  /** Chunk Length field: header and value, without trailing padding. */
  readonly length: number;
  /** Offset of the chunk in the packet. */
  readonly offset: number;
}

/** The chunks of a packet, stopping at the first malformed one. */
export function chunks(packet: Uint8Array): ChunkInfo[] {
  const out: ChunkInfo[] = [];
  const v = view(packet);
  let off = COMMON_HEADER_LENGTH;
  while (off + 4 <= packet.byteLength) {
    const length = v.getUint16(off + 2);
    if (length < 4 || off + length > packet.byteLength) break;
    out.push({ type: v.getUint8(off), flags: v.getUint8(off + 1), length, offset: off });
    off += pad4(length);
  }
  return out;
}

/** A chunk's value: what follows its 4-octet header, without padding (RFC 4960 §3.2). */
export function chunkValue(packet: Buffer, chunk: ChunkInfo): Buffer {
  return packet.subarray(chunk.offset + 4, chunk.offset + chunk.length);
}

/** A DATA chunk's header fields (RFC 4960 §3.3.1). */
export interface DataChunkInfo {
  readonly tsn: number;
  readonly streamId: number;
  readonly ssn: number;
  readonly ppid: number;
  readonly unordered: boolean;
  readonly beginning: boolean;
  readonly ending: boolean;
  readonly userDataLength: number;
}

export function dataChunks(packet: Uint8Array): DataChunkInfo[] {
  const v = view(packet);
  return chunks(packet)
    .filter((c) => c.type === ChunkType.DATA && c.length >= 16)
    .map((c) => ({
      tsn: v.getUint32(c.offset + 4),
      streamId: v.getUint16(c.offset + 8),
      ssn: v.getUint16(c.offset + 10),
      ppid: v.getUint32(c.offset + 12),
      unordered: (c.flags & 0x04) !== 0,
      beginning: (c.flags & 0x02) !== 0,
      ending: (c.flags & 0x01) !== 0,
      userDataLength: c.length - 16,
    }));
}

/** Whether the packet holds a DATA chunk with the U (unordered) bit set (RFC 4960 §3.3.1). */
export function hasUnorderedData(packet: Uint8Array): boolean {
  // Runs on every inbound packet: walks the chunk headers without allocating.
  let off = COMMON_HEADER_LENGTH;
  while (off + 4 <= packet.byteLength) {
    const length = ((packet[off + 2] as number) << 8) | (packet[off + 3] as number);
    if (length < 4) return false;
    if (packet[off] === ChunkType.DATA && ((packet[off + 1] as number) & 0x04) !== 0) return true;
    off += pad4(length);
  }
  return false;
}

/** The first chunk when it is an INIT or INIT ACK (which are never bundled, RFC 4960 §6.10). */
export function initChunk(packet: Uint8Array): ChunkInfo | undefined {
  const first = chunks(packet)[0];
  if (!first || (first.type !== ChunkType.INIT && first.type !== ChunkType.INIT_ACK)) return undefined;
  if (first.length < INIT_FIXED_LENGTH) return undefined;
  return first;
}

/** The Number of Outbound Streams (OS) of an INIT or INIT ACK (RFC 4960 §3.3.2). */
export function outboundStreams(packet: Uint8Array, chunk: ChunkInfo): number {
  return view(packet).getUint16(chunk.offset + 12);
}

/** The Initiate Tag of an INIT or INIT ACK (RFC 4960 §3.3.2). */
export function initiateTag(packet: Uint8Array, chunk: ChunkInfo): number {
  return view(packet).getUint32(chunk.offset + 4);
}

/**
 * The Adaptation Code Point of an INIT or INIT ACK: `null` when the parameter is absent.
 * A malformed parameter (length other than 8) reads as absent.
 */
export function adaptationCodePoint(packet: Uint8Array, chunk: ChunkInfo): number | null {
  const v = view(packet);
  const end = chunk.offset + chunk.length;
  let off = chunk.offset + INIT_FIXED_LENGTH;
  while (off + 4 <= end) {
    const type = v.getUint16(off);
    const length = v.getUint16(off + 2);
    if (length < 4 || off + length > end) return null;
    if (type === ADAPTATION_LAYER_INDICATION_TYPE) {
      return length === ADAPTATION_LAYER_INDICATION_LENGTH ? v.getUint32(off + 4) : null;
    }
    off += pad4(length);
  }
  return null;
}

/**
 * The packet with an Adaptation Layer Indication appended to its INIT or INIT ACK, re-signed. Returns the
 * packet unchanged when it is neither, or when the chunk already carries the parameter.
 */
export function withAdaptationIndication(packet: Buffer, codePoint: number = ADAPTATION_CODE_POINT_DDP): Buffer {
  const chunk = initChunk(packet);
  if (!chunk || adaptationCodePoint(packet, chunk) !== null) return packet;
  const padded = pad4(chunk.length);
  const param = encodeAdaptationLayerIndication(codePoint);
  const out = Buffer.alloc(chunk.offset + padded + param.byteLength);
  packet.copy(out, 0, 0, chunk.offset + chunk.length);
  param.copy(out, chunk.offset + padded);
  out.writeUInt16BE(padded + param.byteLength, chunk.offset + 2);
  return signSctpPacket(out);
}

/** An error cause TLV (RFC 4960 §3.3.10), padded. */
function cause(code: number, body: Uint8Array): Buffer {
  const b = Buffer.alloc(pad4(4 + body.byteLength));
  b.writeUInt16BE(code, 0);
  b.writeUInt16BE(4 + body.byteLength, 2);
  b.set(body, 4);
  return b;
}

/** "Missing Mandatory Parameter" (RFC 4960 §3.3.10.2) naming the given parameter types. */
export function missingMandatoryParameterCause(types: readonly number[]): Buffer {
  const body = Buffer.alloc(4 + 2 * types.length);
  body.writeUInt32BE(types.length, 0);
  for (let i = 0; i < types.length; i++) body.writeUInt16BE(types[i] as number, 4 + 2 * i);
  return cause(CauseCode.MISSING_MANDATORY_PARAMETER, body);
}

/** "Protocol Violation" (RFC 4960 §3.3.10.13) with a text. */
export function protocolViolationCause(text: string): Buffer {
  return cause(CauseCode.PROTOCOL_VIOLATION, Buffer.from(text, 'utf8'));
}

/**
 * A signed packet holding one ABORT chunk (RFC 4960 §3.3.7). `reflected` sets the T bit (the Verification
 * Tag is the receiver's own, §8.4/§8.5.1); an ABORT answering an INIT carries the INIT's Initiate Tag with T=0.
 */
export function abortPacket(h: CommonHeader, reflected: boolean, causes: readonly Buffer[] = []): Buffer {
  const body = Buffer.concat(causes as Buffer[]);
  const out = Buffer.alloc(COMMON_HEADER_LENGTH + 4 + body.byteLength);
  out.writeUInt16BE(h.srcPort, 0);
  out.writeUInt16BE(h.dstPort, 2);
  out.writeUInt32BE(h.vTag >>> 0, 4);
  out.writeUInt8(ChunkType.ABORT, 12);
  out.writeUInt8(reflected ? 1 : 0, 13);
  out.writeUInt16BE(4 + body.byteLength, 14);
  body.copy(out, 16);
  return signSctpPacket(out);
}

/**
 * A signed packet holding one SHUTDOWN COMPLETE with the T bit set, answering an out-of-the-blue SHUTDOWN
 * ACK: the Verification Tag is the one that packet carried, reflected (RFC 4960 §8.4 (5)).
 */
export function shutdownCompletePacket(h: CommonHeader): Buffer {
  const out = Buffer.alloc(COMMON_HEADER_LENGTH + 4);
  out.writeUInt16BE(h.srcPort, 0);
  out.writeUInt16BE(h.dstPort, 2);
  out.writeUInt32BE(h.vTag >>> 0, 4);
  out.writeUInt8(ChunkType.SHUTDOWN_COMPLETE, 12);
  out.writeUInt8(1, 13);
  out.writeUInt16BE(4, 14);
  return signSctpPacket(out);
}

/** The error causes of an ABORT or ERROR chunk, as (code, body) pairs. */
export function errorCauses(packet: Uint8Array, chunk: ChunkInfo): { code: number; body: Uint8Array }[] {
  const v = view(packet);
  const out: { code: number; body: Uint8Array }[] = [];
  const end = chunk.offset + chunk.length;
  let off = chunk.offset + 4;
  while (off + 4 <= end) {
    const code = v.getUint16(off);
    const length = v.getUint16(off + 2);
    if (length < 4 || off + length > end) break;
    out.push({ code, body: packet.subarray(off + 4, off + length) });
    off += pad4(length);
  }
  return out;
}

function pad4(n: number): number {
  return (n + 3) & ~3;
}

function view(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}
