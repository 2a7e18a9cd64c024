/**
 * `rddp dissect`: reads a capture and decodes every iWARP connection in it — MPA over TCP (reassembled
 * in both directions from the MPA Request on), DDP over SCTP (raw or UDP-encapsulated) and the UDP LLP —
 * into per-frame events, per-connection summaries and findings, each finding with its clause.
 */
import { type Capture, readCapture, readCaptureBytes } from '../pcap/read.js';
import { note } from '../wire/violation.js';
import type { DissectReport } from './model.js';
import { MpaTcpConnection, type MpaTcpOptions } from './mpa-tcp.js';
import { decodePacket } from './packet.js';
import { Recorder } from './recorder.js';
import { looksLikeSctp, SCTP_UDP_PORT, SctpAssociation } from './sctp.js';
import { MAX_TCP_OUT_OF_ORDER, MAX_TCP_OUT_OF_ORDER_SEGMENTS, TcpDirection } from './tcp.js';
import { looksLikeUdpLlpRequest, UdpLlpFlow } from './udp-llp.js';

export interface DissectOptions extends MpaTcpOptions {
  /** UDP ports that carry SCTP (RFC 6951); 9899 always does, and any UDP flow whose first datagram is SCTP. */
  readonly sctpUdpPorts?: readonly number[];
  /** UDP ports that carry the UDP LLP; any flow opened by a well-formed REQUEST is recognized without. */
  readonly udpLlpPorts?: readonly number[];
}

interface TcpConn {
  readonly initiator: string;
  readonly responder: string;
  readonly dirs: Map<string, TcpDirection>;
  readonly mpa: MpaTcpConnection;
}

type UdpFlow = { kind: 'sctp'; assoc: SctpAssociation } | { kind: 'llp'; flow: UdpLlpFlow } | { kind: 'other' };

const pairKey = (a: string, b: string, proto: string) => `${proto}:${[a, b].sort().join('|')}`;

/** Decodes a capture already read. */
export function dissectCapture(capture: Capture, options: DissectOptions = {}, file?: string): DissectReport {
  const rec = new Recorder();
  const tcp = new Map<string, TcpConn>();
  const udp = new Map<string, UdpFlow>();
  const sctp = new Map<string, SctpAssociation>();
  const sctpPorts = new Set([SCTP_UDP_PORT, ...(options.sctpUdpPorts ?? [])]);
  const llpPorts = new Set(options.udpLlpPorts ?? []);
  let ids = 0;
  let last = 0;
  for (const pkt of capture.packets) {
    last = pkt.frame;
    const p = decodePacket(pkt.linktype, pkt.data);
    if (!p) continue;
    const l4 = p.l4;
    if (l4.proto === 'tcp') {
      const from = `${p.src}:${l4.srcPort}`;
      const to = `${p.dst}:${l4.dstPort}`;
      const key = pairKey(from, to, 'tcp');
      let c = tcp.get(key);
      if (c && l4.syn && !l4.ackFlag && c.dirs.get(from)) {
        // A new connection on the same ports: finish the old one.
        c.mpa.end(pkt.frame);
        tcp.delete(key);
        c = undefined;
      }
      if (!c) {
        if (l4.rst || (l4.fin && l4.payload.byteLength === 0)) continue;
        const synAck = l4.syn && l4.ackFlag;
        const initiator = synAck ? to : from;
        const responder = synAck ? from : to;
        const dirs = new Map([
          [initiator, new TcpDirection()],
          [responder, new TcpDirection()],
        ]);
        const gap = (who: string) => {
          const d = dirs.get(who);
          return d !== undefined && (d.pending > 0 || d.lost);
        };
        c = {
          initiator,
          responder,
          dirs,
          mpa: new MpaTcpConnection(rec, `tcp-${++ids}`, initiator, responder, { ...options, gap }),
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
      continue;
    }
    if (l4.proto === 'sctp') {
      if (l4.packet.byteLength < 12) continue;
      const sp = (((l4.packet[0] as number) << 8) | (l4.packet[1] as number)) >>> 0;
      const dp = (((l4.packet[2] as number) << 8) | (l4.packet[3] as number)) >>> 0;
      const from = `${p.src}:${sp}`;
      const to = `${p.dst}:${dp}`;
      const key = pairKey(from, to, 'sctp');
      let a = sctp.get(key);
      if (!a) {
        a = new SctpAssociation(rec, `sctp-${++ids}`, false);
        sctp.set(key, a);
      }
      a.packet(pkt.frame, from, to, l4.packet);
      continue;
    }
    // UDP: SCTP over UDP (RFC 6951), the UDP LLP, or neither.
    const from = `${p.src}:${l4.srcPort}`;
    const to = `${p.dst}:${l4.dstPort}`;
    const key = pairKey(from, to, 'udp');
    let f = udp.get(key);
    if (!f) {
      const pl = l4.payload;
      if (sctpPorts.has(l4.srcPort) || sctpPorts.has(l4.dstPort) || looksLikeSctp(pl))
        f = { kind: 'sctp', assoc: new SctpAssociation(rec, `sctp-udp-${++ids}`, true) };
      else if (llpPorts.has(l4.srcPort) || llpPorts.has(l4.dstPort) || looksLikeUdpLlpRequest(pl))
        f = { kind: 'llp', flow: new UdpLlpFlow(rec, `udp-llp-${++ids}`) };
      else f = { kind: 'other' };
      udp.set(key, f);
    }
    if (f.kind === 'sctp') f.assoc.packet(pkt.frame, from, to, l4.payload);
    else if (f.kind === 'llp') f.flow.datagram(pkt.frame, from, to, l4.payload);
  }
  for (const c of tcp.values()) {
    for (const [who, d] of c.dirs)
      if (d.pending > 0)
        c.mpa.streamNote(
          last,
          who,
          note('tcp-gap', 'RFC 793 §3.3', `${d.pending} octets after a gap the capture never filled`),
        );
    c.mpa.end(last);
  }
  for (const a of sctp.values()) a.end(last);
  for (const f of udp.values()) {
    if (f.kind === 'sctp') f.assoc.end(last);
    else if (f.kind === 'llp') f.flow.end(last);
  }
  rec.events.sort((a, b) => a.frame - b.frame);
  return {
    ...(file !== undefined ? { file } : {}),
    format: capture.format,
    packets: capture.packets.length,
    connections: rec.connections,
    events: rec.events,
    findings: rec.findings,
  };
}

export async function dissectFile(path: string, options: DissectOptions = {}): Promise<DissectReport> {
  return dissectCapture(await readCapture(path), options, path);
}

export async function dissectBytes(bytes: Uint8Array, options: DissectOptions = {}): Promise<DissectReport> {
  return dissectCapture(await readCaptureBytes(bytes), options);
}

/** Exit status: 3 when a finding is something a receiver must reject, else 0. */
export function dissectExitStatus(r: DissectReport): 0 | 3 {
  return r.findings.some((f) => f.severity === 'reject') ? 3 : 0;
}
