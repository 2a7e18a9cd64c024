/**
 * FPDUs (RFC 5044 §4.1): ULPDU_Length (16 bits) | ULPDU | pad to a 4-octet boundary | CRC32c, with
 * Markers (§4.2: 16 reserved bits, 16-bit FPDUPTR) at every 512th octet of the stream counted from the
 * first octet after the MPA Request or Reply (§4.3). A Marker inside an FPDU points back to the FPDU's
 * ULPDU_Length field; a Marker due at the first octet of an FPDU opens it with FPDUPTR 0. The CRC covers
 * every octet of the FPDU before the CRC field, Markers included (§4.4).
 */
import { FPDU_OVERHEAD, MARKER_INTERVAL, MARKER_LENGTH, MULPDU_MAX } from './constants.js';
import { crc32cUpdate, readMpaCrc, writeMpaCrc } from './crc.js';
import { note, reject, type Violation, warn } from './violation.js';

/** Pad octets after ULPDU_Length + ULPDU so the FPDU ends on a 4-octet boundary (RFC 5044 §4.1). */
export function padLength(ulpduLength: number): number {
  return (4 - ((ulpduLength + 2) & 3)) & 3;
}

export interface EncodeFpduOptions {
  /** CRCs on (RFC 5044 §7.1 C bit); off: the CRC field is zero. */
  readonly crc: boolean;
  /** Insert Markers (the receiver's M bit asked for them). */
  readonly markers: boolean;
  /** Octets of FPDU stream this side sent before this FPDU (Markers included); Markers fall where it is 0 mod 512. */
  readonly streamOffset?: number;
  /** Fault planting: pad octets to write instead of the right number. */
  readonly padOverride?: number;
  /** Fault planting: ULPDU_Length to write instead of the ULPDU's length. */
  readonly ulpduLengthOverride?: number;
  /** Fault planting: XOR into the CRC. */
  readonly crcXor?: number;
  /** Fault planting: FPDUPTR of the i-th Marker of this FPDU, given the right one. */
  readonly markerPtr?: (index: number, right: number) => number;
}

/** Octets to the next Marker position from stream offset `pos` (0 when one is due there). */
function toNextMarker(pos: number): number {
  const r = pos % MARKER_INTERVAL;
  return r === 0 ? 0 : MARKER_INTERVAL - r;
}

/** An FPDU's octets on the wire (Markers included) carrying `ulpdu`. */
export function encodeFpdu(ulpdu: Uint8Array, options: EncodeFpduOptions): Uint8Array {
  const start = options.streamOffset ?? 0;
  const len = options.ulpduLengthOverride ?? ulpdu.byteLength;
  const pad = options.padOverride ?? padLength(ulpdu.byteLength);
  const content = new Uint8Array(2 + ulpdu.byteLength + pad);
  content[0] = (len >>> 8) & 0xff;
  content[1] = len & 0xff;
  content.set(ulpdu, 2);
  const contentLen = content.byteLength + 4;
  const maxMarkers = options.markers
    ? Math.ceil((contentLen + MARKER_LENGTH) / (MARKER_INTERVAL - MARKER_LENGTH)) + 1
    : 0;
  const out = new Uint8Array(contentLen + maxMarkers * MARKER_LENGTH);
  let o = 0;
  let pos = start;
  let header = -1;
  let markerIndex = 0;
  const maybeMarker = () => {
    if (!options.markers || toNextMarker(pos) !== 0) return;
    const right = header < 0 ? 0 : pos - header;
    const ptr = options.markerPtr ? options.markerPtr(markerIndex, right) : right;
    markerIndex++;
    out[o] = 0;
    out[o + 1] = 0;
    out[o + 2] = (ptr >>> 8) & 0xff;
    out[o + 3] = ptr & 0xff;
    o += MARKER_LENGTH;
    pos += MARKER_LENGTH;
  };
  const place = (src: Uint8Array) => {
    let s = 0;
    while (s < src.byteLength) {
      maybeMarker();
      if (header < 0) header = pos;
      const room = options.markers ? toNextMarker(pos) || MARKER_INTERVAL : src.byteLength - s;
      const n = Math.min(room, src.byteLength - s);
      out.set(src.subarray(s, s + n), o);
      o += n;
      pos += n;
      s += n;
    }
  };
  place(content);
  // A Marker due between pad and CRC belongs to this FPDU (and to its CRC).
  maybeMarker();
  let crc = 0;
  if (options.crc) crc = crc32cUpdate(0, out.subarray(0, o));
  crc = (crc ^ (options.crcXor ?? 0)) >>> 0;
  const crcField = new Uint8Array(4);
  writeMpaCrc(crcField, 0, crc);
  place(crcField);
  return out.slice(0, o);
}

