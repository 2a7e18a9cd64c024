/**
 * The queue pair's edge: a send work request (ibv_send_wr) checked against its queue pair and turned into
 * the RDMAP operation that carries it (RFC 5040 §5.1–5.3; RFC 7306), a receive work request into its
 * receive buffer, and the caller input checks they use — STags (32 bits, RFC 5040 §2.2), Tagged Offsets
 * and RFC 7306 operands (64 bits unsigned, RFC 5041 §5.1.1), the queue pair's limits. Everything is
 * checked before anything of a list is posted (a bad one posts none). Every layer checks what enters
 * through its own public methods: RDMAP's `postSend` and DDP's sends check their input whoever calls them.
 */
import { Access, stagHex as hex, TWO_64, MAX_U64 as U64_MAX } from '@rddp/ddp';
import {
  ATOMIC_OPERAND_LENGTH,
  AtomicOpcode,
  type AtomicOperation,
  type ImmediateData,
  type RdmapExtensions,
  type RdmapOperation,
} from '@rddp/rdmap';
import {
  AccessError,
  ExtensionNotEnabledError,
  InvalidMrError,
  InvalidWorkRequestError,
  MessageTooLongError,
  SgeRangeError,
  VerbsError,
} from './errors.js';
import type { Mr, RemoteBuffer, Sge } from './mr.js';
import type {
  AtomicCmpSwapWr,
  AtomicFetchAddWr,
  AtomicSwapWr,
  RdmaWriteWithImmWr,
  RecvWorkRequest,
  SendWithImmWr,
  SendWorkRequest,
  WcOpcode,
  WrId,
} from './types.js';

/** TOs from which a message of under 2^32 octets could pass 2^64. */
const LAST_WINDOW = TWO_64 - 0x1_0000_0000n;

/** The largest STag (32 bits). */
const MAX_STAG = 0xffff_ffff;

function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > MAX_STAG)
    throw new InvalidWorkRequestError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

function checkU64(v: bigint, what: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX)
    throw new InvalidWorkRequestError(`${what} ${String(v)} is not a 64-bit unsigned bigint`);
  return v;
}

/** The peer's STag and TO; with `length`, the TO + length must not wrap 2^64 (RFC 5041 §7.1). */
function checkRemote(remote: RemoteBuffer | undefined, length?: number): RemoteBuffer {
  if (remote === undefined) throw new InvalidWorkRequestError('the work request has no remote buffer');
  checkStag(remote.stag, 'remote STag');
  checkU64(remote.to, 'remote TO');
  // A length is below 2^32: only a TO in the last 2^32 octets can wrap (one comparison, no bigint made).
  if (length !== undefined && remote.to > LAST_WINDOW && remote.to + BigInt(length) > TWO_64)
    throw new InvalidWorkRequestError('the remote TO + length wraps 2^64 (RFC 5041 §7.1)');
  return remote;
}

/** A limit of at least 1. */
export function positive(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 1) throw new InvalidWorkRequestError(`${what} must be a positive integer, got ${n}`);
  return n;
}

/** A count of at least 0. */
export function count(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidWorkRequestError(`${what} must be a non-negative integer, got ${n}`);
  return n;
}

/** What a work request is checked against: its queue pair's domain, limits and RFC 7306 extensions. */
export interface WrLimits {
  /** The queue pair's protection domain: its elements must be of regions registered there (RFC 5040 §8.1.1). */
  readonly pd: PdId;
  readonly maxSge: number;
  readonly maxMessageSize: number;
  readonly extensions: RdmapExtensions;
}

/** A send work request in RDMAP's terms. */
export interface TranslatedSend {
  readonly op: RdmapOperation;
  /** The local STags whose buffers the operation uses (RDMAP checks them again, RFC 5040 §7.1 case 1). */
  readonly localStags: number[];
  /** What its completion reports. */
  readonly opcode: WcOpcode;
  /** An atomic's 8-octet local element: the original remote value goes there (RFC 7306). */
  readonly result?: Uint8Array;
}

/** A protection domain as work requests see it: compared by identity, named by its id. */
type PdId = { readonly id: number };

const ATOMIC_OPCODE = {
  'atomic-fetch-add': AtomicOpcode.FetchAdd,
  'atomic-swap': AtomicOpcode.Swap,
  'atomic-cmp-swap': AtomicOpcode.CmpSwap,
} as const;

/**
 * How an error names a work request: `work request #<index>` (its place in the list posted together)
 * with its wrId when it has one; without an index, `work request <wrId>` or `work request (no wrId)`.
 */
export function workRequestName(wrId: WrId | undefined, index?: number): string {
  const id = wrId === undefined ? undefined : typeof wrId === 'object' ? 'object' : String(wrId);
  if (index === undefined) return `work request ${id ?? '(no wrId)'}`;
  return `work request #${index}${id === undefined ? '' : ` (wrId ${id})`}`;
}

