/**
 * CRC32c (Castagnoli), the SCTP checksum (RFC 4960 §6.8, Appendix B), slicing-by-8.
 * Used to verify every inbound packet (the sctp package computes it but does not drop mismatches)
 * and to re-sign the INIT/INIT ACK packets the adaptation shim extends.
 */
const T = new Uint32Array(8 * 256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  T[n] = c >>> 0;
}
for (let n = 0; n < 256; n++) {
  let c = T[n] as number;
  for (let s = 1; s < 8; s++) {
    c = ((T[c & 0xff] as number) ^ (c >>> 8)) >>> 0;
    T[s * 256 + n] = c;
  }
}

/** CRC32c of `data[start, end)`, optionally continuing from `crc` (the finalized value of the prefix). */
export function crc32c(data: Uint8Array, start = 0, end = data.byteLength, crc = 0): number {
  let c = ~crc >>> 0;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const a =
      (c ^
        ((data[i] as number) |
          ((data[i + 1] as number) << 8) |
          ((data[i + 2] as number) << 16) |
          ((data[i + 3] as number) << 24))) >>>
      0;
    c =
      ((T[7 * 256 + (a & 0xff)] as number) ^
        (T[6 * 256 + ((a >>> 8) & 0xff)] as number) ^
        (T[5 * 256 + ((a >>> 16) & 0xff)] as number) ^
        (T[4 * 256 + (a >>> 24)] as number) ^
        (T[3 * 256 + (data[i + 4] as number)] as number) ^
        (T[2 * 256 + (data[i + 5] as number)] as number) ^
        (T[256 + (data[i + 6] as number)] as number) ^
        (T[data[i + 7] as number] as number)) >>>
      0;
  }
  for (; i < end; i++) c = ((T[(c ^ (data[i] as number)) & 0xff] as number) ^ (c >>> 8)) >>> 0;
  return ~c >>> 0;
}

/** The checksum an SCTP packet should carry: CRC32c over the packet with its checksum field taken as zero. */
export function sctpChecksum(packet: Uint8Array): number {
  let c = crc32c(packet, 0, 8);
  c = crc32c(ZERO4, 0, 4, c);
  return crc32c(packet, 12, packet.byteLength, c);
}
const ZERO4 = new Uint8Array(4);

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
