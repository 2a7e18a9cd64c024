/**
 * One TCP connection read as MPA (RFC 5044): the MPA Request and Reply (§7.1, RFC 6581), the startup
 * order (§7.1.2: no FPDU from the Initiator before the Reply, none from the Responder before the
 * Initiator's first), then FPDUs in each direction with the CRC and Markers the frames agreed.
 */
import { MPA_FRAME_HEADER_LENGTH, MPA_MAX_PRIVATE_DATA, MPA_REPLY_KEY, MPA_REQUEST_KEY } from '../wire/constants.js';
import { type Fpdu, FpduReader } from '../wire/fpdu.js';
import { decodeMpaFrame, type MpaFrame, mpaAgreement } from '../wire/mpa.js';
import { note, reject, type Violation } from '../wire/violation.js';
import { DdpStream } from './ddp-stream.js';
import { STATE_COST, StateMeter } from './meter.js';
import type { ConnectionSummary } from './model.js';
import { CRC_OFF_RUN, type CrcMode, findFpduStart } from './mpa-infer.js';
import type { Recorder } from './recorder.js';

/** Most octets an Initiator may have sent after its Request before the Reply shows, kept for decoding. */
export const MAX_EARLY_OCTETS = 1 << 20;

export interface MpaTcpOptions {
  /** Longest ULPDU accepted without a finding (RFC 5044 §3: 64768). */
  readonly maxUlpdu?: number;
  /** Whether the capture so far lost octets sent by `from` (a TCP gap not yet filled, or given up). */
  readonly gap?: (from: string) => boolean;
  /** Where the state this connection holds is counted (DissectOptions.maxStateOctets). */
  readonly meter?: StateMeter;
  /**
   * The connection's start was not captured (no SYN): the MPA Request may be missing (decode from the
   * Reply, its sender the responder) or both frames (recognise FPDUs mid-stream by framing and CRC).
   */
  readonly lateStart?: boolean;
  /** Decode as MPA even without the handshake or the heuristic's evidence (`--mpa-port`). */
  readonly decodeAs?: boolean;
  /** How the initiator and responder were told when no SYN and no MPA frame says (for the report). */
  readonly rolesFrom?: string;
}

/** Most octets per direction searched for an FPDU boundary before the direction is given up (2 FPDUs). */
export const MAX_SYNC_OCTETS = 2 * (2 + 0xffff + 3 + 4) + 4;

type State = 'request' | 'reply' | 'fpdu' | 'sync' | 'not-mpa' | 'rejected';

interface SyncSide {
  buf: Uint8Array;
  len: number;
  /** Offsets before this hold no FPDU. */
  from: number;
  skipped: number;
  firstFrame: number;
  lastFrame: number;
  done: boolean;
}

const keyPrefix = (b: Uint8Array, key: string) => {
  const n = Math.min(b.byteLength, key.length);
  for (let i = 0; i < n; i++) if (b[i] !== key.charCodeAt(i)) return false;
  return true;
};

function frameSummary(f: MpaFrame): string {
  const bits = `M=${f.markers ? 1 : 0} C=${f.crc ? 1 : 0}${f.kind === 'reply' ? ` R=${f.reject ? 1 : 0}` : ''}`;
  let s = `MPA ${f.kind === 'request' ? 'Request' : 'Reply'} Rev ${f.rev} ${bits} PD_Length ${f.pdLength}`;
  if (f.enhanced) {
    const e = f.enhanced;
    const rtr = [e.sendRtr ? 'Send' : '', e.writeRtr ? 'Write' : '', e.readRtr ? 'Read' : ''].filter(Boolean).join('/');
    s += ` · IRD ${e.ird} ORD ${e.ord}${e.peerToPeer ? ` peer-to-peer RTR ${rtr || 'none'}` : ''}`;
  }
  return s;
}

