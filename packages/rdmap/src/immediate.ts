/**
 * RFC 7306 Immediate Data: the Immediate Data and Immediate Data with Solicited Event messages carry
 * exactly 64 bits of ULP data (not InfiniBand's 32), untagged on QN 0, consuming a posted receive buffer.
 */
import { MAX_U64 } from '@rddp/ddp';

/** The Immediate Data Header: 64 bits, the message's whole payload. */
export const IMMEDIATE_DATA_LENGTH = 8;

export function encodeImmediateData(data: bigint, out = new Uint8Array(IMMEDIATE_DATA_LENGTH)): Uint8Array {
  if (typeof data !== 'bigint' || data < 0n || data > MAX_U64)
    throw new RangeError('Immediate Data is a 64-bit unsigned bigint');
  if (out.byteLength < IMMEDIATE_DATA_LENGTH) throw new RangeError('Immediate Data needs 8 octets');
  new DataView(out.buffer, out.byteOffset, IMMEDIATE_DATA_LENGTH).setBigUint64(0, data);
  return out;
}

export function decodeImmediateData(bytes: Uint8Array): bigint {
  if (bytes.byteLength < IMMEDIATE_DATA_LENGTH) throw new RangeError('Immediate Data needs 8 octets');
  return new DataView(bytes.buffer, bytes.byteOffset, IMMEDIATE_DATA_LENGTH).getBigUint64(0);
}
