/**
 * The project's UDP LLP (docs/UDP-LLP.md "Wire format"): a 16-octet header — Ver (4 bits) | Type (4) |
 * C | Reserved (7) | Stream id (16) | Destination and Source connection ids (32 each) | Sequence number
 * (32) — a body, and with C = 1 a CRC32c of everything before it (most significant octet first). DATA
 * carries one ULPDU on one stream; the LLP may lose or reorder datagrams, so MSN order is not checked.
 */
import { crc32c } from '../wire/crc.js';
import { note, reject, type Violation } from '../wire/violation.js';
import { DdpStream, MAX_DDP_STREAMS } from './ddp-stream.js';
import { StateMeter } from './meter.js';
import type { ConnectionSummary } from './model.js';
import type { Recorder } from './recorder.js';

const TYPES: Readonly<Record<number, string>> = {
  1: 'REQUEST',
  2: 'ACCEPT',
  3: 'REJECT',
  4: 'DATA',
  5: 'ACK',
  6: 'PROBE',
  7: 'FIN',
  8: 'FIN_ACK',
  9: 'ABORT',
  10: 'COOKIE',
  11: 'COOKIE_ECHO',
  12: 'KEEPALIVE',
};

const ABORT_CODES: Readonly<Record<number, string>> = {
  0: 'user',
  1: 'unknown connection',
  2: 'not listening',
  3: 'protocol',
  4: 'stale cookie',
  5: 'resource limit',
  6: 'idle timeout',
};

const HEADER = 16;
const SETUP = 12;
const COOKIE = 16;
const CLAUSE = 'UDP LLP wire format (docs/UDP-LLP.md)';
/** Stream id of an ABORT that ends every stream of the connection. */
const ALL_STREAMS = 65535;

const u16 = (b: Uint8Array, o: number) => (((b[o] as number) << 8) | (b[o + 1] as number)) >>> 0;
const u32 = (b: Uint8Array, o: number) =>
  (((b[o] as number) << 24) | ((b[o + 1] as number) << 16) | ((b[o + 2] as number) << 8) | (b[o + 3] as number)) >>> 0;

export interface UdpLlpHeader {
  readonly type: number;
  readonly crc: boolean;
  readonly streamId: number;
  readonly dst: number;
  readonly src: number;
  readonly seq: number;
}

/** The header of a UDP LLP datagram, or undefined when the octets are not one (version, type). */
export function udpLlpHeader(d: Uint8Array): UdpLlpHeader | undefined {
  if (d.byteLength < HEADER) return undefined;
  if ((d[0] as number) >>> 4 !== 1) return undefined;
  const type = (d[0] as number) & 0xf;
  if (!TYPES[type]) return undefined;
  return {
    type,
    crc: ((d[1] as number) & 0x80) !== 0,
    streamId: u16(d, 2),
    dst: u32(d, 4),
    src: u32(d, 8),
    seq: u32(d, 12),
  };
}

/** A REQUEST whose setup body parses: how a UDP LLP flow is recognized without a port number. */
export function looksLikeUdpLlpRequest(d: Uint8Array): boolean {
  const h = udpLlpHeader(d);
  if (!h || h.type !== 1) return false;
  const end = d.byteLength - (h.crc ? 4 : 0);
  if (h.crc && crc32c(d.subarray(0, end)) !== u32(d, end)) return false;
  const body = d.subarray(HEADER, end);
  return body.byteLength >= SETUP && u16(body, 10) === body.byteLength - SETUP;
}

function setupText(body: Uint8Array): string | undefined {
  if (body.byteLength < SETUP || u16(body, 10) !== body.byteLength - SETUP) return undefined;
  return `streams ${u16(body, 0)}, datagram size ${u16(body, 2)}, window ${u32(body, 4)}, CRC ${((body[8] as number) & 0x80) !== 0 ? 'on' : 'off'}, ${u16(body, 10)} octets of private data`;
}

