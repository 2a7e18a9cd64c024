/**
 * Untagged Buffer Model queues (RFC 5041 §5.1.2, §5.3): per QN, receive buffers posted by the ULP and
 * consumed in MSN order; the MSN of the first posted buffer is 1 (§5.1.2). A message is complete once
 * all of its octets, the L=1 segment's included, are placed (§5.3 rule 5); then it is delivered.
 */
import { type DdpUntaggedHeader, type FlushedReceive, UntaggedErrorCode } from './api.js';

/** Why a segment cannot be placed in its queue (RFC 5041 §7.2, Untagged Buffer Error codes). */
export interface UntaggedFault {
  readonly code: number;
  readonly message: string;
}

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
  private lookup(msn: number): SlotLookup {
    const d = (msn - this.baseMsn) >>> 0;
    if (d >= HALF) return 'range-not-valid';
    if (d >= (this.nextMsn - this.baseMsn) >>> 0) return 'no-buffer';
    return this.open.get(msn) ?? 'range-not-valid';
  }

  /**
   * One segment of `n` payload octets (RFC 5041 §7.1 untagged checks 3–5, then its bookkeeping): the slot
   * whose buffer takes the payload at `h.mo` — marked `complete`, and out of the window, once every octet
   * of its message is placed (§5.3 rule 5) — or 'duplicate' (an unreliable LLP's repeat, DDPP core draft
   * §3), or why not. Nothing is placed here: the caller copies, the checks having passed.
   */
  accept(
    h: DdpUntaggedHeader,
    n: number,
    strict: boolean,
    reliable: boolean,
  ): ReceiveSlot | UntaggedFault | 'duplicate' {
    const E = UntaggedErrorCode;
    const slot = this.lookup(h.msn);
    if (slot === 'range-not-valid') {
      if (!reliable) return 'duplicate'; // an unreliable LLP may duplicate; the set already happened
      return {
        code: E.InvalidMsnRangeNotValid,
        message: `MSN ${h.msn} on QN ${h.qn} is outside the window of available buffers`,
      };
    }
    if (slot === 'no-buffer')
      return {
        code: E.InvalidMsnNoBufferAvailable,
        message: `no receive buffer posted for MSN ${h.msn} on QN ${h.qn}`,
      };
    const cap = slot.buffer.length;
    if (h.mo > cap || (strict && h.mo !== slot.nextMo) || (slot.length !== undefined && h.mo + n > slot.length))
      return {
        code: E.InvalidMo,
        message: `MO ${h.mo} is not a legal offset for MSN ${h.msn} on QN ${h.qn}${strict ? ` (expected ${slot.nextMo})` : ''}`,
      };
    if (h.mo + n > cap)
      return { code: E.MessageTooLong, message: `message needs ${h.mo + n} octets, the posted buffer has ${cap}` };
    if (!strict) {
      // A set may happen more than once (DDPP core draft §3): count each segment's octets once.
      slot.seen ??= new Set();
      if (slot.seen.has(h.mo)) return 'duplicate';
      slot.seen.add(h.mo);
    }
    slot.placed += n;
    slot.nextMo = h.mo + n;
    if (h.last) {
      slot.length = h.mo + n;
      slot.rsvdUlp = h.rsvdUlp;
    }
    if (slot.length !== undefined && slot.placed >= slot.length) this.complete(slot);
    return slot;
  }

  /** Marks `slot` complete and drops it; the window's start moves to the oldest buffer still open. */
  private complete(slot: ReceiveSlot): void {
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
