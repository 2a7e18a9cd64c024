/**
 * Capture files in memory: pcapng (SHB/IDB/EPB, the obsolete PB; SPB skipped: it has no timestamp) and
 * classic pcap (µs and ns magic), either byte order; and the link layers the experiment's captures use,
 * down to the IPv4 datagram. IPv4 only: the experiment's link is IPv4.
 *
 * Formats: pcapng is draft-ietf-opsawg-pcapng (§4.1 SHB, §4.2 IDB with if_tsresol/if_tsoffset, §4.3 EPB,
 * Appendix A PB); classic pcap and the link-layer headers are the tcpdump.org LINKTYPE_ registry.
 */

/** A capture file that cannot be read; the caller names which file. */
export class PcapFormatError extends Error {}

/** One captured frame. */
export interface CaptureRecord {
  readonly linktype: number;
  /** Capture time, µs since the epoch (fractional with a finer resolution). */
  readonly tsUs: number;
  /** The captured octets (a view into the file). */
  readonly data: Uint8Array;
  /** Length on the wire (more than `data` when the capture cut the frame). */
  readonly origLen: number;
  /** The byte order of the section/file the frame came from (the capturing host's). */
  readonly littleEndian: boolean;
}

export const LINKTYPE_NULL = 0;
export const LINKTYPE_ETHERNET = 1;
export const LINKTYPE_RAW = 101;
export const LINKTYPE_LOOP = 108;
export const LINKTYPE_LINUX_SLL = 113;
export const LINKTYPE_IPV4 = 228;
export const LINKTYPE_NFLOG = 239;
export const LINKTYPE_LINUX_SLL2 = 276;

const SHB = 0x0a0d0d0a;
const BYTE_ORDER_MAGIC = 0x1a2b3c4d;
const IDB = 1;
const PB = 2;
const EPB = 6;
const OPT_IF_TSRESOL = 9;
const OPT_IF_TSOFFSET = 14;

/** Reads every frame of a pcapng or classic pcap file, in file order. */
export function readCapture(bytes: Uint8Array): CaptureRecord[] {
  if (bytes.byteLength < 4) throw new PcapFormatError(`${bytes.byteLength} octets: too short for a capture file`);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = v.getUint32(0, true);
  if (magic === SHB) return readPcapng(bytes, v);
  const classic = classicMagic(magic);
  if (classic) return readPcap(bytes, v, classic.le, classic.nano);
  throw new PcapFormatError(`not a pcapng or pcap file (first word 0x${magic.toString(16).padStart(8, '0')})`);
}

function classicMagic(m: number): { le: boolean; nano: boolean } | undefined {
  switch (m) {
    case 0xa1b2c3d4:
      return { le: true, nano: false };
    case 0xd4c3b2a1:
      return { le: false, nano: false };
    case 0xa1b23c4d:
      return { le: true, nano: true };
    case 0x4d3cb2a1:
      return { le: false, nano: true };
    default:
      return undefined;
  }
}

/** Classic pcap: 24-octet file header, then 16-octet record headers (ts_sec, ts_usec|ts_nsec, caplen, len). */
function readPcap(bytes: Uint8Array, v: DataView, le: boolean, nano: boolean): CaptureRecord[] {
  if (bytes.byteLength < 24) throw new PcapFormatError('truncated pcap file header');
  const linktype = v.getUint32(20, le) & 0xffff; // upper bits: FCS length flags
  const out: CaptureRecord[] = [];
  let off = 24;
  while (off < bytes.byteLength) {
    if (off + 16 > bytes.byteLength) throw new PcapFormatError(`truncated record header at offset ${off}`);
    const sec = v.getUint32(off, le);
    const frac = v.getUint32(off + 4, le);
    const caplen = v.getUint32(off + 8, le);
    const len = v.getUint32(off + 12, le);
    if (off + 16 + caplen > bytes.byteLength)
      throw new PcapFormatError(`truncated record at offset ${off}: ${caplen} octets announced`);
    out.push({
      linktype,
      tsUs: sec * 1e6 + (nano ? frac / 1000 : frac),
      data: bytes.subarray(off + 16, off + 16 + caplen),
      origLen: len,
      littleEndian: le,
    });
    off += 16 + caplen;
  }
  return out;
}

interface Interface {
  readonly linktype: number;
  /** Timestamp units per second. */
  readonly unitsPerSec: number;
  /** if_tsoffset, µs. */
  readonly offsetUs: number;
}

