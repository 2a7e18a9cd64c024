/**
 * SCTP associations carrying DDP (RFC 5043), raw (IP protocol 132) or UDP-encapsulated (RFC 6951):
 * the common header and its CRC32c (RFC 4960 §6.8), INIT/INIT ACK with the Adaptation Layer
 * Indication for DDP (RFC 5043 §5.1, RFC 5061 §4.2.6), DATA chunks reassembled into user messages
 * (RFC 4960 §6.9) — PPID 16 a DDP Segment, PPID 17 a DDP Stream Session Control message (RFC 5043
 * §5.2) — and the association's end (ABORT, SHUTDOWN).
 */
import { crc32c } from '../wire/crc.js';
import { note, reject, type Violation, warn } from '../wire/violation.js';
import { DdpStream, MAX_DDP_STREAMS } from './ddp-stream.js';
import { STATE_COST, StateMeter } from './meter.js';
import type { ConnectionSummary } from './model.js';
import type { Recorder } from './recorder.js';

export const PPID_DDP_SEGMENT = 16;
export const PPID_DDP_SESSION_CONTROL = 17;
/** RFC 6951: the IANA-assigned UDP port for SCTP over UDP. */
export const SCTP_UDP_PORT = 9899;
/** Most DATA octets held for user messages not yet complete, per association direction. */
export const MAX_SCTP_REASSEMBLY = 16 << 20;
/** Fragments held per association direction. */
export const MAX_SCTP_FRAGMENTS = 1 << 16;
/** TSNs remembered per direction to drop retransmissions. */
export const MAX_SCTP_TSNS = 1 << 16;

/** SCTP chunk types by name (RFC 9260 §3.2, RFC 8260, RFC 3758, RFC 5061, RFC 6525, RFC 4820). */
export const SCTP_CHUNK_NAMES: Readonly<Record<number, string>> = {
  0: 'DATA',
  1: 'INIT',
  2: 'INIT ACK',
  3: 'SACK',
  4: 'HEARTBEAT',
  5: 'HEARTBEAT ACK',
  6: 'ABORT',
  7: 'SHUTDOWN',
  8: 'SHUTDOWN ACK',
  9: 'ERROR',
  10: 'COOKIE ECHO',
  11: 'COOKIE ACK',
  14: 'SHUTDOWN COMPLETE',
  15: 'AUTH',
  16: 'NR-SACK',
  64: 'I-DATA',
  128: 'ASCONF ACK',
  130: 'RE-CONFIG',
  132: 'PAD',
  192: 'FORWARD TSN',
  193: 'ASCONF',
  194: 'I-FORWARD-TSN',
};

/** DDP Stream Session Control function codes as this project's SCTP LLP sends them (RFC 5043 §5.2.2). */
const SESSION_FUNCTIONS: Readonly<Record<number, string>> = {
  1: 'Session Initiate',
  2: 'Session Accept',
  3: 'Session Reject',
  4: 'Session Terminate',
};

const u16 = (b: Uint8Array, o: number) => (((b[o] as number) << 8) | (b[o + 1] as number)) >>> 0;
const u32 = (b: Uint8Array, o: number) =>
  (((b[o] as number) << 24) | ((b[o + 1] as number) << 16) | ((b[o + 2] as number) << 8) | (b[o + 3] as number)) >>> 0;

/** Whether `p` carries a correct SCTP CRC32c (RFC 4960 §6.8, the value least significant octet first). */
export function sctpChecksumOk(p: Uint8Array): boolean {
  if (p.byteLength < 12) return false;
  const zeroed = Uint8Array.from(p);
  zeroed.fill(0, 8, 12);
  const c = crc32c(zeroed);
  const field =
    ((p[8] as number) | ((p[9] as number) << 8) | ((p[10] as number) << 16) | ((p[11] as number) << 24)) >>> 0;
  return field === c;
}

/** A plausible SCTP packet: common header, chunks that tile the rest, correct CRC32c. */
export function looksLikeSctp(p: Uint8Array): boolean {
  if (p.byteLength < 16 || !sctpChecksumOk(p)) return false;
  let o = 12;
  while (o + 4 <= p.byteLength) {
    const len = u16(p, o + 2);
    if (len < 4) return false;
    o += (len + 3) & ~3;
  }
  return o >= p.byteLength;
}

