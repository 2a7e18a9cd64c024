/**
 * DDP receive path (RFC 5041 §5, §7.1): decode the header, run every check before a single octet is
 * written, then copy the payload once — from the LLP's chunks straight into the registered region or the
 * posted receive buffer. Emits placement per tagged segment, delivery per complete message, and one
 * error (then the stream drops every later segment, §7.1).
 */

import type { Ulpdu } from '@rddp/llp';
import type { Subject } from 'rxjs';
import {
  DDP_TAGGED_HEADER_LENGTH,
  DDP_UNTAGGED_HEADER_LENGTH,
  type DdpErrorEvent,
  DdpErrorType,
  type DdpHeader,
  type DdpTaggedHeader,
  type DdpUntaggedHeader,
  type DdpVersion,
  type DeliveryEvent,
  type MemoryRegion,
  type PlacementEvent,
  type StagTableApi,
  TaggedErrorCode,
  type UlpAcceptTable,
  type UlpSegmentCheck,
  UntaggedErrorCode,
} from './api.js';
import {
  DDP_DV_MASK,
  DDP_L_FLAG,
  DDP_T_FLAG,
  decodeHeader,
  gatherPrefix,
  get32,
  MAX_SAFE_TO,
  stagHex,
  TWO_32,
} from './header.js';
import { type ReceiveSlot, UntaggedQueue } from './queues.js';
import { regionOffset } from './stag-table.js';

/** RDMAP header octets after an untagged DDP header that a Terminate may copy (RFC 5040 §4.8: up to 28). */
const ULP_HEADER_COPY = 28;

/** Where the receive path's events go: the ULP's direct consumer first, then the stream's observers. */
export interface ReceiverSinks {
  /** Placement events, built only when observed. */
  readonly placements: Subject<PlacementEvent>;
  /** The ULP's direct consumer of Deliveries (`DdpStreamOptions.onDelivery`), called first. */
  readonly delivery: ((e: DeliveryEvent) => void) | undefined;
  /** Deliveries for observers (`delivery$`). */
  readonly deliveries: Subject<DeliveryEvent>;
  error(e: DdpErrorEvent): void;
}

export interface ReceiverOptions {
  readonly dv: DdpVersion;
  readonly pdId: number;
  readonly stags: StagTableApi;
  readonly queues: number;
  /** QNs of untagged messages the LLP received for the ULP at setup (each moves that queue's first MSN on). */
  readonly startupReceived?: readonly number[];
  /** The LLP delivers in order (RFC 5041 §3): then MO must continue exactly where the last segment ended. */
  readonly ordered: boolean;
  /** The LLP is reliable: a segment for an already completed message is a §7.1 error (otherwise a duplicate, dropped). */
  readonly reliable: boolean;
  readonly ulpCheck?: UlpSegmentCheck;
  readonly ulpAccepts?: UlpAcceptTable;
}

/**
 * Copies `length` octets of the ULPDU, starting `skip` octets in, into `dst` at `dstOffset` (default: all
 * of `dst`): the one copy.
 */
export function copyPayload(
  chunks: readonly Uint8Array[],
  skip: number,
  dst: Uint8Array,
  dstOffset = 0,
  length = dst.length - dstOffset,
): void {
  let at = dstOffset;
  const end = dstOffset + length;
  let s = skip;
  for (let i = 0; i < chunks.length && at < end; i++) {
    const c = chunks[i] as Uint8Array;
    const cl = c.length;
    if (s >= cl) {
      s -= cl;
      continue;
    }
    const n = Math.min(cl - s, end - at);
    dst.set(s === 0 && n === cl ? c : c.subarray(s, s + n), at);
    at += n;
    s = 0;
  }
}

export class Receiver {
  readonly queues: UntaggedQueue[];
  private failed = false;
  private readonly scratch = new Uint8Array(DDP_UNTAGGED_HEADER_LENGTH + ULP_HEADER_COPY);
  /** Tagged octets placed since the last L=1 tagged segment (the current tagged message's length). */
  private taggedRun = 0;
  /** Statistics. */
  segments = 0;
  dropped = 0;
  duplicates = 0;

  constructor(
    private readonly o: ReceiverOptions,
    private readonly out: ReceiverSinks,
  ) {
    this.queues = Array.from(
      { length: o.queues },
      (_, qn) => new UntaggedQueue(qn, 1 + (o.startupReceived?.filter((q) => q === qn).length ?? 0)),
    );
  }

  /** Reliable and ordered (RFC 5041 §3, DDPP core draft §3.1): MO must continue exactly where the last segment ended. */
  private get strict(): boolean {
    return this.o.ordered && this.o.reliable;
  }

  get inError(): boolean {
    return this.failed;
  }