function readPcapng(bytes: Uint8Array, v: DataView): CaptureRecord[] {
  const out: CaptureRecord[] = [];
  let le = true;
  let ifaces: Interface[] = [];
  let off = 0;
  while (off < bytes.byteLength) {
    if (off + 12 > bytes.byteLength) throw new PcapFormatError(`truncated block header at offset ${off}`);
    const typeLe = v.getUint32(off, true);
    if (typeLe === SHB) {
      // The SHB's Byte-Order Magic says how the whole section is written (§4.1).
      const bom = v.getUint32(off + 8, true);
      if (bom === BYTE_ORDER_MAGIC) le = true;
      else if (bom === 0x4d3c2b1a) le = false;
      else throw new PcapFormatError(`section header at offset ${off} has no byte-order magic`);
      ifaces = [];
    } else if (off === 0) throw new PcapFormatError('pcapng file does not start with a section header');
    const type = v.getUint32(off, le);
    const len = v.getUint32(off + 4, le);
    if (len < 12 || len % 4 !== 0) throw new PcapFormatError(`bad block length ${len} at offset ${off}`);
    if (off + len > bytes.byteLength)
      throw new PcapFormatError(
        `truncated block at offset ${off}: ${len} octets announced, ${bytes.byteLength - off} left`,
      );
    if (v.getUint32(off + len - 4, le) !== len)
      throw new PcapFormatError(`block at offset ${off}: trailing length differs from ${len}`);
    const body = off + 8;
    const bodyEnd = off + len - 4;
    if (type === IDB) {
      if (bodyEnd - body < 8) throw new PcapFormatError(`short interface block at offset ${off}`);
      ifaces.push(readIdb(v, body, bodyEnd, le));
    } else if (type === EPB || type === PB) {
      if (bodyEnd - body < 20) throw new PcapFormatError(`short packet block at offset ${off}`);
      const id = type === EPB ? v.getUint32(body, le) : v.getUint16(body, le);
      const iface = ifaces[id];
      if (!iface) throw new PcapFormatError(`packet block at offset ${off} names interface ${id}, not described`);
      const hi = v.getUint32(body + 4, le);
      const lo = v.getUint32(body + 8, le);
      const caplen = v.getUint32(body + 12, le);
      const origLen = v.getUint32(body + 16, le);
      if (body + 20 + caplen > bodyEnd)
        throw new PcapFormatError(`packet block at offset ${off}: ${caplen} captured octets overrun the block`);
      out.push({
        linktype: iface.linktype,
        tsUs: ticksToUs(hi, lo, iface.unitsPerSec) + iface.offsetUs,
        data: bytes.subarray(body + 20, body + 20 + caplen),
        origLen,
        littleEndian: le,
      });
    }
    // SPB (3, no timestamp), NRB, ISB, custom blocks: skipped.
    off += len;
  }
  return out;
}

function readIdb(v: DataView, body: number, end: number, le: boolean): Interface {
  const linktype = v.getUint16(body, le);
  let unitsPerSec = 1e6;
  let offsetUs = 0;
  let o = body + 8;
  while (o + 4 <= end) {
    const code = v.getUint16(o, le);
    const n = v.getUint16(o + 2, le);
    if (code === 0 || o + 4 + n > end) break;
    if (code === OPT_IF_TSRESOL && n >= 1) {
      const r = v.getUint8(o + 4);
      unitsPerSec = r & 0x80 ? 2 ** (r & 0x7f) : 10 ** r;
    } else if (code === OPT_IF_TSOFFSET && n >= 8) offsetUs = Number(v.getBigInt64(o + 4, le)) * 1e6;
    o += 4 + ((n + 3) & ~3);
  }
  return { linktype, unitsPerSec, offsetUs };
}

/** A 64-bit timestamp in 1/unitsPerSec units as µs, exact to the unit for decimal resolutions. */
function ticksToUs(hi: number, lo: number, unitsPerSec: number): number {
  if (unitsPerSec === 1e6) return hi * 2 ** 32 + lo;
  if (unitsPerSec > 1e6 && Number.isInteger(unitsPerSec / 1e6)) {
    const t = (BigInt(hi) << 32n) | BigInt(lo);
    const d = BigInt(unitsPerSec / 1e6);
    return Number(t / d) + Number(t % d) / Number(d);
  }
  return ((hi * 2 ** 32 + lo) * 1e6) / unitsPerSec;
}