interface Fragment {
  readonly frame: number;
  readonly tsn: number;
  readonly sid: number;
  readonly ppid: number;
  readonly begin: boolean;
  readonly end: boolean;
  readonly unordered: boolean;
  readonly data: Uint8Array;
}

class Side {
  readonly seen = new Set<number>();
  /** The TSNs in `seen`, oldest first, as a ring (grown as TSNs come, to MAX_SCTP_TSNS). */
  seenRing = new Float64Array(64);
  seenCount = 0;
  dropped = false;
  readonly fragments = new Map<number, Fragment>();
  held = 0;
  lastTsn: number | undefined;
}

export class SctpAssociation {
  private conn: ConnectionSummary | undefined;
  private readonly sides = new Map<string, Side>();
  private readonly streams = new Map<number, DdpStream>();
  private initiator: string | undefined;
  private responder: string | undefined;
  private adaptation = new Map<string, boolean>();
  /** An ABORT or SHUTDOWN COMPLETE was seen. */
  closed = false;
  private streamsFull = false;

  constructor(
    private readonly rec: Recorder,
    private readonly id: string,
    private readonly udp: boolean,
    /** Where the state this association holds is counted (DissectOptions.maxStateOctets). */
    readonly meter: StateMeter = new StateMeter(),
  ) {}

  private summary(from: string, to: string): ConnectionSummary {
    if (!this.conn) {
      this.initiator ??= from;
      this.responder ??= to;
      this.conn = this.rec.connection(this.id, this.udp ? 'sctp-udp' : 'sctp', this.initiator, this.responder);
      this.conn.setup = `SCTP${this.udp ? ' over UDP (RFC 6951)' : ''}`;
    }
    return this.conn;
  }

  private side(from: string): Side {
    let s = this.sides.get(from);
    if (!s) {
      s = new Side();
      this.sides.set(from, s);
      this.meter.add(STATE_COST.direction);
    }
    return s;
  }

  packet(frame: number, from: string, to: string, p: Uint8Array): void {
    const label = `${from} → ${to}`;
    if (p.byteLength < 12) return;
    let o = 12;
    const first = p.byteLength > 12 ? (p[12] as number) : -1;
    if (first === 1 && !this.conn) {
      this.initiator = from;
      this.responder = to;
    }
    const conn = this.summary(from, to);
    if (!sctpChecksumOk(p)) {
      this.rec.event(conn, frame, label, 'sctp-chunk', 'SCTP packet with a bad checksum (dropped by the receiver)', [
        reject('sctp-checksum', 'RFC 4960 §6.8', 'CRC32c of the SCTP packet does not match'),
      ]);
      return;
    }
    while (o + 4 <= p.byteLength) {
      const type = p[o] as number;
      const flags = p[o + 1] as number;
      const len = u16(p, o + 2);
      if (len < 4 || o + len > p.byteLength) {
        this.rec.event(conn, frame, label, 'sctp-chunk', `malformed chunk (type ${type}, length ${len})`, [
          reject('sctp-chunk-length', 'RFC 4960 §3.2', `chunk length ${len} at offset ${o}`),
        ]);
        return;
      }
      const value = p.subarray(o + 4, o + len);
      this.chunk(conn, frame, from, to, label, type, flags, value);
      o += (len + 3) & ~3;
    }
  }

