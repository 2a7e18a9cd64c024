/**
 * Caller input checks at the edge of the stack: STags (32 bits, RFC 5040 §2.2), Tagged Offsets and RFC
 * 7306 operands (64 bits unsigned, RFC 5041 §5.1.1), and the queue pair's numeric limits, before any work
 * request of a list is posted (a bad one posts none). Every layer checks what enters through its own
 * public methods: RDMAP's `postSend` and DDP's sends check their input whoever calls them.
 */
import { TWO_64, MAX_U64 as U64_MAX } from '@rddp/ddp';
import { InvalidWorkRequestError } from './errors.js';
import type { RemoteBuffer } from './mr.js';

/** TOs from which a message of under 2^32 octets could pass 2^64. */
const LAST_WINDOW = TWO_64 - 0x1_0000_0000n;

/** The largest STag (32 bits). */
export const MAX_STAG = 0xffff_ffff;
/** 2^64 − 1 (the largest Tagged Offset and RFC 7306 operand) and the STag formatter: one home, in @rddp/ddp. */
export { MAX_U64 as U64_MAX, stagHex as hex } from '@rddp/ddp';

export function checkStag(stag: number, what: string): void {
  if (!Number.isInteger(stag) || stag < 0 || stag > MAX_STAG)
    throw new InvalidWorkRequestError(`${what} ${stag} is not a 32-bit unsigned integer`);
}

export function checkU64(v: bigint, what: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX)
    throw new InvalidWorkRequestError(`${what} ${String(v)} is not a 64-bit unsigned bigint`);
  return v;
}

/** The peer's STag and TO; with `length`, the TO + length must not wrap 2^64 (RFC 5041 §7.1). */
export function checkRemote(remote: RemoteBuffer | undefined, length?: number): RemoteBuffer {
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
