/** The operations RDMAP offers its ULP (RFC 5040 §3.2) and what comes back from them. */
import type { AtomicOpcode } from './atomic.js';
import type { RdmapError } from './errors.js';
import type { RdmapStreamState } from './state.js';
import type { TerminateHeader } from './terminate.js';

/**
 * RFC 7306 Immediate Data sent after a Write or Send: the peer's next posted receive completes with the
 * 64 bits. `solicited` sends Immediate Data with Solicited Event.
 */
export interface ImmediateData {
  readonly data: bigint;
  readonly solicited?: boolean;
}

/** RDMA Write (§5.1): one Tagged Message into the Data Sink's STag at its TO. */
export interface WriteOperation {
  readonly type: 'write';
  readonly sinkStag: number;
  readonly sinkTo: bigint;
  /** The ULP Message, as a gather list of slices (sent without concatenation). */
  readonly payload: readonly Uint8Array[];
  /** Write with Immediate (RFC 7306): the RDMA Write, then an Immediate Data message. */
  readonly immediate?: ImmediateData;
}

/** RDMA Read (§5.2): a Read Request on QN 1; the Response lands in the local Data Sink STag/TO. */
export interface ReadOperation {
  readonly type: 'read';
  readonly sinkStag: number;
  readonly sinkTo: bigint;
  /** RDMA Read Message Size, 0 to 2^32-1. */
  readonly size: number;
  readonly srcStag: number;
  readonly srcTo: bigint;
}

/** Send, Send with SE, Send with Invalidate, Send with SE and Invalidate (§5.3), on QN 0. */
export interface SendOperation {
  readonly type: 'send';
  readonly payload: readonly Uint8Array[];
  /** Send with Solicited Event. */
  readonly solicited?: boolean;
  /** Send with Invalidate: the remote STag to invalidate. */
  readonly invalidateStag?: number;
  /**
   * Send with Immediate (RFC 7306): the Send, then an Immediate Data message (which carries the Solicited
   * Event if `immediate.solicited`; `solicited` above applies to the Send).
   */
  readonly immediate?: ImmediateData;
}

/** An Immediate Data or Immediate Data with Solicited Event message on its own (RFC 7306), on QN 0. */
export interface ImmediateOperation {
  readonly type: 'immediate';
  readonly data: bigint;
  readonly solicited?: boolean;
}

/**
 * An atomic operation (RFC 7306): an Atomic Request on QN 1 naming a naturally aligned 64-bit word of the
 * peer's Tagged Buffer; completes with the word's original value once the Atomic Response is Delivered.
 */
export interface AtomicOperation {
  readonly type: 'atomic';
  /**
   * `AtomicOpcode.FetchAdd` or `AtomicOpcode.CmpSwap`, or `AtomicOpcode.Swap`: CmpSwap with Compare Mask 0
   * on the wire (RFC 7306 has no Swap; 0001b is Reserved).
   */
  readonly atomicOpcode: number | typeof AtomicOpcode.Swap;
  readonly remoteStag: number;
  readonly remoteTo: bigint;
  /** Add Data (FetchAdd) or Swap Data (CmpSwap, Swap). */
  readonly addOrSwapData: bigint;
  /** Add Mask (FetchAdd, default 0: a plain add) or Swap Mask (default all ones: swap every bit). */
  readonly addOrSwapMask?: bigint;
  /** CmpSwap: compared with the word under Compare Mask (default all ones). Ignored for Swap. */
  readonly compareData?: bigint;
  readonly compareMask?: bigint;
}

/** Local invalidation of an STag, ordered with the other work of the send queue (no message). */
export interface LocalInvalidateOperation {
  readonly type: 'local-invalidate';
  readonly stag: number;
}

export type RdmapOperation =
  | WriteOperation
  | ReadOperation
  | SendOperation
  | LocalInvalidateOperation
  | ImmediateOperation
  | AtomicOperation;

