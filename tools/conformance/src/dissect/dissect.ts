/**
 * `rddp dissect`: reads a capture and decodes every iWARP connection in it — MPA over TCP (reassembled
 * in both directions from the MPA Request on), DDP over SCTP (raw or UDP-encapsulated) and the UDP LLP —
 * into per-frame events, per-connection summaries and findings, each finding with its clause.
 * At most `maxConnections` connections, associations and UDP flows are followed at once; one that ends
 * (TCP FIN both ways or RST, SCTP ABORT or SHUTDOWN COMPLETE, UDP LLP ABORT of every stream) frees its place.
 */
import { type Capture, type CapturedPacket, streamCaptureBytes, streamCaptureFile } from '../pcap/read.js';
import { note } from '../wire/violation.js';
import { DEFAULT_MAX_STATE_OCTETS, StateMeter } from './meter.js';
import type { DissectReport } from './model.js';
import { MpaTcpConnection, type MpaTcpOptions } from './mpa-tcp.js';
import { decodePacket } from './packet.js';
import { DEFAULT_MAX_REPORT_ENTRIES, Recorder } from './recorder.js';
import { looksLikeSctp, SCTP_UDP_PORT, SctpAssociation } from './sctp.js';
import { MAX_TCP_OUT_OF_ORDER, MAX_TCP_OUT_OF_ORDER_SEGMENTS, TcpDirection } from './tcp.js';
import { looksLikeUdpLlpRequest, UdpLlpFlow } from './udp-llp.js';

/** Connections, SCTP associations and UDP flows followed at once unless `maxConnections` says otherwise. */
export const DEFAULT_MAX_CONNECTIONS = 4096;

export interface DissectOptions extends MpaTcpOptions {
  /** Most connections, associations and UDP flows followed at once (default 4096); later ones are not decoded. */
  readonly maxConnections?: number;
  /** UDP ports that carry SCTP (RFC 6951); 9899 always does, and any UDP flow whose first datagram is SCTP. */
  readonly sctpUdpPorts?: readonly number[];
  /** UDP ports that carry the UDP LLP; any flow opened by a well-formed REQUEST is recognized without. */
  readonly udpLlpPorts?: readonly number[];
  /** Events, findings and connection summaries kept in the report, each (default 10 000); the rest are counted. */
  readonly maxEvents?: number;
  /** Most octets read from a capture file (default MAX_CAPTURE_BYTES, 1 GiB). */
  readonly maxCaptureBytes?: number;
  /**
   * Decoding state held at once over every connection, in estimated octets (default 64 MiB): held
   * segments and fragments, open messages, outstanding Reads, DDP Streams, TSNs. A connection whose
   * packet takes the sum over it is given up (its state let go, its later packets skipped), with a note.
   */
  readonly maxStateOctets?: number;
  /**
   * TCP ports whose traffic is decoded as MPA even without the MPA Request and Reply or the heuristic's
   * evidence (`--mpa-port`, Wireshark's "Decode As"); the side on the port is taken as the responder.
   */
  readonly mpaPorts?: readonly number[];
}

/** Ports below this are taken as a server's (the responder's) when no SYN says who connected. */
const EPHEMERAL_PORTS = 32768;

interface TcpConn {
  readonly initiator: string;
  readonly responder: string;
  readonly dirs: Map<string, TcpDirection>;
  readonly mpa: MpaTcpConnection;
  /** Sides whose FIN was seen (RFC 793 §3.5). */
  readonly fin: Set<string>;
  readonly meter: StateMeter;
}

type UdpFlow = { kind: 'sctp'; assoc: SctpAssociation } | { kind: 'llp'; flow: UdpLlpFlow };

/** The first chunk type of an SCTP packet (RFC 4960 §3), -1 when it has none. */
const firstChunk = (p: Uint8Array) => (p.byteLength > 12 ? (p[12] as number) : -1);
const SCTP_INIT = 1;
const SCTP_ABORT = 6;
const SCTP_SHUTDOWN_COMPLETE = 14;