/** What a frame holds at the network layer. */
export type NetworkPayload =
  /** An IPv4 datagram (from its first header octet to the end of the captured octets). */
  | { readonly ip: Uint8Array }
  /** The link-layer header itself was cut. */
  | 'truncated'
  /** Not IPv4 (ARP, IPv6, an unknown linktype…). */
  | undefined;

const ETHERTYPE_IPV4 = 0x0800;
const ETHERTYPE_VLAN = 0x8100;
const ETHERTYPE_QINQ = 0x88a8;
const NFULA_PAYLOAD = 9;
const AF_INET = 2;

/** The IPv4 datagram of a frame, by its linktype. */
export function networkPayload(rec: CaptureRecord): NetworkPayload {
  const d = rec.data;
  switch (rec.linktype) {
    case LINKTYPE_ETHERNET: {
      // dst(6) src(6) EtherType(2), 802.1Q / 802.1ad tags (4 each) before the EtherType.
      let o = 12;
      for (;;) {
        if (o + 2 > d.byteLength) return 'truncated';
        const et = be16(d, o);
        if (et === ETHERTYPE_VLAN || et === ETHERTYPE_QINQ) {
          o += 4;
          continue;
        }
        return et === ETHERTYPE_IPV4 ? ipAt(d, o + 2) : undefined;
      }
    }
    case LINKTYPE_LINUX_SLL:
      // packet type(2) ARPHRD(2) address length(2) address(8) protocol(2).
      if (d.byteLength < 16) return 'truncated';
      return be16(d, 14) === ETHERTYPE_IPV4 ? ipAt(d, 16) : undefined;
    case LINKTYPE_LINUX_SLL2:
      // protocol(2) reserved(2) ifindex(4) ARPHRD(2) packet type(1) address length(1) address(8).
      if (d.byteLength < 20) return 'truncated';
      return be16(d, 0) === ETHERTYPE_IPV4 ? ipAt(d, 20) : undefined;
    case LINKTYPE_RAW:
    case LINKTYPE_IPV4:
      return ipAt(d, 0);
    case LINKTYPE_NULL:
    case LINKTYPE_LOOP: {
      if (d.byteLength < 4) return 'truncated';
      const dv = new DataView(d.buffer, d.byteOffset, 4);
      const fam = rec.linktype === LINKTYPE_LOOP ? dv.getUint32(0) : dv.getUint32(0, rec.littleEndian);
      return fam === AF_INET ? ipAt(d, 4) : undefined;
    }
    case LINKTYPE_NFLOG:
      return nflogPayload(rec);
    default:
      return undefined;
  }
}

function ipAt(d: Uint8Array, o: number): NetworkPayload {
  if (o >= d.byteLength) return 'truncated';
  if ((d[o] as number) >> 4 !== 4) return undefined;
  return { ip: d.subarray(o) };
}

/**
 * LINKTYPE_NFLOG: family(1) version(1) resource id(2, BE), then TLVs — length(2) type(2), both in the
 * capturing host's byte order, the length counting the 4-octet TLV header, each padded to 4 octets.
 * NFULA_PAYLOAD (9) holds the packet from its network header. The file's byte order is tried first
 * (pcap writers use the host's), then the other one.
 */
function nflogPayload(rec: CaptureRecord): NetworkPayload {
  const d = rec.data;
  if (d.byteLength < 4) return 'truncated';
  if (d[0] !== AF_INET) return undefined;
  const found = nflogTlv(d, rec.littleEndian) ?? nflogTlv(d, !rec.littleEndian);
  if (!found) return 'truncated';
  return found.byteLength === 0 ? 'truncated' : (found[0] as number) >> 4 === 4 ? { ip: found } : undefined;
}

function nflogTlv(d: Uint8Array, le: boolean): Uint8Array | undefined {
  const v = new DataView(d.buffer, d.byteOffset, d.byteLength);
  let o = 4;
  while (o + 4 <= d.byteLength) {
    const len = v.getUint16(o, le);
    const type = v.getUint16(o + 2, le) & 0x3fff; // without the netlink NESTED / NET_BYTEORDER flags
    if (len < 4 || o + len > d.byteLength) return undefined;
    if (type === NFULA_PAYLOAD) return d.subarray(o + 4, o + len);
    o += (len + 3) & ~3;
  }
  return undefined;
}

function be16(d: Uint8Array, o: number): number {
  return ((d[o] as number) << 8) | (d[o + 1] as number);
}
