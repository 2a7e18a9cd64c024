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

export const DatagramType = {
  /** Initiator → listener: asks for a connection (setup body, private data). */
  Request: 1,
  /** Responder → initiator: the connection exists (setup body with the agreed values, private data). */
  Accept: 2,
  /** Responder → initiator: the responder's ULP refused (setup body, private data). */
  Reject: 3,
  /** One ULPDU on one stream; Sequence number counts this stream's DATA datagrams from 1. */
  Data: 4,
  /** Receive-window update: Sequence number = highest DATA sequence number the receiver consumed. */
  Ack: 5,
  /** Sender blocked on the window asks for an Ack; Sequence number = highest DATA sequence number sent. */
  Probe: 6,
  /** Graceful close of one stream (best effort, resent until answered); Sequence number = highest DATA sent. */
  Fin: 7,
  /** The answer to a FIN, in any state; never answered itself. */
  FinAck: 8,
  /** Abortive close of one stream, or of all with Stream id 0xffff; body: a 16-bit reason code. Sent once. */
  Abort: 9,
  /**
   * Responder → initiator, the answer to a REQUEST: a state cookie (RFC 4960 §5.1.3's INIT ACK). The
   * responder keeps nothing; Source connection id 0.
   */
  Cookie: 10,
  /** Initiator → listener: the cookie and the REQUEST's setup body again (RFC 4960 §5.1 COOKIE ECHO). */
  CookieEcho: 11,
  /** Nothing to say: keeps the peer's idle timer from expiring the connection. Never answered. */
  Keepalive: 12,
} as const;
export type DatagramType = (typeof DatagramType)[keyof typeof DatagramType];

/** Reason codes in an ABORT body. */
export const AbortCode = {
  /** The peer's ULP aborted. */
  User: 0,
  /** The datagram named a connection the sender of the ABORT does not know (any more). */
  UnknownConnection: 1,
  /** A REQUEST reached a socket that does not accept connections (any more). */
  NotListening: 2,
  /** The peer broke this wire format (bad setup body, bad stream id). */
  Protocol: 3,
  /** A COOKIE_ECHO whose cookie is authentic but too old (RFC 4960 §3.3.10.3): send REQUEST again. */
  StaleCookie: 4,
  /** The listener is at a limit (connections, pending setups): refused, as a TCP RST would be. */
  ResourceLimit: 5,
  /** The connection heard nothing from its peer for its idle timeout and ended. */
  IdleTimeout: 6,
} as const;

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
