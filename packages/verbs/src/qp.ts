/**
 * A queue pair (ibv_qp) over one RDMAP Stream: a send queue (RDMA Write, RDMA Read, the four Sends,
 * local invalidation; with RFC 7306, Write/Send with Immediate and the three atomics) and a receive queue, completions to completion queues, states after Linux siw
 * (`init` → `rts` → `closing`/`terminate` → `closed`/`error`), and promise-returning conveniences.
 */
import { Access, type DdpProfile } from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import {
  ATOMIC_OPERAND_LENGTH,
  AtomicOpcode,
  RDMAP_MAX_MESSAGE,
  type RdmapClosedEvent,
  type RdmapExtensions,
  type RdmapOperation,
  RdmapStream,
  type RdmapStreamState,
  type RdmapTerminateEvent,
  type ReceiveCompletion,
  rdmapOptionsFromSetup,
  type SendCompletion,
} from '@rddp/rdmap';
import { BehaviorSubject, type Observable, ReplaySubject } from 'rxjs';
import type { CompletionQueue } from './cq.js';
import {
  AccessError,
  ExtensionNotEnabledError,
  InvalidMrError,
  InvalidWorkRequestError,
  MessageTooLongError,
  QpStateError,
  QueueFullError,
  SgeRangeError,
  WorkCompletionError,
} from './errors.js';
import type { Mr } from './mr.js';
import type { ProtectionDomain } from './pd.js';
import type { RecvWorkRequest, RemoteBuffer, SendWorkRequest, Sge, WcOpcode, WorkCompletion, WrId } from './types.js';

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
}

/** `init` until connected, then the RDMAP Stream's state (RFC 5040 §6). */
export type QpState = 'init' | RdmapStreamState;

interface Pending {
  readonly wrId: WrId | undefined;
  readonly opcode: WcOpcode;
  readonly signaled: boolean;
  readonly settle?: { resolve(wc: WorkCompletion): void; reject(e: unknown): void };
  /** An atomic's 8-octet local element: the original remote value is written there. */
  readonly result?: Uint8Array;
}

interface PendingRecv extends Pending {
  readonly buffer: Uint8Array;
}

const MAX_STAG = 0xffff_ffff;
const MAX_TO = (1n << 64n) - 1n;
const ATOMIC_OPCODE = {
  'atomic-fetch-add': AtomicOpcode.FetchAdd,
  'atomic-swap': AtomicOpcode.Swap,
  'atomic-cmp-swap': AtomicOpcode.CmpSwap,
} as const;

export class QueuePair {
  readonly sendCq: CompletionQueue;
  readonly recvCq: CompletionQueue;
  readonly maxSendWr: number;
  readonly maxRecvWr: number;
  readonly maxSge: number;
  readonly maxMessageSize: number;
  readonly ord: number;
  readonly ird: number;
  readonly sqSigAll: boolean;
  readonly profile: DdpProfile;
  private stream: RdmapStream | undefined;
  private readonly stateSubject = new BehaviorSubject<QpState>('init');
  private readonly closedSubject = new ReplaySubject<RdmapClosedEvent>(1);
  private readonly terminateSubject = new ReplaySubject<RdmapTerminateEvent>(1);
  private sqOutstanding = 0;
  private rqOutstanding = 0;
  /** Receives posted before `connect` (ibverbs allows posting receives in INIT). */
  private readonly early: PendingRecv[] = [];

  /** @internal Made by `ProtectionDomain.createQp`. */
  constructor(
    readonly pd: ProtectionDomain,
    readonly qpNum: number,
    init: QpInit,
    private readonly onDestroy: (qp: QueuePair) => void,
  ) {
    this.sendCq = init.sendCq;
    this.recvCq = init.recvCq;
    this.maxSendWr = positive(init.maxSendWr ?? 256, 'maxSendWr');
    this.maxRecvWr = positive(init.maxRecvWr ?? 256, 'maxRecvWr');
    this.maxSge = positive(init.maxSge ?? 16, 'maxSge');
    this.maxMessageSize = Math.min(
      positive(init.maxMessageSize ?? RDMAP_MAX_MESSAGE, 'maxMessageSize'),
      RDMAP_MAX_MESSAGE,
    );
    this.ord = count(init.ord ?? 8, 'ord');
    this.ird = count(init.ird ?? 8, 'ird');
    this.sqSigAll = init.sqSigAll ?? true;
    this.profile = init.profile ?? 'ietf';
  }

