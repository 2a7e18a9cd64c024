/**
 * RFC 7306 atomic operations: the Atomic Request and Atomic Response Headers, the two operations with
 * their masks (FetchAdd, CmpSwap) on a naturally aligned 64-bit word of a Tagged Buffer, the responder's
 * check of that word, and the requester's outstanding atomics (bounded with RDMA Reads by ORD).
 */
import { MAX_U64, type MemoryRegion, stagHex, type UlpCheckFailure } from '@rddp/ddp';
import { rdmapFailure as fail, OutstandingQueue } from './outstanding.js';
import { RdmaErrorCode, RdmaErrorType } from './terminate-codes.js';

/**
 * Atomic Operation Codes (RFC 7306 IANA Considerations, registry "RDMAP Message Atomic Operation
 * Subcodes"): FetchAdd 0000b, CmpSwap 0010b; 0001b is Reserved, 0011b–1111b unassigned. RFC 7306 has no
 * Swap operation.
 */
export const AtomicOpcode = {
  FetchAdd: 0b0000,
  CmpSwap: 0b0010,
  /**
   * Not an Atomic OpCode: posting shorthand for an unconditional swap under the Swap Mask, sent as CmpSwap
   * with Compare Mask 0 (every word compares equal). Never on the wire.
   */
  Swap: 'swap',
} as const;
export type AtomicOpcode = (typeof AtomicOpcode)[keyof typeof AtomicOpcode];

/** True for the Atomic OpCodes RFC 7306 defines (FetchAdd, CmpSwap). */
export function isAtomicOpcode(code: number): boolean {
  return code === AtomicOpcode.FetchAdd || code === AtomicOpcode.CmpSwap;
}

/** The access right a Tagged Buffer needs for atomics (RFC 7306; verbs' Remote Atomic), beside RFC 5040's four. */
export const ACCESS_REMOTE_ATOMIC = 0x10;

/** Atomic Request Header: 28 reserved bits and the Atomic OpCode, then the fields below (RFC 7306 §5). */
export interface AtomicRequestHeader {
  /** Atomic Operation Code, 4 bits. */
  readonly atomicOpcode: number;
  /** Bits 0–27 of the first word: zero on transmit, ignored on receive. */
  readonly reserved?: number;
  /** Request Identifier: the requester's, copied into the Atomic Response. */
  readonly requestId: number;
  /** Remote STag and Tagged Offset of the 64-bit word operated on. */
  readonly remoteStag: number;
  readonly remoteTo: bigint;
  /** Add Data (FetchAdd) or Swap Data (CmpSwap). */
  readonly addOrSwapData: bigint;
  /** Add Mask (FetchAdd: field boundaries) or Swap Mask (CmpSwap: which bits are swapped). */
  readonly addOrSwapMask: bigint;
  /** Compare Data and Compare Mask (CmpSwap only; zero otherwise). */
  readonly compareData: bigint;
  readonly compareMask: bigint;
}

/** Atomic Response Header (RFC 7306 §5): the Request Identifier it answers and the word's value before. */
export interface AtomicResponseHeader {
  readonly originalRequestId: number;
  readonly originalRemoteData: bigint;
}

/** 32 + 32 + 32 + 64 + 4 × 64 bits. */
export const ATOMIC_REQUEST_HEADER_LENGTH = 52;
/** 32 + 64 bits. */
export const ATOMIC_RESPONSE_HEADER_LENGTH = 12;
/**
 * The Atomic Request Header (RFC 7306 §4.2) for a posted atomic: FetchAdd, CmpSwap, or Swap sent as
 * CmpSwap with Compare Mask 0 (the compare always succeeds: RFC 7306 defines no Swap).
 */
export function encodeAtomicRequestOf(
  op: Pick<AtomicRequestHeader, 'remoteStag' | 'remoteTo' | 'addOrSwapData'> &
    Partial<Pick<AtomicRequestHeader, 'addOrSwapMask' | 'compareData' | 'compareMask'>> & {
      readonly atomicOpcode: number | 'swap';
    },
  requestId: number,
): Uint8Array {
  const isAdd = op.atomicOpcode === AtomicOpcode.FetchAdd;
  const isCmp = op.atomicOpcode === AtomicOpcode.CmpSwap;
  return encodeAtomicRequest({
    atomicOpcode: isAdd ? AtomicOpcode.FetchAdd : AtomicOpcode.CmpSwap,
    requestId,
    remoteStag: op.remoteStag,
    remoteTo: op.remoteTo,
    addOrSwapData: op.addOrSwapData,
    addOrSwapMask: op.addOrSwapMask ?? (isAdd ? 0n : MAX_U64),
    compareData: isCmp ? (op.compareData ?? 0n) : 0n,
    compareMask: isCmp ? (op.compareMask ?? MAX_U64) : 0n,
  });
}

