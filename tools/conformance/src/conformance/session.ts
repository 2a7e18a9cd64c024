/**
 * The kit's end of one MPA connection, built on its own codec (../wire): MPA startup in either role
 * (RFC 5044 §7.1, RFC 6581), FPDUs out with the agreed CRC and Markers (RFC 5044 §4), FPDUs in taken
 * apart into DDP (RFC 5041 §4) and RDMAP (RFC 5040 §4) headers, and Terminates decoded (RFC 5040 §4.8).
 */
import { Opcode } from '../wire/constants.js';
import { type DdpHeader, type DdpHeaderFields, decodeDdpHeader, encodeDdpHeader } from '../wire/ddp.js';
import { type EncodeFpduOptions, encodeFpdu, type Fpdu, FpduReader } from '../wire/fpdu.js';
import {
  decodeMpaFrame,
  type EnhancedSetup,
  encodeMpaReply,
  encodeMpaRequest,
  type MpaFrame,
  type MpaFrameFields,
} from '../wire/mpa.js';
import {
  decodeReadRequest,
  encodeRdmapControl,
  encodeReadRequest,
  IETF_VERSIONS,
  RDMAC_VERSIONS,
  type ReadRequestHeader,
  type StreamVersions,
} from '../wire/rdmap.js';
import { type DecodedTerminate, decodeTerminate } from '../wire/terminate.js';
import type { WireConn } from './conn.js';
import { ConformanceProtocolError, ConformanceRejectedError } from './errors.js';
import type { Mode } from './types.js';

/** IRD/ORD the kit announces at Rev 2 (RFC 6581). */
export const KIT_IRD = 8;
export const KIT_ORD = 8;

/** One FPDU the target sent, taken apart. */
export interface RxMessage {
  readonly fpdu: Fpdu;
  /** Undefined when the ULPDU is shorter than a DDP header. */
  readonly ddp?: DdpHeader;
  /** RDMAP control octet fields (RFC 5040 §4.1). */
  readonly rv: number;
  readonly opcode: number;
  /** ULPDU after the DDP header. */
  readonly payload: Uint8Array;
}

export type ReadRequestFields = ReadRequestHeader;
export { decodeReadRequest as decodeReadRequestHeader, encodeReadRequest as encodeReadRequestHeader };

/** RDMAP control octet (RFC 5040 §4.1): RV (2 bits), reserved (2), OpCode (4). */
export function rdmapControl(opcode: number, rv?: number): number {
  return encodeRdmapControl({ opcode, ...(rv !== undefined ? { rv } : {}) });
}

/** What the kit's MPA Request or Reply says, beyond the mode (faults planted by startup cases). */
export type FrameOverrides = Partial<MpaFrameFields>;

/** RFC 6581 data the kit puts in a Rev 2 frame. */
export function kitEnhanced(e: Partial<EnhancedSetup> = {}): EnhancedSetup {
  return { peerToPeer: false, ird: KIT_IRD, ord: KIT_ORD, sendRtr: false, writeRtr: false, readRtr: false, ...e };
}

/**
 * The E flag (the top Res bit) that deployed Rev 2 implementations (Linux siw MPA_RR_FLAG_ENHANCED)
 * set when the Private Data opens with the RFC 6581 IRD/ORD words; the kit sets it on its own.
 */
export const MPA_FLAG_ENHANCED = 0x10;

/** The RFC 6581 data of a frame, when it carries it (Rev 2 with E set). */
export function enhancedOf(f: MpaFrame): EnhancedSetup | undefined {
  return f.rev === 2 && (f.res & MPA_FLAG_ENHANCED) !== 0 ? f.enhanced : undefined;
}

/** Reads one MPA frame (bounded: the codec refuses more than 532 octets). */
export async function readMpaFrame(conn: WireConn, expect: 'request' | 'reply', ms: number): Promise<MpaFrame> {
  return conn.until(
    (b) => {
      if (b.length === 0) return undefined;
      const r = decodeMpaFrame(b, expect);
      if (r.status === 'need-more') return undefined;
      if (r.status === 'error') throw new ConformanceProtocolError(`${r.violation.clause}: ${r.violation.message}`);
      conn.consume(r.frame.length);
      return r.frame;
    },
    ms,
    `an MPA ${expect === 'request' ? 'Request' : 'Reply'}`,
  );
}

export class KitSession {
  private txOffset = 0;
  private readonly reader: FpduReader;
  private readonly inbox: RxMessage[] = [];
  /** Next MSN the kit sends on each untagged queue (RFC 5041 §5.1: from 1). */
  readonly nextMsn = [1, 1, 1, 1];
  /** DDP and RDMAP versions of this stream: 0 and 0 at MPA Rev 0 (RFC 5044 Appendix C), else 1 and 1. */
  readonly versions: StreamVersions;