  get state(): QpState {
    return this.stateSubject.value;
  }
  /** The state now and every change; completes when the queue pair has ended. */
  get state$(): Observable<QpState> {
    return this.stateSubject.asObservable();
  }
  /** The Terminate this queue pair sent or received, if any (RFC 5040 §7.1: both ULPs learn of an error). */
  get terminate$(): Observable<RdmapTerminateEvent> {
    return this.terminateSubject.asObservable();
  }
  /** Emits once when the queue pair's stream has ended (`closed` or `error`). */
  get closed$(): Observable<RdmapClosedEvent> {
    return this.closedSubject.asObservable();
  }
  /** The RDMAP Stream, once connected. */
  get rdmap(): RdmapStream | undefined {
    return this.stream;
  }
  /** Send and receive work requests posted and not completed. */
  get outstanding(): { send: number; recv: number } {
    return { send: this.sqOutstanding, recv: this.rqOutstanding };
  }

  /**
   * Moves the queue pair to RTS over `llp` (RFC 5040 §6.1): an LLP stream, or a connection (its first
   * stream, its role and its LLP's promises). Receives posted before are handed over in order.
   */
  connect(llp: LlpStream | LlpConnection, options: QpConnectOptions = {}): void {
    if (this.state !== 'init') throw new QpStateError(this.state, 'connect');
    const isConnection = 'streams' in llp;
    const stream = isConnection ? llp.streams[0] : llp;
    if (stream === undefined) throw new InvalidWorkRequestError('the LLP connection has no stream');
    const role = options.role ?? (isConnection ? llp.role : 'initiator');
    // The rdma_cm order: receives posted in INIT, and IRD/ORD as the LLP announced them (RFC 6581), are in
    // place before the first ULPDU reaches DDP.
    const early = this.early.splice(0);
    const rdmap = new RdmapStream(stream, {
      profile: this.profile,
      pdId: this.pd.id,
      stags: this.pd.device.stags,
      ord: this.ord,
      ird: this.ird,
      ...(isConnection ? rdmapOptionsFromSetup(llp.setup) : {}),
      receives: early.map((r) => ({ buffer: r.buffer, receiveId: r })),
      role,
      ...(options.initiatorSendsFirst !== undefined ? { initiatorSendsFirst: options.initiatorSendsFirst } : {}),
      ...(options.extensions !== undefined ? { extensions: options.extensions } : {}),
      ...(isConnection
        ? { llpCapabilities: { reliable: llp.capabilities.reliable, ordered: llp.capabilities.ordered } }
        : {}),
    });
    this.stream = rdmap;
    rdmap.completions$.subscribe((c) => {
      if (c.kind === 'receive') this.onReceive(c);
    });
    rdmap.terminate$.subscribe((t) => this.terminateSubject.next(t));
    rdmap.state$.subscribe((s) => this.stateSubject.next(s));
    rdmap.closed$.subscribe((ev) => {
      this.onDestroy(this);
      this.terminateSubject.complete();
      this.closedSubject.next(ev);
      this.closedSubject.complete();
      this.stateSubject.complete();
    });
  }

  /**
   * Posts send work requests (ibv_post_send): validated all first (typed errors, nothing posted if one
   * is bad), then handed to RDMAP in order (RFC 5040 §5.5 rule 13). Completions come on `sendCq`.
   */
  postSend(wrs: SendWorkRequest | readonly SendWorkRequest[]): void {
    const list = Array.isArray(wrs) ? (wrs as readonly SendWorkRequest[]) : [wrs as SendWorkRequest];
    const stream = this.stream;
    if (stream === undefined || this.state !== 'rts') throw new QpStateError(this.state, 'post a send work request');
    if (this.sqOutstanding + list.length > this.maxSendWr)
      throw new QueueFullError(
        `the send queue holds ${this.sqOutstanding} of ${this.maxSendWr} work requests; ${list.length} more do not fit`,
      );
    const built = list.map((wr) => this.buildSend(wr));
    for (const b of built) this.submit(stream, b.wr, b.op, b.localStags);
  }