/** The operand size and alignment of every atomic operation (RFC 7306: 64 bits, naturally aligned). */
export const ATOMIC_OPERAND_LENGTH = 8;

function u64(name: string, v: bigint): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > MAX_U64) throw new RangeError(`${name} is a 64-bit unsigned bigint`);
  return v;
}

export function encodeAtomicRequest(
  h: AtomicRequestHeader,
  out = new Uint8Array(ATOMIC_REQUEST_HEADER_LENGTH),
): Uint8Array {
  if (out.byteLength < ATOMIC_REQUEST_HEADER_LENGTH) throw new RangeError('Atomic Request Header needs 52 octets');
  if (!Number.isInteger(h.atomicOpcode) || h.atomicOpcode < 0 || h.atomicOpcode > 0xf)
    throw new RangeError('Atomic OpCode is 4 bits');
  const v = new DataView(out.buffer, out.byteOffset, ATOMIC_REQUEST_HEADER_LENGTH);
  v.setUint32(0, (((h.reserved ?? 0) & 0x0fff_ffff) << 4) | h.atomicOpcode);
  v.setUint32(4, h.requestId >>> 0);
  v.setUint32(8, h.remoteStag >>> 0);
  v.setBigUint64(12, u64('Remote Tagged Offset', h.remoteTo));
  v.setBigUint64(20, u64('Add or Swap Data', h.addOrSwapData));
  v.setBigUint64(28, u64('Add or Swap Mask', h.addOrSwapMask));
  v.setBigUint64(36, u64('Compare Data', h.compareData));
  v.setBigUint64(44, u64('Compare Mask', h.compareMask));
  return out;
}

export function decodeAtomicRequest(bytes: Uint8Array): AtomicRequestHeader {
  if (bytes.byteLength < ATOMIC_REQUEST_HEADER_LENGTH) throw new RangeError('Atomic Request Header needs 52 octets');
  const v = new DataView(bytes.buffer, bytes.byteOffset, ATOMIC_REQUEST_HEADER_LENGTH);
  const w0 = v.getUint32(0);
  return {
    atomicOpcode: w0 & 0xf,
    reserved: w0 >>> 4,
    requestId: v.getUint32(4),
    remoteStag: v.getUint32(8),
    remoteTo: v.getBigUint64(12),
    addOrSwapData: v.getBigUint64(20),
    addOrSwapMask: v.getBigUint64(28),
    compareData: v.getBigUint64(36),
    compareMask: v.getBigUint64(44),
  };
}

export function encodeAtomicResponse(
  h: AtomicResponseHeader,
  out = new Uint8Array(ATOMIC_RESPONSE_HEADER_LENGTH),
): Uint8Array {
  if (out.byteLength < ATOMIC_RESPONSE_HEADER_LENGTH) throw new RangeError('Atomic Response Header needs 12 octets');
  const v = new DataView(out.buffer, out.byteOffset, ATOMIC_RESPONSE_HEADER_LENGTH);
  v.setUint32(0, h.originalRequestId >>> 0);
  v.setBigUint64(4, u64('Original Remote Data Value', h.originalRemoteData));
  return out;
}

export function decodeAtomicResponse(bytes: Uint8Array): AtomicResponseHeader {
  if (bytes.byteLength < ATOMIC_RESPONSE_HEADER_LENGTH) throw new RangeError('Atomic Response Header needs 12 octets');
  const v = new DataView(bytes.buffer, bytes.byteOffset, ATOMIC_RESPONSE_HEADER_LENGTH);
  return { originalRequestId: v.getUint32(0), originalRemoteData: v.getBigUint64(4) };
}

/**
 * FetchAdd with an Add Mask: a 1 in the mask marks the most significant bit of a field, and the carry out
 * of that bit is dropped, so the word is added as independent fields. A zero mask is the plain 64-bit
 * add, modulo 2^64.
 */
export function maskedAdd(original: bigint, add: bigint, addMask: bigint): bigint {
  if (addMask === 0n) return (original + add) & MAX_U64;
  let out = 0n;
  let carry = 0n;
  for (let i = 0n; i < 64n; i++) {
    const s = ((original >> i) & 1n) + ((add >> i) & 1n) + carry;
    out |= (s & 1n) << i;
    carry = (addMask >> i) & 1n ? 0n : s >> 1n;
  }
  return out;
}