/** Runs `check`; a verbs error it throws gets the work request's name in front of its message. */
function naming<T>(wrId: WrId | undefined, index: number | undefined, check: () => T): T {
  try {
    return check();
  } catch (e) {
    if (e instanceof VerbsError) e.message = `${workRequestName(wrId, index)}: ${e.message}`;
    throw e;
  }
}

/**
 * Checks `wr` (typed errors, named by `index`, its place in the posted list) and translates it into its
 * RDMAP operation.
 */
export function translateSend(wr: SendWorkRequest, q: WrLimits, index?: number): TranslatedSend {
  try {
    return translate(wr, q); // no closure per work request: this is every post's path
  } catch (e) {
    if (e instanceof VerbsError) e.message = `${workRequestName(wr?.wrId, index)}: ${e.message}`;
    throw e;
  }
}

function translate(wr: SendWorkRequest, q: WrLimits): TranslatedSend {
  switch (wr.opcode) {
    case 'rdma-write':
    case 'rdma-write-with-imm': {
      const immediate = wr.opcode === 'rdma-write-with-imm' ? immediateOf(wr, q) : undefined;
      const { slices, stags, length } = gather(wr.sgList, q);
      const remote = checkRemote(wr.remote, length);
      const op: RdmapOperation = immediate
        ? { type: 'write', sinkStag: remote.stag, sinkTo: remote.to, payload: slices, immediate }
        : { type: 'write', sinkStag: remote.stag, sinkTo: remote.to, payload: slices };
      return { opcode: 'rdma-write', op, localStags: stags };
    }
    case 'send':
    case 'send-with-invalidate':
    case 'send-with-imm': {
      const immediate = wr.opcode === 'send-with-imm' ? immediateOf(wr, q) : undefined;
      const { slices, stags } = gather(wr.sgList, q);
      if (wr.opcode === 'send-with-invalidate') checkStag(wr.invalidateStag, 'Invalidate STag');
      // RFC 7306: with Immediate Data, `solicited` belongs to the Immediate Data message, not the Send.
      const op: RdmapOperation = immediate
        ? { type: 'send', payload: slices, immediate }
        : wr.opcode === 'send-with-invalidate'
          ? { type: 'send', payload: slices, solicited: wr.solicited ?? false, invalidateStag: wr.invalidateStag }
          : { type: 'send', payload: slices, solicited: wr.solicited ?? false };
      return { opcode: 'send', op, localStags: stags };
    }
    case 'rdma-read': {
      const sge = onlyElement(
        wr.sgList,
        'an RDMA Read takes exactly one scatter element: its Data Sink (RFC 5040 §5.2)',
      );
      const { offset, length } = checkSge(sge, Access.LocalWrite, 'the Data Sink of an RDMA Read', q.pd);
      if (length > q.maxMessageSize) throw new MessageTooLongError(length, q.maxMessageSize);
      const remote = checkRemote(wr.remote);
      return {
        opcode: 'rdma-read',
        op: {
          type: 'read',
          sinkStag: sge.mr.stag,
          sinkTo: checkU64(sge.mr.baseTo + BigInt(offset), 'the Data Sink TO'),
          size: length,
          srcStag: remote.stag,
          srcTo: remote.to,
        },
        localStags: [sge.mr.stag],
      };
    }
    case 'atomic-fetch-add':
    case 'atomic-swap':
    case 'atomic-cmp-swap': {
      requireExtension(q, 'atomics');
      const sge = onlyElement(
        wr.sgList,
        'an atomic takes exactly one scatter element: 8 octets for the original value (RFC 7306)',
      );
      const { offset, length } = checkSge(sge, Access.LocalWrite, 'the result element of an atomic', q.pd);
      if (length !== ATOMIC_OPERAND_LENGTH)
        throw new SgeRangeError('the result element of an atomic (RFC 7306)', offset, length, {
          exactLength: ATOMIC_OPERAND_LENGTH,
        });
      const remote = checkRemote(wr.remote);
      return {
        opcode: wr.opcode,
        op: { type: 'atomic', remoteStag: remote.stag, remoteTo: remote.to, ...atomicOperands(wr) },
        localStags: [sge.mr.stag],
        result: sge.mr.buffer.subarray(offset, offset + length),
      };
    }
    case 'local-invalidate':
      checkStag(wr.invalidateStag, 'STag');
      return { opcode: 'local-invalidate', op: { type: 'local-invalidate', stag: wr.invalidateStag }, localStags: [] };
    default:
      throw new InvalidWorkRequestError(`unknown opcode '${String((wr as { opcode: unknown }).opcode)}'`);
  }
}

/** Checks a receive work request: one element with Local Write access (RFC 5041 §5.3); returns its buffer. */
export function receiveBuffer(wr: RecvWorkRequest, pd: PdId, index?: number): Uint8Array {
  return naming(wr?.wrId, index, () => {
    const sge = onlyElement(
      wr.sgList,
      'a receive takes exactly one scatter element (an untagged buffer, RFC 5041 §5.3)',
    );
    const { offset, length } = checkSge(sge, Access.LocalWrite, 'a receive buffer', pd);
    return sge.mr.buffer.subarray(offset, offset + length);
  });
}

