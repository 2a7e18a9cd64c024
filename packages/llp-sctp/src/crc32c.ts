/**
 * CRC32c (Castagnoli), the SCTP checksum (RFC 4960 §6.8, Appendix B; RFC 3309), computed once per packet
 * each way: on send by `@rddp/sctp` through `sctpChecksumOfZeroed` (installed with the package's
 * `configure`), on receive here in paths.ts before the package sees the packet (the package's own check is
 * off).
 *
 * The CRC, its backends and their once-only choice are @rddp/crc32c's, shared with MPA/TCP
 * (`RDDP_CRC32C=isal | sse4_crc32 | node-rs` pins one; a pin that cannot be honoured is
 * `Crc32cBackendUnknownError` / `Crc32cBackendMissingError`): importing this module loads no backend and
 * never throws.
 */
import { crc32cRange } from '@rddp/crc32c';

export { chooseCrc32cBackend as chooseSctpCrc32cBackend } from '@rddp/crc32c';

/** CRC32c of `data[start, end)`, continuing from `crc` (the finished CRC32c of what precedes, or 0). */
export function crc32c(data: Uint8Array, start = 0, end = data.byteLength, crc = 0): number {
  return crc32cRange(data, start, end, crc);
}

const ZERO4 = new Uint8Array(4);

/** The checksum an SCTP packet should carry: CRC32c over the packet with its checksum field taken as zero. */
export function sctpChecksum(packet: Uint8Array): number {
  let c = crc32cRange(packet, 0, 8, 0);
  c = crc32cRange(ZERO4, 0, 4, c);
  return crc32cRange(packet, 12, packet.byteLength, c);
}

/** The checksum of a packet whose checksum field already holds zero (what `@rddp/sctp` signs). */
export function sctpChecksumOfZeroed(packet: Uint8Array): number {
  return crc32cRange(packet, 0, packet.byteLength, 0);
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
