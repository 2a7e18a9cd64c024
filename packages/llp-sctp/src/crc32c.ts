/**
 * CRC32c (Castagnoli), the SCTP checksum (RFC 4960 §6.8, Appendix B), computed once per packet each way:
 * on send by `@rddp/sctp` through `sctpChecksumOfZeroed` (installed with the package's `configure`), on
 * receive here in paths.ts before the package sees the packet (the package's own check is off).
 *
 * Backends, fastest first, as MPA picks them (`RDDP_CRC32C=isal | sse4_crc32 | node-rs` pins one;
 * a pinned backend that does not load is `SctpCrc32cBackendError`):
 * `@rddp/crc32c-isal` (Intel ISA-L, where built), `sse4_crc32`, `@node-rs/crc32`. Runs shorter than a
 * native call's cost go through a table in JavaScript.
 */
import { createRequire } from 'node:module';
import { crc32c as nodeRsCrc32c } from '@node-rs/crc32';
import { SctpCrc32cBackendError } from './errors.js';

const require = createRequire(import.meta.url);
const pinned = process.env.RDDP_CRC32C;
const CHECK = new TextEncoder().encode('123456789'); // check value 0xE3069283 (RFC 3720 §B.4)

type RangeCrc = (data: Uint8Array, start: number, end: number, crc: number) => number;

interface Backend {
  readonly name: string;
  readonly range: RangeCrc;
}

function loadBackend(): Backend {
  const wanted = (name: string) => pinned === undefined || pinned === name;
  if (wanted('isal')) {
    try {
      const m = require('@rddp/crc32c-isal') as { calculate: RangeCrc };
      if (m.calculate(CHECK, 0, CHECK.length, 0) === 0xe3069283)
        return { name: '@rddp/crc32c-isal', range: m.calculate };
    } catch {
      // not built here
    }
  }
  if (wanted('sse4_crc32')) {
    try {
      const m = require('sse4_crc32') as {
        calculate(b: Uint8Array, initial?: number): number;
        hardware_support: boolean;
      };
      if (m.hardware_support && m.calculate(CHECK) === 0xe3069283) {
        return { name: 'sse4_crc32', range: (d, s, e, c) => m.calculate(d.subarray(s, e), c) };
      }
    } catch {
      // not installed
    }
  }
  return {
    name: '@node-rs/crc32',
    range: (d, s, e, c) => nodeRsCrc32c(Buffer.from(d.buffer, d.byteOffset + s, e - s), c),
  };
}

const backend = loadBackend();
/** The package each `RDDP_CRC32C` value pins. */
const PINNED: Readonly<Record<string, string>> = {
  isal: '@rddp/crc32c-isal',
  sse4_crc32: 'sse4_crc32',
  'node-rs': '@node-rs/crc32',
};
// A pin is never ignored: a backend it names that does not load here is an error (`rddp doctor` says why).
if (pinned !== undefined && PINNED[pinned] !== backend.name)
  throw new SctpCrc32cBackendError(
    PINNED[pinned] === undefined
      ? `RDDP_CRC32C=${pinned} names no CRC32c backend (one of: ${Object.keys(PINNED).join(', ')})`
      : `RDDP_CRC32C=${pinned} pins ${PINNED[pinned]}, which does not load here (see \`rddp doctor\`); or unset RDDP_CRC32C`,
  );

/** Which CRC32c implementation SCTP packets go through. */
export const sctpCrc32cBackend: string = backend.name;

const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  TABLE[n] = c >>> 0;
}
/** Shorter runs than this cost less in the table than one native call. */
const NATIVE_MIN = 64;

/** CRC32c of `data[start, end)`, continuing from `crc` (the finished CRC32c of what precedes, or 0). */
export function crc32c(data: Uint8Array, start = 0, end = data.byteLength, crc = 0): number {
  if (end - start >= NATIVE_MIN) return backend.range(data, start, end, crc) >>> 0;
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