/** Ends a TCP connection: a note per direction still missing octets before held ones, then MPA's end. */
function finishTcp(
  c: TcpConn,
  frame: number,
  closed: boolean,
  unrecognised?: { count: number; firstFrame: number },
): void {
  if (unrecognised && c.mpa.unrecognised) {
    unrecognised.count++;
    if (unrecognised.firstFrame === 0) unrecognised.firstFrame = frame;
  }
  for (const [who, d] of c.dirs)
    if (d.pending > 0)
      c.mpa.streamNote(
        frame,
        who,
        note(
          'tcp-gap',
          'RFC 793 §3.3',
          `${d.pending} octets after a gap the ${closed ? 'connection' : 'capture'} never filled`,
        ),
      );
  c.mpa.end(frame, closed);
}

/** The note on a connection given up at the state bound. */
const stateNote = (max: number) =>
  note(
    'dissect-state-limit',
    'docs/CONFORMANCE.md "Limits"',
    `decoding state over ${max} octets at once (--max-state): the rest of this connection is not decoded`,
  );

const pairKey = (a: string, b: string, proto: string) => `${proto}:${[a, b].sort().join('|')}`;

/**
 * The decoder as a packet sink: `packet()` for each captured packet in order, then `finish()`. Holds
 * only per-connection state (bounded by `maxConnections` and each transport's limits) and the report's
 * bounded lists, never the packets: a capture of any length is decoded in bounded memory.
 */
export class Dissector {
  private readonly rec: Recorder;
  private readonly tcp = new Map<string, TcpConn>();
  private readonly udp = new Map<string, UdpFlow>();
  private readonly sctp = new Map<string, SctpAssociation>();
  private readonly sctpPorts: Set<number>;
  private readonly llpPorts: Set<number>;
  private readonly maxConnections: number;
  // Flows refused at the limit, remembered (a bounded number of them) so that none is picked up half-way
  // once a place frees; packets of those not remembered are still counted.
  private readonly refused = new Set<string>();
  private readonly maxRefused: number;
  private readonly over = { flows: 0, packets: 0, firstFrame: 0, forgot: false };
  /** Estimated octets of decoding state held now (the sum of the flows' meters), and its bound. */
  private state = 0;
  private readonly maxState: number;
  /** Flows given up at the state bound (a bounded number remembered), so none is picked up half-way. */
  private readonly starved = new Set<string>();
  private readonly starve = { flows: 0, packets: 0, firstFrame: 0, forgot: false };
  private ids = 0;
  private last = 0;
  /** TCP connections whose start was not captured and in which no MPA was recognised (for a hint). */
  private unrecognised = { count: 0, firstFrame: 0 };
  /** Packets seen. */
  packets = 0;

  constructor(private readonly options: DissectOptions = {}) {
    this.rec = new Recorder(options.maxEvents ?? DEFAULT_MAX_REPORT_ENTRIES);
    this.sctpPorts = new Set([SCTP_UDP_PORT, ...(options.sctpUdpPorts ?? [])]);
    this.llpPorts = new Set(options.udpLlpPorts ?? []);
    this.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    this.maxRefused = Math.max(this.maxConnections, DEFAULT_MAX_CONNECTIONS);
    this.maxState = options.maxStateOctets ?? DEFAULT_MAX_STATE_OCTETS;
  }

  /** Adds what `m` holds now to the sum; whether the sum is over the bound. */
  private overState(m: StateMeter): boolean {
    this.state += m.cost - m.counted;
    m.counted = m.cost;
    return this.state > this.maxState;
  }

  /** A flow is let go: what its meter held leaves the sum. */
  private release(m: StateMeter): void {
    this.state -= m.counted;
    m.counted = 0;
  }

  /** Whether packets of `key` are skipped, the flow having been given up at the state bound. */
  private starving(key: string, opening: boolean): boolean {
    if (!this.starved.has(key)) return false;
    if (opening) {
      this.starved.delete(key);
      return false;
    }
    this.starve.packets++;
    return true;
  }

  /** Gives up a flow at the state bound: its later packets are skipped (until it opens again). */
  private starveFlow(key: string, frame: number, m: StateMeter): void {
    this.release(m);
    if (this.starve.firstFrame === 0) this.starve.firstFrame = frame;
    this.starve.flows++;
    if (this.starved.size < this.maxRefused) this.starved.add(key);
    else this.starve.forgot = true;
  }

  /** Decoding state held now, in estimated octets (the sum bounded by `maxStateOctets`). */
  get stateOctets(): number {
    return this.state;
  }