export class UdpLlpFlow {
  private conn: ConnectionSummary | undefined;
  private readonly streams = new Map<number, DdpStream>();
  /** An ABORT of every stream (Stream id 65535) was seen: the connection is over. */
  closed = false;
  private streamsFull = false;

  constructor(
    private readonly rec: Recorder,
    private readonly id: string,
    /** Where the state this flow holds is counted (DissectOptions.maxStateOctets). */
    readonly meter: StateMeter = new StateMeter(),
  ) {}

  datagram(frame: number, from: string, to: string, d: Uint8Array): void {
    const label = `${from} → ${to}`;
    const h = udpLlpHeader(d);
    if (!this.conn) this.conn = this.rec.connection(this.id, 'udp-llp', from, to);
    const conn = this.conn;
    if (!h) {
      this.rec.event(conn, frame, label, 'udp-llp', 'not a UDP LLP datagram', [
        reject('udp-llp-header', CLAUSE, 'wrong version or type (dropped by the receiver)'),
      ]);
      return;
    }
    const name = TYPES[h.type] as string;
    const v: Violation[] = [];
    let end = d.byteLength;
    if (h.crc) {
      end -= 4;
      if (end < HEADER || crc32c(d.subarray(0, end)) !== u32(d, end)) {
        conn.crc.bad++;
        v.push(reject('udp-llp-crc', CLAUSE, 'CRC32c trailer does not match (dropped by the receiver)'));
        this.rec.event(conn, frame, label, 'udp-llp', `${name} with a bad CRC`, v);
        return;
      }
      conn.crc.good++;
    } else conn.crc.off++;
    const body = d.subarray(HEADER, end);
    const head = `UDP LLP ${name} stream ${h.streamId} seq ${h.seq} (${h.src.toString(16)} → ${h.dst.toString(16)})`;
    if (h.type === 4) {
      conn.segments++;
      let s = this.streams.get(h.streamId);
      if (!s && this.streams.size >= MAX_DDP_STREAMS) {
        if (this.streamsFull) return;
        this.streamsFull = true;
        v.push(
          note(
            'udp-llp-stream-limit',
            CLAUSE,
            `DATA on more than ${MAX_DDP_STREAMS} streams: those on further streams are not decoded`,
          ),
        );
        this.rec.event(conn, frame, label, 'udp-llp', `${head}: not decoded`, v);
        return;
      }
      if (!s) {
        s = new DdpStream(this.rec, conn, {
          ordered: false,
          name: `UDP LLP stream ${h.streamId}`,
          meter: this.meter,
        });
        this.streams.set(h.streamId, s);
      }
      s.segment(frame, label, body, v, `${head} · `);
      return;
    }
    let text = head;
    if (h.type === 1 || h.type === 2 || h.type === 3) {
      const s = setupText(body);
      if (s) text += `: ${s}`;
      else v.push(reject('udp-llp-setup', CLAUSE, `${name} with a malformed setup body`));
      if (h.type === 2 && s) conn.setup = `UDP LLP: ${s}`;
    } else if (h.type === 11) {
      const s = setupText(body.subarray(COOKIE));
      if (s) text += `: ${s}`;
      else v.push(reject('udp-llp-setup', CLAUSE, 'COOKIE_ECHO with a malformed setup body'));
    } else if (h.type === 9) {
      const code = body.byteLength >= 2 ? u16(body, 0) : 0;
      text += `: ${ABORT_CODES[code] ?? `code ${code}`}`;
      this.rec.terminate(conn, { frame, direction: label, name: `ABORT (${ABORT_CODES[code] ?? code})` });
      if (h.streamId === ALL_STREAMS) this.closed = true;
    }
    this.rec.event(conn, frame, label, 'udp-llp', text, v);
  }

  /** The capture ended, or (`closed`) the connection did. */
  end(frame: number, closed = false): void {
    for (const s of this.streams.values()) s.end(frame, closed);
  }
}
