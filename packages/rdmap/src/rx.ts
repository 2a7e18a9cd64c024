/**
 * RDMAP receive path (RFC 5040 §5, §7.2): the checks run on every incoming DDP segment before DDP places
 * a byte of it (RDMAP Version, OpCode against the Tagged flag and Queue Number, RDMA Write access
 * rights, Read Response against the outstanding Read, Read Request length, Send with Invalidate's
 * STag), then the handling of Delivered messages: Sends into posted receive buffers (§5.3, rules 10
 * and 16), Read Responses completing Reads (rule 19), Read Requests validated (§7.2 4a–4e) and
 * answered in order (rules 17, 20), Terminates (§5.4).
 */
import { Access, type DdpHeader, type DeliveryEvent, type MemoryRegion, type UlpCheckFailure } from '@rddp/ddp';
import type { RdmapError } from './errors.js';
import {
  controlOf,
  decodeControl,
  decodeReadRequest,
  decodeUntaggedRsvdUlp,
  READ_REQUEST_HEADER_LENGTH,
  type ReadRequestHeader,
} from './header.js';
import { opcodeInfo, RDMAP_QUEUE_COUNT, RdmapOpcode, RdmapQueue, type RdmapVersion } from './opcode.js';
import { checkReadSource, type OutstandingReads } from './read.js';
import type { TerminateCause, TerminatedSegment } from './terminate.js';
import { RdmaErrorCode, RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import type { CompletionStatus, ReceiveCompletion } from './types.js';

/** One receive buffer posted on the Send queue (QN 0). */
export interface PostedReceive {
  readonly id: unknown;
  readonly buffer: Uint8Array;
}

/** An inbound RDMA Read Request accepted and waiting for its Response. */
export interface PendingResponse {
  readonly rr: ReadRequestHeader;
  /** The Read Request queue buffer it arrived in: posted again once the Response is handed over. */
  readonly buffer: Uint8Array;
  /** The Read Request's DDP header and segment, for a Terminate (§4.8, §7.1 case 3). */
  readonly segment: TerminatedSegment;
}

export interface RxHost {
  readonly rv: RdmapVersion;
  readonly pdId: number;
  readonly reads: OutstandingReads<unknown>;
  /** True once the stream is terminating: nothing more is placed (RFC 5040 §5.4). */
  readonly rxBlocked: boolean;
  lookup(stag: number): MemoryRegion | undefined;
  invalidate(stag: number): boolean;
  canRemoteInvalidate(region: MemoryRegion): boolean;
  /** The segment DDP is processing now, as received (for a Terminate's copied headers, §4.8). */
  currentSegment(): TerminatedSegment;
  onReadCompleted(token: unknown): void;
  onReadRequest(p: PendingResponse): void;
  onTerminateReceived(bytes: Uint8Array): void;
  /** An error found on a Delivered message (§7.1 cases 2, 3): Terminate, with the receive it failed. */
  onDeliveredError(cause: TerminateCause, receive?: CompletionStatus): void;
  emitReceive(c: ReceiveCompletion): void;
}

const fail = (type: number, code: number, message: string): UlpCheckFailure => ({
  layer: 'rdmap',
  type,
  code,
  message,
});

const hex = (stag: number) => `0x${(stag >>> 0).toString(16).padStart(8, '0')}`;

export class Receiver {
  private readonly receives: PostedReceive[] = [];

  constructor(private readonly host: RxHost) {}

  get postedReceives(): number {
    return this.receives.length;
  }

  /** Records a receive buffer posted on QN 0; consumed in MSN order by incoming Sends (§5.3). */
  add(r: PostedReceive): void {
    this.receives.push(r);
  }

  /** Completes every posted receive in error: the oldest with `first` if given, the rest flushed. */
  flush(error: RdmapError, first?: { status: CompletionStatus; error: RdmapError }): void {
    let i = 0;
    for (const r of this.receives.splice(0)) {
      const f = i++ === 0 ? first : undefined;
      this.host.emitReceive({
        kind: 'receive',
        id: r.id,
        buffer: r.buffer,
        status: f?.status ?? 'flushed',
        byteLength: 0,
        solicited: false,
        error: f?.error ?? error,
      });
    }
  }

  /**
   * RFC 5040 §7.2 checks 4–5 of an incoming Send with Invalidate (and §5.3): the Invalidate STag must be
   * valid, and associated with this stream ("STag Cannot be Invalidated" otherwise, §5.3); and remote
   * invalidation must be allowed for it (RFC 5040 §8.1.1).
   */
  checkInvalidate(stag: number): UlpCheckFailure | undefined {
    const h = this.host;
    const region = h.lookup(stag);
    if (region === undefined || !region.valid)
      return fail(
        RdmaErrorType.RemoteProtection,
        RdmaErrorCode.InvalidStag,
        `Send with Invalidate: STag ${hex(stag)} is not valid (RFC 5040 §7.2 4)`,
      );
    if (region.pdId !== h.pdId)
      return fail(
        RdmaErrorType.RemoteProtection,
        RdmaErrorCode.StagCannotBeInvalidated,
        `Send with Invalidate: STag ${hex(stag)} is not associated with this RDMAP Stream (RFC 5040 §5.3, §7.2 5)`,
      );
    if (!h.canRemoteInvalidate(region))
      return fail(
        RdmaErrorType.RemoteProtection,
        RdmaErrorCode.StagCannotBeInvalidated,
        `Send with Invalidate: STag ${hex(stag)} may not be invalidated by the peer (RFC 5040 §5.3)`,
      );
    return undefined;
  }

  /**
   * DdpStreamOptions.ulpCheck: RFC 5040 §7.2 checks 2–5 on each segment, before placement. DDP ran its
   * DV check first and runs its own STag/bounds or QN/MSN/MO checks after this one; where DDP has a
   * check of its own (an unknown STag, a foreign protection domain, a queue beyond RDMAP's three), this
   * one leaves the segment to it.
   */
  readonly ulpCheck = (
    header: DdpHeader,
    payloadLength: number,
    region: MemoryRegion | undefined,
  ): UlpCheckFailure | undefined => {
    const h = this.host;
    if (h.rxBlocked)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.CatastrophicLocalized,
        'the RDMAP Stream is terminating: nothing more is placed (RFC 5040 §5.4)',
      );
    const control = controlOf(header); // per segment: plain bit operations, no allocation
    const rv = control >>> 6;
    const opcode = control & 0x0f;
    if (rv !== h.rv)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.InvalidRdmapVersion,
        `RDMAP Version ${rv}, this stream runs version ${h.rv} (RFC 5040 §4.1, §7.2 3)`,
      );
    const info = opcodeInfo(opcode);
    if (info === undefined)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `reserved RDMA OpCode ${opcode} (RFC 5040 §4.1 Figure 4, §7.2 2)`,
      );
    if (info.tagged !== header.tagged)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} in a${header.tagged ? ' tagged' : 'n untagged'} DDP segment (RFC 5040 Figure 4, §7.2 2)`,
      );
    if (header.tagged) {
      // An unknown or foreign STag is DDP's error to report (RFC 5041 §7.2); leave it to DDP.
      if (region === undefined && payloadLength > 0) return undefined;
      if (opcode === RdmapOpcode.RdmaReadResponse)
        return h.reads.checkResponseSegment(header.stag, header.to, payloadLength, header.last);
      if (region !== undefined && payloadLength > 0 && (region.access & Access.RemoteWrite) === 0)
        return fail(
          RdmaErrorType.RemoteProtection,
          RdmaErrorCode.AccessRightsViolation,
          `RDMA Write to STag ${hex(header.stag)}, which does not allow remote writes (RFC 5040 §8.1.1)`,
        );
      return undefined;
    }
    // Untagged: a queue beyond RDMAP's three is DDP's "Invalid QN" (RFC 5041 §7.2).
    if (header.qn < RDMAP_QUEUE_COUNT && header.qn !== info.qn)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} on queue ${header.qn}; RFC 5040 Figure 4 puts it on queue ${info.qn} (§7.2 2)`,
      );
    if (opcode === RdmapOpcode.RdmaReadRequest && header.last && header.mo + payloadLength < READ_REQUEST_HEADER_LENGTH)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.Unspecified,
        `RDMA Read Request of ${header.mo + payloadLength} octets; its header has ${READ_REQUEST_HEADER_LENGTH} (RFC 5040 §4.4)`,
      );
    if (info.invalidateStag) return this.checkInvalidate(decodeUntaggedRsvdUlp(header.rsvdUlp).invalidateStag);
    return undefined;
  };

  /** A DDP Message was Delivered (RFC 5041 §5.4). */
  onDelivery(ev: DeliveryEvent): void {
    const h = this.host;
    if (h.rxBlocked) return;
    if (ev.tagged) {
      // RDMA Writes are placed, never Delivered to the ULP (§5.1); Read Responses complete Reads (rule 19).
      if (decodeControl(ev.rsvdUlp & 0xff).opcode !== RdmapOpcode.RdmaReadResponse) return;
      const r = h.reads.completeOldest();
      if (r !== undefined) h.onReadCompleted(r.token);
      return;
    }
    const { control, invalidateStag } = decodeUntaggedRsvdUlp(ev.rsvdUlp);
    const opcode = decodeControl(control).opcode;
    switch (ev.qn) {
      case RdmapQueue.Send:
        this.onSend(ev.receiveId as PostedReceive, ev.length, opcode, invalidateStag);
        return;
      case RdmapQueue.ReadRequest:
        this.onReadRequest(ev.buffer, ev.length);
        return;
      case RdmapQueue.Terminate:
        h.onTerminateReceived(ev.buffer.subarray(0, ev.length));
        return;
    }
  }

  /** A Send Message Type Delivered (§5.3): invalidate if asked, then Deliver to the ULP in order (rule 10). */
  private onSend(r: PostedReceive, length: number, opcode: number, invalidateStag: number): void {
    const h = this.host;
    const idx = this.receives.indexOf(r);
    if (idx >= 0) this.receives.splice(idx, 1);
    const info = opcodeInfo(opcode);
    let invalidated: number | undefined;
    if (info?.invalidateStag) {
      // Checked on every segment before placement; checked again as the STag is invalidated (§5.3).
      const bad = this.checkInvalidate(invalidateStag);
      if (bad !== undefined || !h.invalidate(invalidateStag)) {
        this.receives.unshift(r); // it completes in error, first, with the flush
        h.onDeliveredError(
          {
            layer: TerminateLayer.Rdma,
            errorType: bad?.type ?? RdmaErrorType.RemoteProtection,
            errorCode: bad?.code ?? RdmaErrorCode.StagCannotBeInvalidated,
            segment: h.currentSegment(),
          },
          'remote-invalid-request',
        );
        return;
      }
      invalidated = invalidateStag;
    }
    h.emitReceive({
      kind: 'receive',
      id: r.id,
      buffer: r.buffer,
      status: 'success',
      byteLength: length,
      solicited: info?.solicitedEvent ?? false,
      ...(invalidated !== undefined ? { invalidatedStag: invalidated } : {}),
    });
  }

  /** An RDMA Read Request Delivered (rule 17): validated (§7.2 4a–4e), then answered in order (rule 20). */
  private onReadRequest(buffer: Uint8Array, length: number): void {
    const h = this.host;
    const segment = h.currentSegment();
    if (length !== READ_REQUEST_HEADER_LENGTH) {
      h.onDeliveredError({
        layer: TerminateLayer.Rdma,
        errorType: RdmaErrorType.RemoteOperation,
        errorCode: RdmaErrorCode.Unspecified,
        segment,
      });
      return;
    }
    const rr = decodeReadRequest(buffer);
    // Before the first octet is read, a Terminate carries the original Read Request Header (§4.8).
    const original = buffer.slice(0, READ_REQUEST_HEADER_LENGTH);
    const bad = checkReadSource(rr, h.lookup(rr.srcStag), h.pdId);
    if (bad !== undefined) {
      h.onDeliveredError({
        layer: TerminateLayer.Rdma,
        errorType: RdmaErrorType.RemoteProtection,
        errorCode: bad.code,
        segment: { ...segment, readRequest: original },
      });
      return;
    }
    h.onReadRequest({ rr, buffer, segment: { ...segment, readRequest: original } });
  }
}
