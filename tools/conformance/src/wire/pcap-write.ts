/**
 * A small pcap writer (classic libpcap format, LINKTYPE_ETHERNET): synthesizes an Ethernet/IPv4/TCP
 * flow — three-way handshake, data in both directions with correct sequence and acknowledgment numbers
 * and checksums, FIN exchange — from a list of (direction, octets), so captures can be written without
 * a capture tool.
 */

const LINKTYPE_ETHERNET = 1;

/** Collects packets into a classic pcap file (microsecond timestamps). */
export class PcapWriter {
  private readonly packets: Uint8Array[] = [];

  constructor(private readonly linktype = LINKTYPE_ETHERNET) {}

  add(frame: Uint8Array, timeMicros: number): void {
    const h = new Uint8Array(16);
    const v = new DataView(h.buffer);
    v.setUint32(0, Math.floor(timeMicros / 1e6), true);
    v.setUint32(4, Math.floor(timeMicros % 1e6), true);
    v.setUint32(8, frame.byteLength, true);
    v.setUint32(12, frame.byteLength, true);
    this.packets.push(h, frame);
  }

  bytes(): Uint8Array {
    const g = new Uint8Array(24);
    const v = new DataView(g.buffer);
    v.setUint32(0, 0xa1b2c3d4, true);
    v.setUint16(4, 2, true);
    v.setUint16(6, 4, true);
    v.setUint32(16, 262144, true);
    v.setUint32(20, this.linktype, true);
    const total = this.packets.reduce((n, p) => n + p.byteLength, 24);
    const out = new Uint8Array(total);
    out.set(g, 0);
    let o = 24;
    for (const p of this.packets) {
      out.set(p, o);
      o += p.byteLength;
    }
    return out;
  }
}