  constructor(
    readonly conn: WireConn,
    /** CRCs in both directions (RFC 5044 §7.1). */
    readonly crc: boolean,
    /** Markers in the FPDUs the kit sends (the target's M bit). */
    readonly markersTx: boolean,
    /** Markers in the FPDUs the kit receives (the kit's M bit). */
    readonly markersRx: boolean,
    readonly rev: number,
    readonly waitMs: number,
    /** The target's MPA frame (Request in server role, Reply in client role). */
    readonly peerFrame: MpaFrame,
  ) {
    this.reader = new FpduReader({ crc, markers: markersRx });
    this.versions = rev === 0 ? RDMAC_VERSIONS : IETF_VERSIONS;
  }

  /** Client role: sends the MPA Request and reads the Reply. Rejects when the target refuses or closes. */
  static async connect(
    conn: WireConn,
    mode: Mode,
    waitMs: number,
    o: { request?: FrameOverrides; enhanced?: Partial<EnhancedSetup> } = {},
  ): Promise<KitSession> {
    const request = encodeMpaRequest({
      markers: mode.markers,
      crc: mode.crc,
      rev: mode.mpaRev,
      ...(mode.mpaRev === 2 ? { enhanced: kitEnhanced(o.enhanced), res: MPA_FLAG_ENHANCED } : {}),
      ...o.request,
    });
    conn.write(request);
    const reply = await readMpaFrame(conn, 'reply', waitMs);
    if (reply.reject) throw new ConformanceRejectedError('the target rejected the connection (MPA Reply R=1)');
    // RFC 5044 Appendix C: a Rev 0 Reply means the RDMAC profile, Markers and CRCs both ways.
    if (reply.rev === 0) return new KitSession(conn, true, true, true, 0, waitMs, reply);
    const crc = (o.request?.crc ?? mode.crc) || reply.crc;
    return new KitSession(conn, crc, reply.markers, o.request?.markers ?? mode.markers, reply.rev, waitMs, reply);
  }

  /** Server role: reads the client's MPA Request and answers it with a Reply. */
  static async accept(
    conn: WireConn,
    mode: Mode,
    waitMs: number,
    o: { reply?: FrameOverrides; enhanced?: Partial<EnhancedSetup>; withReply?: (s: KitSession) => void } = {},
  ): Promise<KitSession> {
    const request = await readMpaFrame(conn, 'request', waitMs);
    const rev = o.reply?.rev ?? Math.min(request.rev, mode.mpaRev);
    const crc = request.crc || mode.crc;
    // RFC 6581: a peer-to-peer Request is answered with one of the RTR types it offers.
    const q = enhancedOf(request);
    const p2p = rev === 2 && q?.peerToPeer === true;
    const rtr = p2p ? (q?.writeRtr ? 'write' : q?.readRtr ? 'read' : q?.sendRtr ? 'send' : undefined) : undefined;
    const reply = encodeMpaReply({
      markers: mode.markers,
      crc,
      rev,
      ...(rev === 2 && q
        ? {
            res: MPA_FLAG_ENHANCED,
            enhanced: kitEnhanced({
              peerToPeer: p2p,
              writeRtr: rtr === 'write',
              readRtr: rtr === 'read',
              sendRtr: rtr === 'send',
              ...o.enhanced,
            }),
          }
        : {}),
      ...o.reply,
    });
    // RFC 5044 Appendix C: a Rev 0 Reply means the RDMAC profile, Markers and CRCs both ways.
    const s =
      rev === 0
        ? new KitSession(conn, true, true, true, 0, waitMs, request)
        : new KitSession(
            conn,
            (o.reply?.crc ?? crc) || request.crc,
            request.markers,
            o.reply?.markers ?? mode.markers,
            rev,
            waitMs,
            request,
          );
    // `withReply` writes right behind the Reply, in the same segment: the client has it before it can send.
    conn.together(() => {
      conn.write(reply);
      o.withReply?.(s);
    });
    return s;
  }

  /** Sends one ULPDU as an FPDU (faults: the codec's fault-planting options). */
  sendUlpdu(ulpdu: Uint8Array, faults: Partial<EncodeFpduOptions> = {}): Uint8Array {
    const wire = encodeFpdu(ulpdu, {
      crc: this.crc,
      markers: this.markersTx,
      streamOffset: this.txOffset,
      ...faults,
    });
    this.txOffset += wire.byteLength;
    this.conn.write(wire);
    return wire;
  }

  /** A DDP segment: header then payload, as one ULPDU. */
  segment(h: DdpHeaderFields, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
    const head = encodeDdpHeader(h);
    const u = new Uint8Array(head.byteLength + payload.byteLength);
    u.set(head, 0);
    u.set(payload, head.byteLength);
    return u;
  }