  /** Whether a flow not followed yet may be; `opening`: its first packet (SYN, INIT, REQUEST). */
  private admit(key: string, frame: number, opening: boolean): boolean {
    const refused = this.refused;
    const over = this.over;
    const known = refused.has(key);
    if (known && !opening) {
      over.packets++;
      return false;
    }
    if (this.tcp.size + this.sctp.size + this.udp.size < this.maxConnections) {
      refused.delete(key);
      return true;
    }
    over.packets++;
    if (over.firstFrame === 0) over.firstFrame = frame;
    if (known) return false; // its opening again (a retransmitted SYN or INIT): counted already
    if (refused.size < this.maxRefused) {
      refused.add(key);
      over.flows++;
    } else over.forgot = true;
    return false;
  }

  /** One captured packet (in capture order). */
  packet(pkt: CapturedPacket): void {
    this.packets++;
    this.last = pkt.frame;
    const p = decodePacket(pkt.linktype, pkt.data);
    if (!p) return;
    const l4 = p.l4;
    const options = this.options;
    const rec = this.rec;
    const tcp = this.tcp;
    const udp = this.udp;
    const sctp = this.sctp;
    if (l4.proto === 'tcp') {
      const from = `${p.src}:${l4.srcPort}`;
      const to = `${p.dst}:${l4.dstPort}`;
      const key = pairKey(from, to, 'tcp');
      let c = tcp.get(key);
      if (c && l4.syn && !l4.ackFlag && c.dirs.get(from)) {
        // A new connection on the same ports: finish the old one.
        finishTcp(c, pkt.frame, true, this.unrecognised);
        tcp.delete(key);
        this.release(c.meter);
        c = undefined;
      }
      if (!c) {
        // Nothing to decode in a reset or an empty segment of a connection not followed.
        if (l4.rst || (!l4.syn && l4.payload.byteLength === 0)) return;
        if (this.starving(key, l4.syn && !l4.ackFlag)) return;
        if (!this.admit(key, pkt.frame, l4.syn && !l4.ackFlag)) return;
        const meter = new StateMeter();
        const synAck = l4.syn && l4.ackFlag;
        const lateStart = !l4.syn;
        const mpaPorts = options.mpaPorts ?? [];
        const decodeAs = mpaPorts.includes(l4.srcPort) || mpaPorts.includes(l4.dstPort);
        // Without a SYN, who connected is not seen: the side on --mpa-port, else a port below the ephemeral
        // range, is taken as the responder (an MPA Reply, when captured, says for sure).
        let swap = synAck;
        let rolesFrom: string | undefined;
        if (lateStart) {
          if (decodeAs && mpaPorts.includes(l4.dstPort) !== mpaPorts.includes(l4.srcPort)) {
            swap = mpaPorts.includes(l4.srcPort);
            rolesFrom = `roles inferred from --mpa-port (${swap ? from : to} is the responder)`;
          } else if (l4.srcPort < EPHEMERAL_PORTS !== l4.dstPort < EPHEMERAL_PORTS) {
            swap = l4.srcPort < EPHEMERAL_PORTS;
            rolesFrom = `roles inferred from the ports (${swap ? from : to}, below ${EPHEMERAL_PORTS}, is the responder)`;
          }
        }
        const initiator = swap ? to : from;
        const responder = swap ? from : to;
        const dirs = new Map([
          [initiator, new TcpDirection(meter)],
          [responder, new TcpDirection(meter)],
        ]);
        const gap = (who: string) => {
          const d = dirs.get(who);
          return d !== undefined && (d.pending > 0 || d.lost);
        };
        c = {
          initiator,
          responder,
          dirs,
          mpa: new MpaTcpConnection(rec, `tcp-${++this.ids}`, initiator, responder, {
            ...options,
            gap,
            meter,
            lateStart,
            decodeAs,
            ...(rolesFrom !== undefined ? { rolesFrom } : {}),
          }),
          fin: new Set(),
          meter,
        };
        tcp.set(key, c);
      }
      const dir = c.dirs.get(from) as TcpDirection;
      if (l4.syn) dir.syn(l4.seq);
      const wasLost = dir.lost;
      for (const d of dir.push(pkt.frame, l4.syn ? (l4.seq + 1) >>> 0 : l4.seq, l4.payload))
        c.mpa.data(d.frame, from, d.bytes);
      if (dir.lost && !wasLost)
        c.mpa.streamNote(
          pkt.frame,
          from,
          note(
            'tcp-gap',
            'RFC 793 §3.3',
            `more than ${MAX_TCP_OUT_OF_ORDER} octets or ${MAX_TCP_OUT_OF_ORDER_SEGMENTS} segments after a gap: the rest of this direction is not decoded`,
          ),
        );
      if (this.overState(c.meter)) {
        c.mpa.streamNote(pkt.frame, from, stateNote(this.maxState));
        tcp.delete(key);
        this.starveFlow(key, pkt.frame, c.meter);
        return;
      }
      // RFC 793 §3.5: a reset ends the connection; so do FINs both ways once no octet before them is missing.
      if (l4.fin) c.fin.add(from);
      const settled = [...c.dirs.values()].every((d) => d.pending === 0);
      if (l4.rst || (c.fin.size === 2 && settled)) {
        finishTcp(c, pkt.frame, true, this.unrecognised);
        tcp.delete(key);
        this.release(c.meter);
      }
      return;
    }
    if (l4.proto === 'sctp') {
      if (l4.packet.byteLength < 12) return;
      const sp = (((l4.packet[0] as number) << 8) | (l4.packet[1] as number)) >>> 0;
      const dp = (((l4.packet[2] as number) << 8) | (l4.packet[3] as number)) >>> 0;
      const from = `${p.src}:${sp}`;
      const to = `${p.dst}:${dp}`;
      const key = pairKey(from, to, 'sctp');
      let a = sctp.get(key);
      if (!a) {
        const chunk = firstChunk(l4.packet);
        // The last packet of an association already ended (or never seen) starts none.
        if (chunk === SCTP_ABORT || chunk === SCTP_SHUTDOWN_COMPLETE) return;
        if (this.starving(key, chunk === SCTP_INIT)) return;
        if (!this.admit(key, pkt.frame, chunk === SCTP_INIT)) return;
        a = new SctpAssociation(rec, `sctp-${++this.ids}`, false);
        sctp.set(key, a);
      }
      a.packet(pkt.frame, from, to, l4.packet);
      if (this.overState(a.meter)) {
        sctp.delete(key);
        this.starveFlow(key, pkt.frame, a.meter);
      } else if (a.closed) {
        a.end(pkt.frame, true);
        sctp.delete(key);
        this.release(a.meter);
      }
      return;
    }
    // UDP: SCTP over UDP (RFC 6951), the UDP LLP, or neither (nothing kept for those).
    const from = `${p.src}:${l4.srcPort}`;
    const to = `${p.dst}:${l4.dstPort}`;
    const key = pairKey(from, to, 'udp');
    let f = udp.get(key);
    if (!f) {
      const pl = l4.payload;
      if (this.sctpPorts.has(l4.srcPort) || this.sctpPorts.has(l4.dstPort) || looksLikeSctp(pl)) {
        const chunk = firstChunk(pl);
        if (chunk === SCTP_ABORT || chunk === SCTP_SHUTDOWN_COMPLETE) return;
        if (this.starving(key, chunk === SCTP_INIT)) return;
        if (!this.admit(key, pkt.frame, chunk === SCTP_INIT)) return;
        f = { kind: 'sctp', assoc: new SctpAssociation(rec, `sctp-udp-${++this.ids}`, true) };
      } else if (this.llpPorts.has(l4.srcPort) || this.llpPorts.has(l4.dstPort) || looksLikeUdpLlpRequest(pl)) {
        if (this.starving(key, looksLikeUdpLlpRequest(pl))) return;
        if (!this.admit(key, pkt.frame, looksLikeUdpLlpRequest(pl))) return;
        f = { kind: 'llp', flow: new UdpLlpFlow(rec, `udp-llp-${++this.ids}`) };
      } else return;
      udp.set(key, f);
    }
    const meter = f.kind === 'sctp' ? f.assoc.meter : f.flow.meter;
    if (f.kind === 'sctp') f.assoc.packet(pkt.frame, from, to, l4.payload);
    else f.flow.datagram(pkt.frame, from, to, l4.payload);
    if (this.overState(meter)) {
      udp.delete(key);
      this.starveFlow(key, pkt.frame, meter);
    } else if (f.kind === 'sctp' ? f.assoc.closed : f.flow.closed) {
      if (f.kind === 'sctp') f.assoc.end(pkt.frame, true);
      else f.flow.end(pkt.frame, true);
      udp.delete(key);
      this.release(meter);
    }
  }

