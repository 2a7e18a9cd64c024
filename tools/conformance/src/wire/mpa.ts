/**
 * MPA Request and Reply frames (RFC 5044 §7.1) with RFC 6581's enhanced connection setup (Rev 2:
 * IRD/ORD, the peer-to-peer bit and the RTR types in the first 4 octets of Private Data).
 *
 *   Key (16) | M C R Res(5) | Rev (8) | PD_Length (16) | Private Data (PD_Length ≤ 512)
 */
import {
  MPA_FLAG_C,
  MPA_FLAG_ENHANCED,
  MPA_FLAG_M,
  MPA_FLAG_R,
  MPA_FLAG_RES,
  MPA_FRAME_HEADER_LENGTH,
  MPA_KEY_LENGTH,
  MPA_MAX_PRIVATE_DATA,
  MPA_REPLY_KEY,
  MPA_REQUEST_KEY,
  MPA_V2_IRD_ORD_MASK,
  MPA_V2_PEER_TO_PEER,
  MPA_V2_ZERO_LENGTH_READ_RTR,
  MPA_V2_ZERO_LENGTH_SEND_RTR,
  MPA_V2_ZERO_LENGTH_WRITE_RTR,
} from './constants.js';
import { note, reject, type Violation, warn } from './violation.js';

/** RFC 6581 §5 enhanced connection data. */
export interface EnhancedSetup {
  /** P: the sender follows the peer-to-peer model (an RTR message opens the connection). */
  readonly peerToPeer: boolean;
  /** Inbound / Outbound RDMA Read Queue Depth, 14 bits (0x3FFF: no limit given). */
  readonly ird: number;
  readonly ord: number;
  /** RTR message types the sender offers (Request) or chose (Reply). */
  readonly sendRtr: boolean;
  readonly writeRtr: boolean;
  readonly readRtr: boolean;
}

export interface MpaFrameFields {
  /** M: the sender wants Markers in the FPDUs it receives. */
  readonly markers: boolean;
  /** C: CRCs in FPDUs. */
  readonly crc: boolean;
  /** R: the Reply rejects the connection (zero on Requests). */
  readonly reject?: boolean;
  /** Res: 5 reserved bits (zero; set only to plant a fault). */
  readonly res?: number;
  /** Rev: 1 for RFC 5044, 2 for RFC 6581; 0 is the RDMA Consortium's MPA. */
  readonly rev: number;
  /** RFC 6581 data, written before `privateData` (Rev 2 frames carry it). */
  readonly enhanced?: EnhancedSetup;
  readonly privateData?: Uint8Array;
  /** Override PD_Length (to plant a fault); default: the Private Data's real length. */
  readonly pdLength?: number;
  /** Override the key (to plant a fault). */
  readonly key?: string;
}

export interface MpaFrame {
  readonly kind: 'request' | 'reply' | 'unknown';
  readonly key: string;
  readonly markers: boolean;
  readonly crc: boolean;
  readonly reject: boolean;
  readonly res: number;
  readonly rev: number;
  readonly pdLength: number;
  /** Whole Private Data (including the RFC 6581 words when present). */
  readonly privateData: Uint8Array;
  /** RFC 6581 data of a Rev 2 frame. */
  readonly enhanced?: EnhancedSetup;
  /** Private Data after the RFC 6581 words. */
  readonly ulpData: Uint8Array;
  /** Octets the frame occupies. */
  readonly length: number;
  readonly violations: readonly Violation[];
}

export type MpaDecodeResult =
  | { readonly status: 'ok'; readonly frame: MpaFrame }
  | { readonly status: 'need-more'; readonly needed: number }
  | { readonly status: 'error'; readonly violation: Violation };

export function encodeEnhancedSetup(e: EnhancedSetup): Uint8Array {
  for (const [n, v] of [
    ['IRD', e.ird],
    ['ORD', e.ord],
  ] as const)
    if (!Number.isInteger(v) || v < 0 || v > MPA_V2_IRD_ORD_MASK) throw new RangeError(`${n} is 14 bits, got ${v}`);
  const ird = e.ird | (e.peerToPeer ? MPA_V2_PEER_TO_PEER : 0) | (e.sendRtr ? MPA_V2_ZERO_LENGTH_SEND_RTR : 0);
  const ord = e.ord | (e.writeRtr ? MPA_V2_ZERO_LENGTH_WRITE_RTR : 0) | (e.readRtr ? MPA_V2_ZERO_LENGTH_READ_RTR : 0);
  return Uint8Array.of(ird >>> 8, ird & 0xff, ord >>> 8, ord & 0xff);
}

