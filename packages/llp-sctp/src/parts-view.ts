/**
 * A ULPDU given as parts, shaped like the Buffer the sctp package's SEND expects (`length`, `slice`,
 * `copy`), so a multi-part ULPDU (DDP header + payload slices) reaches the wire without being
 * concatenated first: the package slices it into DATA chunks and copies each chunk's user data once,
 * straight from the caller's parts, when it encodes the chunk.
 */
export class PartsView {
  private readonly parts: readonly Buffer[];
  readonly length: number;

  private constructor(parts: readonly Buffer[], length: number) {
    this.parts = parts;
    this.length = length;
  }

  /** A Buffer (zero-copy view) for one part, a PartsView for several. */
  static of(parts: readonly Uint8Array[]): Buffer | PartsView {
    const bufs: Buffer[] = [];
    let length = 0;
    for (const p of parts) {
      if (p.byteLength === 0) continue;
      bufs.push(asBuffer(p));
      length += p.byteLength;
    }
    if (bufs.length === 0) return Buffer.alloc(0);
    if (bufs.length === 1) return bufs[0] as Buffer;
    return new PartsView(bufs, length);
  }

  /** Octets [start, end) as a zero-copy view: a Buffer when they lie in one part. */
  slice(start = 0, end = this.length): Buffer | PartsView {
    start = Math.max(0, Math.min(start, this.length));
    end = Math.max(start, Math.min(end, this.length));
    const out: Buffer[] = [];
    let base = 0;
    for (const p of this.parts) {
      const pEnd = base + p.byteLength;
      if (pEnd > start && base < end)
        out.push(p.subarray(Math.max(0, start - base), Math.min(p.byteLength, end - base)));
      if (pEnd >= end) break;
      base = pEnd;
    }
    if (out.length === 1) return out[0] as Buffer;
    if (out.length === 0) return Buffer.alloc(0);
    return new PartsView(out, end - start);
  }

  /** Copies all octets into `target` at `targetStart` (the one copy the package makes when encoding). */
  copy(target: Uint8Array, targetStart = 0): number {
    let off = targetStart;
    for (const p of this.parts) {
      target.set(p, off);
      off += p.byteLength;
    }
    return off - targetStart;
  }
}

function asBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