/** RFC 7306: the extension must have been enabled for this connection (both ends agreed). */
function requireExtension(q: WrLimits, extension: 'atomics' | 'immediate'): void {
  if (!q.extensions[extension]) throw new ExtensionNotEnabledError(extension);
}

function immediateOf(wr: RdmaWriteWithImmWr | SendWithImmWr, q: WrLimits): ImmediateData {
  requireExtension(q, 'immediate');
  return { data: checkU64(wr.immData, 'immData'), solicited: wr.solicited ?? false };
}

/** RFC 7306 Add or Swap Data and Mask, and CmpSwap's Compare Data and Mask, checked as 64 bits unsigned. */
function atomicOperands(
  wr: AtomicFetchAddWr | AtomicSwapWr | AtomicCmpSwapWr,
): Omit<AtomicOperation, 'type' | 'remoteStag' | 'remoteTo'> {
  const atomicOpcode = ATOMIC_OPCODE[wr.opcode];
  if (wr.opcode === 'atomic-fetch-add')
    return {
      atomicOpcode,
      addOrSwapData: checkU64(wr.add, 'add'),
      ...optionalU64(wr.addMask, 'addMask', 'addOrSwapMask'),
    };
  const swap = {
    atomicOpcode,
    addOrSwapData: checkU64(wr.swap, 'swap'),
    ...optionalU64(wr.swapMask, 'swapMask', 'addOrSwapMask'),
  };
  if (wr.opcode === 'atomic-swap') return swap;
  return {
    ...swap,
    compareData: checkU64(wr.compare, 'compare'),
    ...optionalU64(wr.compareMask, 'compareMask', 'compareMask'),
  };
}

/** `{ [as]: v }` when `v` is given. */
function optionalU64<K extends string>(v: bigint | undefined, what: string, as: K): Partial<Record<K, bigint>> {
  return v === undefined ? {} : ({ [as]: checkU64(v, what) } as Record<K, bigint>);
}

function onlyElement(sgList: readonly Sge[], message: string): Sge {
  if (!Array.isArray(sgList) || sgList.length !== 1) throw new InvalidWorkRequestError(message);
  return sgList[0] as Sge;
}

function gather(sgList: readonly Sge[], q: WrLimits): { slices: Uint8Array[]; stags: number[]; length: number } {
  if (!Array.isArray(sgList)) throw new InvalidWorkRequestError('sgList must be an array of scatter/gather elements');
  if (sgList.length > q.maxSge)
    throw new InvalidWorkRequestError(`${sgList.length} scatter/gather elements; this queue pair takes ${q.maxSge}`);
  const slices: Uint8Array[] = [];
  const stags: number[] = [];
  let length = 0;
  for (let i = 0; i < sgList.length; i++) {
    const sge = sgList[i] as Sge;
    const n = checkSgeLength(sge, 0, 'a gather element', q.pd);
    const mr = sge.mr;
    // The region's fields are read directly: this runs for every element of every post.
    const offset = sge.offset ?? 0;
    let v = mr.lastView;
    if (v === undefined || mr.lastOffset !== offset || v.byteLength !== n) {
      v = mr.region.buffer.subarray(offset, offset + n);
      mr.lastView = v;
      mr.lastOffset = offset;
    }
    slices.push(v);
    const stag = mr.region.stag;
    if (i === 0 || !stags.includes(stag)) stags.push(stag);
    length += n;
  }
  if (length > q.maxMessageSize) throw new MessageTooLongError(length, q.maxMessageSize);
  return { slices, stags, length };
}

/** An element of a valid region of `pd` with `access`, inside the region (RFC 5040 §8.1.1 protection domains). */
function checkSge(sge: Sge, access: number, what: string, pd: PdId): { offset: number; length: number } {
  const length = checkSgeLength(sge, access, what, pd);
  return { offset: sge.offset ?? 0, length };
}

/** `checkSge` returning the element's length only (its offset is `sge.offset ?? 0`): every post's path. */
function checkSgeLength(sge: Sge, access: number, what: string, pd: PdId): number {
  const mr: Mr | undefined = sge?.mr;
  // The STag table's entry, read field by field (no getter calls on every post's path).
  const r = mr?.region;
  if (mr === undefined || r === undefined || typeof r.stag !== 'number')
    throw new InvalidWorkRequestError(`${what} has no memory region`);
  if (mr.pd !== pd)
    throw new InvalidMrError(what, r.stag, `belongs to protection domain ${mr.pd.id}, this queue pair to ${pd.id}`);
  // Deregistration clears `valid` as invalidation does.
  if (!r.valid) throw new InvalidMrError(what, r.stag, mr.isDeregistered ? 'is deregistered' : 'is invalidated');
  if ((r.access & access) !== access)
    throw new AccessError(`${what}: memory region ${hex(r.stag)} was registered without Local Write access`);
  const offset = sge.offset ?? 0;
  const length = sge.length ?? r.length - offset;
  if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > r.length)
    throw new SgeRangeError(what, offset, length, { stag: r.stag, regionLength: r.length });
  return length;
}
