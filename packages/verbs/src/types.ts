/** Work requests and work completions, shaped after libibverbs (ibv_send_wr, ibv_recv_wr, ibv_wc). */
import type { CompletionStatus } from '@rddp/rdmap';
import type { RemoteBuffer, Sge } from './mr.js';

export type { RemoteBuffer, Sge } from './mr.js';

/** The caller's id for a work request, echoed in its completion (ibv wr_id). */
export type WrId = string | number | bigint | symbol | object;

interface SendWrBase {
  readonly wrId?: WrId;
  /** Report a completion on success too (errors always complete). Default: the queue pair's `sqSigAll`. */
  readonly signaled?: boolean;
  /** Read fence: wait until every earlier RDMA Read has completed (RFC 5040 §5.5, Appendix B footnote 2). */
  readonly fence?: boolean;
  /** Withdraws the request if it fires before the request is handed to the wire (completes as `aborted`). */
  readonly signal?: AbortSignal;
}

/** RDMA Write (RFC 5040 §5.1): the gather list is written to the remote buffer as one message. */
export interface RdmaWriteWr extends SendWrBase {
  readonly opcode: 'rdma-write';
  readonly sgList: readonly Sge[];
  readonly remote: RemoteBuffer;
}

/** RDMA Read (RFC 5040 §5.2): `sgList[0]` (exactly one element, Local Write access) receives the data. */
export interface RdmaReadWr extends SendWrBase {
  readonly opcode: 'rdma-read';
  readonly sgList: readonly [Sge];
  readonly remote: RemoteBuffer;
}

/** Send and Send with Solicited Event (RFC 5040 §5.3). */
export interface SendWr extends SendWrBase {
  readonly opcode: 'send';
  readonly sgList: readonly Sge[];
  /** Send with Solicited Event. */
  readonly solicited?: boolean;
}

/** Send with Invalidate and Send with SE and Invalidate (RFC 5040 §5.3): the peer invalidates `invalidateStag`. */
export interface SendWithInvalidateWr extends SendWrBase {
  readonly opcode: 'send-with-invalidate';
  readonly sgList: readonly Sge[];
  readonly invalidateStag: number;
  readonly solicited?: boolean;
}

/** Local invalidation of one of this side's STags, in order with the rest of the send queue. */
export interface LocalInvalidateWr extends SendWrBase {
  readonly opcode: 'local-invalidate';
  readonly invalidateStag: number;
}

/**
 * RDMA Write with Immediate (RFC 7306): the Write, then an Immediate Data message carrying `immData` (64
 * bits), which completes the peer's next receive. `solicited` sends it as Immediate Data with SE.
 */
export interface RdmaWriteWithImmWr extends SendWrBase {
  readonly opcode: 'rdma-write-with-imm';
  readonly sgList: readonly Sge[];
  readonly remote: RemoteBuffer;
  readonly immData: bigint;
  readonly solicited?: boolean;
}

/**
 * Send with Immediate (RFC 7306): the Send, then an Immediate Data message; the peer gets two receive
 * completions, the Send's and then the Immediate Data's (which carries `solicited`).
 */
export interface SendWithImmWr extends SendWrBase {
  readonly opcode: 'send-with-imm';
  readonly sgList: readonly Sge[];
  readonly immData: bigint;
  readonly solicited?: boolean;
}

interface AtomicWrBase extends SendWrBase {
  /**
   * Exactly one element of 8 octets with Local Write access: the remote word's original value is written
   * there (big-endian, as on the wire) when the Atomic Response arrives.
   */
  readonly sgList: readonly [Sge];
  /** The peer's 64-bit word: an STag with Remote Atomic access and an 8-octet-aligned TO. */
  readonly remote: RemoteBuffer;
}

/** Fetch-and-Add (RFC 7306 FetchAdd): the word becomes word + `add`; `addMask` splits it into fields. */
export interface AtomicFetchAddWr extends AtomicWrBase {
  readonly opcode: 'atomic-fetch-add';
  readonly add: bigint;
  /** A 1 marks the top bit of a field (no carry out of it). Default 0: one 64-bit add. */
  readonly addMask?: bigint;
}

/** Unconditional swap: the bits of `swapMask` (default all) take `swap`; sent as RFC 7306 CmpSwap with Compare Mask 0. */
export interface AtomicSwapWr extends AtomicWrBase {
  readonly opcode: 'atomic-swap';
  readonly swap: bigint;
  readonly swapMask?: bigint;
}

/** Compare-and-Swap (RFC 7306 CmpSwap): if word equals `compare` under `compareMask`, swap as above. */
export interface AtomicCmpSwapWr extends AtomicWrBase {
  readonly opcode: 'atomic-cmp-swap';
  readonly compare: bigint;
  readonly swap: bigint;
  readonly compareMask?: bigint;
  readonly swapMask?: bigint;
}

export type SendWorkRequest =
  | RdmaWriteWr
  | RdmaReadWr
  | SendWr
  | SendWithInvalidateWr
  | LocalInvalidateWr
  | RdmaWriteWithImmWr
  | SendWithImmWr
  | AtomicFetchAddWr
  | AtomicSwapWr
  | AtomicCmpSwapWr;

/** A receive buffer for an incoming Send (RFC 5040 §5.3): one element, Local Write access. */
export interface RecvWorkRequest {
  readonly wrId?: WrId;
  readonly sgList: readonly [Sge];
}

export type WcOpcode =
  | 'rdma-write'
  | 'rdma-read'
  | 'send'
  | 'local-invalidate'
  | 'recv'
  | 'atomic-fetch-add'
  | 'atomic-swap'
  | 'atomic-cmp-swap';

/** Success, or why not (the RDMAP completion status: flushed, remote access error, ...). */
export type WcStatus = CompletionStatus;

/** One completed work request (ibv_wc). */
export interface WorkCompletion {
  readonly wrId: WrId | undefined;
  readonly status: WcStatus;
  readonly opcode: WcOpcode;
  /**
   * Octets moved: the Write or Send length, the Read size, 8 for an atomic, or how much of the receive
   * buffer a Send filled (0 for an Immediate Data receive).
   */
  readonly byteLen: number;
  readonly qpNum: number;
  /** For receives of a Send with Invalidate: the STag the peer invalidated here (RFC 5040 §5.3). */
  readonly invalidatedStag?: number;
  /** For receives: the Send (or Immediate Data) asked for a Solicited Event (RFC 5040 §5.3, RFC 7306). */
  readonly solicited: boolean;
  /** For receives of an Immediate Data message: its 64 bits (RFC 7306; ibverbs' IBV_WC_WITH_IMM). */
  readonly immData?: bigint;
  /** For atomics: the remote word's value before the operation (also written to the work request's element). */
  readonly atomicResult?: bigint;
  /** What went wrong, for statuses other than success. */
  readonly error?: Error;
}