  /** Posts receive work requests (ibv_post_recv) for incoming Sends (RFC 5040 §5.3), consumed in order. */
  postRecv(wrs: RecvWorkRequest | readonly RecvWorkRequest[]): void {
    const list = Array.isArray(wrs) ? (wrs as readonly RecvWorkRequest[]) : [wrs as RecvWorkRequest];
    for (const wr of list) this.checkRecv(wr);
    for (const wr of list) this.recvOne(wr);
  }

  /** RDMA Write of `local` into `remote` (RFC 5040 §5.1); resolves with the completion, rejects with a WorkCompletionError. */
  write(local: Sge | readonly Sge[], remote: RemoteBuffer, options: ConvenienceOptions = {}): Promise<WorkCompletion> {
    return this.settled({ opcode: 'rdma-write', sgList: asList(local), remote, ...common(options) });
  }

  /** RDMA Read of `remote` into `local` (RFC 5040 §5.2); resolves once the Read Response is Delivered. */
  read(local: Sge, remote: RemoteBuffer, options: ConvenienceOptions = {}): Promise<WorkCompletion> {
    return this.settled({ opcode: 'rdma-read', sgList: [local], remote, ...common(options) });
  }

  /** A Send, Send with SE, Send with Invalidate or Send with SE and Invalidate (RFC 5040 §5.3). */
  send(
    local: Sge | readonly Sge[],
    options: ConvenienceOptions & { solicited?: boolean; invalidateStag?: number } = {},
  ): Promise<WorkCompletion> {
    const solicited = options.solicited ?? false;
    return this.settled(
      options.invalidateStag !== undefined
        ? {
            opcode: 'send-with-invalidate',
            sgList: asList(local),
            invalidateStag: options.invalidateStag,
            solicited,
            ...common(options),
          }
        : { opcode: 'send', sgList: asList(local), solicited, ...common(options) },
    );
  }

  /** RDMA Write with Immediate (RFC 7306): the Write, then 64 bits of Immediate Data for the peer's next receive. */
  writeWithImm(
    local: Sge | readonly Sge[],
    remote: RemoteBuffer,
    immData: bigint,
    options: ConvenienceOptions & { solicited?: boolean } = {},
  ): Promise<WorkCompletion> {
    return this.settled({
      opcode: 'rdma-write-with-imm',
      sgList: asList(local),
      remote,
      immData,
      solicited: options.solicited ?? false,
      ...common(options),
    });
  }

  /** Send with Immediate (RFC 7306): the Send, then 64 bits of Immediate Data in the peer's following receive. */
  sendWithImm(
    local: Sge | readonly Sge[],
    immData: bigint,
    options: ConvenienceOptions & { solicited?: boolean } = {},
  ): Promise<WorkCompletion> {
    return this.settled({
      opcode: 'send-with-imm',
      sgList: asList(local),
      immData,
      solicited: options.solicited ?? false,
      ...common(options),
    });
  }

  /**
   * Fetch-and-Add (RFC 7306) on the peer's 64-bit word at `remote`: resolves with the completion, whose
   * `atomicResult` (also written into `local`, 8 octets) is the word before the add.
   */
  fetchAdd(
    local: Sge,
    remote: RemoteBuffer,
    add: bigint,
    options: ConvenienceOptions & { addMask?: bigint } = {},
  ): Promise<WorkCompletion> {
    return this.settled({
      opcode: 'atomic-fetch-add',
      sgList: [local],
      remote,
      add,
      ...(options.addMask !== undefined ? { addMask: options.addMask } : {}),
      ...common(options),
    });
  }

  /** Unconditional swap: the word takes `swap` (under `swapMask`); resolves with its value before. Sent as RFC 7306 CmpSwap with Compare Mask 0 (RFC 7306 defines no Swap). */
  swap(
    local: Sge,
    remote: RemoteBuffer,
    swap: bigint,
    options: ConvenienceOptions & { swapMask?: bigint } = {},
  ): Promise<WorkCompletion> {
    return this.settled({
      opcode: 'atomic-swap',
      sgList: [local],
      remote,
      swap,
      ...(options.swapMask !== undefined ? { swapMask: options.swapMask } : {}),
      ...common(options),
    });
  }

