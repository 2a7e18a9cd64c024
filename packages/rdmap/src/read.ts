/**
 * RDMA Read bookkeeping (RFC 5040 §5.2, §6.1): the requester's outstanding Reads, bounded by ORD, whose
 * Read Responses arrive in order (§5.5 rule 20) and are checked against their Request (§5.2.2 "MAY
 * validate"); and the responder's check of a Read Request's Data Source (§7.2 4a–4e).
 */
import { Access, type MemoryRegion, stagHex, TWO_64, type UlpCheckFailure } from '@rddp/ddp';
import type { ReadRequestHeader } from './header.js';
import { rdmapFailure as fail, OutstandingQueue } from './outstanding.js';
import { RdmaErrorCode, RdmaErrorType } from './terminate-codes.js';

/** One RDMA Read whose Request was handed to DDP and whose Response has not been Delivered yet. */
export interface OutstandingRead<T> {
  readonly token: T;
  readonly sinkStag: number;
  readonly sinkTo: bigint;
  readonly size: number;
  readonly srcStag: number;
  readonly srcTo: bigint;
}

/** The requester side: Read Requests in flight, at most ORD of them (RFC 5040 §6.1). */
export class OutstandingReads<T> extends OutstandingQueue<OutstandingRead<T>> {
  /** Octets of the Response arriving now (of the Read at index `arrived`) received so far. */
  private rxReceived = 0;

  constructor(readonly ord: number) {
    super();
  }

  /** Whether one more Read Request may be issued without exceeding ORD. */
  canIssue(): boolean {
    return this.queue.length < this.ord;
  }
  /** The Read whose Response is arriving now (the oldest whose Response is not complete). */
  get receiving(): OutstandingRead<T> | undefined {
    return this.queue[this.arrived];
  }

  /**
   * Checks one Read Response segment against the oldest Read still receiving, before placement
   * (RFC 5040 §5.2.2, §5.5 rule 20): same Data Sink STag, contiguous Tagged Offset, no more than the
   * size asked for, and the whole size by the segment with L=1. A Response nobody asked for is an
   * Unexpected OpCode; one that does not match its Request is a Remote Operation Error (Figure 10: a
   * Read Response cannot cause a Remote Protection Error). Advances the expected offset on success.
   */
  checkResponseSegment(stag: number, to: bigint, length: number, last: boolean): UlpCheckFailure | undefined {
    const r = this.queue[this.arrived];
    if (r === undefined)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        'RDMA Read Response with no RDMA Read outstanding (RFC 5040 §5.2.2)',
      );
    if (stag !== r.sinkStag)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.Unspecified,
        `RDMA Read Response to STag ${stagHex(stag)}, the RDMA Read Request named ${stagHex(r.sinkStag)} (RFC 5040 §5.2.2)`,
      );
    const expected = r.sinkTo + BigInt(this.rxReceived);
    if (to !== expected || this.rxReceived + length > r.size || (last && this.rxReceived + length !== r.size))
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.Unspecified,
        `RDMA Read Response segment at TO ${to} (+${length}${last ? ', last' : ''}) does not continue the RDMA Read of ${r.size} octets at TO ${r.sinkTo} (${this.rxReceived} received; RFC 5040 §5.2.2)`,
      );
    this.rxReceived += length;
    if (last) {
      this.arrived++;
      this.rxReceived = 0;
    }
    return undefined;
  }

  override drain(): OutstandingRead<T>[] {
    this.rxReceived = 0;
    return super.drain();
  }
}

/**
 * RFC 5040 §7.2 checks 4a–4e of an incoming non-zero-length RDMA Read Request's Data Source, plus the
 * region's Remote Read right (RFC 5040 §8.1.1, Figure 9 "Access rights violation"). Returns the Remote
 * Protection Error code to send, or undefined if the Data Source is valid.
 */
export function checkReadSource(
  rr: ReadRequestHeader,
  region: MemoryRegion | undefined,
  pdId: number,
): { code: number; message: string } | undefined {
  if (rr.size === 0) return undefined; // §5.2.1: a zero-length Read MUST NOT be validated
  if (rr.sinkTo + BigInt(rr.size) > TWO_64)
    return {
      code: RdmaErrorCode.ToWrap,
      message: `Data Sink TO ${rr.sinkTo} + ${rr.size} wraps 2^64: no Read Response can carry it (RFC 5041 §7.1)`,
    };
  const stag = () => stagHex(rr.srcStag); // formatted only for an error message
  if (region === undefined || !region.valid || region.stag !== rr.srcStag >>> 0)
    return { code: RdmaErrorCode.InvalidStag, message: `Data Source STag ${stag()} is not valid (RFC 5040 §7.2 4a)` };
  if (region.pdId !== pdId)
    return {
      code: RdmaErrorCode.StagNotAssociatedWithStream,
      message: `Data Source STag ${stag()} is not associated with this RDMAP Stream (RFC 5040 §7.2 4b)`,
    };
  if ((region.access & Access.RemoteRead) === 0)
    return {
      code: RdmaErrorCode.AccessRightsViolation,
      message: `Data Source STag ${stag()} does not allow remote reads (RFC 5040 §8.1.1)`,
    };
  const base = region.baseTo;
  const end = base + BigInt(region.length);
  if (rr.srcTo < base || rr.srcTo >= end)
    return {
      code: RdmaErrorCode.BaseOrBoundsViolation,
      message: `Data Source TO ${rr.srcTo} is outside [${base}, ${end}) of STag ${stag()} (RFC 5040 §7.2 4c)`,
    };
  const last = rr.srcTo + BigInt(rr.size);
  if (last > TWO_64)
    return {
      code: RdmaErrorCode.ToWrap,
      message: `Data Source TO ${rr.srcTo} + ${rr.size} wraps 2^64 (RFC 5040 §7.2 4e)`,
    };
  if (last > end)
    return {
      code: RdmaErrorCode.BaseOrBoundsViolation,
      message: `Data Source TO ${rr.srcTo} + ${rr.size} is beyond the end ${end} of STag ${stag()} (RFC 5040 §7.2 4d)`,
    };
  return undefined;
}
