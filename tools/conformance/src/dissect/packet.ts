/**
 * Link, network and transport headers of a captured packet: Ethernet (with 802.1Q tags), Linux cooked
 * capture (SLL, SLL2), BSD loopback and raw IP; IPv4 and IPv6; TCP, UDP and SCTP (RFC 4960 common header).
 */

export interface TcpSegment {
  readonly proto: 'tcp';
  readonly srcPort: number;
  readonly dstPort: number;
  readonly seq: number;
  readonly ack: number;
  readonly syn: boolean;
  readonly fin: boolean;
  readonly rst: boolean;
  readonly ackFlag: boolean;
  readonly payload: Uint8Array;
}

export interface UdpDatagram {
  readonly proto: 'udp';
  readonly srcPort: number;
  readonly dstPort: number;
  readonly payload: Uint8Array;
}

export interface SctpRaw {
  readonly proto: 'sctp';
  /** The whole SCTP packet (common header and chunks). */
  readonly packet: Uint8Array;
}

export interface DecodedPacket {
  readonly src: string;
  readonly dst: string;
  readonly l4: TcpSegment | UdpDatagram | SctpRaw;
}

const LINKTYPE_NULL = 0;
const LINKTYPE_ETHERNET = 1;
const LINKTYPE_RAW = 101;
const LINKTYPE_LINUX_SLL = 113;
const LINKTYPE_IPV4 = 228;
const LINKTYPE_IPV6 = 229;
const LINKTYPE_LINUX_SLL2 = 276;

function u16(b: Uint8Array, o: number): number {
  return (((b[o] as number) << 8) | (b[o + 1] as number)) >>> 0;
}

function u32(b: Uint8Array, o: number): number {
  return (
    (((b[o] as number) << 24) | ((b[o + 1] as number) << 16) | ((b[o + 2] as number) << 8) | (b[o + 3] as number)) >>> 0
  );
}

function ipv6Text(b: Uint8Array): string {
  const parts: string[] = [];
  for (let i = 0; i < 16; i += 2) parts.push(u16(b, i).toString(16));
  return parts.join(':').replace(/(^|:)0(:0)+(:|$)/, '::');
}

/** The IP packet inside a link-layer frame, or undefined (not IP). */
function ipOf(linktype: number, d: Uint8Array): Uint8Array | undefined {
  let etherType: number;
  let o: number;
  switch (linktype) {
    case LINKTYPE_ETHERNET:
      if (d.byteLength < 14) return undefined;
      etherType = u16(d, 12);
      o = 14;
      while ((etherType === 0x8100 || etherType === 0x88a8) && d.byteLength >= o + 4) {
        etherType = u16(d, o + 2);
        o += 4;
      }
      break;
    case LINKTYPE_LINUX_SLL:
      if (d.byteLength < 16) return undefined;
      etherType = u16(d, 14);
      o = 16;
      break;
    case LINKTYPE_LINUX_SLL2:
      if (d.byteLength < 20) return undefined;
      etherType = u16(d, 0);
      o = 20;
      break;
    case LINKTYPE_NULL: {
      if (d.byteLength < 4) return undefined;
      const fam = (d[0] as number) === 0 ? u32(d, 0) : (d[0] as number) | ((d[1] as number) << 8);
      etherType = fam === 2 ? 0x0800 : 0x86dd;
      o = 4;
      break;
    }
    case LINKTYPE_RAW:
    case LINKTYPE_IPV4:
    case LINKTYPE_IPV6:
      return d;
    default:
      return undefined;
  }
  if (etherType !== 0x0800 && etherType !== 0x86dd) return undefined;
  return d.subarray(o);
}

/** Decodes a captured frame down to TCP, UDP or SCTP; undefined for anything else (or IP fragments). */
export function decodePacket(linktype: number, frame: Uint8Array): DecodedPacket | undefined {
  const ip = ipOf(linktype, frame);
  if (!ip || ip.byteLength < 1) return undefined;
  const version = (ip[0] as number) >>> 4;
  let proto: number;
  let l4: Uint8Array;
  let src: string;
  let dst: string;
  if (version === 4) {
    if (ip.byteLength < 20) return undefined;
    const ihl = ((ip[0] as number) & 0xf) * 4;
    const total = Math.min(u16(ip, 2), ip.byteLength);
    const fragOff = u16(ip, 6) & 0x1fff;
    const more = (u16(ip, 6) & 0x2000) !== 0;
    if (fragOff !== 0 || more) return undefined;
    proto = ip[9] as number;
    src = Array.from(ip.subarray(12, 16)).join('.');
    dst = Array.from(ip.subarray(16, 20)).join('.');
    l4 = ip.subarray(ihl, Math.max(ihl, total));
  } else if (version === 6) {
    if (ip.byteLength < 40) return undefined;
    const plen = u16(ip, 4);
    proto = ip[6] as number;
    src = ipv6Text(ip.subarray(8, 24));
    dst = ipv6Text(ip.subarray(24, 40));
    let o = 40;
    const end = Math.min(ip.byteLength, 40 + plen);
    // Hop-by-hop, routing and destination options headers; a fragment header ends the walk.
    while ((proto === 0 || proto === 43 || proto === 60) && o + 8 <= end) {
      proto = ip[o] as number;
      o += ((ip[o + 1] as number) + 1) * 8;
    }
    if (proto === 44) return undefined;
    l4 = ip.subarray(Math.min(o, end), end);
  } else return undefined;
  if (proto === 6) {
    if (l4.byteLength < 20) return undefined;
    const off = ((l4[12] as number) >>> 4) * 4;
    const flags = l4[13] as number;
    return {
      src,
      dst,
      l4: {
        proto: 'tcp',
        srcPort: u16(l4, 0),
        dstPort: u16(l4, 2),
        seq: u32(l4, 4),
        ack: u32(l4, 8),
        fin: (flags & 0x01) !== 0,
        syn: (flags & 0x02) !== 0,
        rst: (flags & 0x04) !== 0,
        ackFlag: (flags & 0x10) !== 0,
        payload: l4.subarray(Math.min(off, l4.byteLength)),
      },
    };
  }
  if (proto === 17) {
    if (l4.byteLength < 8) return undefined;
    const len = Math.min(u16(l4, 4), l4.byteLength);
    return {
      src,
      dst,
      l4: { proto: 'udp', srcPort: u16(l4, 0), dstPort: u16(l4, 2), payload: l4.subarray(8, Math.max(8, len)) },
    };
  }
  if (proto === 132) return { src, dst, l4: { proto: 'sctp', packet: l4 } };
  return undefined;
}