/** The word's new value after the operation (RFC 7306: FetchAdd, CmpSwap, with their masks). */
export function applyAtomic(h: AtomicRequestHeader, original: bigint): bigint {
  switch (h.atomicOpcode) {
    case AtomicOpcode.FetchAdd:
      return maskedAdd(original, h.addOrSwapData, h.addOrSwapMask);
    case AtomicOpcode.CmpSwap:
      if (((original ^ h.compareData) & h.compareMask) !== 0n) return original;
      return (original & ~h.addOrSwapMask & MAX_U64) | (h.addOrSwapData & h.addOrSwapMask);
    default:
      throw new RangeError(`reserved Atomic OpCode ${h.atomicOpcode}`);
  }
}

/** The 64-bit word at `off` in `buffer`, in network byte order (as every RDMAP field). */
export function readWord(buffer: Uint8Array, off: number): bigint {
  return new DataView(buffer.buffer, buffer.byteOffset + off, ATOMIC_OPERAND_LENGTH).getBigUint64(0);
}

export function writeWord(buffer: Uint8Array, off: number, value: bigint): void {
  new DataView(buffer.buffer, buffer.byteOffset + off, ATOMIC_OPERAND_LENGTH).setBigUint64(0, value);
}

/**
 * The responder's checks of an Atomic Request before it executes (RFC 7306, as RFC 5040 §7.2 4a–4d for a
 * Read Request's Data Source): a defined Atomic OpCode; a valid STag of this stream with the Remote
 * Atomic right; the 64-bit word inside the region and naturally aligned. Returns the Terminate's Error
 * Type and Code, or undefined.
 */
export function checkAtomicRequest(
  h: AtomicRequestHeader,
  region: MemoryRegion | undefined,
  pdId: number,
): { type: number; code: number; message: string } | undefined {
  if (!isAtomicOpcode(h.atomicOpcode))
    return {
      type: RdmaErrorType.RemoteOperation,
      code: RdmaErrorCode.UnexpectedOpcode,
      message: `Atomic OpCode ${h.atomicOpcode}: only FetchAdd (0000b) and CmpSwap (0010b) are defined (RFC 7306)`,
    };
  const stag = () => stagHex(h.remoteStag); // formatted only for an error message
  const prot = (code: number, message: string) => ({ type: RdmaErrorType.RemoteProtection, code, message });
  if (region === undefined || !region.valid || region.stag !== h.remoteStag >>> 0)
    return prot(RdmaErrorCode.InvalidStag, `Atomic Request: Remote STag ${stag()} is not valid (RFC 7306)`);
  if (region.pdId !== pdId)
    return prot(
      RdmaErrorCode.StagNotAssociatedWithStream,
      `Atomic Request: Remote STag ${stag()} is not associated with this RDMAP Stream`,
    );
  if ((region.access & ACCESS_REMOTE_ATOMIC) === 0)
    return prot(
      RdmaErrorCode.AccessRightsViolation,
      `Atomic Request: STag ${stag()} does not allow remote atomic operations (RFC 7306)`,
    );
  const end = region.baseTo + BigInt(region.length);
  if (h.remoteTo < region.baseTo || h.remoteTo + BigInt(ATOMIC_OPERAND_LENGTH) > end)
    return prot(
      RdmaErrorCode.BaseOrBoundsViolation,
      `Atomic Request: the 64-bit word at TO ${h.remoteTo} is outside [${region.baseTo}, ${end}) of STag ${stag()}`,
    );
  if ((h.remoteTo & 7n) !== 0n)
    return prot(
      RdmaErrorCode.BaseOrBoundsViolation,
      `Atomic Request: TO ${h.remoteTo} is not aligned to 8 octets (RFC 7306: naturally aligned 64-bit operands)`,
    );
  return undefined;
}

/** One Atomic Request handed to DDP whose Atomic Response has not been Delivered. */
export interface OutstandingAtomic<T> {
  readonly token: T;
  readonly requestId: number;
}

/** The requester side: Atomic Requests in flight, answered in the order they were sent (RFC 7306). */
export class OutstandingAtomics<T> extends OutstandingQueue<OutstandingAtomic<T>> {
  /** The atomic the next Atomic Response answers. */
  get oldest(): OutstandingAtomic<T> | undefined {
    return this.queue[0];
  }

  /** Before placement: an Atomic Response with no Atomic Request outstanding is an Unexpected OpCode. */
  checkResponseSegment(last: boolean): UlpCheckFailure | undefined {
    if (this.arrived >= this.queue.length)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        'Atomic Response with no Atomic Request outstanding (RFC 7306)',
      );
    if (last) this.arrived++;
    return undefined;
  }
}
