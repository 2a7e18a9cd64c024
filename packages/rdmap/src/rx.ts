/**
 * RDMAP receive path (RFC 5040 §5, §7.2): the checks run on every incoming DDP segment before DDP places
 * a byte of it (RDMAP Version, OpCode against the Tagged flag and Queue Number, RDMA Write access
 * rights, Read Response against the outstanding Read, Read Request length, Send with Invalidate's
 * STag), then the handling of Delivered messages: Sends into posted receive buffers (§5.3, rules 10
 * and 16), Read Responses completing Reads (rule 19), Read Requests validated (§7.2 4a–4e) and
 * answered in order (rules 17, 20), Terminates (§5.4). RFC 7306, on a stream that enabled it: Immediate
 * Data into posted receives, Atomic Requests checked and executed in order and answered with the Read
 * Responses, Atomic Responses completing atomics; an extension message the stream did not enable is an
 * Unexpected OpCode (RFC 5040 §7.2 2), as the reserved opcodes it was in RFC 5040.
 */
import {
  Access,
  type DdpHeader,
  type DeliveryEvent,
  type MemoryRegion,
  stagHex,
  type UlpCheckFailure,
} from '@rddp/ddp';
import type { Ulpdu } from '@rddp/llp';
import {
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  type AtomicResponseHeader,
  applyAtomic,
  checkAtomicRequest,
  decodeAtomicRequest,
  decodeAtomicResponse,
  type OutstandingAtomics,
  readWord,
  writeWord,
} from './atomic.js';
import type { RdmapError } from './errors.js';
import {
  controlOf,
  decodeControl,
  decodeReadRequest,
  decodeUntaggedRsvdUlp,
  READ_REQUEST_HEADER_LENGTH,
  type ReadRequestHeader,
} from './header.js';
import { decodeImmediateData } from './immediate.js';
import {
  type ExtensionOpcodeInfo,
  type OpcodeInfo,
  RDMAP_OPCODES,
  type RdmapExtension,
  RdmapOpcode,
  type RdmapVersion,
} from './opcode.js';
import { checkReadSource, type OutstandingReads } from './read.js';
import { segmentOf, type TerminateCause, type TerminatedSegment } from './terminate.js';
import { RdmaErrorCode, RdmaErrorType, TerminateLayer } from './terminate-codes.js';
import type { CompletionStatus, ReceiveCompletion } from './types.js';

/** One receive buffer posted on the Send queue (QN 0). */
export interface PostedReceive {
  readonly id: unknown;
  readonly buffer: Uint8Array;
}

/** An inbound RDMA Read Request or Atomic Request (RFC 7306) accepted and waiting for its Response. */
export type PendingResponse = PendingReadResponse | PendingAtomicResponse;

export interface PendingReadResponse {
  readonly kind: 'read';
  readonly rr: ReadRequestHeader;
  /** The Read Request queue buffer it arrived in: posted again once the Response is handed over. */
  readonly buffer: Uint8Array;
  /** The Read Request's DDP header and segment, for a Terminate (§4.8, §7.1 case 3). */
  readonly segment: TerminatedSegment;
}

/** An Atomic Request executed at Delivery: its Response waits its turn behind earlier Read Responses. */
export interface PendingAtomicResponse {
  readonly kind: 'atomic';
  readonly response: AtomicResponseHeader;
  /** The QN 1 buffer the Request arrived in (one of the IRD buffers it shares with Read Requests). */
  readonly buffer: Uint8Array;
  readonly segment: TerminatedSegment;
}