/** Total octets an FPDU stream of these FPDUs occupies (for computing the next streamOffset). */
export function fpduOverhead(ulpduLength: number): number {
  return FPDU_OVERHEAD + padLength(ulpduLength);
}

export interface FpduReaderOptions {
  readonly crc: boolean;
  readonly markers: boolean;
  /** Stream offset of the first octet pushed (0: the first octet after the MPA frame). */
  readonly streamOffset?: number;
  /** Longest ULPDU accepted without a finding (RFC 5044 §3: 64768). */
  readonly maxUlpdu?: number;
}

export interface MarkerRecord {
  /** Stream offset of the Marker's first octet. */
  readonly streamOffset: number;
  readonly reserved: number;
  readonly fpduPtr: number;
  /** The FPDUPTR this position requires. */
  readonly expected: number;
  readonly ok: boolean;
}

export interface Fpdu {
  /** Stream offset of the FPDU's first octet (an opening Marker included). */
  readonly streamOffset: number;
  /** Octets on the wire, Markers included. */
  readonly wireLength: number;
  readonly ulpduLength: number;
  /** The ULPDU with Markers removed. */
  readonly ulpdu: Uint8Array;
  readonly pad: Uint8Array;
  readonly crcField: number;
  /** CRC32c over the FPDU before the CRC field (computed even with CRCs off). */
  readonly crcComputed: number;
  readonly crcVerdict: 'good' | 'bad' | 'off';
  readonly markers: readonly MarkerRecord[];
  readonly violations: readonly Violation[];
}

/** Largest FPDU on the wire: 16-bit ULPDU_Length, pad, CRC and its Markers. */
const MAX_WIRE_FPDU =
  2 + 0xffff + 3 + 4 + MARKER_LENGTH * (Math.ceil((0xffff + 9) / (MARKER_INTERVAL - MARKER_LENGTH)) + 1);

/**
 * Reads FPDUs from one direction of an MPA connection, chunks in any layout: Markers anywhere, several
 * FPDUs per chunk, FPDUs split across chunks. Holds at most one FPDU's octets (≤ ~66 KB) between pushes.
 */
export class FpduReader {
  private buf = new Uint8Array(0);
  /** Octets held: buf[head, head + bufLen). */
  private head = 0;
  private bufLen = 0;
  /** Stream offset of buf[0]. */
  private pos: number;
  private readonly maxUlpdu: number;

  constructor(private readonly options: FpduReaderOptions) {
    this.pos = options.streamOffset ?? 0;
    this.maxUlpdu = options.maxUlpdu ?? MULPDU_MAX;
  }

  /** Octets held for an FPDU not yet complete. */
  get buffered(): number {
    return this.bufLen;
  }

  /** Stream offset of the next FPDU. */
  get streamOffset(): number {
    return this.pos;
  }

  push(chunk: Uint8Array): Fpdu[] {
    const out: Fpdu[] = [];
    let off = 0;
    while (off < chunk.byteLength) {
      // Top up the buffer to at most one maximal FPDU, then decode what is complete.
      const room = MAX_WIRE_FPDU - this.bufLen;
      const n = Math.min(room, chunk.byteLength - off);
      // A full buffer always holds a whole FPDU (MAX_WIRE_FPDU is the longest); never spin on one that does not.
      if (n === 0) break;
      this.append(chunk.subarray(off, off + n));
      off += n;
      for (;;) {
        const f = this.next();
        if (!f) break;
        out.push(f);
      }
    }
    return out;
  }

  /** Findings for octets left over at the end of the stream (a truncated FPDU). */
  end(): Violation[] {
    if (this.bufLen === 0) return [];
    return [
      note('mpa-truncated', 'RFC 5044 §4.1', `${this.bufLen} octets of an incomplete FPDU at the end of the stream`),
    ];
  }

  private append(b: Uint8Array): void {
    if (this.head + this.bufLen + b.byteLength > this.buf.byteLength) {
      if (this.bufLen + b.byteLength <= this.buf.byteLength) this.buf.copyWithin(0, this.head, this.head + this.bufLen);
      else {
        const nb = new Uint8Array(Math.max(this.bufLen + b.byteLength, this.buf.byteLength * 2, 4096));
        nb.set(this.buf.subarray(this.head, this.head + this.bufLen));
        this.buf = nb;
      }
      this.head = 0;
    }
    this.buf.set(b, this.head + this.bufLen);
    this.bufLen += b.byteLength;
  }

