/**
 * TCP stream reassembly for the dissector: per direction, octets in sequence order from the first
 * segment seen (the SYN when captured), retransmissions and overlaps dropped, out-of-order segments held
 * (bounded) until the gap fills. A gap that never fills ends decoding of that direction.
 * Held segments are kept in a min-heap by stream offset: an arrival looks at the lowest held segment
 * only (O(log n) per segment taken), never at all of them.
 */

import { STATE_COST, StateMeter } from './meter.js';

/** Most octets, and segments, held out of order per direction before the direction is given up. */
export const MAX_TCP_OUT_OF_ORDER = 8 << 20;
export const MAX_TCP_OUT_OF_ORDER_SEGMENTS = 4096;

export interface Delivery {
  readonly frame: number;
  readonly bytes: Uint8Array;
}

interface Held {
  readonly frame: number;
  readonly seq: number;
  /** Stream offset of the first octet (sequence numbers unwrapped). */
  readonly at: number;
  readonly bytes: Uint8Array;
}

/**
 * Held segments looked at, over every direction: each arrival costs O(1) plus O(log n) per held
 * segment it takes (the tests count these to show an arrival does not rescan what is held).
 */
export const tcpReassemblyWork = { heldVisits: 0 };

export class TcpDirection {
  /** Sequence number of the next in-order octet; undefined until the first segment. */
  private next: number | undefined;
  /** Stream offset of `next` (octets delivered so far). */
  private nextAt = 0;
  /** Held segments by sequence number (one per sequence number) and as a min-heap by stream offset. */
  private readonly bySeq = new Set<number>();
  private heap: Held[] = [];
  private heldBytes = 0;
  /** Set when a gap could not be filled (lost from the capture). */
  lost = false;

  constructor(private readonly meter: StateMeter = new StateMeter()) {}

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
    // Take held segments that became in order, lowest stream offset first.
    while (!this.lost && this.heap.length > 0) {
      tcpReassemblyWork.heldVisits++;
      const h = this.heap[0] as Held;
      if (h.at > this.nextAt) break;
      this.pop();
      this.bySeq.delete(h.seq);
      this.heldBytes -= h.bytes.byteLength;
      this.meter.add(-(h.bytes.byteLength + STATE_COST.segment));
      this.accept(h.frame, h.seq, h.bytes, out);
    }
    return out;
  }

  private accept(frame: number, seq: number, payload: Uint8Array, out: Delivery[]): void {
    const rel = (seq - (this.next as number)) | 0;
    if (rel > 0) {
      if (!this.bySeq.has(seq)) {
        this.bySeq.add(seq);
        // A copy of its own: a view would keep the whole captured packet alive for a few octets.
        this.insert({ frame, seq, at: this.nextAt + rel, bytes: new Uint8Array(payload) });
        this.heldBytes += payload.byteLength;
        this.meter.add(payload.byteLength + STATE_COST.segment);
        if (this.heldBytes > MAX_TCP_OUT_OF_ORDER || this.heap.length > MAX_TCP_OUT_OF_ORDER_SEGMENTS) this.giveUp();
      }
      return;
    }
    const skip = -rel;
    if (skip >= payload.byteLength) return; // retransmission of octets already delivered
    const bytes = payload.subarray(skip);
    out.push({ frame, bytes });
    this.next = ((this.next as number) + bytes.byteLength) >>> 0;
    this.nextAt += bytes.byteLength;
  }

  /** Ends decoding of this direction: what is held is let go. */
  giveUp(): void {
    this.lost = true;
    this.meter.add(-(this.heldBytes + this.heap.length * STATE_COST.segment));
    this.heap = [];
    this.bySeq.clear();
    this.heldBytes = 0;
  }

  private insert(h: Held): void {
    const a = this.heap;
    let i = a.push(h) - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p] as Held;
      if (parent.at <= h.at) break;
      a[i] = parent;
      i = p;
    }
    a[i] = h;
  }

  private pop(): void {
    const a = this.heap;
    const last = a.pop() as Held;
    if (a.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const c = r < a.length && (a[r] as Held).at < (a[l] as Held).at ? r : l;
      if ((a[c] as Held).at >= last.at) break;
      a[i] = a[c] as Held;
      i = c;
    }
    a[i] = last;
  }

  /** Octets still held out of order (a gap at the end of the capture). */
  get pending(): number {
    return this.heldBytes;
  }

  /** Segments still held out of order. */
  get heldSegments(): number {
    return this.heap.length;
  }
}
