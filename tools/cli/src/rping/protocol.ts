/**
 * librdmacm rping's application protocol (examples/rping.c), byte for byte, so `rddp rping` can face a
 * real rping: a 16-octet buffer advertisement `struct rping_rdma_info { __be64 buf; __be32 rkey;
 * __be32 size; }` carried by a Send, and the ping text rping puts in its source buffer.
 */
export const RPING_INFO_LENGTH = 16;
export const RPING_DEFAULT_PORT = 7174;
export const RPING_DEFAULT_SIZE = 64;
/** rping's RPING_MIN_BUFSIZE: twice sizeof(stringify(INT_MAX)) ("2147483647" + NUL = 11 octets). */
export const RPING_MIN_SIZE = 22;
export const RPING_MAX_SIZE = 0x7fff_ffff;

export interface RpingInfo {
  /** The buffer's address: the Tagged Offset its region was registered at. */
  readonly addr: bigint;
  /** The STag. */
  readonly rkey: number;
  readonly size: number;
}

export function encodeInfo(i: RpingInfo, out = new Uint8Array(RPING_INFO_LENGTH)): Uint8Array {
  const v = new DataView(out.buffer, out.byteOffset, RPING_INFO_LENGTH);
  v.setBigUint64(0, i.addr);
  v.setUint32(8, i.rkey >>> 0);
  v.setUint32(12, i.size >>> 0);
  return out;
}

export function decodeInfo(b: Uint8Array): RpingInfo {
  if (b.length < RPING_INFO_LENGTH) throw new RangeError(`rping buffer advertisement of ${b.length} octets (needs 16)`);
  const v = new DataView(b.buffer, b.byteOffset, RPING_INFO_LENGTH);
  return { addr: v.getBigUint64(0), rkey: v.getUint32(8), size: v.getUint32(12) };
}

/**
 * Fills `buf` as rping's client does for ping number `ping`: "rdma-ping-%d: ", then characters from
 * `start` upwards wrapping from 'z' (122) back to 'A' (65), and a NUL as the last octet. Returns the
 * next iteration's start character.
 */
export function fillPing(buf: Uint8Array, ping: number, start: number): number {
  const head = new TextEncoder().encode(`rdma-ping-${ping}: `);
  const cc = Math.min(head.length, buf.length);
  buf.set(head.subarray(0, cc));
  let c = start;
  for (let i = cc; i < buf.length; i++) {
    buf[i] = c;
    c++;
    if (c > 122) c = 65;
  }
  if (buf.length > 0) buf[buf.length - 1] = 0;
  const next = start + 1;
  return next > 122 ? 65 : next;
}

/** strlen(): octets before the first NUL. */
export function cStringLength(buf: Uint8Array): number {
  const z = buf.indexOf(0);
  return z < 0 ? buf.length : z;
}

export function cString(buf: Uint8Array): string {
  return new TextDecoder().decode(buf.subarray(0, cStringLength(buf)));
}