export function decodeEnhancedSetup(b: Uint8Array): EnhancedSetup {
  const ird = ((b[0] as number) << 8) | (b[1] as number);
  const ord = ((b[2] as number) << 8) | (b[3] as number);
  return {
    peerToPeer: (ird & MPA_V2_PEER_TO_PEER) !== 0,
    sendRtr: (ird & MPA_V2_ZERO_LENGTH_SEND_RTR) !== 0,
    ird: ird & MPA_V2_IRD_ORD_MASK,
    writeRtr: (ord & MPA_V2_ZERO_LENGTH_WRITE_RTR) !== 0,
    readRtr: (ord & MPA_V2_ZERO_LENGTH_READ_RTR) !== 0,
    ord: ord & MPA_V2_IRD_ORD_MASK,
  };
}

function encodeFrame(defaultKey: string, f: MpaFrameFields): Uint8Array {
  const key = f.key ?? defaultKey;
  const enhanced = f.enhanced ? encodeEnhancedSetup(f.enhanced) : new Uint8Array(0);
  const pd = f.privateData ?? new Uint8Array(0);
  const pdLen = enhanced.byteLength + pd.byteLength;
  const out = new Uint8Array(MPA_FRAME_HEADER_LENGTH + pdLen);
  for (let i = 0; i < MPA_KEY_LENGTH; i++) out[i] = key.charCodeAt(i) & 0xff;
  out[16] =
    (f.markers ? MPA_FLAG_M : 0) |
    (f.crc ? MPA_FLAG_C : 0) |
    (f.reject ? MPA_FLAG_R : 0) |
    ((f.res ?? 0) & MPA_FLAG_RES);
  out[17] = f.rev & 0xff;
  const wireLen = f.pdLength ?? pdLen;
  out[18] = (wireLen >>> 8) & 0xff;
  out[19] = wireLen & 0xff;
  out.set(enhanced, 20);
  out.set(pd, 20 + enhanced.byteLength);
  return out;
}

/** An MPA Request frame (RFC 5044 §7.1). */
export function encodeMpaRequest(fields: MpaFrameFields): Uint8Array {
  return encodeFrame(MPA_REQUEST_KEY, fields);
}

/** An MPA Reply frame (RFC 5044 §7.1). */
export function encodeMpaReply(fields: MpaFrameFields): Uint8Array {
  return encodeFrame(MPA_REPLY_KEY, fields);
}

/**
 * Decodes the MPA frame at the start of `bytes`. 'need-more' until the whole frame is there; 'error' when
 * the octets cannot be an MPA frame (wrong key, PD_Length over 512: RFC 5044 §7.1), so a reader never
 * waits for more than 532 octets.
 */
export function decodeMpaFrame(bytes: Uint8Array, expect?: 'request' | 'reply'): MpaDecodeResult {
  const keyLen = Math.min(bytes.byteLength, MPA_KEY_LENGTH);
  let key = '';
  for (let i = 0; i < keyLen; i++) key += String.fromCharCode(bytes[i] as number);
  const kind: MpaFrame['kind'] = key === MPA_REQUEST_KEY ? 'request' : key === MPA_REPLY_KEY ? 'reply' : 'unknown';
  if (kind === 'unknown') {
    const prefixOk =
      keyLen < MPA_KEY_LENGTH &&
      ((expect !== 'reply' && MPA_REQUEST_KEY.startsWith(key)) ||
        (expect !== 'request' && MPA_REPLY_KEY.startsWith(key)));
    if (prefixOk) return { status: 'need-more', needed: MPA_FRAME_HEADER_LENGTH };
    return {
      status: 'error',
      violation: reject(
        'mpa-key',
        'RFC 5044 §7.1',
        `not an MPA ${expect ?? 'Request/Reply'} key: ${JSON.stringify(key)}`,
      ),
    };
  }
  if (expect && kind !== expect)
    return {
      status: 'error',
      violation: reject('mpa-key', 'RFC 5044 §7.1', `an MPA ${kind} frame where an MPA ${expect} was due`),
    };
  if (bytes.byteLength < MPA_FRAME_HEADER_LENGTH) return { status: 'need-more', needed: MPA_FRAME_HEADER_LENGTH };
  const flags = bytes[16] as number;
  const rev = bytes[17] as number;
  const pdLength = ((bytes[18] as number) << 8) | (bytes[19] as number);
  if (pdLength > MPA_MAX_PRIVATE_DATA)
    return {
      status: 'error',
      violation: reject('mpa-pd-length', 'RFC 5044 §7.1', `PD_Length ${pdLength} exceeds 512`),
    };
  const length = MPA_FRAME_HEADER_LENGTH + pdLength;
  if (bytes.byteLength < length) return { status: 'need-more', needed: length };
  const violations: Violation[] = [];
  const res = flags & MPA_FLAG_RES;
  const rejectBit = (flags & MPA_FLAG_R) !== 0;
  // At Rev 2 the top Res bit flags the RFC 6581 data (Linux siw: MPA_RR_FLAG_ENHANCED); other bits are reserved.
  const enhancedFlag = rev === 2 && (res & MPA_FLAG_ENHANCED) !== 0;
  const reserved = enhancedFlag ? res & ~MPA_FLAG_ENHANCED : res;
  if (enhancedFlag)
    violations.push(note('mpa-enhanced-flag', 'RFC 6581 §5', 'Res bit 0x10 set: enhanced connection data (Linux siw)'));
  if (reserved !== 0)
    violations.push(warn('mpa-res', 'RFC 5044 §7.1', `Res bits 0x${reserved.toString(16)} are not zero`));
  if (kind === 'request' && rejectBit)
    violations.push(warn('mpa-r-on-request', 'RFC 5044 §7.1', 'R bit set on a Request (reserved there)'));
  if (rev === 0)
    violations.push(
      note('mpa-rev0', 'RFC 5044 Appendix C', 'Rev 0: the RDMA Consortium MPA (DDP and RDMAP version 0)'),
    );
  else if (rev !== 1 && rev !== 2)
    violations.push(reject('mpa-rev', 'RFC 5044 §7.1', `Rev ${rev}: an MPA revision neither 0, 1 nor 2`));
  const privateData = bytes.slice(MPA_FRAME_HEADER_LENGTH, length);
  let enhanced: EnhancedSetup | undefined;
  let ulpData = privateData;
  if (rev === 2) {
    if (pdLength < 4)
      violations.push(
        reject(
          'mpa-enhanced-missing',
          'RFC 6581 §5',
          `Rev 2 frame with ${pdLength} octets of Private Data: no IRD/ORD`,
        ),
      );
    else {
      enhanced = decodeEnhancedSetup(privateData);
      ulpData = privateData.subarray(4);
    }
  }
  const frame: MpaFrame = {
    kind,
    key,
    markers: (flags & MPA_FLAG_M) !== 0,
    crc: (flags & MPA_FLAG_C) !== 0,
    reject: rejectBit,
    res,
    rev,
    pdLength,
    privateData,
    ulpData,
    length,
    violations,
    ...(enhanced ? { enhanced } : {}),
  };
  return { status: 'ok', frame };
}

