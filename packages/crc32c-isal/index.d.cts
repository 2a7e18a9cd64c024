/*
 * Every function reads each argument once and never coerces it: offsets and lengths must be integers in
 * range (a TypeError for a non-number, a RangeError for NaN, a fraction, a negative value or one past the
 * array); `crc` a 32-bit word (0..2^32-1, or as a signed int32); `room` 0..508; `ptr` 0..2^32-1. Arrays must
 * be Uint8Arrays (views of a SharedArrayBuffer are taken as they are; a detached one has no octets).
 */
/** CRC32c of `bytes[start, end)` continuing from `crc` (a finished CRC32c of the preceding octets, or 0). */
export declare function calculate(bytes: Uint8Array, start: number, end: number, crc: number): number;
/**
 * The CRC32c of `bytes[start, end)` as MPA sends them with Markers (RFC 5044 §4.3): a Marker
 * (0x0000, FPDUPTR) whenever `room` octets have passed, the first with FPDUPTR `ptr`, each next one
 * 512 further. Continues from `crc` like `calculate`.
 */
export declare function calculateMarked(
  bytes: Uint8Array,
  start: number,
  end: number,
  crc: number,
  room: number,
  ptr: number,
): number;
/**
 * Copies `src[start, end)` to `dst` at `dstOff` with a Marker (0x0000, FPDUPTR) wherever `calculateMarked`
 * counts one (whenever `room` octets have passed, the first with FPDUPTR `ptr`), and returns the CRC32c
 * continuing from `crc` over everything it wrote. Throws a RangeError, writing nothing, when `dst` cannot
 * hold the copy and its Markers, or when the octets it would write overlap `src[start, end)` in memory.
 */
export declare function copyMarked(
  dst: Uint8Array,
  dstOff: number,
  src: Uint8Array,
  start: number,
  end: number,
  crc: number,
  room: number,
  ptr: number,
): number;
/**
 * For each of `count` frames, `spans[2i]`..`spans[2i + 1]` bound its octets [start, end) in `bytes`; their
 * CRC32c is written to `bytes[end, end + 4)`, least significant octet first (the MPA CRC field, RFC 5044
 * §4.4). The spans are copied, then every one is checked (end + 4 within `bytes`) before anything is
 * written, and only the copy is used; `spans` sharing memory with `bytes` is a TypeError.
 */
export declare function crcFrames(bytes: Uint8Array, spans: Int32Array, count: number): void;