  /** The end of the capture: what is still open is ended, and the report. */
  finish(format: 'pcap' | 'pcapng', file?: string): DissectReport {
    const rec = this.rec;
    const over = this.over;
    const maxConnections = this.maxConnections;
    const last = this.last;
    for (const c of this.tcp.values()) finishTcp(c, last, false, this.unrecognised);
    for (const a of this.sctp.values()) a.end(last);
    for (const f of this.udp.values()) {
      if (f.kind === 'sctp') f.assoc.end(last);
      else f.flow.end(last);
    }
    this.tcp.clear();
    this.sctp.clear();
    this.udp.clear();
    if (over.packets > 0)
      rec.captureEvent(
        over.firstFrame,
        `connections beyond ${maxConnections} at once not decoded: ${over.flows}${over.forgot ? ' or more' : ''}`,
        [
          note(
            'dissect-connection-limit',
            'docs/CONFORMANCE.md "Limits"',
            `more than ${maxConnections} connections, associations and UDP flows at once (--max-connections): ${over.flows}${over.forgot ? ' or more' : ''} not decoded, ${over.packets} packets skipped`,
          ),
        ],
      );
    const un = this.unrecognised;
    if (un.count > 0)
      rec.captureEvent(
        un.firstFrame,
        `${un.count} TCP connection(s) captured without their start and no FPDU recognised in them: if one carries MPA, try --mpa-port <port>`,
        [
          note(
            'mpa-not-recognised',
            'RFC 5044 §4.1',
            `${un.count} TCP connection(s) without their SYN or MPA Request/Reply in which no FPDU (ULPDU_Length, pad, CRC32c, DDP header) was found`,
          ),
        ],
      );
    const st = this.starve;
    if (st.flows > 0)
      rec.captureEvent(
        st.firstFrame,
        `decoding state over ${this.maxState} octets: ${st.flows} connection(s) given up`,
        [
          note(
            'dissect-state-limit',
            'docs/CONFORMANCE.md "Limits"',
            `decoding state (held segments, reassembly, open messages, streams) over ${this.maxState} octets at once (--max-state): ${st.flows}${st.forgot ? ' or more' : ''} connection(s) given up, ${st.packets} later packets skipped`,
          ),
        ],
      );
    rec.events.sort((a, b) => a.frame - b.frame);
    const o = rec.omitted;
    const cut = o.events + o.findings + o.connections > 0;
    return {
      ...(file !== undefined ? { file } : {}),
      format,
      packets: this.packets,
      connections: rec.connections,
      events: rec.events,
      findings: rec.findings,
      ...(cut ? { omitted: o } : {}),
    };
  }
}

