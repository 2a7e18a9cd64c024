/**
 * CRC32c (Castagnoli), the SCTP checksum (RFC 4960 §6.8, Appendix B), computed once per packet each way:
 * on send by `@rddp/sctp` through `sctpChecksumOfZeroed` (installed with the package's `configure`), on
 * receive here in paths.ts before the package sees the packet (the package's own check is off).
 *
 * Backends, fastest first, as @rddp/llp's `resolveCrc32cBackend` picks them for MPA too
 * (`RDDP_CRC32C=isal | sse4_crc32 | node-rs` pins one; a pin that cannot be honoured is
 * `Crc32cBackendUnknownError` / `Crc32cBackendMissingError`): `@rddp/crc32c-isal` (Intel ISA-L, where
 * built), `sse4_crc32`, `@node-rs/crc32`. Chosen once, when the transport is made or the first checksum
 * is needed: importing this module loads no backend and never throws. Runs shorter than a native call's
 * cost go through a table in JavaScript.
 */
import { createRequire } from 'node:module';
import {
  CRC32C_BACKENDS,
  CRC32C_PIN_ENV,
  type Crc32cChoice,
  type Crc32cLoaders,
  type IsalCrc32cModule,
  type NodeRsCrc32Module,
  resolveCrc32cBackend,
  type Sse4Crc32Module,
} from '@rddp/llp';

const require = createRequire(import.meta.url);

type RangeCrc = (data: Uint8Array, start: number, end: number, crc: number) => number;

/** SCTP's loaders (`RDDP_CRC32C`'s names); each loads its package from here and checks it with its entry's `check`. */
const LOADERS: Crc32cLoaders<RangeCrc> = {
  // The binding's `calculate` does not use `this`: called as it is, with nothing in between.
  isal: () => {
    const m = require(CRC32C_BACKENDS.isal.package) as IsalCrc32cModule;
    return CRC32C_BACKENDS.isal.check(m) ? m.calculate : undefined;
  },
  sse4_crc32: () => {
    const m = require(CRC32C_BACKENDS.sse4_crc32.package) as Sse4Crc32Module;
    return CRC32C_BACKENDS.sse4_crc32.check(m) ? (d, s, e, c) => m.calculate(d.subarray(s, e), c) : undefined;
  },
  'node-rs': () => {
    const m = require(CRC32C_BACKENDS['node-rs'].package) as NodeRsCrc32Module;
    return CRC32C_BACKENDS['node-rs'].check(m)
      ? (d, s, e, c) => m.crc32c(Buffer.from(d.buffer, d.byteOffset + s, e - s), c)
      : undefined;
  },
};

/** The package SCTP packets go through; undefined until chosen. */
let chosenPackage: string | undefined;
/** Long runs: the chosen backend's function (ISA-L's binding itself); undefined until chosen. */
let range: RangeCrc | undefined;
/** Shorter runs than this cost less in the table than one native call; 0 until chosen (every run chooses). */
let nativeMin = 0;

/**
 * Chooses SCTP's CRC32c backend once (`RDDP_CRC32C` as @rddp/llp's `resolveCrc32cBackend` reads it) and
 * returns its package; later calls return it at once. Computes no checksum. Throws
 * `Crc32cBackendUnknownError` / `Crc32cBackendMissingError` for a pin that cannot be honoured, at every
 * call until it can.
 */
export function chooseSctpCrc32cBackend(): string {
  return chosenPackage ?? choose().package;
}

function choose(): Crc32cChoice<RangeCrc> {
  const chosen = resolveCrc32cBackend(process.env[CRC32C_PIN_ENV], LOADERS);
  range = chosen.backend;
  nativeMin = 64;
  chosenPackage = chosen.package;
  return chosen;
}

const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  TABLE[n] = c >>> 0;
}

/** CRC32c of `data[start, end)`, continuing from `crc` (the finished CRC32c of what precedes, or 0). */
export function crc32c(data: Uint8Array, start = 0, end = data.byteLength, crc = 0): number {
  // Until chosen, `nativeMin` is 0 and `range` undefined: the first run chooses.
  if (end - start >= nativeMin) return (range ?? choose().backend)(data, start, end, crc) >>> 0;
  let c = ~crc >>> 0;
  for (let i = start; i < end; i++) c = ((TABLE[(c ^ (data[i] as number)) & 0xff] as number) ^ (c >>> 8)) >>> 0;
  return ~c >>> 0;
}

const ZERO4 = new Uint8Array(4);

/** The checksum an SCTP packet should carry: CRC32c over the packet with its checksum field taken as zero. */
export function sctpChecksum(packet: Uint8Array): number {
  let c = crc32c(packet, 0, 8);
  c = crc32c(ZERO4, 0, 4, c);
  return crc32c(packet, 12, packet.byteLength, c);
}

/** The checksum of a packet whose checksum field already holds zero (what `@rddp/sctp` signs). */
export function sctpChecksumOfZeroed(packet: Uint8Array): number {
  return crc32c(packet, 0, packet.byteLength);
}

/** Whether the packet's checksum (stored little-endian at offset 8, as the sctp package and Linux do) is right. */
export function verifySctpChecksum(packet: Uint8Array): boolean {
  if (packet.byteLength < 12) return false;
  const stored =
    ((packet[8] as number) |
      ((packet[9] as number) << 8) |
      ((packet[10] as number) << 16) |
      ((packet[11] as number) << 24)) >>>
    0;
  return stored === sctpChecksum(packet);
}

/** Writes the packet's checksum in place. */
export function signSctpPacket(packet: Buffer): Buffer {
  packet.writeUInt32LE(sctpChecksum(packet), 8);
  return packet;
}