  /**
   * Maps the first `count` content octets (non-Marker octets) of the buffer: returns the wire index just
   * after them and the Markers passed, or undefined when the buffer is too short.
   */
  private walk(count: number): { wire: number; markers: number[] } | undefined {
    const markers: number[] = [];
    let w = 0;
    let c = 0;
    const on = this.options.markers;
    while (c < count) {
      if (on && toNextMarker(this.pos + w) === 0) {
        if (w + MARKER_LENGTH > this.bufLen) return undefined;
        markers.push(w);
        w += MARKER_LENGTH;
        continue;
      }
      const room = on ? toNextMarker(this.pos + w) || MARKER_INTERVAL : count - c;
      const n = Math.min(room, count - c);
      if (w + n > this.bufLen) return undefined;
      w += n;
      c += n;
    }
    return { wire: w, markers };
  }

  /** Copies content octets [from, to) of the buffer out, skipping Markers. */
  private content(from: number, to: number): Uint8Array {
    const out = new Uint8Array(to - from);
    let w = 0;
    let c = 0;
    let o = 0;
    const on = this.options.markers;
    while (c < to) {
      if (on && toNextMarker(this.pos + w) === 0) {
        w += MARKER_LENGTH;
        continue;
      }
      const room = on ? toNextMarker(this.pos + w) || MARKER_INTERVAL : to - c;
      const n = Math.min(room, to - c);
      const s = Math.max(c, from);
      const e = c + n;
      if (e > s) {
        out.set(this.buf.subarray(this.head + w + (s - c), this.head + w + (e - c)), o);
        o += e - s;
      }
      w += n;
      c += n;
    }
    return out;
  }

  /**
   * Whether the CRC of an FPDU of `ulpduLength` framed with `pad` octets of pad is good: a bad CRC that is
   * good under another pad is a pad-length fault (RFC 5044 §4.1), not a CRC one.
   */
  private crcGoodWithPad(ulpduLength: number, pad: number): boolean {
    const before = 2 + ulpduLength + pad;
    const body = this.walk(before);
    if (!body) return false;
    let crcStart = body.wire;
    if (this.options.markers && toNextMarker(this.pos + crcStart) === 0) crcStart += MARKER_LENGTH;
    const all = this.walk(before + 4);
    if (!all || crcStart + 4 > this.bufLen) return false;
    const field = readMpaCrc(this.content(before, before + 4), 0);
    return field === crc32cUpdate(0, this.buf.subarray(this.head, this.head + crcStart));
  }

  /**
   * The FPDU framed with the first of `candidates` pad lengths (other than the `right` one) under which its
   * CRC is good, reported as the pad fault it is (RFC 5044 §4.1); undefined when none is.
   */
  private padFault(ulpduLength: number, right: number, candidates: readonly number[]): Fpdu | undefined {
    for (const other of candidates) {
      if (other === right || !this.crcGoodWithPad(ulpduLength, other)) continue;
      const f = this.next(other);
      if (!f) return undefined;
      return {
        ...f,
        violations: [
          reject(
            'mpa-pad-length',
            'RFC 5044 §4.1',
            `${other} pad octet(s) after a ${ulpduLength}-octet ULPDU: the pad makes the FPDU (ULPDU_Length field, ULPDU, pad) a multiple of 4 octets, so ${right} are due (the CRC is good where the sender's pad ends)`,
          ),
          ...f.violations,
        ],
      };
    }
    return undefined;
  }

