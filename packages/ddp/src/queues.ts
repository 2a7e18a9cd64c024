/**
 * Untagged Buffer Model queues (RFC 5041 §5.1.2, §5.3): per QN, receive buffers posted by the ULP and
 * consumed in MSN order; the MSN of the first posted buffer is 1 (§5.1.2). A message is complete once
 * all of its octets, the L=1 segment's included, are placed (§5.3 rule 5); then it is delivered.
 */
import type { FlushedReceive } from './api.js';

export interface ReceiveSlot {
  readonly msn: number;
  readonly buffer: Uint8Array;
  readonly receiveId: unknown;
  /** Octets placed so far. */
  placed: number;
  /** MO the next in-order segment must carry (ordered LLPs). */
  nextMo: number;
  /** Message length, known once the L=1 segment arrived. */
  length: number | undefined;
  rsvdUlp: number;
  complete: boolean;
  /** MOs already placed (kept only on LLPs that may duplicate or reorder), so a duplicate is not counted twice. */
  seen: Set<number> | undefined;
}

export type SlotLookup = ReceiveSlot | 'no-buffer' | 'range-not-valid';

const HALF = 0x8000_0000;

export class UntaggedQueue {
  /** Posted slots, oldest first; the first has MSN `baseMsn`. */
  private readonly slots: ReceiveSlot[] = [];
  /** MSN of the oldest not-yet-completed message (starts at 1, §5.1.2). */
  private baseMsn = 1;

  constructor(readonly qn: number) {}

  get posted(): number {
    return this.slots.filter((s) => !s.complete).length;
  }

  post(buffer: Uint8Array, receiveId: unknown): void {
    const msn = (this.baseMsn + this.slots.length) >>> 0;
    this.slots.push({
      msn,
      buffer,
      receiveId,
      placed: 0,
      nextMo: 0,
      length: undefined,
      rsvdUlp: 0,
      complete: false,
      seen: undefined,
    });
  }

  /** §7.1 check 5: the MSN lies between the first and the last available buffer's MSN. */
  lookup(msn: number): SlotLookup {
    const d = (msn - this.baseMsn) >>> 0;
    if (d >= HALF) return 'range-not-valid'; // before the window: a message already completed
    if (d >= this.slots.length) return 'no-buffer';
    const s = this.slots[d] as ReceiveSlot;
    return s.complete ? 'range-not-valid' : s;
  }

  /** Marks `slot` complete and drops completed slots from the front, advancing the window. */
  complete(slot: ReceiveSlot): void {
    slot.complete = true;
    while (this.slots.length > 0 && (this.slots[0] as ReceiveSlot).complete) {
      this.slots.shift();
      this.baseMsn = (this.baseMsn + 1) >>> 0;
    }
  }

  /** Takes back every posted, not completed buffer, in MSN order; the next message then finds no buffer. */
  flush(): FlushedReceive[] {
    const out = this.slots
      .filter((s) => !s.complete)
      .map((s) => ({ qn: this.qn, msn: s.msn, buffer: s.buffer, receiveId: s.receiveId, placed: s.placed }));
    // Completed slots only sit behind an incomplete one; the window restarts at the first incomplete MSN.
    const firstOpen = this.slots.find((s) => !s.complete);
    if (firstOpen) this.baseMsn = firstOpen.msn;
    this.slots.length = 0;
    return out;
  }
}
