/**
 * librdmacm rping's application messages, written out by hand from examples/rping.c for raw and
 * stack-built peers in the tests: independent of the tool's own codec (`src/rping/protocol.ts`, which
 * rping.test.ts pins against the same bytes), so a peer built here checks the tool against the format
 * itself.
 */

/** `struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; }`: the 16-octet buffer advertisement a Send carries. */
export function rpingInfo(addr: bigint, rkey: number, size: number): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(addr, 0);
  b.writeUInt32BE(rkey >>> 0, 8);
  b.writeUInt32BE(size >>> 0, 12);
  return new Uint8Array(b.buffer, b.byteOffset, 16);
}

/**
 * A ping buffer as rping's client fills it for ping `ping`: "rdma-ping-<n>: ", then the characters from
 * 'A' upwards (wrapping from 'z' back to 'A'), and a NUL as the last octet.
 */
export function rpingPing(ping: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  const head = new TextEncoder().encode(`rdma-ping-${ping}: `).subarray(0, size);
  b.set(head);
  for (let i = head.length, c = 65; i < size; i++, c = c === 122 ? 65 : c + 1) b[i] = c;
  if (size > 0) b[size - 1] = 0;
  return b;
}
