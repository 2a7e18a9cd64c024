/**
 * The UDP LLP's wire format (docs/UDP-LLP.md "Wire format"): every datagram starts with a 16-octet header,
 * then a body (a ULPDU for DATA, the setup body for REQUEST/ACCEPT/REJECT, a cookie for COOKIE, cookie and
 * setup body for COOKIE_ECHO, an error code for ABORT), then,
 * when C = 1, a CRC32c of everything before it. All fields are big-endian (network order).
 *
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-------+-------+-+-------------+-------------------------------+
 *  |  Ver  | Type  |C|  Reserved   |           Stream id           |
 *  +-------+-------+-+-------------+-------------------------------+
 *  |                  Destination connection id                    |
 *  +---------------------------------------------------------------+
 *  |                    Source connection id                       |
 *  +---------------------------------------------------------------+
 *  |                     Sequence number                           |
 *  +---------------------------------------------------------------+
 */
import { crc32c } from '@node-rs/crc32';
import { codesByKey } from '@rddp/llp';

export const UDP_LLP_VERSION = 1;
export const HEADER_LENGTH = 16;
export const CRC_LENGTH = 4;
/** Length of the setup body of REQUEST, ACCEPT and REJECT, before the private data. */
export const SETUP_BODY_LENGTH = 12;
/** Stream id of an ABORT that ends every stream of the connection. */
export const ALL_STREAMS = 0xffff;
/** Most LLP streams one connection carries: stream ids 0..0xfffe (0xffff means "all"). */
export const MAX_STREAMS = 0xffff;
/** Largest UDP payload over IPv4 (65535 − 8 UDP − 20 IP). */
export const MAX_DATAGRAM = 65_507;
/** Smallest receive window, in DATA datagrams (the sender waits for it to fall to half). */
export const MIN_WINDOW = 2;
/** Smallest datagram size: header, CRC and a DDP untagged header (18 octets) with a few payload octets. */
export const MIN_DATAGRAM = 64;
/** State cookie (COOKIE, COOKIE_ECHO): 32-bit timestamp and a MAC truncated to 96 bits (as HMAC-SHA-256-96). */
export const COOKIE_TIMESTAMP_LENGTH = 4;
export const COOKIE_MAC_LENGTH = 12;
export const COOKIE_LENGTH = COOKIE_TIMESTAMP_LENGTH + COOKIE_MAC_LENGTH;

/**
 * One datagram type: its Type value, its name in `DatagramType` and in docs/UDP-LLP.md, who sends it and
 * what it answers.
 */
export interface DatagramTypeInfo {
  readonly code: number;
  readonly key: string;
  readonly name: string;
  /** The initiator or the responder of a setup, or either end of a connection. */
  readonly from: 'initiator' | 'responder' | 'either';
  /** The types (`DatagramType` names) it answers; empty when it is sent unasked. */
  readonly answers: readonly string[];
}

const DATAGRAM_TYPE_ROWS = [
  // Asks for a connection (setup body, private data).
  { code: 1, key: 'Request', name: 'REQUEST', from: 'initiator', answers: [] },
  // The connection exists (setup body with the agreed values, private data).
  { code: 2, key: 'Accept', name: 'ACCEPT', from: 'responder', answers: ['CookieEcho'] },
  // The responder's ULP refused (setup body, private data).
  { code: 3, key: 'Reject', name: 'REJECT', from: 'responder', answers: ['CookieEcho'] },
  // One ULPDU on one stream; Sequence number counts this stream's DATA datagrams from 1.
  { code: 4, key: 'Data', name: 'DATA', from: 'either', answers: [] },
  // Receive-window update: Sequence number = highest DATA sequence number the receiver consumed.
  { code: 5, key: 'Ack', name: 'ACK', from: 'either', answers: ['Data', 'Probe'] },
  // Sender blocked on the window asks for an Ack; Sequence number = highest DATA sequence number sent.
  { code: 6, key: 'Probe', name: 'PROBE', from: 'either', answers: [] },
  // Graceful close of one stream (best effort, resent until answered); Sequence number = highest DATA sent.
  { code: 7, key: 'Fin', name: 'FIN', from: 'either', answers: [] },
  // The answer to a FIN, in any state; never answered itself.
  { code: 8, key: 'FinAck', name: 'FIN_ACK', from: 'either', answers: ['Fin'] },
  // Abortive close of one stream, or of all with Stream id 0xffff; body: an `AbortCode`. Sent once, never
  // answered. Unasked (codes 0, 6), or refusing a setup datagram (2–5) or one of no connection known (1).
  {
    code: 9,
    key: 'Abort',
    name: 'ABORT',
    from: 'either',
    answers: ['Request', 'Accept', 'CookieEcho', 'Data', 'Probe', 'Fin', 'Keepalive'],
  },
  // A state cookie (RFC 4960 §5.1.3's INIT ACK). The responder keeps nothing; Source connection id 0.
  { code: 10, key: 'Cookie', name: 'COOKIE', from: 'responder', answers: ['Request'] },
  // The cookie and the REQUEST's setup body again (RFC 4960 §5.1 COOKIE ECHO).
  { code: 11, key: 'CookieEcho', name: 'COOKIE_ECHO', from: 'initiator', answers: ['Cookie'] },
  // Nothing to say: keeps the peer's idle timer from expiring the connection. Never answered.
  { code: 12, key: 'Keepalive', name: 'KEEPALIVE', from: 'either', answers: [] },
] as const satisfies readonly DatagramTypeInfo[];