  /** One ULPDU = one DDP segment (RFC 5041 §5.2). Bound: the LLP calls it directly. */
  readonly receive = (u: Ulpdu): undefined => {
    if (this.failed) {
      this.dropped++; // §7.1: after an error DDP silently drops every later segment
      return;
    }
    this.segments++;
    const first = u.chunks[0];
    if (u.length < 1 || !first || first.length < 1)
      return this.fail(DdpErrorType.LocalCatastrophic, 0, 'empty DDP segment', u);
    const hlen = ((first[0] as number) & DDP_T_FLAG) !== 0 ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH;
    // The header is read in place when the first chunk holds it (the usual case), else gathered.
    const hdrBytes = first.length >= hlen ? first : gatherPrefix(u.chunks, Math.min(u.length, hlen), this.scratch);
    if (hlen === DDP_TAGGED_HEADER_LENGTH && this.taggedFast(hdrBytes, u)) return;
    const h = decodeHeader(hdrBytes);
    if (!h)
      return this.fail(
        DdpErrorType.LocalCatastrophic,
        0,
        `DDP segment of ${u.length} octets is shorter than its ${hlen}-octet header`,
        u,
      );
    const payloadLength = u.length - hlen;
    if (h.tagged) this.tagged(h, u, payloadLength);
    else this.untagged(h, u, payloadLength);
  };

  /**
   * The common tagged segment, read straight from the header octets with no header object and no bigint:
   * every §7.1 check passes, the TO is below 2^53, and the ULP has no check or its shortcut accepts the
   * segment. Anything else returns false and takes the general path, which reports the exact error.
   */
  private taggedFast(b: Uint8Array, u: Ulpdu): boolean {
    const o = this.o;
    const n = u.length - DDP_TAGGED_HEADER_LENGTH;
    if (b.length < DDP_TAGGED_HEADER_LENGTH || n <= 0) return false;
    const c = b[0] as number;
    if ((c & DDP_DV_MASK) !== o.dv) return false;
    const stag = get32(b, 2);
    const r = o.stags.lookup(stag);
    if (!r || !r.valid || r.pdId !== o.pdId || r.baseTo > MAX_SAFE_TO) return false;
    const hi = get32(b, 6);
    if (hi >= 0x20_0000) return false;
    const off = hi * TWO_32 + get32(b, 10) - Number(r.baseTo);
    if (off < 0 || off + n > r.length) return false;
    // A ULP check runs unless the ULP's table accepts this segment in a region granting what it names.
    if (o.ulpCheck !== undefined) {
      const need = o.ulpAccepts?.tagged[b[1] as number] ?? 0;
      if (need === 0 || (r.access & need) !== need) return false;
    }
    copyPayload(u.chunks, DDP_TAGGED_HEADER_LENGTH, r.buffer, off, n);
    this.taggedRun += n;
    const last = (c & DDP_L_FLAG) !== 0;
    const rsvdUlp = b[1] as number;
    if (this.out.placements.observed)
      this.out.placements.next({ stag, to: BigInt(off) + r.baseTo, length: n, last, rsvdUlp });
    if (last && o.reliable) {
      const length = this.taggedRun;
      this.taggedRun = 0;
      this.emitDelivery({ tagged: true, stag, rsvdUlp, length, segment: u });
    }
    return true;
  }

  private tagged(h: DdpTaggedHeader, u: Ulpdu, n: number): undefined {
    const o = this.o;
    if (h.dv !== o.dv)
      return this.fail(
        DdpErrorType.TaggedBuffer,
        TaggedErrorCode.InvalidDdpVersion,
        `DDP version ${h.dv}, this stream runs ${o.dv}`,
        u,
        h,
      );
    const r = o.stags.lookup(h.stag);
    const usable: MemoryRegion | undefined = r?.valid && r.pdId === o.pdId ? r : undefined;
    if (o.ulpCheck) {
      const f = this.runUlpCheck(h, n, usable, u);
      if (f === 'threw') return;
      if (f) return this.failUlp(f, u, h);
    }
    let offset = 0;
    if (n > 0) {
      // §7.1 tagged checks 1–5, all before placement.
      if (!r || !r.valid)
        return this.fail(
          DdpErrorType.TaggedBuffer,
          TaggedErrorCode.InvalidStag,
          `STag ${stagHex(h.stag)} is not valid`,
          u,
          h,
        );
      if (r.pdId !== o.pdId)
        return this.fail(
          DdpErrorType.TaggedBuffer,
          TaggedErrorCode.StagNotAssociatedWithStream,
          `STag ${stagHex(h.stag)} belongs to another protection domain`,
          u,
          h,
        );
      const at = regionOffset(r, h.to, n);
      if (at === 'wrap')
        return this.fail(
          DdpErrorType.TaggedBuffer,
          TaggedErrorCode.ToWrap,
          `TO 0x${h.to.toString(16)} + ${n} wraps 2^64`,
          u,
          h,
        );
      if (at === 'bounds')
        return this.fail(
          DdpErrorType.TaggedBuffer,
          TaggedErrorCode.BaseOrBoundsViolation,
          `[TO 0x${h.to.toString(16)}, +${n}) is outside STag ${stagHex(h.stag)}'s [0x${r.baseTo.toString(16)}, +${r.length})`,
          u,
          h,
        );
      offset = at;
      copyPayload(u.chunks, DDP_TAGGED_HEADER_LENGTH, r.buffer, offset, n);
    }
    this.taggedRun += n;
    if (this.out.placements.observed)
      this.out.placements.next({ stag: h.stag, to: h.to, length: n, last: h.last, rsvdUlp: h.rsvdUlp });
    // Tagged messages carry no sequence number, so a duplicate L=1 segment cannot be told from a new message:
    // on an unreliable LLP DDP gives no tagged reception indication at all (DDPP core draft §3.3/§3.4: "if any").
    if (h.last && o.reliable) {
      const length = this.taggedRun;
      this.taggedRun = 0;
      this.emitDelivery({ tagged: true, stag: h.stag, rsvdUlp: h.rsvdUlp, length, segment: u });
    }
  }