  private chunk(
    conn: ConnectionSummary,
    frame: number,
    from: string,
    to: string,
    label: string,
    type: number,
    flags: number,
    value: Uint8Array,
  ): void {
    const name = SCTP_CHUNK_NAMES[type] ?? `chunk type ${type}`;
    if (type === 0) {
      if (value.byteLength < 12) {
        this.rec.event(conn, frame, label, 'sctp-chunk', 'short DATA chunk', [
          reject('sctp-data-short', 'RFC 4960 §3.3.1', `DATA chunk of ${value.byteLength + 4} octets`),
        ]);
        return;
      }
      this.data(conn, frame, from, to, label, {
        frame,
        tsn: u32(value, 0),
        sid: u16(value, 4),
        ppid: u32(value, 8),
        begin: (flags & 0x02) !== 0,
        end: (flags & 0x01) !== 0,
        unordered: (flags & 0x04) !== 0,
        data: value.subarray(12),
      });
      return;
    }
    if (type === 1 || type === 2) {
      // INIT / INIT ACK: 16 octets of fixed fields, then parameters (RFC 4960 §3.3.2, §3.3.3).
      let o = 16;
      let code: number | undefined;
      const streamsOut = value.byteLength >= 12 ? u16(value, 8) : 0;
      const streamsIn = value.byteLength >= 12 ? u16(value, 10) : 0;
      while (o + 4 <= value.byteLength) {
        const ptype = u16(value, o);
        const plen = u16(value, o + 2);
        if (plen < 4) break;
        if (ptype === 0xc006 && plen >= 8 && o + 8 <= value.byteLength) code = u32(value, o + 4);
        o += (plen + 3) & ~3;
      }
      const v: Violation[] = [];
      if (code !== 1)
        v.push(
          warn(
            'sctp-adaptation',
            'RFC 5043 §5.1',
            code === undefined
              ? `${name} without the Adaptation Layer Indication for DDP`
              : `${name} announces adaptation code point ${code}, not DDP (1)`,
          ),
        );
      this.adaptation.set(from, code === 1);
      conn.setup = `SCTP${this.udp ? ' over UDP (RFC 6951)' : ''}, DDP adaptation ${[...this.adaptation.values()].every(Boolean) ? 'on' : 'missing'}`;
      this.rec.event(
        conn,
        frame,
        label,
        'sctp-chunk',
        `${name}: ${streamsOut} outbound / ${streamsIn} inbound streams${code === 1 ? ', adaptation DDP' : ''}`,
        v,
      );
      return;
    }
    if (type === 6 || type === 7 || type === 8 || type === 14 || type === 9)
      this.rec.event(conn, frame, label, 'sctp-chunk', name);
    // RFC 4960 §9.1, §9.2: ABORT and SHUTDOWN COMPLETE end the association.
    if (type === 6 || type === 14) this.closed = true;
    else if (type === 64)
      this.rec.event(conn, frame, label, 'sctp-chunk', name, [
        note('sctp-i-data', 'RFC 8260', 'I-DATA chunks are not decoded'),
      ]);
  }

  private data(conn: ConnectionSummary, frame: number, from: string, to: string, label: string, f: Fragment): void {
    const s = this.side(from);
    if (s.seen.has(f.tsn)) return; // retransmission
    s.seen.add(f.tsn);
    const slot = s.seenCount % MAX_SCTP_TSNS;
    if (s.seenCount >= MAX_SCTP_TSNS) s.seen.delete(s.seenRing[slot] as number);
    else {
      this.meter.add(STATE_COST.tsn);
      if (slot === s.seenRing.length) {
        const grown = new Float64Array(Math.min(MAX_SCTP_TSNS, 2 * s.seenRing.length));
        grown.set(s.seenRing);
        s.seenRing = grown;
      }
    }
    s.seenRing[slot] = f.tsn;
    s.seenCount++;
    if (f.begin && f.end) {
      this.message(conn, frame, from, to, label, f, f.data);
      return;
    }
    // A copy of its own: a view would keep the whole captured packet alive.
    const held = { ...f, data: new Uint8Array(f.data) };
    s.fragments.set(f.tsn, held);
    s.held += f.data.byteLength;
    this.meter.add(f.data.byteLength + STATE_COST.segment);
    while ((s.held > MAX_SCTP_REASSEMBLY || s.fragments.size > MAX_SCTP_FRAGMENTS) && s.fragments.size > 0) {
      const [k, old] = s.fragments.entries().next().value as [number, Fragment];
      s.fragments.delete(k);
      s.held -= old.data.byteLength;
      this.meter.add(-(old.data.byteLength + STATE_COST.segment));
      if (!s.dropped) {
        s.dropped = true;
        this.rec.event(conn, frame, label, 'sctp-chunk', 'fragments dropped', [
          note(
            'sctp-reassembly-limit',
            'RFC 4960 §6.9',
            `more than ${MAX_SCTP_REASSEMBLY} octets or ${MAX_SCTP_FRAGMENTS} fragments of incomplete user messages`,
          ),
        ]);
      }
    }
    // A message is complete when its fragments B..E have consecutive TSNs (same stream). A fragment that
    // arrives in TSN order and is not the last completes nothing; otherwise find its run's E, then its B.
    const inOrder = s.lastTsn !== undefined && f.tsn === (s.lastTsn + 1) >>> 0;
    s.lastTsn = f.tsn;
    if (inOrder && !f.end) return;
    let e: Fragment = held;
    while (!e.end) {
      const next = s.fragments.get((e.tsn + 1) >>> 0);
      if (!next || next.sid !== f.sid || next.begin) return;
      e = next;
    }
    const parts: Fragment[] = [e];
    while (!(parts[0] as Fragment).begin) {
      const prev = s.fragments.get(((parts[0] as Fragment).tsn - 1) >>> 0);
      if (!prev || prev.sid !== f.sid || prev.end) return;
      parts.unshift(prev);
    }
    const total = parts.reduce((n, p) => n + p.data.byteLength, 0);
    const msg = new Uint8Array(total);
    let o = 0;
    for (const p of parts) {
      msg.set(p.data, o);
      o += p.data.byteLength;
      s.fragments.delete(p.tsn);
      s.held -= p.data.byteLength;
      this.meter.add(-(p.data.byteLength + STATE_COST.segment));
    }
    this.message(conn, frame, from, to, label, parts[0] as Fragment, msg);
  }