/** The datagram types (docs/UDP-LLP.md "Wire format"), in Type order from 1. */
export const DATAGRAM_TYPES: readonly DatagramTypeInfo[] = DATAGRAM_TYPE_ROWS;

/** The Type field's values. */
export const DatagramType = codesByKey(DATAGRAM_TYPE_ROWS, 'code');
export type DatagramType = (typeof DatagramType)[keyof typeof DatagramType];

/** The row of a Type value, or undefined for 0 and 13–15. */
export function datagramTypeInfo(type: number): DatagramTypeInfo | undefined {
  return DATAGRAM_TYPES[type - 1];
}

/** One reason code of an ABORT body: its value, its name in `AbortCode`, and the reason it gives. */
export interface AbortCodeInfo {
  readonly code: number;
  readonly key: string;
  readonly reason: string;
}

const ABORT_CODE_ROWS = [
  // The peer's ULP aborted.
  { code: 0, key: 'User', reason: 'user abort' },
  // The datagram named a connection the sender of the ABORT does not know (any more).
  { code: 1, key: 'UnknownConnection', reason: 'unknown connection' },
  // A REQUEST reached a socket that does not accept connections (any more).
  { code: 2, key: 'NotListening', reason: 'not listening' },
  // The peer broke this wire format (bad setup body, bad stream id).
  { code: 3, key: 'Protocol', reason: 'protocol violation' },
  // A COOKIE_ECHO whose cookie is authentic but too old (RFC 4960 §3.3.10.3), or already used by a setup
  // that has ended (cookies are single-use): send REQUEST again.
  { code: 4, key: 'StaleCookie', reason: 'stale cookie' },
  // The listener is at a limit (connections, pending setups, a source's share of either, setups remembered,
  // the process's memory budget): refused, as a TCP RST would be.
  { code: 5, key: 'ResourceLimit', reason: 'resource limit' },
  // The connection heard nothing from its peer for its idle timeout and ended.
  { code: 6, key: 'IdleTimeout', reason: 'idle timeout' },
] as const satisfies readonly AbortCodeInfo[];

/** The reason codes of an ABORT body. */
export const ABORT_CODES: readonly AbortCodeInfo[] = ABORT_CODE_ROWS;

/** Reason codes in an ABORT body. */
export const AbortCode = codesByKey(ABORT_CODE_ROWS, 'code');

/** "ABORT code N: reason", for the errors an ABORT ends something with (an unknown code: its number only). */
export function describeAbortCode(code: number): string {
  const reason = ABORT_CODES.find((c) => c.code === code)?.reason;
  return reason === undefined ? `ABORT code ${code}` : `ABORT code ${code}: ${reason}`;
}

export interface DatagramHeader {
  readonly type: number;
  /** C: a CRC32c trailer follows the body. */
  readonly crc: boolean;
  readonly streamId: number;
  readonly dst: number;
  readonly src: number;
  readonly seq: number;
}

export interface SetupBody {
  /** REQUEST: streams asked for; ACCEPT: streams granted. */
  readonly streams: number;
  /** REQUEST: the initiator's datagram size; ACCEPT: the agreed one (the smaller of both). */
  readonly datagramSize: number;
  /** The sender's receive window: DATA datagrams per stream the peer may have in flight unconsumed. */
  readonly window: number;
  /** REQUEST: the initiator wants CRC32c; ACCEPT: CRC32c is in use (either side wanted it). */
  readonly crc: boolean;
  readonly privateData: Uint8Array;
}

/** A received datagram, parsed: header, body (a view into the datagram) and whether its CRC checked. */
export interface ParsedDatagram {
  readonly header: DatagramHeader;
  readonly body: Uint8Array;
}

export function encodeHeader(h: DatagramHeader): Buffer {
  const b = Buffer.allocUnsafe(HEADER_LENGTH);
  b[0] = (UDP_LLP_VERSION << 4) | (h.type & 0x0f);
  b[1] = h.crc ? 0x80 : 0;
  b.writeUInt16BE(h.streamId, 2);
  b.writeUInt32BE(h.dst >>> 0, 4);
  b.writeUInt32BE(h.src >>> 0, 8);
  b.writeUInt32BE(h.seq >>> 0, 12);
  return b;
}