function checksum(...parts: Uint8Array[]): number {
  let sum = 0;
  let odd: number | undefined;
  for (const p of parts)
    for (let i = 0; i < p.byteLength; i++) {
      const b = p[i] as number;
      if (odd === undefined) odd = b;
      else {
        sum += (odd << 8) | b;
        odd = undefined;
      }
    }
  if (odd !== undefined) sum += odd << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

function ipv4(
  src: readonly number[],
  dst: readonly number[],
  proto: number,
  payload: Uint8Array,
  id: number,
): Uint8Array {
  const ip = new Uint8Array(20 + payload.byteLength);
  const v = new DataView(ip.buffer);
  ip[0] = 0x45;
  v.setUint16(2, ip.byteLength);
  v.setUint16(4, id & 0xffff);
  v.setUint16(6, 0x4000);
  ip[8] = 64;
  ip[9] = proto;
  ip.set(src, 12);
  ip.set(dst, 16);
  v.setUint16(10, checksum(ip.subarray(0, 20)));
  ip.set(payload, 20);
  return ip;
}

function ethernet(ethertype: number, payload: Uint8Array): Uint8Array {
  const f = new Uint8Array(14 + payload.byteLength);
  f.set([0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1], 0);
  f[12] = ethertype >>> 8;
  f[13] = ethertype & 0xff;
  f.set(payload, 14);
  return f;
}

export const TCP_FIN = 0x01;
export const TCP_SYN = 0x02;
export const TCP_PSH = 0x08;
export const TCP_ACK = 0x10;

export interface TcpSegmentFields {
  readonly srcIp: readonly number[];
  readonly dstIp: readonly number[];
  readonly srcPort: number;
  readonly dstPort: number;
  readonly seq: number;
  readonly ack: number;
  readonly flags: number;
  readonly payload?: Uint8Array;
  readonly ipId?: number;
}

/** One Ethernet/IPv4/TCP frame with correct IP and TCP checksums. */
export function tcpFrame(s: TcpSegmentFields): Uint8Array {
  const payload = s.payload ?? new Uint8Array(0);
  const tcp = new Uint8Array(20 + payload.byteLength);
  const v = new DataView(tcp.buffer);
  v.setUint16(0, s.srcPort);
  v.setUint16(2, s.dstPort);
  v.setUint32(4, s.seq >>> 0);
  v.setUint32(8, s.ack >>> 0);
  tcp[12] = 5 << 4;
  tcp[13] = s.flags;
  v.setUint16(14, 65535);
  tcp.set(payload, 20);
  const pseudo = new Uint8Array(12);
  pseudo.set(s.srcIp, 0);
  pseudo.set(s.dstIp, 4);
  pseudo[9] = 6;
  new DataView(pseudo.buffer).setUint16(10, tcp.byteLength);
  v.setUint16(16, checksum(pseudo, tcp));
  return ethernet(0x0800, ipv4(s.srcIp, s.dstIp, 6, tcp, s.ipId ?? 0));
}

/** One Ethernet/IPv4 frame carrying `payload` as IP protocol `proto` (e.g. 132, SCTP). */
export function ipv4Frame(
  srcIp: readonly number[],
  dstIp: readonly number[],
  proto: number,
  payload: Uint8Array,
): Uint8Array {
  return ethernet(0x0800, ipv4(srcIp, dstIp, proto, payload, 0));
}

/** One Ethernet/IPv4/UDP frame (UDP checksum computed). */
export function udpFrame(s: {
  srcIp: readonly number[];
  dstIp: readonly number[];
  srcPort: number;
  dstPort: number;
  payload: Uint8Array;
}): Uint8Array {
  const udp = new Uint8Array(8 + s.payload.byteLength);
  const v = new DataView(udp.buffer);
  v.setUint16(0, s.srcPort);
  v.setUint16(2, s.dstPort);
  v.setUint16(4, udp.byteLength);
  udp.set(s.payload, 8);
  const pseudo = new Uint8Array(12);
  pseudo.set(s.srcIp, 0);
  pseudo.set(s.dstIp, 4);
  pseudo[9] = 17;
  new DataView(pseudo.buffer).setUint16(10, udp.byteLength);
  v.setUint16(6, checksum(pseudo, udp) || 0xffff);
  return ethernet(0x0800, ipv4(s.srcIp, s.dstIp, 17, udp, 0));
}

export type FlowDirection = 'client' | 'server';

export interface FlowRecord {
  /** Who sends these octets. */
  readonly from: FlowDirection;
  readonly bytes: Uint8Array;
  /** Split into TCP segments of these sizes (the rest in one more); default: one segment (or `mss`-sized). */
  readonly segments?: readonly number[];
}

export interface TcpFlowOptions {
  readonly clientIp?: readonly number[];
  readonly serverIp?: readonly number[];
  readonly clientPort?: number;
  readonly serverPort?: number;
  /** Largest TCP payload per segment (default 65000). */
  readonly mss?: number;
  /** Close with FIN from both sides (default true). */
  readonly close?: boolean;
}

/** A classic pcap of one TCP connection carrying `records` in order. */
export function tcpFlowPcap(records: readonly FlowRecord[], options: TcpFlowOptions = {}): Uint8Array {
  const cIp = options.clientIp ?? [10, 0, 0, 1];
  const sIp = options.serverIp ?? [10, 0, 0, 2];
  const cPort = options.clientPort ?? 40000;
  const sPort = options.serverPort ?? 7174;
  const mss = options.mss ?? 65000;
  const w = new PcapWriter();
  let t = 1_700_000_000_000_000;
  let cSeq = 1000;
  let sSeq = 5000;
  let id = 1;
  const send = (from: FlowDirection, flags: number, payload?: Uint8Array) => {
    const c = from === 'client';
    w.add(
      tcpFrame({
        srcIp: c ? cIp : sIp,
        dstIp: c ? sIp : cIp,
        srcPort: c ? cPort : sPort,
        dstPort: c ? sPort : cPort,
        seq: c ? cSeq : sSeq,
        ack: flags === TCP_SYN ? 0 : c ? sSeq : cSeq,
        flags,
        ipId: id++,
        ...(payload ? { payload } : {}),
      }),
      (t += 100),
    );
    const n = (payload?.byteLength ?? 0) + (flags & (TCP_SYN | TCP_FIN) ? 1 : 0);
    if (c) cSeq = (cSeq + n) >>> 0;
    else sSeq = (sSeq + n) >>> 0;
  };
  send('client', TCP_SYN);
  cSeq = 1001;
  w.add(
    tcpFrame({
      srcIp: sIp,
      dstIp: cIp,
      srcPort: sPort,
      dstPort: cPort,
      seq: 5000,
      ack: cSeq,
      flags: TCP_SYN | TCP_ACK,
    }),
    (t += 100),
  );
  sSeq = 5001;
  send('client', TCP_ACK);
  for (const r of records) {
    const sizes = [...(r.segments ?? [])];
    let off = 0;
    for (const s of sizes) {
      if (off >= r.bytes.byteLength) break;
      send(r.from, TCP_ACK | TCP_PSH, r.bytes.subarray(off, Math.min(off + s, r.bytes.byteLength)));
      off += s;
    }
    while (off < r.bytes.byteLength) {
      const n = Math.min(mss, r.bytes.byteLength - off);
      send(r.from, TCP_ACK | TCP_PSH, r.bytes.subarray(off, off + n));
      off += n;
    }
  }
  if (options.close ?? true) {
    send('client', TCP_FIN | TCP_ACK);
    send('server', TCP_FIN | TCP_ACK);
    send('client', TCP_ACK);
  }
  return w.bytes();
}