export class MpaTcpConnection {
  private state: State = 'request';
  private conn: ConnectionSummary | undefined;
  private request: MpaFrame | undefined;
  private readonly pending = new Map<string, { frame: number; bytes: Uint8Array }[]>();
  private pendingOctets = 0;
  private readers = new Map<string, FpduReader>();
  private firstInitiatorFpduFrame: number | undefined;
  private ddp: DdpStream | undefined;
  private early = new Set<string>();
  private readonly meter: StateMeter;
  /** Most octets each FPDU reader held (its buffer grew to about twice that, and stays). */
  private readonly readerPeak = new Map<string, number>();
  /** Mid-stream decoding: each direction searched for its first FPDU boundary. */
  private readonly sync = new Map<string, SyncSide>();
  private syncCrc: CrcMode | undefined;
  private syncRdmac = false;
  /** What was inferred rather than seen (reported once). */
  private inferred: 'reply-first' | 'mid-stream' | undefined;
  private initiator: string;
  private responder: string;

  constructor(
    private readonly rec: Recorder,
    private readonly id: string,
    initiator: string,
    responder: string,
    private readonly options: MpaTcpOptions = {},
  ) {
    this.meter = options.meter ?? new StateMeter();
    this.initiator = initiator;
    this.responder = responder;
  }

  private swapRoles(): void {
    const i = this.initiator;
    this.initiator = this.responder;
    this.responder = i;
  }

  private get rolesText(): string {
    return this.options.rolesFrom ?? 'roles unknown (the first sender is shown as initiator)';
  }

  private dirLabel(from: string): string {
    return from === this.initiator ? `${this.initiator} → ${this.responder}` : `${this.responder} → ${this.initiator}`;
  }

  /** In-order octets from `from` (an "address:port"). */
  data(frame: number, from: string, bytes: Uint8Array): void {
    if (this.state === 'not-mpa') return;
    if (this.state === 'request' && (this.options.lateStart || this.options.decodeAs) && !this.pending.has(from)) {
      // The first octets of a side whose Request may not have been captured: an MPA frame, or FPDUs?
      const other = this.pending.get(from === this.initiator ? this.responder : this.initiator) ?? [];
      const seen = other.length > 0;
      if (keyPrefix(bytes, MPA_REQUEST_KEY) && !seen) {
        if (from !== this.initiator) this.swapRoles();
      } else if (keyPrefix(bytes, MPA_REPLY_KEY) && !seen && this.options.lateStart) {
        // RFC 5044 §7.1: the Reply's sender is the Responder; its Request went before the capture.
        if (from !== this.responder) this.swapRoles();
        this.inferred = 'reply-first';
        this.state = 'reply';
      } else if (!seen || this.options.decodeAs) {
        this.state = 'sync';
        this.inferred = 'mid-stream';
        this.dropPending();
      }
    }
    if (this.state === 'sync') {
      this.syncData(frame, from, bytes);
      return;
    }
    const isInit = from === this.initiator;
    if (this.state === 'fpdu') {
      if (this.readers.has(from)) this.fpduData(frame, from, bytes);
      else if (this.inferred) this.syncData(frame, from, bytes);
      return;
    }
    // Setup phase: gather octets per side until the frames decode.
    const list = this.pending.get(from) ?? [];
    this.pending.set(from, list);
    if (this.pendingOctets + bytes.byteLength > MAX_EARLY_OCTETS) {
      if (this.conn)
        this.rec.event(this.conn, frame, this.dirLabel(from), 'stream', 'octets before the MPA Reply dropped', [
          note('mpa-early-dropped', 'RFC 5044 §7.1.2', `more than ${MAX_EARLY_OCTETS} octets before the MPA Reply`),
        ]);
      return;
    }
    // A copy of its own: a view would keep the whole captured packet alive.
    list.push({ frame, bytes: new Uint8Array(bytes) });
    this.pendingOctets += bytes.byteLength;
    this.meter.add(bytes.byteLength + STATE_COST.early);
    this.advance(isInit ? 'initiator' : 'responder');
  }

  /** Lets go of every octet held before the MPA Reply. */
  private dropPending(): void {
    let entries = 0;
    for (const l of this.pending.values()) entries += l.length;
    this.meter.add(-(this.pendingOctets + entries * STATE_COST.early));
    this.pending.clear();
    this.pendingOctets = 0;
  }

  private take(from: string, n: number): void {
    const list = this.pending.get(from) ?? [];
    let left = n;
    while (left > 0 && list.length > 0) {
      const h = list[0] as { frame: number; bytes: Uint8Array };
      if (h.bytes.byteLength <= left) {
        left -= h.bytes.byteLength;
        this.pendingOctets -= h.bytes.byteLength;
        this.meter.add(-(h.bytes.byteLength + STATE_COST.early));
        list.shift();
      } else {
        h.bytes = h.bytes.subarray(left);
        this.pendingOctets -= left;
        this.meter.add(-left);
        left = 0;
      }
    }
  }