  /** Compare-and-Swap (RFC 7306 CmpSwap): `swap` replaces the word if it equals `compare`; resolves with its value before. */
  cmpSwap(
    local: Sge,
    remote: RemoteBuffer,
    compare: bigint,
    swap: bigint,
    options: ConvenienceOptions & { compareMask?: bigint; swapMask?: bigint } = {},
  ): Promise<WorkCompletion> {
    return this.settled({
      opcode: 'atomic-cmp-swap',
      sgList: [local],
      remote,
      compare,
      swap,
      ...(options.compareMask !== undefined ? { compareMask: options.compareMask } : {}),
      ...(options.swapMask !== undefined ? { swapMask: options.swapMask } : {}),
      ...common(options),
    });
  }

  /** Posts one receive buffer and resolves with its completion (also reported on `recvCq`). */
  recv(local: Sge, options: { wrId?: WrId } = {}): Promise<WorkCompletion> {
    return new Promise<WorkCompletion>((resolve, reject) => {
      const wr: RecvWorkRequest = { sgList: [local], ...(options.wrId !== undefined ? { wrId: options.wrId } : {}) };
      this.checkRecv(wr);
      this.recvOne(wr, { resolve, reject });
    });
  }

  /** Graceful teardown (RFC 5040 §6.2): what is posted completes, then the LLP stream closes. */
  async close(signal?: AbortSignal): Promise<void> {
    if (this.stream === undefined) {
      if (this.state === 'init') this.endUnconnected();
      return;
    }
    await this.stream.close(signal);
  }

  /** RDMAP Abortive Termination (RFC 5040 §6.2.1): a Terminate to the peer, everything Completed in error. */
  terminate(): void {
    if (this.stream === undefined) {
      if (this.state === 'init') this.endUnconnected();
      return;
    }
    this.stream.terminate();
  }

  /** LLP Abortive Termination (RFC 5040 §6.2): the LLP stream is reset without a Terminate. */
  abort(reason?: Error): void {
    if (this.stream === undefined) {
      if (this.state === 'init') this.endUnconnected();
      return;
    }
    this.stream.abort(reason);
  }

  // ----- internals -----

  private settled(wr: SendWorkRequest): Promise<WorkCompletion> {
    return new Promise<WorkCompletion>((resolve, reject) => {
      const settle = { resolve, reject };
      const stream = this.stream;
      if (stream === undefined || this.state !== 'rts') throw new QpStateError(this.state, 'post a send work request');
      if (this.sqOutstanding + 1 > this.maxSendWr)
        throw new QueueFullError(`the send queue holds ${this.sqOutstanding} of ${this.maxSendWr} work requests`);
      const b = this.buildSend(wr, settle);
      this.submit(stream, b.wr, b.op, b.localStags);
    });
  }

