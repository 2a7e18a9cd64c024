/**
 * Caller input checked once, where it enters the stack: RDMAP used directly checks each work request's
 * STags, Tagged Offsets and lengths (RFC 5040 §4, §5; "TO + length wraps 2^64", RFC 5041 §7.1) and the
 * RFC 7306 extensions it needs; behind verbs (which checks its own) it does not, and DDP never does for
 * RDMAP. ORD is a state check and always applies. Typed errors.
 */
import { MAX_U64, TWO_64 } from '@rddp/ddp';
import { ATOMIC_OPERAND_LENGTH, AtomicOpcode } from './atomic.js';
import {
  OrdExceededError,
  RdmapExtensionDisabledError,
  RdmapInvalidArgumentError,
  RdmapMessageTooLongError,
} from './errors.js';
import type { RdmapExtension } from './opcode.js';
import type { ImmediateData, RdmapWorkRequest } from './types.js';

/** The largest message RDMAP can describe: RDMA Read Message Size and DDP MO are 32 bits (§4.4). */
export const RDMAP_MAX_MESSAGE = 0xffff_ffff;
const ATOMIC_OPCODES: readonly unknown[] = Object.values(AtomicOpcode);

/** At or below 2^63 no message (< 2^32 octets) can wrap the TO space. */
const TO_NO_WRAP = 1n << 63n;

/** ORD (RFC 5040 §6.1): a Read or Atomic Request needs a slot; with `ordPolicy: 'error'` none may wait. */
export function checkOrd(
  wr: RdmapWorkRequest,
  o: { readonly ord: number; readonly ordPolicy: 'queue' | 'error'; outstanding(): number },
): void {
  const t = wr.op.type;
  if (t !== 'read' && t !== 'atomic') return;
  if (o.ord === 0 || (o.ordPolicy === 'error' && o.outstanding() >= o.ord))
    throw new OrdExceededError(o.ord, t === 'atomic' ? 'Atomic Request' : undefined);
}

function checkPayload(parts: readonly Uint8Array[]): number {
  if (!Array.isArray(parts)) throw new RdmapInvalidArgumentError('the payload must be an array of Uint8Arrays');
  let n = 0;
  for (const p of parts) {
    if (!(p instanceof Uint8Array)) throw new RdmapInvalidArgumentError('payload parts must be Uint8Arrays');
    n += p.byteLength;
  }
  if (n > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(n, RDMAP_MAX_MESSAGE);
  return n;
}

/**
 * Checks a work request where it enters RDMAP (`postSend`, whoever calls it); throws a typed error for bad
 * input. Returns the message's length in octets (what its completion reports).
 */
export function checkWorkRequest(wr: RdmapWorkRequest, extensions: Readonly<Record<RdmapExtension, boolean>>): number {
  const op = wr.op;
  switch (op.type) {
    case 'write': {
      const n = checkPayload(op.payload);
      if (op.immediate !== undefined) checkImmediate(extensions, op.immediate);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      // Below 2^63 no message can wrap: the bigint sum is made only for TOs near the top.
      if (op.sinkTo > TO_NO_WRAP && op.sinkTo + BigInt(n) > TWO_64)
        throw new RdmapInvalidArgumentError('Data Sink TO + length wraps 2^64 (RFC 5041 §7.1)');
      return n;
    }
    case 'send': {
      const n = checkPayload(op.payload);
      if (op.invalidateStag !== undefined) checkStag(op.invalidateStag, 'Invalidate STag');
      if (op.immediate !== undefined) checkImmediate(extensions, op.immediate);
      return n;
    }
    case 'immediate':
      checkImmediate(extensions, op);
      return 0;
    case 'atomic':
      if (!extensions.atomics) throw new RdmapExtensionDisabledError('atomics');
      if (!ATOMIC_OPCODES.includes(op.atomicOpcode))
        throw new RdmapInvalidArgumentError(
          `Atomic OpCode ${String(op.atomicOpcode)} is not FetchAdd or CmpSwap (RFC 7306: 0001b is Reserved), nor Swap`,
        );
      checkStag(op.remoteStag, 'Remote STag');
      checkTo(op.remoteTo, 'Remote Tagged Offset');
      checkTo(op.addOrSwapData, 'Add or Swap Data');
      if (op.addOrSwapMask !== undefined) checkTo(op.addOrSwapMask, 'Add or Swap Mask');
      if (op.compareData !== undefined) checkTo(op.compareData, 'Compare Data');
      if (op.compareMask !== undefined) checkTo(op.compareMask, 'Compare Mask');
      return ATOMIC_OPERAND_LENGTH;
    case 'read':
      if (!Number.isInteger(op.size) || op.size < 0)
        throw new RdmapInvalidArgumentError(`RDMA Read Message Size ${op.size} is not a length`);
      if (op.size > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(op.size, RDMAP_MAX_MESSAGE);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkStag(op.srcStag, 'Data Source STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      checkTo(op.srcTo, 'Data Source TO');
      return op.size;
    case 'local-invalidate':
      checkStag(op.stag, 'STag');
      return 0;
    default:
      throw new RdmapInvalidArgumentError(`unknown operation ${String((op as { type: unknown }).type)}`);
  }
}

/** Immediate Data needs the extension and a 64-bit value (RFC 7306). */
function checkImmediate(extensions: Readonly<Record<RdmapExtension, boolean>>, imm: ImmediateData): void {
  if (!extensions.immediate) throw new RdmapExtensionDisabledError('immediate');
  checkTo(imm.data, 'Immediate Data');
}

export function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > 0xffff_ffff)
    throw new RdmapInvalidArgumentError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

export function checkTo(to: bigint, what: string): void {
  if (typeof to !== 'bigint' || to < 0n || to > MAX_U64)
    throw new RdmapInvalidArgumentError(`${what} ${String(to)} is not a 64-bit unsigned integer`);
}
