/**
 * Caller input checked once, where it enters RDMAP (the verbs layer checks its own before): each work
 * request's STags, Tagged Offsets and lengths (RFC 5040 §4, §5; "TO + length wraps 2^64", RFC 5041 §7.1),
 * the RFC 7306 extensions it needs, and ORD when the stream refuses Reads beyond it. Typed errors.
 */
import { MAX_U64 } from '@rddp/ddp';
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

function totalLength(parts: readonly Uint8Array[]): number {
  let n = 0;
  for (const p of parts) n += p.byteLength;
  return n;
}

/** Checks `wr` and returns the octets it moves; throws a typed error for bad caller input. */
export function validateWorkRequest(
  wr: RdmapWorkRequest,
  o: {
    readonly extensions: Readonly<Record<RdmapExtension, boolean>>;
    readonly ord: number;
    readonly ordPolicy: 'queue' | 'error';
    outstanding(): number;
  },
): number {
  const op = wr.op;
  let byteLength = 0;
  switch (op.type) {
    case 'write':
      byteLength = totalLength(op.payload);
      if (op.immediate !== undefined) checkImmediate(o.extensions, op.immediate);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      if (byteLength > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(byteLength, RDMAP_MAX_MESSAGE);
      if (op.sinkTo + BigInt(byteLength) > MAX_U64 + 1n)
        throw new RdmapInvalidArgumentError('Data Sink TO + length wraps 2^64 (RFC 5041 §7.1)');
      break;
    case 'send':
      byteLength = totalLength(op.payload);
      if (byteLength > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(byteLength, RDMAP_MAX_MESSAGE);
      if (op.invalidateStag !== undefined) checkStag(op.invalidateStag, 'Invalidate STag');
      if (op.immediate !== undefined) checkImmediate(o.extensions, op.immediate);
      break;
    case 'immediate':
      checkImmediate(o.extensions, op);
      break;
    case 'atomic':
      if (!o.extensions.atomics) throw new RdmapExtensionDisabledError('atomics');
      byteLength = ATOMIC_OPERAND_LENGTH;
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
      if (o.ord === 0 || (o.ordPolicy === 'error' && o.outstanding() >= o.ord))
        throw new OrdExceededError(o.ord, 'Atomic Request');
      break;
    case 'read':
      byteLength = op.size;
      if (!Number.isInteger(op.size) || op.size < 0)
        throw new RdmapInvalidArgumentError(`RDMA Read Message Size ${op.size} is not a length`);
      if (op.size > RDMAP_MAX_MESSAGE) throw new RdmapMessageTooLongError(op.size, RDMAP_MAX_MESSAGE);
      checkStag(op.sinkStag, 'Data Sink STag');
      checkStag(op.srcStag, 'Data Source STag');
      checkTo(op.sinkTo, 'Data Sink TO');
      checkTo(op.srcTo, 'Data Source TO');
      if (o.ord === 0 || (o.ordPolicy === 'error' && o.outstanding() >= o.ord)) throw new OrdExceededError(o.ord);
      break;
    case 'local-invalidate':
      checkStag(op.stag, 'STag');
      break;
    default:
      throw new RdmapInvalidArgumentError(`unknown operation ${String((op as { type: unknown }).type)}`);
  }
  return byteLength;
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
