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

/**
 * One untagged queue's receive window. Only posted, not yet completed buffers are held (keyed by MSN), so
 * memory is bounded by what the ULP posted whatever order messages complete in (RFC 5041 §5.3): a message
 * that never arrives (an MSN hole) pins its own buffer, not every buffer posted after it.
 */
export class UntaggedQueue {
  /** Posted, not completed slots by MSN, in posting (= MSN) order. */
  private readonly open = new Map<number, ReceiveSlot>();
  /** MSN of the oldest not-yet-completed message (starts at 1, §5.1.2); equals `nextMsn` when none is open. */
  private baseMsn = 1;
  /** MSN the next posted buffer gets. */
  private nextMsn = 1;

  constructor(
    readonly qn: number,
    /** MSN of the first message this queue takes: 1, or later when the LLP took some at setup. */
    firstMsn = 1,
  ) {
    this.baseMsn = this.nextMsn = firstMsn >>> 0;
  }

  /** Buffers posted and not completed. */
  get posted(): number {
    return this.open.size;
  }

  post(buffer: Uint8Array, receiveId: unknown): void {
    const msn = this.nextMsn;
    this.nextMsn = (msn + 1) >>> 0;
    this.open.set(msn, {
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

  /**
   * §7.1 check 5: the MSN lies between the first and the last available buffer's MSN. Below the window, or
   * a message inside it that already completed: "MSN range is not valid"; beyond the last posted buffer:
   * "no buffer available" (§7.2).
   */
  lookup(msn: number): SlotLookup {
    const d = (msn - this.baseMsn) >>> 0;
    if (d >= HALF) return 'range-not-valid';
    if (d >= (this.nextMsn - this.baseMsn) >>> 0) return 'no-buffer';
    return this.open.get(msn) ?? 'range-not-valid';
  }

  /** Marks `slot` complete and drops it; the window's start moves to the oldest buffer still open. */
  complete(slot: ReceiveSlot): void {
    slot.complete = true;
    this.open.delete(slot.msn);
    if (slot.msn !== this.baseMsn) return;
    const first = this.open.keys().next();
    this.baseMsn = first.done ? this.nextMsn : first.value;
  }

  /** Takes back every posted, not completed buffer, in MSN order; the next message then finds no buffer. */
  flush(): FlushedReceive[] {
    const out: FlushedReceive[] = [];
    for (const s of this.open.values())
      out.push({ qn: this.qn, msn: s.msn, buffer: s.buffer, receiveId: s.receiveId, placed: s.placed });
    // The window restarts at the first flushed MSN: buffers posted later take those MSNs again.
    if (out.length > 0) this.baseMsn = this.nextMsn = (out[0] as FlushedReceive).msn;
    this.open.clear();
    return out;
  }
}