  private buildSend(
    wr: SendWorkRequest,
    settle?: Pending['settle'],
  ): { wr: SendWorkRequest & { readonly pending: Pending }; op: RdmapOperation; localStags: number[] } {
    const signaled = wr.signaled ?? this.sqSigAll;
    const pending = (opcode: WcOpcode, result?: Uint8Array): Pending => ({
      wrId: wr.wrId,
      opcode,
      signaled,
      ...(settle ? { settle } : {}),
      ...(result ? { result } : {}),
    });
    switch (wr.opcode) {
      case 'rdma-write-with-imm': {
        this.requireExtension('immediate');
        checkU64(wr.immData, 'immData');
        const { slices, stags, length } = this.gather(wr.sgList, 0);
        checkRemote(wr.remote);
        if (wr.remote.to + BigInt(length) > MAX_TO + 1n)
          throw new InvalidWorkRequestError('the remote TO + length wraps 2^64 (RFC 5041 §7.1)');
        return {
          wr: { ...wr, pending: pending('rdma-write') },
          op: {
            type: 'write',
            sinkStag: wr.remote.stag,
            sinkTo: wr.remote.to,
            payload: slices,
            immediate: { data: wr.immData, solicited: wr.solicited ?? false },
          },
          localStags: stags,
        };
      }
      case 'send-with-imm': {
        this.requireExtension('immediate');
        checkU64(wr.immData, 'immData');
        const { slices, stags } = this.gather(wr.sgList, 0);
        return {
          wr: { ...wr, pending: pending('send') },
          op: { type: 'send', payload: slices, immediate: { data: wr.immData, solicited: wr.solicited ?? false } },
          localStags: stags,
        };
      }
      case 'atomic-fetch-add':
      case 'atomic-swap':
      case 'atomic-cmp-swap': {
        this.requireExtension('atomics');
        if (!Array.isArray(wr.sgList) || wr.sgList.length !== 1)
          throw new InvalidWorkRequestError(
            'an atomic takes exactly one scatter element: 8 octets for the original value (RFC 7306)',
          );
        const sge = wr.sgList[0] as Sge;
        const { offset, length } = this.checkSge(sge, Access.LocalWrite, 'the result element of an atomic');
        if (length !== ATOMIC_OPERAND_LENGTH)
          throw new SgeRangeError(`the result element of an atomic is ${length} octets; it must be 8 (RFC 7306)`);
        checkRemote(wr.remote);
        let data: bigint;
        let mask: bigint | undefined;
        let compare: { compareData: bigint; compareMask?: bigint } | undefined;
        if (wr.opcode === 'atomic-fetch-add') {
          data = checkU64(wr.add, 'add');
          mask = wr.addMask === undefined ? undefined : checkU64(wr.addMask, 'addMask');
        } else {
          data = checkU64(wr.swap, 'swap');
          mask = wr.swapMask === undefined ? undefined : checkU64(wr.swapMask, 'swapMask');
          if (wr.opcode === 'atomic-cmp-swap')
            compare = {
              compareData: checkU64(wr.compare, 'compare'),
              ...(wr.compareMask !== undefined ? { compareMask: checkU64(wr.compareMask, 'compareMask') } : {}),
            };
        }
        return {
          wr: { ...wr, pending: pending(wr.opcode, sge.mr.buffer.subarray(offset, offset + length)) },
          op: {
            type: 'atomic',
            atomicOpcode: ATOMIC_OPCODE[wr.opcode],
            remoteStag: wr.remote.stag,
            remoteTo: wr.remote.to,
            addOrSwapData: data,
            ...(mask !== undefined ? { addOrSwapMask: mask } : {}),
            ...compare,
          },
          localStags: [sge.mr.stag],
        };
      }
      case 'rdma-write': {
        const { slices, stags, length } = this.gather(wr.sgList, 0);
        checkRemote(wr.remote);
        if (wr.remote.to + BigInt(length) > MAX_TO + 1n)
          throw new InvalidWorkRequestError('the remote TO + length wraps 2^64 (RFC 5041 §7.1)');
        return {
          wr: { ...wr, pending: pending('rdma-write') },
          op: { type: 'write', sinkStag: wr.remote.stag, sinkTo: wr.remote.to, payload: slices },
          localStags: stags,
        };
      }
      case 'rdma-read': {
        if (!Array.isArray(wr.sgList) || wr.sgList.length !== 1)
          throw new InvalidWorkRequestError(
            'an RDMA Read takes exactly one scatter element: its Data Sink (RFC 5040 §5.2)',
          );
        const sge = wr.sgList[0] as Sge;
        const { offset, length } = this.checkSge(sge, Access.LocalWrite, 'the Data Sink of an RDMA Read');
        if (length > this.maxMessageSize) throw new MessageTooLongError(length, this.maxMessageSize);
        checkRemote(wr.remote);
        return {
          wr: { ...wr, pending: pending('rdma-read') },
          op: {
            type: 'read',
            sinkStag: sge.mr.stag,
            sinkTo: sge.mr.baseTo + BigInt(offset),
            size: length,
            srcStag: wr.remote.stag,
            srcTo: wr.remote.to,
          },
          localStags: [sge.mr.stag],
        };
      }
      case 'send':
      case 'send-with-invalidate': {
        const { slices, stags } = this.gather(wr.sgList, 0);
        let invalidateStag: number | undefined;
        if (wr.opcode === 'send-with-invalidate') {
          invalidateStag = wr.invalidateStag;
          checkStag(invalidateStag, 'Invalidate STag');
        }
        return {
          wr: { ...wr, pending: pending('send') },
          op: {
            type: 'send',
            payload: slices,
            solicited: wr.solicited ?? false,
            ...(invalidateStag !== undefined ? { invalidateStag } : {}),
          },
          localStags: stags,
        };
      }
      case 'local-invalidate':
        checkStag(wr.invalidateStag, 'STag');
        return {
          wr: { ...wr, pending: pending('local-invalidate') },
          op: { type: 'local-invalidate', stag: wr.invalidateStag },
          localStags: [],
        };
      default:
        throw new InvalidWorkRequestError(`unknown opcode '${String((wr as { opcode: unknown }).opcode)}'`);
    }
  }

