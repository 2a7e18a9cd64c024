/**
 * One TCP connection read as MPA (RFC 5044): the MPA Request and Reply (§7.1, RFC 6581), the startup
 * order (§7.1.2: no FPDU from the Initiator before the Reply, none from the Responder before the
 * Initiator's first), then FPDUs in each direction with the CRC and Markers the frames agreed.
 */
import { MPA_FRAME_HEADER_LENGTH, MPA_MAX_PRIVATE_DATA } from '../wire/constants.js';
import { type Fpdu, FpduReader } from '../wire/fpdu.js';
import { decodeMpaFrame, type MpaFrame, mpaAgreement } from '../wire/mpa.js';
import { note, reject, type Violation } from '../wire/violation.js';
import { DdpStream } from './ddp-stream.js';
import { STATE_COST, StateMeter } from './meter.js';
import type { ConnectionSummary } from './model.js';
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
}

type State = 'request' | 'reply' | 'fpdu' | 'not-mpa' | 'rejected';

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

  constructor(
    private readonly rec: Recorder,
    private readonly id: string,
    private readonly initiator: string,
    private readonly responder: string,
    private readonly options: MpaTcpOptions = {},
  ) {
    this.meter = options.meter ?? new StateMeter();
  }

  private dirLabel(from: string): string {
    return from === this.initiator ? `${this.initiator} → ${this.responder}` : `${this.responder} → ${this.initiator}`;
  }

  /** In-order octets from `from` (an "address:port"). */
  data(frame: number, from: string, bytes: Uint8Array): void {
    if (this.state === 'not-mpa') return;
    const isInit = from === this.initiator;
    if (this.state === 'fpdu') {
      this.fpduData(frame, from, bytes);
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
    if (from === this.responder && this.firstInitiatorFpduFrame === undefined && !this.early.has(from)) {
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
    for (const [who, r] of this.readers) {
      const v = r.end();
      if (v.length > 0) this.rec.event(this.conn, frame, this.dirLabel(who), 'stream', `end of ${what}`, v);
    }
    this.ddp?.end(frame, closed);
  }

  private notMpa(): void {
    this.state = 'not-mpa';
    this.dropPending();
  }

  get isMpa(): boolean {
    return this.conn !== undefined;
  }
}
