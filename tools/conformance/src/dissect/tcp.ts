/**
 * TCP stream reassembly for the dissector: per direction, octets in sequence order from the first
 * segment seen (the SYN when captured), retransmissions and overlaps dropped, out-of-order segments held
 * (bounded) until the gap fills. A gap that never fills ends decoding of that direction.
 */

/** Most octets, and segments, held out of order per direction before the direction is given up. */
export const MAX_TCP_OUT_OF_ORDER = 8 << 20;
export const MAX_TCP_OUT_OF_ORDER_SEGMENTS = 4096;

export interface Delivery {
  readonly frame: number;
  readonly bytes: Uint8Array;
}

export class TcpDirection {
  /** Sequence number of the next in-order octet; undefined until the first segment. */
  private next: number | undefined;
  private readonly held = new Map<number, Delivery & { seq: number }>();
  private heldBytes = 0;
  /** Set when a gap could not be filled (lost from the capture). */
  lost = false;

  /** A SYN: data starts at seq + 1. */
  syn(seq: number): void {
    if (this.next === undefined) this.next = (seq + 1) >>> 0;
  }

  /** Adds a segment; returns the octets now in order. */
  push(frame: number, seq: number, payload: Uint8Array): Delivery[] {
    if (this.lost || payload.byteLength === 0) return [];
    if (this.next === undefined) this.next = seq;
    const out: Delivery[] = [];
    this.accept(frame, seq, payload, out);
    // Drain held segments that became in order.
    let progress = true;
    while (progress && this.held.size > 0) {
      progress = false;
      for (const [k, h] of this.held) {
        const rel = (h.seq - (this.next as number)) | 0;
        if (rel <= 0) {
          this.held.delete(k);
          this.heldBytes -= h.bytes.byteLength;
          this.accept(h.frame, h.seq, h.bytes, out);
          progress = true;
        }
      }
    }
    return out;
  }

  private accept(frame: number, seq: number, payload: Uint8Array, out: Delivery[]): void {
    const rel = (seq - (this.next as number)) | 0;
    if (rel > 0) {
      if (!this.held.has(seq)) {
        this.held.set(seq, { frame, seq, bytes: payload });
        this.heldBytes += payload.byteLength;
        if (this.heldBytes > MAX_TCP_OUT_OF_ORDER || this.held.size > MAX_TCP_OUT_OF_ORDER_SEGMENTS) {
          this.lost = true;
          this.held.clear();
          this.heldBytes = 0;
        }
      }
      return;
    }
    const skip = -rel;
    if (skip >= payload.byteLength) return; // retransmission of octets already delivered
    const bytes = payload.subarray(skip);
    out.push({ frame, bytes });
    this.next = ((this.next as number) + bytes.byteLength) >>> 0;
  }

  /** Octets still held out of order (a gap at the end of the capture). */
  get pending(): number {
    return this.heldBytes;
  }
}
