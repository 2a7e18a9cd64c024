/**
 * A queue pair's work posted and not completed (siw keeps its send queue as a ring on the QP): the send
 * queue in submission order, since RDMAP completes send-queue work in that order (RFC 5040 §5.5 rule 15),
 * so each completion is normally the head's; receives by the opaque token RDMAP carries for each.
 */
import { Fifo } from '@rddp/llp';
import type { RdmapWorkRequest } from '@rddp/rdmap';
import type { WcOpcode, WorkCompletion, WrId } from './types.js';

/** A work request posted and not completed. */
export interface Pending {
  readonly wrId: WrId | undefined;
  readonly opcode: WcOpcode;
  readonly signaled: boolean;
  readonly settle?: Settle | undefined;
  /** An atomic's 8-octet local element: the original remote value is written there. */
  readonly result?: Uint8Array | undefined;
  /** A send's request as handed to RDMAP: its completion names it (`request`). */
  readonly request?: RdmapWorkRequest;
}

/** The promise of a convenience call, settled by the work request's completion. */
export interface Settle {
  resolve(wc: WorkCompletion): void;
  reject(e: unknown): void;
}

/** Send work in submission order. */
export class PendingSends {
  private readonly list = new Fifo<Pending>();

  push(p: Pending): void {
    this.list.push(p);
  }

  /** The pending send whose RDMAP request completed: the head, unless RDMAP reported out of order. */
  take(request: RdmapWorkRequest): Pending | undefined {
    if (this.list.peek()?.request === request) return this.list.shift();
    const p = this.list.find((q) => q.request === request);
    if (p === undefined) return undefined; // work posted on the RDMAP Stream directly, not through this queue pair
    this.list.remove(p);
    return p;
  }
}

/**
 * The id a receive work request carries through RDMAP (its `receiveId`, echoed in its completion). RDMAP
 * and DDP events show it, so the record sits in private fields: only the queue pair that posted the
 * receive reads it back, once. (A token per receive in a WeakMap cost ≈1 µs per posted receive.)
 */
export class RecvToken {
  readonly #owner: object;
  #pending: Pending | undefined;

  constructor(owner: object, pending: Pending) {
    this.#owner = owner;
    this.#pending = pending;
  }

  /** The record of `id` if `owner` posted it and it has not completed yet; marks it completed. */
  static take(owner: object, id: unknown): Pending | undefined {
    if (typeof id !== 'object' || id === null || !(#pending in id)) return undefined;
    const t = id as RecvToken;
    if (t.#owner !== owner) return undefined;
    const p = t.#pending;
    t.#pending = undefined;
    return p;
  }
}
