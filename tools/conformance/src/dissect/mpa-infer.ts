/**
 * Recognising MPA on a TCP stream whose MPA Request and Reply were not captured (the capture started
 * late, or mid-stream): an offset where the octets parse as an FPDU (RFC 5044 §4.1: ULPDU_Length, pad,
 * CRC32c) carrying a well-formed DDP/RDMAP header (RFC 5041 §4, RFC 5040 §4). A matching CRC32c is the
 * strong evidence; with CRCs off (the CRC field zero) several consecutive well-formed FPDUs are required.
 * Markers (§4.3) cannot be placed without the stream's start and are not inferred.
 */
import { DDP_TAGGED_HEADER_LENGTH, DDP_UNTAGGED_HEADER_LENGTH, Opcode } from '../wire/constants.js';
import { crc32cUpdate, readMpaCrc } from '../wire/crc.js';
import { padLength } from '../wire/fpdu.js';
import { decodeUlpdu, IETF_VERSIONS, RDMAC_VERSIONS } from '../wire/rdmap.js';

/** FPDUs with CRCs off that must follow each other before a stream counts as MPA (heuristic only). */
export const CRC_OFF_RUN = 3;

export type CrcMode = 'on' | 'off';

/** What one offset of a buffer holds: no FPDU, not known yet (too few octets), or an FPDU of `length` octets. */
type Probe = { kind: 'no' } | { kind: 'wait' } | { kind: 'fpdu'; length: number; crc: CrcMode; rdmac: boolean };

/** Cheap checks on the 4 octets at `off` (ULPDU_Length, DDP control, RDMAP control): no CRC computed. */
function header(b: Uint8Array, off: number): { ulpduLength: number; rdmac: boolean } | undefined {
  const ulpduLength = (((b[off] as number) << 8) | (b[off + 1] as number)) >>> 0;
  if (ulpduLength < DDP_TAGGED_HEADER_LENGTH) return undefined;
  const ddp = b[off + 2] as number;
  const rdmap = b[off + 3] as number;
  if ((ddp & 0x3c) !== 0 || (rdmap & 0x30) !== 0) return undefined;
  const dv = ddp & 3;
  const rv = rdmap >>> 6;
  if (dv > 1 || rv !== dv) return undefined;
  const op = rdmap & 0x0f;
  if (op > Opcode.AtomicResponse) return undefined;
  const tagged = (ddp & 0x80) !== 0;
  if (tagged !== (op === Opcode.RdmaWrite || op === Opcode.RdmaReadResponse)) return undefined;
  if (!tagged && ulpduLength < DDP_UNTAGGED_HEADER_LENGTH) return undefined;
  return { ulpduLength, rdmac: dv === 0 };
}

/** The FPDU at `off` of `b[0, end)`, if there is one, with CRCs as `want` allows. */
export function probeFpdu(b: Uint8Array, off: number, end: number, want?: CrcMode): Probe {
  if (end - off < 4) return { kind: 'wait' };
  const h = header(b, off);
  if (!h) return { kind: 'no' };
  const beforeCrc = 2 + h.ulpduLength + padLength(h.ulpduLength);
  const length = beforeCrc + 4;
  if (end - off < length) return { kind: 'wait' };
  for (let i = off + 2 + h.ulpduLength; i < off + beforeCrc; i++) if (b[i] !== 0) return { kind: 'no' };
  const field = readMpaCrc(b, off + beforeCrc);
  let crc: CrcMode | undefined;
  if (want !== 'off' && field === crc32cUpdate(0, b.subarray(off, off + beforeCrc))) crc = 'on';
  else if (want !== 'on' && field === 0) crc = 'off';
  if (!crc) return { kind: 'no' };
  const ulpdu = b.subarray(off + 2, off + 2 + h.ulpduLength);
  const d = decodeUlpdu(ulpdu, h.rdmac ? RDMAC_VERSIONS : IETF_VERSIONS);
  if ('error' in d || d.violations.some((v) => v.severity === 'reject')) return { kind: 'no' };
  return { kind: 'fpdu', length, crc, rdmac: h.rdmac };
}

export type Sync =
  /** FPDUs start at `offset`. */
  | { kind: 'found'; offset: number; crc: CrcMode; rdmac: boolean }
  /** Offsets before `from` hold no FPDU; the one at `from` needs more octets. */
  | { kind: 'wait'; from: number };

/**
 * The first offset of `b[from, end)` where FPDUs start: one FPDU with a good CRC, or (CRCs off) `run`
 * consecutive well-formed ones. `want`: the CRC mode already known for the connection.
 */
export function findFpduStart(b: Uint8Array, from: number, end: number, run: number, want?: CrcMode): Sync {
  for (let off = from; off < end; off++) {
    const p = probeFpdu(b, off, end, want);
    if (p.kind === 'no') continue;
    if (p.kind === 'wait') return { kind: 'wait', from: off };
    if (p.crc === 'on' || run <= 1) return { kind: 'found', offset: off, crc: p.crc, rdmac: p.rdmac };
    // CRCs off: the next FPDUs must follow, each well-formed.
    let at = off + p.length;
    let n = 1;
    let verdict: 'ok' | 'no' | 'wait' = 'ok';
    while (n < run) {
      const q = probeFpdu(b, at, end, 'off');
      if (q.kind !== 'fpdu') {
        verdict = q.kind;
        break;
      }
      at += q.length;
      n++;
    }
    if (verdict === 'wait') return { kind: 'wait', from: off };
    if (verdict === 'ok') return { kind: 'found', offset: off, crc: 'off', rdmac: p.rdmac };
  }
  return { kind: 'wait', from: end };
}