  private next(padFound?: number): Fpdu | undefined {
    const head = this.walk(2);
    if (!head) return undefined;
    const lenField = this.content(0, 2);
    const ulpduLength = ((lenField[0] as number) << 8) | (lenField[1] as number);
    const pad = padFound ?? padLength(ulpduLength);
    // Not all here under the right pad: a sender whose pad is shorter may have sent its whole FPDU.
    const shorter = () =>
      padFound === undefined && this.options.crc
        ? this.padFault(
            ulpduLength,
            pad,
            Array.from({ length: pad }, (_, i) => i),
          )
        : undefined;
    const beforeCrc = 2 + ulpduLength + pad;
    const body = this.walk(beforeCrc);
    if (!body) return shorter();
    // A Marker due right after the pad sits before the CRC (and is covered by it).
    let crcStart = body.wire;
    const markers = [...body.markers];
    if (this.options.markers && toNextMarker(this.pos + crcStart) === 0) {
      if (crcStart + MARKER_LENGTH > this.bufLen) return shorter();
      markers.push(crcStart);
      crcStart += MARKER_LENGTH;
    }
    const all = this.walk(beforeCrc + 4);
    if (!all) return shorter();
    const wireLength = Math.max(all.wire, crcStart + 4);
    if (wireLength > this.bufLen) return shorter();
    for (const m of all.markers) if (!markers.includes(m)) markers.push(m);

    const violations: Violation[] = [];
    const contentAll = this.content(0, beforeCrc + 4);
    const ulpdu = contentAll.slice(2, 2 + ulpduLength);
    const padBytes = contentAll.slice(2 + ulpduLength, beforeCrc);
    const crcField = readMpaCrc(contentAll, beforeCrc);
    const crcComputed = crc32cUpdate(0, this.buf.subarray(this.head, this.head + crcStart));
    let crcVerdict: Fpdu['crcVerdict'] = 'off';
    if (this.options.crc) {
      crcVerdict = crcField === crcComputed ? 'good' : 'bad';
      if (crcVerdict === 'bad' && padFound === undefined) {
        // The sender's pad may be wrong: its CRC then sits (and is good) where its own pad ends.
        const f = this.padFault(ulpduLength, pad, [0, 1, 2, 3, 4]);
        if (f) return f;
      }
      if (crcVerdict === 'bad')
        violations.push(
          reject(
            'mpa-crc',
            'RFC 5044 §4.4',
            `bad CRC: field 0x${crcField.toString(16).padStart(8, '0')}, computed 0x${crcComputed.toString(16).padStart(8, '0')}`,
          ),
        );
    } else if (crcField !== 0)
      violations.push(note('mpa-crc-off-nonzero', 'RFC 5044 §4.4', 'CRC field not zero while CRCs are off'));
    if (ulpduLength > this.maxUlpdu)
      violations.push(
        reject('mpa-ulpdu-too-long', 'RFC 5044 §3 (MULPDU)', `ULPDU_Length ${ulpduLength} exceeds ${this.maxUlpdu}`),
      );
    if (padBytes.some((b) => b !== 0))
      violations.push(warn('mpa-pad-not-zero', 'RFC 5044 §4.1', 'pad octets are not zero'));
    // FPDUPTR: 0 for a Marker opening the FPDU, else the distance back to ULPDU_Length (§4.3).
    const headerAt = head.markers.length > 0 && head.markers[0] === 0 ? MARKER_LENGTH : 0;
    const records: MarkerRecord[] = [];
    markers.sort((a, b) => a - b);
    for (const m of markers) {
      const at = this.head + m;
      const reserved = (((this.buf[at] as number) << 8) | (this.buf[at + 1] as number)) >>> 0;
      const fpduPtr = (((this.buf[at + 2] as number) << 8) | (this.buf[at + 3] as number)) >>> 0;
      const expected = m === 0 ? 0 : m - headerAt;
      const ok = fpduPtr === expected;
      records.push({ streamOffset: this.pos + m, reserved, fpduPtr, expected, ok });
      if (!ok)
        violations.push(
          reject(
            'mpa-marker',
            'RFC 5044 §4.3',
            `Marker at stream offset ${this.pos + m}: FPDUPTR ${fpduPtr}, the FPDU's ULPDU_Length is ${expected} octets back`,
          ),
        );
      if (reserved !== 0)
        violations.push(
          warn('mpa-marker-reserved', 'RFC 5044 §4.2', `Marker reserved field 0x${reserved.toString(16)}`),
        );
    }
    if ((this.pos & 3) !== 0)
      violations.push(
        reject(
          'mpa-misaligned',
          'RFC 5044 §4.1',
          `FPDU starts at stream offset ${this.pos}, not on a 4-octet boundary`,
        ),
      );
    const fpdu: Fpdu = {
      streamOffset: this.pos,
      wireLength,
      ulpduLength,
      ulpdu,
      pad: padBytes,
      crcField,
      crcComputed,
      crcVerdict,
      markers: records,
      violations,
    };
    this.head += wireLength;
    this.bufLen -= wireLength;
    if (this.bufLen === 0) this.head = 0;
    this.pos += wireLength;
    return fpdu;
  }
}
