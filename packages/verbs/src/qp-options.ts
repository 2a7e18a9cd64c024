/**
 * What a queue pair is made and connected with (`ProtectionDomain.createQp`, `QueuePair.connect`), and the
 * record it keeps of each work request posted and not completed.
 */
import type { LlpStream } from '@rddp/llp';
import type { RdmapExtensions, RdmapStream, RdmapStreamOptions } from '@rddp/rdmap';
import type { DdpProfile } from './access.js';
import type { CompletionQueue } from './cq.js';
import type { WcOpcode, WorkCompletion, WrId } from './types.js';

export interface QpInit {
  readonly sendCq: CompletionQueue;
  readonly recvCq: CompletionQueue;
  /** Send work requests outstanding at most (posted, not completed). Default 256. */
  readonly maxSendWr?: number;
  /** Receive work requests outstanding at most. Default 256. */
  readonly maxRecvWr?: number;
  /** Scatter/gather elements per work request at most. Default 16. */
  readonly maxSge?: number;
  /** Largest message, at most 2^32-1 (the default). */
  readonly maxMessageSize?: number;
  /** Outbound RDMA Reads in flight at most (RFC 5040 §6.1). Default 8; more wait in order. */
  readonly ord?: number;
  /** Inbound RDMA Read Requests in flight at most (RFC 5040 §6.1). Default 8. */
  readonly ird?: number;
  /** Whether successful send work requests report a completion unless they say otherwise. Default true. */
  readonly sqSigAll?: boolean;
  /** `ietf` (RFC 5040/5041) or `rdmac` (RDMA Consortium). Default `ietf`. */
  readonly profile?: DdpProfile;
}

export interface QpConnectOptions {
  /** Default: the connection's role, or `initiator` for a bare stream. */
  readonly role?: 'initiator' | 'responder';
  /** RFC 5040 §6.1: as responder, send nothing until the initiator's first message arrived. */
  readonly initiatorSendsFirst?: boolean;
  /**
   * The RFC 7306 extensions both ends agreed on (e.g. in their connection private data); none by default.
   * Posting an atomic or an Immediate Data work request without its extension throws
   * `ExtensionNotEnabledError`; the peer refuses the messages of an extension it did not enable.
   */
  readonly extensions?: RdmapExtensions;
  /** Which LLP stream of a connection carries this queue pair (default 0; SCTP offers several, RFC 5043). */
  readonly stream?: number;
  /**
   * Builds the RDMAP Stream from the options the queue pair composed (default `new RdmapStream`); a stack
   * passes the RDMAP and DDP factories bound in its container here.
   */
  readonly rdmapFactory?: (llp: LlpStream, options: RdmapStreamOptions) => RdmapStream;
}

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