/** Decodes a capture already read. */
export function dissectCapture(capture: Capture, options: DissectOptions = {}, file?: string): DissectReport {
  const d = new Dissector(options);
  for (const pkt of capture.packets) d.packet(pkt);
  return d.finish(capture.format, file);
}

/**
 * Reads and decodes a capture file as a stream (CAPTURE_READ_CHUNK at a time, each packet decoded as it
 * is read): a regular file longer than `maxCaptureBytes` (default MAX_CAPTURE_BYTES) is refused before
 * reading, a FIFO or device is cut there (CaptureFormatError either way).
 */
export async function dissectFile(path: string, options: DissectOptions = {}): Promise<DissectReport> {
  const d = new Dissector(options);
  const { format } = await streamCaptureFile(path, (p) => d.packet(p), {
    ...(options.maxCaptureBytes !== undefined ? { maxBytes: options.maxCaptureBytes } : {}),
  });
  return d.finish(format, path);
}

export async function dissectBytes(bytes: Uint8Array, options: DissectOptions = {}): Promise<DissectReport> {
  const d = new Dissector(options);
  const { format } = streamCaptureBytes(bytes, (p) => d.packet(p));
  return d.finish(format);
}

/** Findings a receiver must reject, counting those past the report's bound. */
export function rejectCount(r: DissectReport): number {
  return r.findings.filter((f) => f.severity === 'reject').length + (r.omitted?.findingsBySeverity.reject ?? 0);
}

/** Exit status: 3 when a finding is something a receiver must reject, else 0. */
export function dissectExitStatus(r: DissectReport): 0 | 3 {
  return rejectCount(r) > 0 ? 3 : 0;
}