export interface RxHost {
  readonly rv: RdmapVersion;
  readonly pdId: number;
  readonly reads: OutstandingReads<unknown>;
  readonly atomics: OutstandingAtomics<unknown>;
  /** The RFC 7306 extensions this stream enabled (both ends agreed). */
  readonly extensions: Readonly<Record<RdmapExtension, boolean>>;
  /** Untagged queues of the stream: 3, or 4 with atomics (QN 3 for Atomic Responses). */
  readonly queueCount: number;
  /** True once the stream is terminating: nothing more is placed (RFC 5040 §5.4). */
  readonly rxBlocked: boolean;
  lookup(stag: number): MemoryRegion | undefined;
  invalidate(stag: number): boolean;
  canRemoteInvalidate(region: MemoryRegion): boolean;
  onReadCompleted(token: unknown): void;
  onReadRequest(p: PendingResponse): void;
  /** An Atomic Response was Delivered and matched its Request: the atomic completes. */
  onAtomicCompleted(token: unknown, original: bigint, buffer: Uint8Array): void;
  /** An Atomic Response that does not answer the oldest Atomic Request (RFC 7306): Terminate. */
  onAtomicResponseError(token: unknown, cause: TerminateCause): void;
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
        `Send with Invalidate: STag ${stagHex(stag)} is not valid (RFC 5040 §7.2 4)`,
      );
    if (region.pdId !== h.pdId)
      return fail(
        RdmaErrorType.RemoteProtection,
        RdmaErrorCode.StagCannotBeInvalidated,
        `Send with Invalidate: STag ${stagHex(stag)} is not associated with this RDMAP Stream (RFC 5040 §5.3, §7.2 5)`,
      );
    if (!h.canRemoteInvalidate(region))
      return fail(
        RdmaErrorType.RemoteProtection,
        RdmaErrorCode.StagCannotBeInvalidated,
        `Send with Invalidate: STag ${stagHex(stag)} may not be invalidated by the peer (RFC 5040 §5.3)`,
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
    const info = RDMAP_OPCODES[opcode];
    if (info === undefined)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `reserved RDMA OpCode ${opcode} (RFC 5040 §4.1 Figure 4, §7.2 2)`,
      );
    if (info.extension !== undefined) {
      if (h.extensions[info.extension]) return this.checkExtension(info as ExtensionOpcodeInfo, header, payloadLength);
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} (RFC 7306), but this stream did not enable ${info.extension} (RFC 5040 §7.2 2)`,
      );
    }
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
          `RDMA Write to STag ${stagHex(header.stag)}, which does not allow remote writes (RFC 5040 §8.1.1)`,
        );
      return undefined;
    }
    // Untagged: a queue beyond the stream's is DDP's "Invalid QN" (RFC 5041 §7.2).
    if (header.qn < h.queueCount && header.qn !== info.qn)
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

  /**
   * RFC 7306 messages on a stream that enabled them: untagged, on their queue (RFC 5040 §7.2 2 applied to
   * RFC 7306's table), and exactly as long as their header; an Atomic Response only while an Atomic
   * Request is outstanding. A longer Atomic Request overflows its 52-octet buffer: DDP's own error.
   */
  private checkExtension(
    ext: ExtensionOpcodeInfo,
    header: DdpHeader,
    payloadLength: number,
  ): UlpCheckFailure | undefined {
    const h = this.host;
    if (header.tagged)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${ext.name} in a tagged DDP segment (RFC 7306: untagged, QN ${ext.qn})`,
      );
    if (header.qn < h.queueCount && header.qn !== ext.qn)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${ext.name} on queue ${header.qn}; RFC 7306 puts it on queue ${ext.qn} (RFC 5040 §7.2 2)`,
      );
    if (header.qn !== ext.qn) return undefined; // beyond the stream's queues: DDP's Invalid QN
    const end = header.mo + payloadLength;
    const short = header.last && end < ext.headerLength;
    if (short || (ext.rdmaHeader !== 'atomic-request' && end > ext.headerLength))
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.Unspecified,
        `${ext.name} of ${end}${header.last ? '' : '+'} octets; it is exactly ${ext.headerLength} (RFC 7306)`,
      );
    if (ext.rdmaHeader === 'atomic-response') return h.atomics.checkResponseSegment(header.last);
    return undefined;
  }

  /**
   * DdpStreamOptions.ulpTaggedFastCheck: true exactly when `ulpCheck` accepts a tagged segment in a valid,
   * in-bounds region without further state — an RDMA Write of this RDMAP version to a region that allows
   * remote writes (RFC 5040 §7.2, §8.1.1) while the stream is not terminating. Read Responses (checked
   * against the outstanding Reads) and everything else take `ulpCheck`.
   */
  readonly taggedFastCheck = (rsvdUlp: number, region: MemoryRegion, _payloadLength: number): boolean => {
    const h = this.host;
    return (
      !h.rxBlocked &&
      rsvdUlp >>> 6 === h.rv &&
      (rsvdUlp & 0x0f) === RdmapOpcode.RdmaWrite &&
      (region.access & Access.RemoteWrite) !== 0
    );
  };

  /** A DDP Message was Delivered (RFC 5041 §5.4). */
  /** The segment that completed the message being handled (for a Terminate's copied headers, §4.8). */
  private current: Ulpdu | undefined;

  private currentSegment(): TerminatedSegment {
    return segmentOf(this.current);
  }

  onDelivery(ev: DeliveryEvent): void {
    const h = this.host;
    if (h.rxBlocked) return;
    this.current = ev.segment;
    // The opcode table names the handler (every segment passed ulpCheck, so the row exists and fits).
    const control = ev.tagged ? ev.rsvdUlp & 0xff : decodeUntaggedRsvdUlp(ev.rsvdUlp).control;
    const info = RDMAP_OPCODES[decodeControl(control).opcode];
    if (info === undefined) return;
    if (ev.tagged) {
      // RDMA Writes are placed, never Delivered to the ULP (§5.1); Read Responses complete Reads (rule 19).
      if (info.receive !== 'read-response') return;
      const r = h.reads.completeOldest();
      if (r !== undefined) h.onReadCompleted(r.token);
      return;
    }
    switch (info.receive) {
      case 'send':
        this.onSend(ev.receiveId as PostedReceive, ev.length, info, decodeUntaggedRsvdUlp(ev.rsvdUlp).invalidateStag);
        return;
      case 'immediate-data':
        this.onImmediate(ev.receiveId as PostedReceive, info);
        return;
      case 'read-request':
        this.onReadRequest(ev.buffer, ev.length);
        return;
      case 'atomic-request':
        this.onAtomicRequest(ev.buffer, ev.length);
        return;
      case 'terminate':
        h.onTerminateReceived(ev.buffer.subarray(0, ev.length));
        return;
      case 'atomic-response':
        this.onAtomicResponse(ev.buffer);
        return;
    }
  }

  /**
   * An Immediate Data (with SE) message Delivered (RFC 7306): it consumed the next posted receive, in MSN
   * order with the Sends; the completion carries its 64 bits (checked to be exactly 8 octets before placement).
   */
  private onImmediate(r: PostedReceive, info: OpcodeInfo): void {
    const idx = this.receives.indexOf(r);
    if (idx >= 0) this.receives.splice(idx, 1);
    this.host.emitReceive({
      kind: 'receive',
      id: r.id,
      buffer: r.buffer,
      status: 'success',
      byteLength: 0,
      solicited: info.solicitedEvent,
      immediateData: decodeImmediateData(r.buffer),
    });
  }

  /**
   * An Atomic Request Delivered on QN 1 (RFC 7306): checked (Atomic OpCode, STag, Remote Atomic right,
   * bounds, alignment), executed at once — after every earlier message of the stream, before any later
   * one — and answered in Request order with the Read Responses.
   */
  private onAtomicRequest(buffer: Uint8Array, length: number): void {
    const h = this.host;
    const segment = this.currentSegment();
    const req = decodeAtomicRequest(buffer);
    const region = h.lookup(req.remoteStag);
    const bad =
      length !== ATOMIC_REQUEST_HEADER_LENGTH
        ? { type: RdmaErrorType.RemoteOperation, code: RdmaErrorCode.Unspecified }
        : checkAtomicRequest(req, region, h.pdId);
    if (bad !== undefined || region === undefined) {
      h.onDeliveredError({
        layer: TerminateLayer.Rdma,
        errorType: bad?.type ?? RdmaErrorType.RemoteProtection,
        errorCode: bad?.code ?? RdmaErrorCode.InvalidStag,
        segment,
      });
      return;
    }
    const off = Number(req.remoteTo - region.baseTo);
    const original = readWord(region.buffer, off);
    const updated = applyAtomic(req, original);
    if (updated !== original) writeWord(region.buffer, off, updated);
    h.onReadRequest({
      kind: 'atomic',
      response: { originalRequestId: req.requestId, originalRemoteData: original },
      buffer,
      segment,
    });
  }

  /** An Atomic Response Delivered on QN 3 (RFC 7306): it answers the oldest Atomic Request, or it is an error. */
  private onAtomicResponse(buffer: Uint8Array): void {
    const h = this.host;
    const res = decodeAtomicResponse(buffer.subarray(0, ATOMIC_RESPONSE_HEADER_LENGTH));
    const a = h.atomics.completeOldest();
    if (a === undefined) return; // checked before placement
    if (a.requestId !== res.originalRequestId) {
      h.onAtomicResponseError(a.token, {
        layer: TerminateLayer.Rdma,
        errorType: RdmaErrorType.RemoteOperation,
        errorCode: RdmaErrorCode.Unspecified,
        segment: this.currentSegment(),
      });
      return;
    }
    h.onAtomicCompleted(a.token, res.originalRemoteData, buffer);
  }

  /** A Send Message Type Delivered (§5.3): invalidate if asked, then Deliver to the ULP in order (rule 10). */
  private onSend(r: PostedReceive, length: number, info: OpcodeInfo, invalidateStag: number): void {
    const h = this.host;
    const idx = this.receives.indexOf(r);
    if (idx >= 0) this.receives.splice(idx, 1);
    let invalidated: number | undefined;
    if (info.invalidateStag) {
      // Checked on every segment before placement; checked again as the STag is invalidated (§5.3).
      const bad = this.checkInvalidate(invalidateStag);
      if (bad !== undefined || !h.invalidate(invalidateStag)) {
        this.receives.unshift(r); // it completes in error, first, with the flush
        h.onDeliveredError(
          {
            layer: TerminateLayer.Rdma,
            errorType: bad?.type ?? RdmaErrorType.RemoteProtection,
            errorCode: bad?.code ?? RdmaErrorCode.StagCannotBeInvalidated,
            segment: this.currentSegment(),
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
      solicited: info.solicitedEvent,
      ...(invalidated !== undefined ? { invalidatedStag: invalidated } : {}),
    });
  }

  /** An RDMA Read Request Delivered (rule 17): validated (§7.2 4a–4e), then answered in order (rule 20). */
  private onReadRequest(buffer: Uint8Array, length: number): void {
    const h = this.host;
    const segment = this.currentSegment();
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
    h.onReadRequest({ kind: 'read', rr, buffer, segment: { ...segment, readRequest: original } });
  }
}
