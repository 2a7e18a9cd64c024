/**
 * @rddp/crc32c — CRC32c (Castagnoli, the iSCSI polynomial 0x1EDC6F41; RFC 3720 §B.4) for rddp's
 * transports: MPA's CRC over the FPDU (RFC 5044 §4.4) and the SCTP checksum (RFC 4960 §6.8, Appendix B;
 * RFC 3309).
 *
 * Incremental: every function takes the CRC so far (0 to start) and returns the CRC including its octets,
 * so a CRC can run over pieces without concatenating them. Short runs go through a table in JavaScript
 * (cheaper than a native call); long ones through a native backend, chosen once for the process by
 * @rddp/llp's `resolveCrc32cBackend` (`RDDP_CRC32C=isal | sse4_crc32 | node-rs` pins one; a pin that
 * cannot be honoured is `Crc32cBackendUnknownError` / `Crc32cBackendMissingError`) when a transport is
 * made or the first CRC is needed: importing this module loads no backend and never throws.
 *
 * @packageDocumentation
 */
import { createRequire } from 'node:module';
import {
  CRC32C_BACKEND_NAMES,
  CRC32C_BACKENDS,
  CRC32C_PIN_ENV,
  type Crc32cBackendName,
  type Crc32cChoice,
  type Crc32cLoaders,
  type IsalCrc32cModule,
  type NodeRsCrc32Module,
  resolveCrc32cBackend,
  type Sse4Crc32Module,
} from '@rddp/llp';

/**
 * `@rddp/crc32c-isal`'s module: `calculate` over a byte range, and its MPA extras (RFC 5044 §4.3, §4.4),
 * each absent from a binding built before it was added.
 */
export type IsalCrc32cBinding = IsalCrc32cModule & {
  /** CRC32c of `b[start, end)` with a Marker (16 zero bits, FPDUPTR) put in every time `room` octets pass. */
  calculateMarked?(b: Uint8Array, start: number, end: number, crc: number, room: number, ptr: number): number;
  /** For each of `count` frames bounded by `spans[2i]`..`spans[2i + 1]`, writes its CRC after it. */
  crcFrames?(b: Uint8Array, spans: Int32Array, count: number): void;
  /** Copies a run with its Markers put in and returns the CRC32c of what it wrote. */
  copyMarked?(
    dst: Uint8Array,
    dstOff: number,
    src: Uint8Array,
    start: number,
    end: number,
    crc: number,
    room: number,
    ptr: number,
  ): number;
};

/** CRC32c of `bytes[start, end)` continuing from `crc`. */
type RangeCrc = (bytes: Uint8Array, start: number, end: number, crc: number) => number;

/** A backend: long runs, the threshold below which the table is cheaper, ISA-L's binding where it is ISA-L. */
interface Backend {
  readonly range: RangeCrc;
  readonly nativeThreshold: number;
  readonly isal?: IsalCrc32cBinding;
}

const require = createRequire(import.meta.url);

const view = (b: Uint8Array, start: number, end: number) =>
  start === 0 && end === b.byteLength ? b : b.subarray(start, end);

function loadNodeRs(): NodeRsCrc32Module | undefined {
  const m = require(CRC32C_BACKENDS['node-rs'].package) as NodeRsCrc32Module;
  return CRC32C_BACKENDS['node-rs'].check(m) ? m : undefined;
}

/** The loaders (`RDDP_CRC32C`'s names); each loads its package from here and checks it with its entry's `check`. */
const LOADERS: Crc32cLoaders<Backend> = {
  /**
   * `@rddp/crc32c-isal`, a binding to Intel ISA-L's crc32_iscsi (built where ISA-L's headers are
   * installed): the fastest, and it takes a byte range, so no subarray is made per call. Its functions
   * do not use `this`: `calculate` is called as it is, with nothing in between.
   */
  isal: () => {
    const m = require(CRC32C_BACKENDS.isal.package) as IsalCrc32cBinding;
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
 * until chosen (when a transport is made or the first CRC runs). `chooseCrc32cBackend()` chooses and
 * returns it.
 */
export let crc32cBackend: string | undefined;

/** The chosen backend's ISA-L binding, where ISA-L was chosen; undefined until chosen or without it. */
export let isalBinding: IsalCrc32cBinding | undefined;
/** Long runs: the chosen backend's function (ISA-L's binding itself); undefined until chosen. */
let longRange: RangeCrc | undefined;
/** Below this many octets the JavaScript table beats a native call; 0 until chosen (every run chooses). */
let nativeThreshold = 0;

/**
 * Whether each backend (`RDDP_CRC32C`'s names) loads from this package's place and passes its check
 * (RFC 3720 §B.4's check value), without choosing one: what `rddp doctor` lists as available.
 */
export function crc32cBackendsAvailable(): Record<Crc32cBackendName, boolean> {
  const loads = (name: Crc32cBackendName): boolean => {
    try {
      return CRC32C_BACKENDS[name].check(require(CRC32C_BACKENDS[name].package) as never);
    } catch {
      return false;
    }
  };
  return Object.fromEntries(CRC32C_BACKEND_NAMES.map((n) => [n, loads(n)])) as Record<Crc32cBackendName, boolean>;
}

/**
 * Chooses the CRC32c backend once for the process (`RDDP_CRC32C` as @rddp/llp's `resolveCrc32cBackend`
 * reads it) and returns its package; later calls return it at once. Computes no CRC. Throws
 * `Crc32cBackendUnknownError` / `Crc32cBackendMissingError` for a pin that cannot be honoured, at every
 * call until it can.
 */
export function chooseCrc32cBackend(): string {
  return crc32cBackend ?? choose().package;
}

function choose(): Crc32cChoice<Backend> {
  const chosen = resolveCrc32cBackend(process.env[CRC32C_PIN_ENV], LOADERS);
  isalBinding = chosen.backend.isal;
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
  return crc32cTable(bytes, start, end, crc);
}

/** CRC32c of `bytes[start, end)` continuing from `crc`, through the table alone (no backend is chosen). */
export function crc32cTable(bytes: Uint8Array, start: number, end: number, crc: number): number {
  let c = ~crc;
  for (let i = start; i < end; i++) c = (TABLE[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC32c of all of `bytes`, continuing from `crc` (a previous result, or 0). */
export function crc32c(bytes: Uint8Array, crc = 0): number {
  return crc32cRange(bytes, 0, bytes.byteLength, crc);
}

/** CRC32c of `count` zero octets (MPA's pad, RFC 5044 §4.2) continuing from `crc`. */
export function crc32cZeros(count: number, crc: number): number {
  let c = ~crc;
  for (let i = 0; i < count; i++) c = (TABLE[c & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC32c of a 16-bit big-endian value (MPA's ULPDU_Length field, or half a Marker) continuing from `crc`. */
export function crc32cU16(value: number, crc: number): number {
  let c = ~crc;
  c = (TABLE[(c ^ (value >>> 8)) & 0xff] as number) ^ (c >>> 8);
  c = (TABLE[(c ^ value) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}