  /** An untagged message (Send family, Read Request, Terminate...) in one segment; takes the queue's next MSN. */
  untagged(
    opcode: number,
    qn: number,
    payload: Uint8Array,
    o: { msn?: number; mo?: number; dv?: number; rv?: number; invalidateStag?: number; last?: boolean } = {},
  ): Uint8Array {
    const msn = o.msn ?? this.nextMsn[qn] ?? 1;
    if (o.msn === undefined && qn < this.nextMsn.length) this.nextMsn[qn] = msn + 1;
    return this.segment(
      {
        tagged: false,
        last: o.last ?? true,
        rsvdUlp: rdmapControl(opcode, o.rv ?? this.versions.rdmap),
        rsvdUlp2: o.invalidateStag ?? 0,
        qn,
        msn,
        mo: o.mo ?? 0,
        dv: o.dv ?? this.versions.ddp,
      },
      payload,
    );
  }

  tagged(
    opcode: number,
    stag: number,
    to: bigint,
    payload: Uint8Array,
    o: { dv?: number; rv?: number } = {},
  ): Uint8Array {
    return this.segment(
      {
        tagged: true,
        last: true,
        rsvdUlp: rdmapControl(opcode, o.rv ?? this.versions.rdmap),
        stag,
        to,
        dv: o.dv ?? this.versions.ddp,
      },
      payload,
    );
  }

  send(payload: Uint8Array, o: Parameters<KitSession['untagged']>[3] = {}): Uint8Array {
    return this.sendUlpdu(this.untagged(Opcode.Send, 0, payload, o));
  }

  write(stag: number, to: bigint, payload: Uint8Array, o: { dv?: number; rv?: number } = {}): Uint8Array {
    return this.sendUlpdu(this.tagged(Opcode.RdmaWrite, stag, to, payload, o));
  }

  readRequest(r: ReadRequestFields, o: Parameters<KitSession['untagged']>[3] = {}): Uint8Array {
    return this.sendUlpdu(this.untagged(Opcode.RdmaReadRequest, 1, encodeReadRequest(r), o));
  }

  readResponse(stag: number, to: bigint, payload: Uint8Array): Uint8Array {
    return this.sendUlpdu(this.tagged(Opcode.RdmaReadResponse, stag, to, payload));
  }

  /** Pushes what arrived through the FPDU reader; returns the oldest message taken apart, if any. */
  private drain(): RxMessage | undefined {
    const b = this.conn.pending;
    if (b.length > 0)
      for (const fpdu of this.reader.push(this.conn.consume(b.length))) {
        const ddp = decodeDdpHeader(fpdu.ulpdu);
        const ctl = ddp?.rsvdUlp ?? 0;
        this.inbox.push({
          fpdu,
          ...(ddp ? { ddp } : {}),
          rv: ctl >>> 6,
          opcode: ctl & 0xf,
          payload: ddp ? fpdu.ulpdu.subarray(ddp.tagged ? 14 : 18) : new Uint8Array(0),
        });
      }
    return this.inbox.shift();
  }

  /** The target's next FPDU, within the wait bound. */
  next(what = 'an FPDU'): Promise<RxMessage> {
    return this.conn.until(() => this.drain(), this.waitMs, what);
  }

  /** The next FPDU, or undefined when the target ends the connection or stays silent. */
  async nextOrEnd(ms = this.waitMs): Promise<RxMessage | undefined> {
    try {
      return await this.conn.until(() => this.drain(), ms, 'an FPDU');
    } catch {
      return undefined;
    }
  }
}

export function isTerminate(m: RxMessage): boolean {
  return m.ddp !== undefined && !m.ddp.tagged && m.opcode === Opcode.Terminate;
}

export function terminateOf(m: RxMessage): DecodedTerminate | undefined {
  if (!isTerminate(m)) return undefined;
  const t = decodeTerminate(m.payload);
  return 'error' in t ? undefined : t;
}

/** One-line description of a received message. */
export function describe(m: RxMessage): string {
  const t = terminateOf(m);
  if (t) return `Terminate (${t.name}; M=${+t.m} D=${+t.d} R=${+t.r})`;
  if (!m.ddp) return `a ${m.fpdu.ulpduLength}-octet ULPDU (no DDP header)`;
  return m.ddp.tagged
    ? `opcode 0x${m.opcode.toString(16)} tagged STag 0x${m.ddp.stag.toString(16)} TO ${m.ddp.to} (${m.payload.length} octets)`
    : `opcode 0x${m.opcode.toString(16)} QN ${m.ddp.qn} MSN ${m.ddp.msn} (${m.payload.length} octets)`;
}
