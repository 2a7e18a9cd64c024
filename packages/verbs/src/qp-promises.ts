/**
 * The promise-returning conveniences of a queue pair: one work request each, built from the arguments by
 * one table (which options each opcode takes), resolving with its work completion or rejecting with a
 * `WorkCompletionError`.
 */
import type { RemoteBuffer, Sge } from './mr.js';
import type { RecvWorkRequest, SendWorkRequest, WorkCompletion, WrId } from './types.js';

/** Options of the promise-returning conveniences. */
export interface ConvenienceOptions {
  readonly wrId?: WrId;
  /** Also report a successful completion on the send CQ. Default false (errors are always reported). */
  readonly signaled?: boolean;
  readonly fence?: boolean;
  readonly signal?: AbortSignal;
}

type SendOpcode = SendWorkRequest['opcode'];

/** The work request fields each opcode takes from the convenience's options, when given. */
const OPTION_FIELDS: Readonly<Record<SendOpcode, readonly string[]>> = {
  'rdma-write': [],
  'rdma-read': [],
  send: ['solicited'],
  'send-with-invalidate': ['solicited', 'invalidateStag'],
  'local-invalidate': [],
  'rdma-write-with-imm': ['solicited'],
  'send-with-imm': ['solicited'],
  'atomic-fetch-add': ['addMask'],
  'atomic-swap': ['swapMask'],
  'atomic-cmp-swap': ['compareMask', 'swapMask'],
};

/** The work request of a convenience: `fields` from its arguments, the rest from `options` (unsignaled by default). */
function convenienceWr(opcode: SendOpcode, fields: object, options: ConvenienceOptions): SendWorkRequest {
  const wr: Record<string, unknown> = { opcode, ...fields, signaled: options.signaled ?? false };
  const given = options as Readonly<Record<string, unknown>>;
  for (const field of ['wrId', ...OPTION_FIELDS[opcode]]) if (given[field] !== undefined) wr[field] = given[field];
  if (options.fence) wr.fence = true;
  if (options.signal) wr.signal = options.signal;
  return wr as unknown as SendWorkRequest;
}

/** Options of a convenience whose message may carry a Solicited Event (RFC 5040 §5.3, RFC 7306). */
type SolicitedOptions = ConvenienceOptions & { solicited?: boolean };
/** Options of an atomic convenience: its RFC 7306 masks, 64 bits each. */
type MaskOptions<K extends string> = ConvenienceOptions & { [k in K]?: bigint };

const asList = (local: Sge | readonly Sge[]): readonly Sge[] =>
  Array.isArray(local) ? (local as readonly Sge[]) : [local as Sge];

/** The conveniences, over the two posts a queue pair implements. */
export abstract class QueuePairConveniences {
  /** Posts one send work request; the promise settles with its completion. */
  protected abstract postSettled(wr: SendWorkRequest): Promise<WorkCompletion>;
  /** Posts one receive work request; the promise settles with its completion. */
  protected abstract recvSettled(wr: RecvWorkRequest): Promise<WorkCompletion>;

  /** RDMA Write of `local` into `remote` (RFC 5040 §5.1); resolves with the completion, rejects with a WorkCompletionError. */
  write(local: Sge | readonly Sge[], remote: RemoteBuffer, options: ConvenienceOptions = {}): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('rdma-write', { sgList: asList(local), remote }, options));
  }

  /** RDMA Read of `remote` into `local` (RFC 5040 §5.2); resolves once the Read Response is Delivered. */
  read(local: Sge, remote: RemoteBuffer, options: ConvenienceOptions = {}): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('rdma-read', { sgList: [local], remote }, options));
  }

  /** A Send, Send with SE, Send with Invalidate or Send with SE and Invalidate (RFC 5040 §5.3). */
  send(
    local: Sge | readonly Sge[],
    options: SolicitedOptions & { invalidateStag?: number } = {},
  ): Promise<WorkCompletion> {
    const opcode = options.invalidateStag !== undefined ? 'send-with-invalidate' : 'send';
    return this.postSettled(convenienceWr(opcode, { sgList: asList(local) }, options));
  }

  /** RDMA Write with Immediate (RFC 7306): the Write, then 64 bits of Immediate Data for the peer's next receive. */
  writeWithImm(
    local: Sge | readonly Sge[],
    remote: RemoteBuffer,
    immData: bigint,
    options: SolicitedOptions = {},
  ): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('rdma-write-with-imm', { sgList: asList(local), remote, immData }, options));
  }

  /** Send with Immediate (RFC 7306): the Send, then 64 bits of Immediate Data in the peer's following receive. */
  sendWithImm(local: Sge | readonly Sge[], immData: bigint, options: SolicitedOptions = {}): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('send-with-imm', { sgList: asList(local), immData }, options));
  }

  /**
   * Fetch-and-Add (RFC 7306) on the peer's 64-bit word at `remote`: resolves with the completion, whose
   * `atomicResult` (also written into `local`, 8 octets) is the word before the add.
   */
  fetchAdd(
    local: Sge,
    remote: RemoteBuffer,
    add: bigint,
    options: MaskOptions<'addMask'> = {},
  ): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('atomic-fetch-add', { sgList: [local], remote, add }, options));
  }

  /** Unconditional swap: the word takes `swap` (under `swapMask`); resolves with its value before. Sent as RFC 7306 CmpSwap with Compare Mask 0 (RFC 7306 defines no Swap). */
  swap(local: Sge, remote: RemoteBuffer, swap: bigint, options: MaskOptions<'swapMask'> = {}): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('atomic-swap', { sgList: [local], remote, swap }, options));
  }

  /** Compare-and-Swap (RFC 7306 CmpSwap): `swap` replaces the word if it equals `compare`; resolves with its value before. */
  cmpSwap(
    local: Sge,
    remote: RemoteBuffer,
    compare: bigint,
    swap: bigint,
    options: MaskOptions<'compareMask' | 'swapMask'> = {},
  ): Promise<WorkCompletion> {
    return this.postSettled(convenienceWr('atomic-cmp-swap', { sgList: [local], remote, compare, swap }, options));
  }

  /** Posts one receive buffer and resolves with its completion (also reported on `recvCq`). */
  recv(local: Sge, options: { wrId?: WrId } = {}): Promise<WorkCompletion> {
    return this.recvSettled({ sgList: [local], ...(options.wrId !== undefined ? { wrId: options.wrId } : {}) });
  }
}
