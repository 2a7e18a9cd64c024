/**
 * CRC32c for MPA (RFC 5044 §4.4 / §6: CRC32c, the iSCSI polynomial 0x1EDC6F41, over the whole FPDU).
 *
 * Incremental: every function takes the CRC so far (0 to start) and returns the CRC including `bytes`,
 * so a CRC can run over header, payload parts, markers and pad without concatenating them.
 * Short inputs go through a table in JavaScript (cheaper than a native call); long ones through a native
 * backend, chosen once by @rddp/llp's `resolveCrc32cBackend` (`RDDP_CRC32C` pins one) when the transport
 * is made or the first CRC is needed: importing this module loads no backend and never throws.
 */
import { createRequire } from 'node:module';
import {
  CRC32C_BACKENDS,
  CRC32C_PIN_ENV,
  Crc32cBackendMissingError,
  Crc32cBackendUnknownError,
  type Crc32cChoice,
  type Crc32cLoaders,
  type IsalCrc32cModule,
  type NodeRsCrc32Module,
  resolveCrc32cBackend,
  type Sse4Crc32Module,
} from '@rddp/llp';
import { MARKER_INTERVAL, MARKER_LENGTH, writeMarker } from './markers.js';

export { CRC32C_BACKENDS, Crc32cBackendMissingError, Crc32cBackendUnknownError };

type Isal = IsalCrc32cModule & {
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
/** CRC32c of `bytes[start, end)` continuing from `crc`. */
type RangeCrc = (bytes: Uint8Array, start: number, end: number, crc: number) => number;

/** A backend as MPA uses it: long runs, the threshold below which the table is cheaper, ISA-L's extras. */
interface Backend {
  readonly range: RangeCrc;
  readonly nativeThreshold: number;
  readonly isal?: Isal;
}

const require = createRequire(import.meta.url);

const view = (b: Uint8Array, start: number, end: number) =>
  start === 0 && end === b.byteLength ? b : b.subarray(start, end);

function loadNodeRs(): NodeRsCrc32Module | undefined {
  const m = require(CRC32C_BACKENDS['node-rs'].package) as NodeRsCrc32Module;
  return CRC32C_BACKENDS['node-rs'].check(m) ? m : undefined;
}

/** MPA's loaders (`RDDP_CRC32C`'s names); each loads its package from here and checks it with its entry's `check`. */
const LOADERS: Crc32cLoaders<Backend> = {
  /**
   * `@rddp/crc32c-isal`, a binding to Intel ISA-L's crc32_iscsi (built where ISA-L's headers are
   * installed): the fastest, and it takes a byte range, so no subarray is made per call. Its functions
   * do not use `this`: `calculate` is called as it is, with nothing in between.
   */
  isal: () => {
    const m = require(CRC32C_BACKENDS.isal.package) as Isal;
    return CRC32C_BACKENDS.isal.check(m) ? { range: m.calculate, nativeThreshold: 40, isal: m } : undefined;
  },
  /**
   * `sse4_crc32` (a native addon built where node-gyp and SSE4.2 are available) beats @node-rs/crc32 on
   * long runs but costs a little more per call, so it takes runs of `SSE4_THRESHOLD` octets and more.
   */
  sse4_crc32: () => {
    const m = require(CRC32C_BACKENDS.sse4_crc32.package) as Sse4Crc32Module;
    if (!CRC32C_BACKENDS.sse4_crc32.check(m)) return undefined;
    let rs: NodeRsCrc32Module | undefined;
    try {
      rs = loadNodeRs();
    } catch {
      // sse4_crc32 takes the medium runs too
    }
    const mid = rs ?? { crc32c: (b: Uint8Array, c?: number) => m.calculate(b, c) };
    return {
      range: (b, s, e, c) => (e - s >= SSE4_THRESHOLD ? m.calculate(view(b, s, e), c) : mid.crc32c(view(b, s, e), c)),
      nativeThreshold: 48,
    };
  },
  'node-rs': () => {
    const m = loadNodeRs();
    return m && { range: (b, s, e, c) => m.crc32c(view(b, s, e), c), nativeThreshold: 48 };
  },
};
const SSE4_THRESHOLD = 1024;

/**
 * The package long runs go through ('@rddp/crc32c-isal', 'sse4_crc32' or '@node-rs/crc32'): undefined
 * until chosen (when the transport is made or the first CRC runs). `chooseCrc32cBackend()` chooses
 * and returns it.
 */
export let crc32cBackend: string | undefined;

/** The chosen backend's ISA-L binding, where ISA-L was chosen. */
let isal: Isal | undefined;
/** Long runs: the chosen backend's function (ISA-L's binding itself); undefined until chosen. */
let longRange: RangeCrc | undefined;
/** Below this many octets the JavaScript table beats a native call; 0 until chosen (every run chooses). */
let nativeThreshold = 0;

/**
 * Chooses MPA's CRC32c backend once (`RDDP_CRC32C` as @rddp/llp's `resolveCrc32cBackend` reads it) and
 * returns its package; later calls return it at once. Computes no CRC. Throws `Crc32cBackendUnknownError`
 * / `Crc32cBackendMissingError` for a pin that cannot be honoured, at every call until it can.
 */
export function chooseCrc32cBackend(): string {
  return crc32cBackend ?? choose().package;
}

function choose(): Crc32cChoice<Backend> {
  const chosen = resolveCrc32cBackend(process.env[CRC32C_PIN_ENV], LOADERS);
  isal = chosen.backend.isal;
  longRange = chosen.backend.range;
  nativeThreshold = chosen.backend.nativeThreshold;
  crc32cBackend = chosen.package;
  return chosen;
}

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
  // Until chosen, the threshold is 0 and `longRange` undefined: the first run chooses.
  if (n >= nativeThreshold) return (longRange ?? choose().backend.range)(bytes, start, end, crc);
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
