/**
 * CRC32c (Castagnoli; RFC 3720 §12.1 / B.4) as MPA uses it (RFC 5044 §4.4), computed over pieces so
 * header, ULPDU, Markers and pad need no concatenation. On the wire the CRC goes least significant
 * octet first, as deployed implementations put it.
 */
import { crc32c as crc32cNative } from '@node-rs/crc32';

/** CRC32c of `piece` continuing from `crc` (0 to start). */
export function crc32cUpdate(crc: number, piece: Uint8Array): number {
  if (piece.byteLength === 0) return crc >>> 0;
  return crc32cNative(piece, crc) >>> 0;
}

/** CRC32c over the pieces, in order. */
export function crc32c(...pieces: Uint8Array[]): number {
  let crc = 0;
  for (const p of pieces) crc = crc32cUpdate(crc, p);
  return crc;
}

/** Writes an MPA CRC into `out` at `offset`, least significant octet first. */
export function writeMpaCrc(out: Uint8Array, offset: number, crc: number): void {
  out[offset] = crc & 0xff;
  out[offset + 1] = (crc >>> 8) & 0xff;
  out[offset + 2] = (crc >>> 16) & 0xff;
  out[offset + 3] = (crc >>> 24) & 0xff;
}

/** Reads an MPA CRC field (least significant octet first). */
export function readMpaCrc(bytes: Uint8Array, offset: number): number {
  return (
    ((bytes[offset] as number) |
      ((bytes[offset + 1] as number) << 8) |
      ((bytes[offset + 2] as number) << 16) |
      ((bytes[offset + 3] as number) << 24)) >>>
    0
  );
}