  /** RFC 7306: the extension must have been enabled for this connection (both ends agreed). */
  private requireExtension(extension: 'atomics' | 'immediate'): void {
    if (!this.stream?.extensions[extension]) throw new ExtensionNotEnabledError(extension);
  }

  private submit(
    stream: RdmapStream,
    wr: SendWorkRequest & { readonly pending: Pending },
    op: RdmapOperation,
    localStags: number[],
  ): void {
    const p = wr.pending;
    stream.postSend({
      op,
      localStags,
      ...(wr.fence ? { fence: true } : {}),
      ...(wr.signal ? { signal: wr.signal } : {}),
      onComplete: (c) => this.onSendComplete(p, c),
    });
    this.sqOutstanding++;
  }

  private gather(sgList: readonly Sge[], access: number): { slices: Uint8Array[]; stags: number[]; length: number } {
    if (!Array.isArray(sgList)) throw new InvalidWorkRequestError('sgList must be an array of scatter/gather elements');
    if (sgList.length > this.maxSge)
      throw new InvalidWorkRequestError(
        `${sgList.length} scatter/gather elements; this queue pair takes ${this.maxSge}`,
      );
    const slices: Uint8Array[] = [];
    const stags: number[] = [];
    let length = 0;
    for (const sge of sgList) {
      const r = this.checkSge(sge, access, 'a gather element');
      slices.push(sge.mr.buffer.subarray(r.offset, r.offset + r.length));
      if (!stags.includes(sge.mr.stag)) stags.push(sge.mr.stag);
      length += r.length;
    }
    if (length > this.maxMessageSize) throw new MessageTooLongError(length, this.maxMessageSize);
    return { slices, stags, length };
  }

  private checkSge(sge: Sge, access: number, what: string): { offset: number; length: number } {
    const mr: Mr | undefined = sge?.mr;
    if (mr === undefined || typeof mr.stag !== 'number')
      throw new InvalidWorkRequestError(`${what} has no memory region`);
    if (mr.pd !== this.pd)
      throw new InvalidMrError(
        `${what}: memory region ${hex(mr.stag)} belongs to protection domain ${mr.pd.id}, this queue pair to ${this.pd.id}`,
      );
    if (!mr.valid)
      throw new InvalidMrError(
        `${what}: memory region ${hex(mr.stag)} is ${mr.isDeregistered ? 'deregistered' : 'invalidated'}`,
      );
    if ((mr.access & access) !== access)
      throw new AccessError(`${what}: memory region ${hex(mr.stag)} was registered without Local Write access`);
    const offset = sge.offset ?? 0;
    const length = sge.length ?? mr.length - offset;
    if (
      !Number.isInteger(offset) ||
      !Number.isInteger(length) ||
      offset < 0 ||
      length < 0 ||
      offset + length > mr.length
    )
      throw new SgeRangeError(
        `${what}: [${offset}, +${length}) is outside memory region ${hex(mr.stag)} of ${mr.length} octets`,
      );
    return { offset, length };
  }

  private checkRecv(wr: RecvWorkRequest): void {
    if (this.state !== 'init' && this.state !== 'rts')
      throw new QpStateError(this.state, 'post a receive work request');
    if (!Array.isArray(wr.sgList) || wr.sgList.length !== 1)
      throw new InvalidWorkRequestError(
        'a receive takes exactly one scatter element (an untagged buffer, RFC 5041 §5.3)',
      );
    this.checkSge(wr.sgList[0] as Sge, Access.LocalWrite, 'a receive buffer');
    if (this.rqOutstanding + 1 > this.maxRecvWr)
      throw new QueueFullError(`the receive queue holds ${this.rqOutstanding} of ${this.maxRecvWr} work requests`);
  }

  private recvOne(wr: RecvWorkRequest, settle?: Pending['settle']): void {
    const sge = wr.sgList[0] as Sge;
    const offset = sge.offset ?? 0;
    const length = sge.length ?? sge.mr.length - offset;
    const p: PendingRecv = {
      wrId: wr.wrId,
      opcode: 'recv',
      signaled: true,
      buffer: sge.mr.buffer.subarray(offset, offset + length),
      ...(settle ? { settle } : {}),
    };
    if (this.stream === undefined) this.early.push(p);
    else this.stream.postReceive(p.buffer, p);
    this.rqOutstanding++;
  }