  private untagged(h: DdpUntaggedHeader, u: Ulpdu, n: number): undefined {
    const o = this.o;
    const E = UntaggedErrorCode;
    const T = DdpErrorType.UntaggedBuffer;
    if (h.dv !== o.dv) return this.fail(T, E.InvalidDdpVersion, `DDP version ${h.dv}, this stream runs ${o.dv}`, u, h);
    // The ULP's check, unless its table accepts this first RsvdULP octet on this queue.
    if (o.ulpCheck && o.ulpAccepts?.untagged[h.qn]?.[Math.floor(h.rsvdUlp / TWO_32)] !== 1) {
      const f = this.runUlpCheck(h, n, undefined, u);
      if (f === 'threw') return;
      if (f) return this.failUlp(f, u, h);
    }
    // §7.1 untagged checks 1–5, all before placement.
    const q = this.queues[h.qn];
    if (!q)
      return this.fail(T, E.InvalidQn, `QN ${h.qn} is not valid on this stream (it has ${this.queues.length})`, u, h);
    const slot = q.accept(h, n, this.strict, o.reliable);
    if (slot === 'duplicate') {
      this.duplicates++; // DDPP core draft §3.3/§3.4: an unreliable LLP may duplicate
      return;
    }
    if ('code' in slot) return this.fail(T, slot.code, slot.message, u, h);
    if (n > 0) copyPayload(u.chunks, DDP_UNTAGGED_HEADER_LENGTH, slot.buffer, h.mo, n);
    if (slot.complete) this.deliver(q, slot, u);
  }

  /** A ULP check that throws is a local fault: reported as Local Catastrophic, nothing placed (never a hang). */
  private runUlpCheck(
    h: DdpHeader,
    n: number,
    region: MemoryRegion | undefined,
    u: Ulpdu,
  ): ReturnType<UlpSegmentCheck> | 'threw' {
    try {
      return (this.o.ulpCheck as UlpSegmentCheck)(h, n, region);
    } catch (e) {
      this.fail(
        DdpErrorType.LocalCatastrophic,
        0,
        `the ULP's segment check threw: ${e instanceof Error ? e.message : String(e)}`,
        u,
        h,
      );
      return 'threw';
    }
  }

  /**
   * A Delivery (RFC 5041 §5.4): to the ULP's direct consumer, then to observers. A consumer that throws
   * does not stop the receive path (the rest of the LLP's chunk is still read): its error is reported
   * asynchronously, as an RxJS subscriber's would be.
   */
  private emitDelivery(e: DeliveryEvent): void {
    const direct = this.out.delivery;
    if (direct !== undefined)
      try {
        direct(e);
      } catch (err) {
        setTimeout(() => {
          throw err;
        });
      }
    if (this.out.deliveries.observed) this.out.deliveries.next(e);
  }

  private deliver(q: UntaggedQueue, s: ReceiveSlot, segment: Ulpdu): void {
    this.emitDelivery({
      segment,
      tagged: false,
      qn: q.qn,
      msn: s.msn,
      length: s.length as number,
      rsvdUlp: s.rsvdUlp,
      buffer: s.buffer,
      receiveId: s.receiveId,
    });
  }

  private fail(type: number, code: number, message: string, u: Ulpdu, header?: DdpHeader): undefined {
    this.emitError({ layer: 'ddp', type, code, message }, u, header);
  }

  private failUlp(
    f: { layer: 'rdmap'; type: number; code: number; message: string },
    u: Ulpdu,
    header: DdpHeader,
  ): undefined {
    this.emitError(f, u, header);
  }

  private emitError(
    f: { layer: 'ddp' | 'rdmap'; type: number; code: number; message: string },
    u: Ulpdu,
    header: DdpHeader | undefined,
  ): void {
    this.failed = true;
    const hlen = header
      ? header.tagged
        ? DDP_TAGGED_HEADER_LENGTH
        : DDP_UNTAGGED_HEADER_LENGTH
      : Math.min(u.length, DDP_UNTAGGED_HEADER_LENGTH);
    const copyLen = header && !header.tagged ? Math.min(u.length, hlen + ULP_HEADER_COPY) : Math.min(u.length, hlen);
    const all = new Uint8Array(copyLen);
    copyPayload(u.chunks, 0, all);
    this.out.error({
      ...f,
      header,
      segmentLength: u.length,
      headerBytes: all.slice(0, Math.min(hlen, copyLen)),
      ulpHeaderBytes: all.slice(Math.min(hlen, copyLen)),
    });
  }
}
