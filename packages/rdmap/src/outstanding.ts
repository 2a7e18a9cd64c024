/**
 * Requests in flight whose Responses arrive, and are Delivered, in the order the Requests were sent
 * (RFC 5040 §5.5 rule 20 for RDMA Reads, RFC 7306 for atomics), and the form of a failed receive check.
 */
import type { UlpCheckFailure } from '@rddp/ddp';

/** A failed RDMAP receive check: the Terminate's RDMA-layer Error Type and Code (RFC 5040 §4.8), and why. */
export function rdmapFailure(type: number, code: number, message: string): UlpCheckFailure {
  return { layer: 'rdmap', type, code, message };
}

/** The requester's queue of Requests in flight, oldest first, and how many at its head have their Response complete. */
export abstract class OutstandingQueue<E> {
  protected readonly queue: E[] = [];
  /** Requests at the head whose Response has arrived whole (and passed its check) but is not Delivered yet. */
  protected arrived = 0;

  get count(): number {
    return this.queue.length;
  }
  add(entry: E): E {
    this.queue.push(entry);
    return entry;
  }

  /** The Response of the oldest Request was Delivered (RFC 5040 §5.5 rule 19): it leaves the queue. */
  completeOldest(): E | undefined {
    const e = this.queue.shift();
    if (e !== undefined && this.arrived > 0) this.arrived--;
    return e;
  }

  /** Removes and returns every Request (stream end). */
  drain(): E[] {
    this.arrived = 0;
    return this.queue.splice(0);
  }
}