  private onSendComplete(p: Pending, c: SendCompletion): void {
    this.sqOutstanding--;
    // RFC 7306: the Original Remote Data Value goes into the atomic's local element, in wire (big-endian) order.
    if (c.atomicResult !== undefined && p.result !== undefined)
      new DataView(p.result.buffer, p.result.byteOffset, ATOMIC_OPERAND_LENGTH).setBigUint64(0, c.atomicResult);
    const wc: WorkCompletion = {
      wrId: p.wrId,
      status: c.status,
      opcode: p.opcode,
      byteLen: c.byteLength,
      qpNum: this.qpNum,
      solicited: false,
      ...(c.atomicResult !== undefined ? { atomicResult: c.atomicResult } : {}),
      ...(c.error ? { error: c.error } : {}),
    };
    if (p.signaled || wc.status !== 'success') this.sendCq.push(wc);
    settle(p, wc);
  }

  private onReceive(c: ReceiveCompletion): void {
    const p = c.id as PendingRecv;
    this.rqOutstanding--;
    const wc: WorkCompletion = {
      wrId: p.wrId,
      status: c.status,
      opcode: 'recv',
      byteLen: c.byteLength,
      qpNum: this.qpNum,
      solicited: c.solicited,
      ...(c.invalidatedStag !== undefined ? { invalidatedStag: c.invalidatedStag } : {}),
      ...(c.immediateData !== undefined ? { immData: c.immediateData } : {}),
      ...(c.error ? { error: c.error } : {}),
    };
    this.recvCq.push(wc);
    settle(p, wc);
  }

  /** A queue pair closed before it was connected: its receives are flushed. */
  private endUnconnected(): void {
    for (const p of this.early.splice(0)) {
      this.rqOutstanding--;
      const wc: WorkCompletion = {
        wrId: p.wrId,
        status: 'flushed',
        opcode: 'recv',
        byteLen: 0,
        qpNum: this.qpNum,
        solicited: false,
      };
      this.recvCq.push(wc);
      settle(p, wc);
    }
    this.stateSubject.next('closed');
    this.onDestroy(this);
    this.terminateSubject.complete();
    this.closedSubject.next({ state: 'closed' });
    this.closedSubject.complete();
    this.stateSubject.complete();
  }
}

/** Options of the promise-returning conveniences. */
export interface ConvenienceOptions {
  readonly wrId?: WrId;
  /** Also report a successful completion on the send CQ. Default false (errors are always reported). */
  readonly signaled?: boolean;
  readonly fence?: boolean;
  readonly signal?: AbortSignal;
}

function common(o: ConvenienceOptions): { wrId?: WrId; signaled: boolean; fence?: boolean; signal?: AbortSignal } {
  return {
    signaled: o.signaled ?? false,
    ...(o.wrId !== undefined ? { wrId: o.wrId } : {}),
    ...(o.fence ? { fence: true } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  };
}

function settle(p: Pending, wc: WorkCompletion): void {
  if (!p.settle) return;
  if (wc.status === 'success') p.settle.resolve(wc);
  else p.settle.reject(new WorkCompletionError(wc));
}

function asList(local: Sge | readonly Sge[]): readonly Sge[] {
  return Array.isArray(local) ? (local as readonly Sge[]) : [local as Sge];
}

function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > MAX_STAG)
    throw new InvalidWorkRequestError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

function checkU64(v: bigint, what: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > MAX_TO)
    throw new InvalidWorkRequestError(`${what} ${String(v)} is not a 64-bit unsigned bigint`);
  return v;
}

function checkRemote(remote: RemoteBuffer | undefined): void {
  if (remote === undefined) throw new InvalidWorkRequestError('the work request has no remote buffer');
  checkStag(remote.stag, 'remote STag');
  if (typeof remote.to !== 'bigint' || remote.to < 0n || remote.to > MAX_TO)
    throw new InvalidWorkRequestError(`remote TO ${String(remote.to)} is not a 64-bit unsigned bigint`);
}

function positive(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 1) throw new InvalidWorkRequestError(`${what} must be a positive integer, got ${n}`);
  return n;
}

function count(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidWorkRequestError(`${what} must be a non-negative integer, got ${n}`);
  return n;
}

const hex = (stag: number) => `0x${(stag >>> 0).toString(16).padStart(8, '0')}`;