/** CRC32c over the parts, in order, without joining them; returns the 4-octet trailer. */
export function crcTrailer(parts: readonly Uint8Array[]): Buffer {
  let c = 0;
  for (const p of parts) if (p.byteLength > 0) c = crc32c(p, c);
  const t = Buffer.allocUnsafe(CRC_LENGTH);
  t.writeUInt32BE(c >>> 0, 0);
  return t;
}

/** The datagram as parts: header, body parts, CRC trailer when `h.crc`. Body parts are never copied. */
export function datagramParts(h: DatagramHeader, body: readonly Uint8Array[]): Uint8Array[] {
  const parts: Uint8Array[] = [encodeHeader(h), ...body];
  if (h.crc) parts.push(crcTrailer(parts));
  return parts;
}

export function encodeSetupBody(s: SetupBody): Buffer {
  const b = Buffer.alloc(SETUP_BODY_LENGTH + s.privateData.byteLength);
  b.writeUInt16BE(s.streams, 0);
  b.writeUInt16BE(s.datagramSize, 2);
  b.writeUInt32BE(s.window >>> 0, 4);
  b[8] = s.crc ? 0x80 : 0;
  b.writeUInt16BE(s.privateData.byteLength, 10);
  b.set(s.privateData, SETUP_BODY_LENGTH);
  return b;
}

/** Decodes a setup body; undefined when it is malformed (short, or the private data length disagrees). */
export function decodeSetupBody(body: Uint8Array): SetupBody | undefined {
  if (body.byteLength < SETUP_BODY_LENGTH) return undefined;
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const pdLength = v.getUint16(10);
  if (body.byteLength !== SETUP_BODY_LENGTH + pdLength) return undefined;
  return {
    streams: v.getUint16(0),
    datagramSize: v.getUint16(2),
    window: v.getUint32(4),
    crc: ((body[8] as number) & 0x80) !== 0,
    privateData: Uint8Array.from(body.subarray(SETUP_BODY_LENGTH)),
  };
}

/** COOKIE_ECHO body: the cookie, then the REQUEST's setup body unchanged. */
export function encodeCookieEchoBody(cookie: Uint8Array, setup: Uint8Array): Buffer {
  return Buffer.concat([cookie, setup]);
}

/** Splits a COOKIE_ECHO body; undefined when shorter than a cookie. Views, not copies. */
export function decodeCookieEchoBody(body: Uint8Array): { cookie: Uint8Array; setup: Uint8Array } | undefined {
  if (body.byteLength < COOKIE_LENGTH) return undefined;
  return { cookie: body.subarray(0, COOKIE_LENGTH), setup: body.subarray(COOKIE_LENGTH) };
}

export function encodeAbortBody(code: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code, 0);
  return b;
}

export function decodeAbortBody(body: Uint8Array): number {
  return body.byteLength >= 2 ? ((body[0] as number) << 8) | (body[1] as number) : AbortCode.User;
}

export type ParseResult =
  | { readonly ok: true; readonly datagram: ParsedDatagram }
  | { readonly ok: false; readonly reason: 'short' | 'version' | 'type' | 'crc' };

/**
 * Parses and, when C = 1, checks a datagram. A datagram that fails is dropped by the caller: on this LLP a
 * corrupted datagram is a lost one (the DDPP core draft §3.4 class allows loss), never delivered.
 */
export function parseDatagram(d: Uint8Array): ParseResult {
  if (d.byteLength < HEADER_LENGTH) return { ok: false, reason: 'short' };
  const b0 = d[0] as number;
  if (b0 >> 4 !== UDP_LLP_VERSION) return { ok: false, reason: 'version' };
  const type = b0 & 0x0f;
  if (type < DatagramType.Request || type > DatagramType.Keepalive) return { ok: false, reason: 'type' };
  const crc = ((d[1] as number) & 0x80) !== 0;
  const v = new DataView(d.buffer, d.byteOffset, d.byteLength);
  let end = d.byteLength;
  if (crc) {
    if (end < HEADER_LENGTH + CRC_LENGTH) return { ok: false, reason: 'short' };
    end -= CRC_LENGTH;
    if (crc32c(d.subarray(0, end)) >>> 0 !== v.getUint32(end)) return { ok: false, reason: 'crc' };
  }
  return {
    ok: true,
    datagram: {
      header: { type, crc, streamId: v.getUint16(2), dst: v.getUint32(4), src: v.getUint32(8), seq: v.getUint32(12) },
      body: d.subarray(HEADER_LENGTH, end),
    },
  };
}

/** RFC 1982 serial-number arithmetic on 32-bit sequence numbers: is `a` after `b`? */
export function seqAfter(a: number, b: number): boolean {
  return ((a - b) | 0) > 0;
}