/** What an MPA Request and Reply agreed (RFC 5044 §7.1 M and C bits). */
export interface MpaAgreement {
  /** CRCs in both directions: either side asked for them (C in the Reply answers C in the Request). */
  readonly crc: boolean;
  /** Markers in FPDUs the initiator sends: the responder's M bit asked for them. */
  readonly markersToResponder: boolean;
  /** Markers in FPDUs the responder sends: the initiator's M bit asked for them. */
  readonly markersToInitiator: boolean;
  /** A Rev 0 Reply: the RDMA Consortium profile (RFC 5044 Appendix C), DDP and RDMAP version 0. */
  readonly rdmac: boolean;
  readonly violations: readonly Violation[];
}

export function mpaAgreement(request: MpaFrame, reply: MpaFrame): MpaAgreement {
  const violations: Violation[] = [];
  if (request.crc && !reply.crc)
    violations.push(reject('mpa-crc-bit', 'RFC 5044 §7.1', 'the Request asked for CRCs and the Reply cleared C'));
  if (request.rev === 2 && reply.rev === 2 && request.enhanced && reply.enhanced) {
    const q = request.enhanced;
    const p = reply.enhanced;
    if (q.peerToPeer && p.peerToPeer) {
      const chosen = [p.sendRtr, p.writeRtr, p.readRtr].filter(Boolean).length;
      if (chosen !== 1)
        violations.push(
          reject('mpa-rtr-choice', 'RFC 6581 §5', `the Reply chose ${chosen} RTR types; exactly one is required`),
        );
      else if ((p.sendRtr && !q.sendRtr) || (p.writeRtr && !q.writeRtr) || (p.readRtr && !q.readRtr))
        violations.push(
          reject('mpa-rtr-choice', 'RFC 6581 §5', 'the Reply chose an RTR type the Request did not offer'),
        );
    }
  }
  // RFC 5044 Appendix C: the RDMAC MPA negotiates nothing; Markers and CRCs are on both ways.
  if (reply.rev === 0) {
    for (const f of [request, reply])
      if (f.rev === 0 && !(f.markers && f.crc))
        violations.push(
          warn('mpa-rev0-bits', 'RFC 5044 Appendix C', `a Rev 0 ${f.kind} with M or C clear: RDMAC MPA has both on`),
        );
    return { crc: true, markersToResponder: true, markersToInitiator: true, rdmac: true, violations };
  }
  return {
    crc: request.crc || reply.crc,
    markersToResponder: reply.markers,
    markersToInitiator: request.markers,
    rdmac: false,
    violations,
  };
}