export type CompletionStatus =
  | 'success'
  /** Never handed to DDP, or outstanding when the stream ended (§5.4, §6.2.1). */
  | 'flushed'
  /** Withdrawn by its AbortSignal before it was handed to DDP. */
  | 'aborted'
  /** An incoming Send was longer than the receive buffer (§5.3). */
  | 'local-length-error'
  /** A local buffer was invalid when the message was built (§7.1 case 1), or a local invalidate failed. */
  | 'local-protection-error'
  /** The peer terminated over this operation with a protection error (Remote Protection, DDP tagged). */
  | 'remote-access-error'
  /** The peer terminated over this operation with an operation error (Remote Operation, DDP untagged). */
  | 'remote-operation-error'
  /**
   * An invalid request: the peer found our message too long for its receive buffer (RFC 5041 §7.2), or
   * an incoming Send with Invalidate named an STag that cannot be invalidated (RFC 5040 §5.3).
   */
  | 'remote-invalid-request'
  /** The stream failed under the operation (catastrophic error, LLP failure). */
  | 'fatal';

/** What a send-queue operation came to (RFC 5040 §5.5 rules 14, 15, 19). */
export interface SendCompletion {
  readonly kind: 'send';
  readonly request: RdmapWorkRequest;
  readonly status: CompletionStatus;
  /** Octets the operation moved (write/send payload, read size, 8 for an atomic). */
  readonly byteLength: number;
  /** An atomic's Original Remote Data Value: the 64-bit word before the operation (RFC 7306). */
  readonly atomicResult?: bigint;
  readonly error?: RdmapError;
}

/** An incoming Send Message Type Delivered into a posted receive buffer (RFC 5040 §3.2, §5.3). */
export interface ReceiveCompletion {
  readonly kind: 'receive';
  /** The id given to `postReceive`. */
  readonly id: unknown;
  readonly buffer: Uint8Array;
  readonly status: CompletionStatus;
  /** The ULP Message Length (0 for Immediate Data, whose 64 bits are `immediateData`). */
  readonly byteLength: number;
  /** Send with SE / Send with SE and Invalidate / Immediate Data with SE. */
  readonly solicited: boolean;
  /** An Immediate Data message's 64 bits (RFC 7306); absent for the four Sends. */
  readonly immediateData?: bigint;
  /** The STag the Send with Invalidate invalidated. */
  readonly invalidatedStag?: number;
  readonly error?: RdmapError;
}

export type RdmapCompletion = SendCompletion | ReceiveCompletion;

/** One unit of send-queue work. */
export interface RdmapWorkRequest {
  readonly op: RdmapOperation;
  /** Read fence (§5.5 rule 12, Appendix B footnote 2): withheld until every earlier RDMA Read completed. */
  readonly fence?: boolean;
  /**
   * Local STags the operation's buffers belong to: checked again when the message is built, and an
   * invalid one terminates the stream (RFC 5040 §7.1 case 1).
   */
  readonly localStags?: readonly number[];
  /** Withdraws the request if it fires before the request is handed to DDP. */
  readonly signal?: AbortSignal;
  /** Called once with the completion, in submission order (§5.5 rule 15). */
  readonly onComplete?: (completion: SendCompletion) => void;
  /** The caller's own token. */
  readonly context?: unknown;
}

/**
 * A Terminate sent or received (RFC 5040 §5.4, §7.1: surfaced to the ULP on both sides). A Terminate this
 * end issued is reported once the LLP took it (`sent`) or dropped it unsent (`not-sent`, e.g. an MPA
 * Responder that may not send before the Initiator's first FPDU, RFC 5044 §7.1.2), so the ULP can say what
 * went on the wire.
 */
export interface RdmapTerminateEvent {
  readonly direction: 'sent' | 'received' | 'not-sent';
  /** For `not-sent`: why the LLP did not send it. */
  readonly notSentReason?: string;
  /** The decoded Terminate Header; undefined for a received Terminate that could not be decoded. */
  readonly header: TerminateHeader | undefined;
  /** The Terminate Header's octets, as sent or as received. */
  readonly bytes: Uint8Array;
  readonly description: string;
  readonly error: RdmapError;
}

/** How the stream ended: `closed` after a graceful teardown, `error` otherwise (RFC 5040 §6.2). */
export interface RdmapClosedEvent {
  readonly state: Extract<RdmapStreamState, 'closed' | 'error'>;
  readonly error?: RdmapError;
}