  private joined(from: string, max: number): { bytes: Uint8Array; lastFrame: number } {
    const list = this.pending.get(from) ?? [];
    const parts: Uint8Array[] = [];
    let n = 0;
    let lastFrame = 0;
    for (const p of list) {
      if (n >= max) break;
      const piece = p.bytes.subarray(0, max - n);
      parts.push(piece);
      n += piece.byteLength;
      lastFrame = p.frame;
    }
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.byteLength;
    }
    return { bytes: out, lastFrame };
  }

  private summary(): ConnectionSummary {
    if (!this.conn) this.conn = this.rec.connection(this.id, 'mpa-tcp', this.initiator, this.responder);
    return this.conn;
  }

  private advance(side: 'initiator' | 'responder'): void {
    const maxFrame = MPA_FRAME_HEADER_LENGTH + MPA_MAX_PRIVATE_DATA;
    if (this.state === 'request') {
      if (side !== 'initiator') {
        // The responder spoke first: not an MPA connection we can follow.
        if (!this.conn) this.notMpa();
        return;
      }
      const { bytes, lastFrame } = this.joined(this.initiator, maxFrame);
      const d = decodeMpaFrame(bytes, 'request');
      if (d.status === 'need-more') return;
      if (d.status === 'error') {
        // A frame with the right key (or one starting "MPA ID ") is an MPA attempt worth a finding.
        const mpaLike = String.fromCharCode(...bytes.subarray(0, 7)) === 'MPA ID ';
        if (d.violation.code !== 'mpa-key' || mpaLike)
          this.rec.event(
            this.summary(),
            lastFrame,
            this.dirLabel(this.initiator),
            'mpa-request',
            'not a valid MPA Request',
            [d.violation],
          );
        this.notMpa();
        return;
      }
      this.request = d.frame;
      const conn = this.summary();
      this.rec.event(
        conn,
        lastFrame,
        this.dirLabel(this.initiator),
        'mpa-request',
        frameSummary(d.frame),
        d.frame.violations,
        {
          ...d.frame,
          privateData: d.frame.privateData,
          ulpData: d.frame.ulpData,
        },
      );
      this.take(this.initiator, d.frame.length);
      this.state = 'reply';
    }
    if (this.state === 'reply' && this.inferred === 'reply-first') {
      this.replyFirst();
      return;
    }
    if (this.state === 'reply') {
      const conn = this.summary();
      const { bytes, lastFrame } = this.joined(this.responder, maxFrame);
      if (bytes.byteLength === 0) return;
      const d = decodeMpaFrame(bytes, 'reply');
      if (d.status === 'need-more') return;
      if (d.status === 'error') {
        this.rec.event(conn, lastFrame, this.dirLabel(this.responder), 'mpa-reply', 'no MPA Reply', [d.violation]);
        this.notMpa();
        return;
      }
      const request = this.request as MpaFrame;
      this.take(this.responder, d.frame.length);
      const agreed = mpaAgreement(request, d.frame);
      const v: Violation[] = [...d.frame.violations, ...agreed.violations];
      // §7.1.2: the Initiator sends no FPDU before it has the Reply.
      const initEarly = (this.pending.get(this.initiator) ?? []).find((p) => p.frame < lastFrame);
      if (initEarly) {
        v.push(
          reject(
            'mpa-initiator-early',
            'RFC 5044 §7.1.2',
            `the Initiator sent FPDU octets (frame ${initEarly.frame}) before the MPA Reply`,
          ),
        );
        this.early.add(this.initiator);
      }
      this.rec.event(conn, lastFrame, this.dirLabel(this.responder), 'mpa-reply', frameSummary(d.frame), v, {
        ...d.frame,
        agreed: {
          crc: agreed.crc,
          markersToResponder: agreed.markersToResponder,
          markersToInitiator: agreed.markersToInitiator,
        },
      });
      conn.setup = `MPA Rev ${request.rev}/${d.frame.rev}, CRC ${agreed.crc ? 'on' : 'off'}, Markers to responder ${agreed.markersToResponder ? 'on' : 'off'}, to initiator ${agreed.markersToInitiator ? 'on' : 'off'}${d.frame.reject ? ', REJECTED' : ''}`;
      if (d.frame.reject) {
        this.state = 'rejected';
        return;
      }
      const maxUlpdu = this.options.maxUlpdu;
      const opt = (markers: boolean) => ({ crc: agreed.crc, markers, ...(maxUlpdu !== undefined ? { maxUlpdu } : {}) });
      this.readers.set(this.initiator, new FpduReader(opt(agreed.markersToResponder)));
      this.readers.set(this.responder, new FpduReader(opt(agreed.markersToInitiator)));
      this.meter.add(2 * STATE_COST.reader);
      this.ddp = new DdpStream(this.rec, conn, {
        meter: this.meter,
        ordered: true,
        rdmac: agreed.rdmac,
        gapBefore: (direction) => {
          const other = direction.startsWith(`${this.initiator} `) ? this.responder : this.initiator;
          return this.options.gap?.(other) ?? false;
        },
      });
      this.state = 'fpdu';
      const held = [this.initiator, this.responder]
        .flatMap((who) => (this.pending.get(who) ?? []).map((p) => ({ ...p, who })))
        .sort((a, b) => a.frame - b.frame);
      this.dropPending();
      for (const p of held) this.fpduData(p.frame, p.who, p.bytes);
    }
  }

  private fpduData(frame: number, from: string, bytes: Uint8Array): void {
    const conn = this.summary();
    const reader = this.readers.get(from);
    if (!reader) return;
    const label = this.dirLabel(from);
    if (from === this.initiator && this.firstInitiatorFpduFrame === undefined) this.firstInitiatorFpduFrame = frame;
    const extra: Violation[] = [];
    if (
      from === this.responder &&
      this.firstInitiatorFpduFrame === undefined &&
      !this.early.has(from) &&
      this.inferred !== 'mid-stream'
    ) {
      this.early.add(from);
      // The Initiator's first FPDU may be in octets the capture lost.
      if (!this.options.gap?.(this.initiator))
        extra.push(
          reject(
            'mpa-responder-first',
            'RFC 5044 §7.1.2',
            "the Responder sent an FPDU before the Initiator's first FPDU",
          ),
        );
    }
    for (const f of reader.push(bytes)) {
      this.fpdu(conn, frame, label, f, extra.splice(0));
    }
    // The reader's buffer grows (by doubling) to hold an FPDU and does not shrink: counted at its peak.
    const peak = this.readerPeak.get(from) ?? 0;
    if (reader.buffered > peak) {
      this.meter.add(2 * (reader.buffered - peak));
      this.readerPeak.set(from, reader.buffered);
    }
    if (extra.length > 0) this.rec.event(conn, frame, label, 'stream', 'FPDU octets', extra);
  }

  private fpdu(conn: ConnectionSummary, frame: number, label: string, f: Fpdu, extra: Violation[]): void {
    conn.segments++;
    conn.crc[f.crcVerdict]++;
    const crc = f.crcVerdict === 'off' ? 'CRC off' : `CRC ${f.crcVerdict}`;
    const markers = f.markers.length > 0 ? `, ${f.markers.length} Marker${f.markers.length === 1 ? '' : 's'}` : '';
    const prefix = `FPDU ULPDU_Length ${f.ulpduLength} (${crc}${markers}) · `;
    (this.ddp as DdpStream).segment(frame, label, f.ulpdu, [...extra, ...f.violations], prefix, 'fpdu');
  }

  /** Something about the TCP stream itself (a gap the capture never filled). */
  streamNote(frame: number, from: string, v: Violation): void {
    if (this.conn) this.rec.event(this.conn, frame, this.dirLabel(from), 'stream', v.message, [v]);
  }

  /** The capture ended, or (`closed`) the TCP connection did. */
  end(frame: number, closed = false): void {
    if (!this.conn) return;
    const what = closed ? 'connection' : 'capture';
    if (this.state === 'reply')
      this.rec.event(this.conn, frame, this.dirLabel(this.responder), 'stream', `no MPA Reply in the ${what}`, [
        note('mpa-no-reply', 'RFC 5044 §7.1', `the ${what} ends before an MPA Reply`),
      ]);
    for (const [who, s] of this.sync)
      if (!s.done && s.len > 0)
        this.rec.event(
          this.conn,
          frame,
          this.dirLabel(who),
          'stream',
          `no FPDU boundary found by the end of the ${what}`,
          [note('mpa-no-fpdu', 'RFC 5044 §4.1', `${s.skipped + s.len} octets with no FPDU recognised`)],
        );
    for (const [who, r] of this.readers) {
      const v = r.end();
      if (v.length > 0) this.rec.event(this.conn, frame, this.dirLabel(who), 'stream', `end of ${what}`, v);
    }
    this.ddp?.end(frame, closed);
  }

  /** Decodes from an MPA Reply whose Request was not captured: the Reply's sender is the Responder. */
  private replyFirst(): void {
    const { bytes, lastFrame } = this.joined(this.responder, MPA_FRAME_HEADER_LENGTH + MPA_MAX_PRIVATE_DATA);
    if (bytes.byteLength === 0) return;
    const d = decodeMpaFrame(bytes, 'reply');
    if (d.status === 'need-more') return;
    if (d.status === 'error') {
      // Not a Reply after all: look for FPDUs.
      this.inferred = 'mid-stream';
      this.toSync();
      return;
    }
    const f = d.frame;
    this.take(this.responder, f.length);
    const conn = this.summary();
    this.rec.event(conn, lastFrame, this.dirLabel(this.responder), 'mpa-reply', frameSummary(f), f.violations, {
      ...f,
    });
    // RFC 5044 §7.1: M in the Reply asks for Markers to the Responder; M in the Request (not captured), to the
    // Initiator. Appendix C: Rev 0 has both on, and CRCs.
    const rdmac = f.rev === 0;
    const crc: CrcMode | undefined = rdmac || f.crc ? 'on' : undefined;
    const msg = `mpa-inferred: the capture starts at the MPA Reply (the Request was not captured): roles from the Reply (its sender ${this.responder} is the responder); CRC ${crc ? 'on (the Reply set C)' : 'inferred from the FPDUs'}; Markers to the initiator ${rdmac ? 'on (Rev 0)' : 'inferred (assumed off)'}`;
    this.rec.event(conn, lastFrame, this.dirLabel(this.responder), 'stream', msg, [
      note('mpa-inferred', 'RFC 5044 §7.1', msg),
    ]);
    conn.setup = `MPA Rev ?/${f.rev} (Request not captured), CRC ${crc ? 'on' : 'inferred'}, Markers to responder ${rdmac || f.markers ? 'on' : 'off'}, to initiator ${rdmac ? 'on' : 'inferred'}${f.reject ? ', REJECTED' : ''}`;
    if (f.reject) {
      this.state = 'rejected';
      return;
    }
    this.syncCrc = crc;
    this.syncRdmac = rdmac;
    this.newDdp(conn, false);
    if (rdmac || f.markers) this.newReader(this.initiator, crc === 'on', true);
    if (rdmac) this.newReader(this.responder, true, true);
    this.state = 'fpdu';
    this.replayPending();
  }

  private newDdp(conn: ConnectionSummary, midStream: boolean): void {
    this.ddp = new DdpStream(this.rec, conn, {
      meter: this.meter,
      ordered: true,
      rdmac: this.syncRdmac,
      midStream,
      gapBefore: (direction) => {
        const other = direction.startsWith(`${this.initiator} `) ? this.responder : this.initiator;
        return this.options.gap?.(other) ?? false;
      },
    });
  }

  private newReader(who: string, crc: boolean, markers: boolean): void {
    const maxUlpdu = this.options.maxUlpdu;
    this.readers.set(who, new FpduReader({ crc, markers, ...(maxUlpdu !== undefined ? { maxUlpdu } : {}) }));
    this.meter.add(STATE_COST.reader);
  }

  /** Octets held before the MPA frames decoded, passed on in frame order. */
  private replayPending(): void {
    const held = [this.initiator, this.responder]
      .flatMap((who) => (this.pending.get(who) ?? []).map((p) => ({ ...p, who })))
      .sort((a, b) => a.frame - b.frame);
    this.dropPending();
    for (const p of held) this.data(p.frame, p.who, p.bytes);
  }

  private toSync(): void {
    this.state = 'sync';
    this.replayPending();
  }

  /** Octets of a side whose FPDU boundaries are not known yet: search for the first FPDU (resync). */
  private syncData(frame: number, from: string, bytes: Uint8Array): void {
    let s = this.sync.get(from);
    if (!s) {
      s = { buf: new Uint8Array(4096), len: 0, from: 0, skipped: 0, firstFrame: frame, lastFrame: frame, done: false };
      this.sync.set(from, s);
      this.meter.add(s.buf.byteLength + STATE_COST.reader);
    }
    if (s.done) return;
    if (s.len + bytes.byteLength > s.buf.byteLength) {
      const nb = new Uint8Array(Math.max(s.len + bytes.byteLength, 2 * s.buf.byteLength));
      nb.set(s.buf.subarray(0, s.len));
      this.meter.add(nb.byteLength - s.buf.byteLength);
      s.buf = nb;
    }
    s.buf.set(bytes, s.len);
    s.len += bytes.byteLength;
    s.lastFrame = frame;
    // With the MPA frames, --mpa-port or the other side's FPDUs to go by, one FPDU is evidence enough.
    const run =
      this.options.decodeAs || this.syncCrc !== undefined || this.inferred === 'reply-first' ? 1 : CRC_OFF_RUN;
    const r = findFpduStart(s.buf, s.from, s.len, run, this.syncCrc);
    if (r.kind === 'wait') {
      if (r.from > 0) {
        s.buf.copyWithin(0, r.from, s.len);
        s.len -= r.from;
        s.skipped += r.from;
        s.from = 0;
      }
      if (s.len > MAX_SYNC_OCTETS) {
        s.done = true;
        s.skipped += s.len;
        this.meter.add(-s.buf.byteLength);
        s.buf = new Uint8Array(0);
        s.len = 0;
        if (this.conn)
          this.rec.event(this.conn, frame, this.dirLabel(from), 'stream', 'no FPDU boundary found', [
            note(
              'mpa-no-fpdu',
              'RFC 5044 §4.1',
              `no FPDU found in ${MAX_SYNC_OCTETS} octets: this direction is not decoded`,
            ),
          ]);
      }
      return;
    }
    s.skipped += r.offset;
    const rest = s.buf.slice(r.offset, s.len);
    this.sync.delete(from);
    this.meter.add(-(s.buf.byteLength + STATE_COST.reader));
    const first = this.syncCrc === undefined && this.inferred === 'mid-stream' && !this.ddp;
    this.syncCrc ??= r.crc;
    if (!this.ddp) this.syncRdmac = r.rdmac;
    const conn = this.summary();
    const skipped = s.skipped > 0 ? `${s.skipped} octets before the first FPDU boundary skipped` : 'no octets skipped';
    const how = this.options.decodeAs
      ? 'decoded as MPA (--mpa-port)'
      : r.crc === 'on'
        ? 'framing and CRC recognised mid-stream'
        : `framing recognised mid-stream (${CRC_OFF_RUN} well-formed FPDUs in a row, CRCs off)`;
    let msg: string;
    if (this.inferred === 'reply-first') msg = `FPDUs from ${from}: ${skipped}`;
    else if (first)
      msg = `mpa-inferred: ${how}, no MPA Request or Reply captured (CRC ${r.crc}, Markers assumed off); ${skipped} (${from}); ${this.rolesText}`;
    else msg = `mpa-inferred: FPDUs from ${from} recognised (CRC ${this.syncCrc}); ${skipped}`;
    if (first) {
      conn.setup = `inferred mid-stream (no MPA Request/Reply captured): CRC ${r.crc}, Markers off; ${this.rolesText}`;
      this.newDdp(conn, true);
      this.state = 'fpdu';
    }
    this.rec.event(conn, s.firstFrame, this.dirLabel(from), 'stream', msg, [
      note('mpa-inferred', this.inferred === 'reply-first' ? 'RFC 5044 §7.1' : 'RFC 5044 §4.1', msg),
    ]);
    this.newReader(from, this.syncCrc === 'on', false);
    this.fpduData(frame, from, rest);
  }

  /** Whether this connection's start was not captured and nothing in it was recognised as MPA. */
  get unrecognised(): boolean {
    return this.conn === undefined && this.inferred === 'mid-stream';
  }

  private notMpa(): void {
    this.state = 'not-mpa';
    this.dropPending();
  }

  get isMpa(): boolean {
    return this.conn !== undefined;
  }
}
