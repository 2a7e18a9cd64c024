/**
 * CRC32c for MPA (RFC 5044 §4.4 / §6: CRC32c, the iSCSI polynomial 0x1EDC6F41, over the whole FPDU).
 *
 * The CRC itself, its backends and their once-only choice are @rddp/crc32c's (shared with the SCTP LLP);
 * here are MPA's uses of it: the CRC over Markers (§4.3), the copy that puts them in, the CRC fields of a
 * batch of FPDUs, and the CRC field's octet order. Importing this module loads no backend and never throws.
 */
import { crc32cRange, crc32cU16, type IsalCrc32cBinding, isalBinding as isal } from '@rddp/crc32c';
import { MARKER_INTERVAL, MARKER_LENGTH, writeMarker } from './markers.js';

export {
  chooseCrc32cBackend,
  crc32c,
  crc32cBackend,
  crc32cRange,
  crc32cU16,
  crc32cZeros,
} from '@rddp/crc32c';
export { CRC32C_BACKENDS, Crc32cBackendMissingError, Crc32cBackendUnknownError } from '@rddp/llp';

/** `copyMarked`'s signature (the binding's and the JavaScript fallback's). */
type CopyMarked = NonNullable<IsalCrc32cBinding['copyMarked']>;

/**
 * CRC32c of `bytes[start, end)` as MPA sends them with Markers (RFC 5044 §4.3, §4.4: the CRC covers the
 * Markers): a Marker (16 zero bits, FPDUPTR) goes in whenever `room` octets have passed, the first with
 * FPDUPTR `ptr`, each next one 512 further. ISA-L's binding does it in one call; else piece by piece.
 */
export function crc32cMarked(
  bytes: Uint8Array,
  start: number,
  end: number,
  crc: number,
  room: number,
  ptr: number,
): number {
  if (isal?.calculateMarked) return isal.calculateMarked(bytes, start, end, crc, room, ptr);
  let c = crc;
  let s = start;
  while (s < end) {
    if (room === 0) {
      c = crc32cU16(ptr & 0xffff, crc32cU16(0, c));
      ptr += MARKER_LENGTH;
      room = MARKER_INTERVAL - MARKER_LENGTH;
    }
    const n = Math.min(room, end - s);
    c = crc32cRange(bytes, s, s + n, c);
    s += n;
    room -= n;
    ptr += n;
  }
  return c;
}

/** Markers `crc32cMarked` counts in `n` octets that start `room` octets before the next Marker position. */
export function markersIn(n: number, room: number): number {
  return n > room ? Math.ceil((n - room) / (MARKER_INTERVAL - MARKER_LENGTH)) : 0;
}

/**
 * Copies `src[start, end)` into `dst` at `dstOff` with the Markers `crc32cMarked` counts put in their
 * places (RFC 5044 §4.3: 16 zero bits, FPDUPTR), and returns the CRC32c continuing from `crc` over all it
 * wrote (§4.4). `dst` must hold `end - start + 4 * markersIn(end - start, room)` octets from `dstOff`.
 * ISA-L's binding copies (Markers included) and CRCs the result in one pass; else the part is placed with
 * one copy and the gaps for the Markers opened from the last back (a call per piece, no view per piece).
 */
export const copyMarked: CopyMarked = (dst, dstOff, src, start, end, crc, room, ptr) =>
  isal?.copyMarked
    ? isal.copyMarked(dst, dstOff, src, start, end, crc, room, ptr)
    : copyMarkedJs(dst, dstOff, src, start, end, crc, room, ptr);

/** `copyMarked` without ISA-L's binding (exported for its tests). */
export const copyMarkedJs: CopyMarked = (dst, dstOff, src, start, end, crc, room, ptr) => {
  const n = end - start;
  const k = markersIn(n, room);
  const need = n + MARKER_LENGTH * k;
  if (dstOff < 0 || dstOff + need > dst.byteLength) throw new RangeError('dst cannot hold the copy and its Markers');
  dst.set(start === 0 && end === src.byteLength ? src : src.subarray(start, end), dstOff);
  const after = MARKER_INTERVAL - MARKER_LENGTH;
  for (let j = k; j >= 1; j--) {
    // Piece j (the octets after Marker j) moves 4j octets on; Marker j goes in front of it.
    const from = room + after * (j - 1);
    const to = Math.min(n, from + after);
    dst.copyWithin(dstOff + from + MARKER_LENGTH * j, dstOff + from, dstOff + to);
    writeMarker(dst, dstOff + from + MARKER_LENGTH * (j - 1), ptr + room + MARKER_INTERVAL * (j - 1));
  }
  return crc32cRange(dst, dstOff, dstOff + need, crc);
};

/**
 * For each of `count` frames, `spans[2i]`..`spans[2i + 1]` bound its octets [start, end) in `bytes`: their
 * CRC32c goes into the CRC field at `bytes[end, end + 4)` (`writeCrc`'s order). ISA-L's binding does all
 * of them in one native call (a call costs more than the CRC of a small FPDU); else one by one.
 */
export function crcFrames(bytes: Uint8Array, spans: Int32Array, count: number): void {
  if (isal?.crcFrames) {
    isal.crcFrames(bytes, spans, count);
    return;
  }
  for (let i = 0; i < count; i++) {
    const start = spans[2 * i] as number;
    const end = spans[2 * i + 1] as number;
    writeCrc(bytes, end, crc32cRange(bytes, start, end, 0));
  }
}

/**
 * Writes the CRC field (RFC 5044 §4.4) into `out` at `offset`: least significant octet first, the order
 * Linux siw puts on the wire (`put_unaligned_le32`) and the order Wireshark's MPA dissector checks
 * (verified with tshark 4.0: "Good CRC32"). See README "CRC octet order".
 */
export function writeCrc(out: Uint8Array, offset: number, crc: number): void {
  out[offset] = crc & 0xff;
  out[offset + 1] = (crc >>> 8) & 0xff;
  out[offset + 2] = (crc >>> 16) & 0xff;
  out[offset + 3] = (crc >>> 24) & 0xff;
}

/** Reads a CRC field written by `writeCrc`. */
export function readCrc(bytes: Uint8Array, offset: number): number {
  return (
    ((bytes[offset] as number) |
      ((bytes[offset + 1] as number) << 8) |
      ((bytes[offset + 2] as number) << 16) |
      ((bytes[offset + 3] as number) << 24)) >>>
    0
  );
}
