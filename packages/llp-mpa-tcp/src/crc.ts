/**
 * CRC32c for MPA (RFC 5044 §4.4 / §6: CRC32c, the iSCSI polynomial 0x1EDC6F41, over the whole FPDU).
 *
 * Incremental: every function takes the CRC so far (0 to start) and returns the CRC including `bytes`,
 * so a CRC can run over header, payload parts, markers and pad without concatenating them.
 * Short inputs go through a table in JavaScript (cheaper than a native call); long ones through
 * @node-rs/crc32's hardware-accelerated crc32c.
 */
import { createRequire } from 'node:module';
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { codedError, LlpError } from '@rddp/llp';
import { MARKER_INTERVAL, MARKER_LENGTH, writeMarker } from './markers.js';

type Isal = {
  calculate(b: Uint8Array, start: number, end: number, crc: number): number;
  calculateMarked?(b: Uint8Array, start: number, end: number, crc: number, room: number, ptr: number): number;
  crcFrames?(b: Uint8Array, spans: Int32Array, count: number): void;
  copyMarked?: CopyMarked;
};

/** `copyMarked`'s signature (the binding's and the JavaScript fallback's). */
type CopyMarked = (
  dst: Uint8Array,
  dstOff: number,
  src: Uint8Array,
  start: number,
  end: number,
  crc: number,
  room: number,
  ptr: number,
) => number;
type Sse4 = { calculate(b: Uint8Array, initial?: number): number; hardware_support: boolean };

const require = createRequire(import.meta.url);
/** RDDP_CRC32C=isal | sse4_crc32 | node-rs pins a backend (benchmarks, tests); by default the fastest that loads. */
const pinned = process.env.RDDP_CRC32C;
const CHECK = new TextEncoder().encode('123456789'); // CRC32c check value 0xE3069283 (RFC 3720 §B.4)

/**
 * Optional speed-up 1: `@rddp/crc32c-isal`, a binding to Intel ISA-L's crc32_iscsi (built where ISA-L's
 * headers are installed; Debian libisal-dev). ≈55 GB/s on 64 KiB here (PCLMULQDQ/AVX-512 folding), and it
 * takes a byte range, so no subarray is made per call.
 */
const isal: Isal | undefined = (() => {
  if (pinned !== undefined && pinned !== 'isal') return undefined;
  try {
    const m = require('@rddp/crc32c-isal') as Isal;
    return m.calculate(CHECK, 0, CHECK.length, 0) === 0xe3069283 ? m : undefined;
  } catch {
    return undefined;
  }
})();

/**
 * Optional speed-up 2: `sse4_crc32` (a native addon built where node-gyp and SSE4.2 are available) runs
 * ≈2× faster than @node-rs/crc32 on 64 KiB here (9.4 vs 6 GB/s) but costs a little more per call, so it
 * takes the long runs only.
 */
const sse4: Sse4 | undefined = (() => {
  if (isal || (pinned !== undefined && pinned !== 'sse4_crc32')) return undefined;
  try {
    const m = require('sse4_crc32') as Sse4;
    return m.hardware_support && m.calculate(CHECK) === 0xe3069283 ? m : undefined;
  } catch {
    return undefined;
  }
})();
const SSE4_THRESHOLD = 1024;

/** Which CRC32c implementation long runs use: '@rddp/crc32c-isal', 'sse4_crc32' or '@node-rs/crc32'. */
export const crc32cBackend: string = isal ? '@rddp/crc32c-isal' : sse4 ? 'sse4_crc32' : '@node-rs/crc32';

/** `RDDP_CRC32C`'s values, the package each names, and how to get it where it is missing. */
export const CRC32C_BACKENDS = {
  isal: {
    package: '@rddp/crc32c-isal',
    get: 'apt-get install libisal-dev, then pnpm install (builds @rddp/crc32c-isal with node-gyp)',
  },
  sse4_crc32: {
    package: 'sse4_crc32',
    get: 'pnpm install with node-gyp and a C++ compiler (apt-get install build-essential python3) on an SSE4.2 CPU',
  },
  'node-rs': { package: '@node-rs/crc32', get: 'pnpm install' },
} as const;

/** `RDDP_CRC32C` names no backend (issue 37: a pin is never ignored). */
export class Crc32cBackendUnknownError extends codedError(LlpError, 'ERR_MPA_CRC32C_BACKEND_UNKNOWN') {}

/** `RDDP_CRC32C` pins a backend that does not load here: an error, not the next backend in its place (issue 37). */
export class Crc32cBackendMissingError extends codedError(LlpError, 'ERR_MPA_CRC32C_BACKEND_MISSING') {}

if (pinned !== undefined) {
  if (!Object.hasOwn(CRC32C_BACKENDS, pinned))
    throw new Crc32cBackendUnknownError(
      `RDDP_CRC32C=${pinned} names no CRC32c backend (one of: ${Object.keys(CRC32C_BACKENDS).join(', ')})`,
    );
  const want = CRC32C_BACKENDS[pinned as keyof typeof CRC32C_BACKENDS];
  if (crc32cBackend !== want.package)
    throw new Crc32cBackendMissingError(
      `RDDP_CRC32C=${pinned} pins ${want.package}, which does not load here: ${want.get}; or unset RDDP_CRC32C`,
    );
}

/** Below this many octets the JavaScript table beats a native call (a call's fixed cost outweighs the table's per-octet one). */
const NATIVE_THRESHOLD = isal ? 40 : 48;

/** CRC32c table, reflected polynomial 0x82F63B78. */
const TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC32c of `bytes[start, end)` continuing from `crc` (a previous result, or 0). */
export function crc32cRange(bytes: Uint8Array, start: number, end: number, crc: number): number {
  const n = end - start;
  if (n <= 0) return crc;
  if (n >= NATIVE_THRESHOLD) {
    if (isal) return isal.calculate(bytes, start, end, crc);
    const view = start === 0 && end === bytes.byteLength ? bytes : bytes.subarray(start, end);
    if (sse4 && n >= SSE4_THRESHOLD) return sse4.calculate(view, crc);
    return nativeCrc32c(view, crc);
  }
  let c = ~crc;
  for (let i = start; i < end; i++) c = (TABLE[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

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

/** CRC32c of all of `bytes`, continuing from `crc` (a previous result, or 0). */
export function crc32c(bytes: Uint8Array, crc = 0): number {
  return crc32cRange(bytes, 0, bytes.byteLength, crc);
}

/** CRC32c of `count` zero octets (the FPDU pad, RFC 5044 §4.2) continuing from `crc`. */
export function crc32cZeros(count: number, crc: number): number {
  let c = ~crc;
  for (let i = 0; i < count; i++) c = (TABLE[c & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC32c of a 16-bit big-endian value (the ULPDU_Length field, or half a marker) continuing from `crc`. */
export function crc32cU16(value: number, crc: number): number {
  let c = ~crc;
  c = (TABLE[(c ^ (value >>> 8)) & 0xff] as number) ^ (c >>> 8);
  c = (TABLE[(c ^ value) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
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