  /** The DDP Stream on SCTP stream `sid`; undefined past MAX_DDP_STREAMS (noted once). */
  private stream(conn: ConnectionSummary, sid: number, frame: number, label: string): DdpStream | undefined {
    let d = this.streams.get(sid);
    if (!d) {
      if (this.streams.size >= MAX_DDP_STREAMS) {
        if (!this.streamsFull) {
          this.streamsFull = true;
          this.rec.event(conn, frame, label, 'sctp-chunk', `SCTP stream ${sid}: not decoded`, [
            note(
              'sctp-stream-limit',
              'RFC 5043 §5.2',
              `DDP Segments on more than ${MAX_DDP_STREAMS} SCTP streams: those on further streams are not decoded`,
            ),
          ]);
        }
        return undefined;
      }
      d = new DdpStream(this.rec, conn, { ordered: true, name: `SCTP stream ${sid}`, meter: this.meter });
      this.streams.set(sid, d);
    }
    return d;
  }

  private message(
    conn: ConnectionSummary,
    frame: number,
    _from: string,
    _to: string,
    label: string,
    f: Fragment,
    msg: Uint8Array,
  ): void {
    const v: Violation[] = [];
    if (f.unordered) v.push(warn('sctp-unordered', 'RFC 5043 §5.2', 'DDP over an unordered SCTP message (U bit set)'));
    if (f.ppid === PPID_DDP_SEGMENT) {
      conn.segments++;
      this.stream(conn, f.sid, frame, label)?.segment(frame, label, msg, v, `SCTP stream ${f.sid} PPID 16 · `);
      return;
    }
    if (f.ppid === PPID_DDP_SESSION_CONTROL) {
      if (msg.byteLength < 4) {
        v.push(
          reject('sctp-session-control', 'RFC 5043 §5.2.2', `session control message of ${msg.byteLength} octets`),
        );
        this.rec.event(conn, frame, label, 'session-control', 'short DDP Stream Session Control message', v);
        return;
      }
      const fn = u16(msg, 0);
      const pdLength = u16(msg, 2);
      if (pdLength !== msg.byteLength - 4)
        v.push(
          reject(
            'sctp-session-control',
            'RFC 5043 §5.2.2',
            `Private Data Length ${pdLength}, ${msg.byteLength - 4} octets follow`,
          ),
        );
      const name = SESSION_FUNCTIONS[fn];
      if (!name) v.push(warn('sctp-session-function', 'RFC 5043 §5.2.2', `unknown session control function ${fn}`));
      this.rec.event(
        conn,
        frame,
        label,
        'session-control',
        `SCTP stream ${f.sid} PPID 17 · ${name ?? `function ${fn}`}, ${pdLength} octets of private data`,
        v,
        { sid: f.sid, function: fn, name, privateData: msg.subarray(4) },
      );
      if (fn === 4)
        this.rec.terminate(conn, { frame, direction: label, name: `Session Terminate (SCTP stream ${f.sid})` });
      return;
    }
    this.rec.event(conn, frame, label, 'sctp-chunk', `SCTP stream ${f.sid}: user message with PPID ${f.ppid}`, [
      note('sctp-ppid', 'RFC 5043 §5.2', `PPID ${f.ppid} is neither 16 (DDP Segment) nor 17 (session control)`),
    ]);
  }

  /** The capture ended, or (`closed`) the association did. */
  end(frame: number, closed = false): void {
    for (const d of this.streams.values()) d.end(frame, closed);
  }
}
