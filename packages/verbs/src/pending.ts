/**
 * A queue pair's record of each work request posted and not completed. The queues themselves are the
 * RDMAP Stream's (one send queue and one receive queue per queue pair, as siw keeps them on the QP): the
 * record rides through RDMAP in a token — a send request's `context`, a receive's `receiveId` — and comes
 * back in its completion.
 */
import type { WcOpcode, WorkCompletion, WrId } from './types.js';

/** A work request posted and not completed. */
export interface Pending {
  readonly wrId: WrId | undefined;
  readonly opcode: WcOpcode;
  readonly signaled: boolean;
  readonly settle?: Settle | undefined;
  /** An atomic's 8-octet local element: the original remote value is written there. */
  readonly result?: Uint8Array | undefined;
}

/** The promise of a convenience call, settled by the work request's completion. */
export interface Settle {
  resolve(wc: WorkCompletion): void;
  reject(e: unknown): void;
}

/**
 * The token a work request carries through RDMAP (a send's `context`, a receive's `receiveId`, each echoed
 * in its completion). RDMAP and DDP events show it, so the record sits in private fields: only the queue
 * pair that posted the request reads it back, once. (A token per request in a WeakMap cost more.)
 */
export class WrToken {
  readonly #owner: object;
  #pending: Pending | undefined;

  constructor(owner: object, pending: Pending) {
    this.#owner = owner;
    this.#pending = pending;
  }

  /** The record of `id` if `owner` posted it and it has not completed yet; marks it completed. */
  static take(owner: object, id: unknown): Pending | undefined {
    if (typeof id !== 'object' || id === null || !(#pending in id)) return undefined;
    const t = id as WrToken;
    if (t.#owner !== owner) return undefined;
    const p = t.#pending;
    t.#pending = undefined;
    return p;
  }
}
