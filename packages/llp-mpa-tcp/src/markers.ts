/**
 * MPA Markers (RFC 5044 §4.2 format, §4.3 placement) and the MULPDU they shape (RFC 5044 §4.5, §3).
 *
 *    0                   1                   2                   3
 *   |           RESERVED            |            FPDUPTR            |
 *
 * A Marker sits at every 512th octet of the TCP stream, counted from the first octet after the
 * MPA Request (Initiator → Responder) or Reply (Responder → Initiator); the first one therefore opens
 * the first FPDU with FPDUPTR 0 (§4.3). FPDUPTR is the distance back from the Marker to the
 * ULPDU_Length field of the FPDU it sits in; a Marker immediately before an FPDU's ULPDU_Length
 * belongs to that FPDU and carries 0 (our reading of §4.3; Wireshark's dissector agrees: it skips a
 * Marker at the start of a segment and counts it in the FPDU's CRC). Markers are covered by the CRC (§4.4).
 */

/** RFC 5044 §4.3: one Marker every 512 octets of TCP sequence space. */
export const MARKER_INTERVAL = 512;
export const MARKER_LENGTH = 4;
/** ULPDU_Length (2) + CRC (4): the fixed FPDU overhead (RFC 5044 §4.1, §4.5). */
export const FPDU_OVERHEAD = 6;
/** RFC 5044 §3: MULPDU is between 128 and 64768 octets. */
export const MULPDU_MIN = 128;
export const MULPDU_MAX = 64768;

/**
 * The Marker with FPDUPTR `ptr` (a multiple of 4 below 65536) as a chunk shared by every connection and
 * never written after it is built: one 64 KiB table holds every Marker value, so a sender splitting a large
 * FPDU neither frames nor allocates one per 512 octets. Undefined for a `ptr` the table cannot hold.
 */
export function markerChunk(ptr: number): Buffer | undefined {
  if ((ptr & 3) !== 0 || ptr < 0 || ptr > 0xfffc) return undefined;
  const k = ptr >>> 2;
  let views = markerViews;
  if (views === undefined) {
    const table = new Uint8Array(MARKER_LENGTH * 0x4000);
    for (let i = 0; i < 0x4000; i++) writeMarker(table, i * MARKER_LENGTH, i * MARKER_LENGTH);
    markerTable = table;
    views = markerViews = new Array<Buffer | undefined>(0x4000);
  }
  let m = views[k];
  if (m === undefined) m = views[k] = Buffer.from((markerTable as Uint8Array).buffer, k * MARKER_LENGTH, MARKER_LENGTH);
  return m;
}
let markerTable: Uint8Array | undefined;
let markerViews: (Buffer | undefined)[] | undefined;

/** Writes a Marker with this FPDUPTR into `out` at `offset` (RESERVED = 0, §4.2). */
export function writeMarker(out: Uint8Array, offset: number, fpduPtr: number): void {
  out[offset] = 0;
  out[offset + 1] = 0;
  out[offset + 2] = (fpduPtr >>> 8) & 0xff;
  out[offset + 3] = fpduPtr & 0xff;
}

/** FPDUPTR of a received Marker; its two low bits are treated as zero (§4.2). */
export function readFpduPtr(hi: number, lo: number): number {
  return ((hi << 8) | lo) & 0xfffc;
}

/** Pad octets after ULPDU_Length + ULPDU so the FPDU ends 4-aligned (RFC 5044 §4.1). */
export function padLength(ulpduLength: number): number {
  return (4 - ((ulpduLength + 2) & 3)) & 3;
}

/**
 * RFC 5044 §4.5: the largest ULPDU that fits one TCP segment of `emss` octets, with or without Markers
 * in the FPDUs this side sends, clamped to §3's range [128, 64768].
 *   Markers:    MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4)
 *   no Markers: MULPDU = EMSS - (6 + EMSS mod 4)
 */
export function mulpduForEmss(emss: number, markers: boolean): number {
  if (!Number.isFinite(emss) || emss <= 0) throw new RangeError(`EMSS must be a positive number, got ${emss}`);
  const e = Math.floor(emss);
  const raw = e - (FPDU_OVERHEAD + (markers ? MARKER_LENGTH * Math.ceil(e / MARKER_INTERVAL) : 0) + (e % 4));
  return Math.max(MULPDU_MIN, Math.min(MULPDU_MAX, raw));
}
