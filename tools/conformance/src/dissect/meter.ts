/**
 * What decoding state costs, so that the dissector's memory has one bound whatever the capture: each
 * connection (TCP connection, SCTP association, UDP flow) has a StateMeter its parts add to and take
 * from as they hold and let go of things — held segments and fragments with their octets, open
 * messages, outstanding Reads, DDP Streams, TSNs — at the estimated costs below. The dissector sums the
 * meters; a connection whose packet takes the sum over the budget is given up (its state let go).
 */

/** Decoding state kept at once, over every connection, unless `DissectOptions.maxStateOctets` says otherwise. */
export const DEFAULT_MAX_STATE_OCTETS = 64 << 20;

/**
 * Estimated octets of memory per item held, on top of the octets it holds (measured with V8's heap and
 * external counters on Node 20: a held 1-octet TCP segment 293, a DDP Stream 395, with one direction
 * and an open message 979, an open message 150).
 */
export const STATE_COST = {
  /** A held TCP segment or SCTP fragment (object, index entries, its own ArrayBuffer). */
  segment: 288,
  /** A chunk of octets held before the MPA Reply. */
  early: 256,
  /** An FPDU reader (its initial buffer; its growth is counted as it grows). */
  reader: 4096,
  /** A DDP Stream (its tables). */
  stream: 512,
  /** One direction of a DDP Stream or an SCTP association. */
  direction: 512,
  /** A message open (not yet L) on a DDP Stream. */
  message: 192,
  /** An outstanding RDMA Read Request. */
  read: 160,
  /** A TSN remembered to drop retransmissions (set entry, ring slot). */
  tsn: 48,
} as const;

export class StateMeter {
  /** Estimated octets held now. */
  cost = 0;
  /** What the dissector last added to its sum for this meter. */
  counted = 0;

  add(n: number): void {
    this.cost += n;
  }
}
