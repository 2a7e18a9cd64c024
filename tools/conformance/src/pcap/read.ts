/**
 * Reads a capture (classic pcap or pcapng, told apart by their magic numbers) as a stream: octets are
 * pushed in chunks of any size and each record is handed on as soon as it is complete, so what is held
 * is at most one record (MAX_CAPTURE_RECORD) and one chunk, whatever the capture's size. A file is read
 * in CAPTURE_READ_CHUNK pieces; a regular file longer than the limit (MAX_CAPTURE_BYTES unless told) is
 * refused from its size before anything is read, and anything else (a FIFO, a character device, a file
 * that keeps growing) is cut at the same limit.
 */
import { open } from 'node:fs/promises';

export interface CapturedPacket {
  /** 1-based, as Wireshark numbers frames. */
  readonly frame: number;
  /** Microseconds since the epoch (pcapng: in the interface's if_tsresol units, default microseconds). */
  readonly timeMicros: number;
  /** LINKTYPE_* of the interface it was captured on. */
  readonly linktype: number;
  /** The record's octets: a copy of its own (never a view of a larger read buffer). */
  readonly data: Uint8Array;
  /** The packet was longer on the wire than captured (snap length). */
  readonly truncated: boolean;
}

export interface Capture {
  readonly format: 'pcap' | 'pcapng';
  readonly packets: CapturedPacket[];
}

/** What a streamed read found: the format, how many packets it handed on and how many octets it read. */
export interface CaptureInfo {
  readonly format: 'pcap' | 'pcapng';
  readonly packets: number;
  readonly octets: number;
}

export class CaptureFormatError extends Error {
  readonly code = 'ERR_RDDP_CAPTURE_FORMAT';
}

/**
 * Most octets read from one capture (default of `maxBytes`): a regular file longer than this is refused
 * before it is read; a stream (FIFO, device) is cut here with a CaptureFormatError.
 */
export const MAX_CAPTURE_BYTES = 1 << 30;

/** Longest record read: a pcap packet record or a pcapng block (what Wireshark reads at most, 16 MiB). */
export const MAX_CAPTURE_RECORD = 16 << 20;

/** Octets read from a file at a time. */
export const CAPTURE_READ_CHUNK = 1 << 20;

export function captureFormat(head: Uint8Array): 'pcap' | 'pcapng' | undefined {
  if (head.byteLength < 4) return undefined;
  const m = Buffer.from(head.subarray(0, 4)).toString('hex');
  if (m === 'a1b2c3d4' || m === 'd4c3b2a1' || m === 'a1b23c4d' || m === '4d3cb2a1') return 'pcap';
  if (m === '0a0d0d0a') return 'pcapng';
  return undefined;
}

const PCAP_HEADER = 24;
const PCAP_RECORD_HEADER = 16;
const PCAPNG_SHB = 0x0a0d0d0a;
const PCAPNG_IDB = 1;
const PCAPNG_EPB = 6;
const PCAPNG_EPB_HEADER = 28;
const OPT_IF_TSRESOL = 9;

/** b[start, end) in an ArrayBuffer of its own (Buffer#slice would be a view of the read buffer). */
function copyOf(b: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(b.subarray(start, end));
  return out;
}

/** Microseconds per timestamp unit from an if_tsresol option value (default 10^-6 s). */
function unitMicros(tsresol: number | undefined): number {
  if (tsresol === undefined) return 1;
  const seconds = tsresol & 0x80 ? 2 ** -(tsresol & 0x7f) : 10 ** -tsresol;
  return seconds * 1e6;
}

interface PcapngInterface {
  readonly linktype: number;
  readonly unit: number;
}

/**
 * A push parser for pcap and pcapng. `push()` takes chunks of any size (and keeps no view of them: the
 * caller may reuse its buffer); every complete record goes to `onPacket` at once. Holds at most one
 * incomplete record plus one chunk.
 */
export class CaptureParser {
  format: 'pcap' | 'pcapng' | undefined;
  /** Packets handed on so far. */
  packets = 0;
  /** Octets pushed so far. */
  octets = 0;
  /** Octets of an incomplete record: win[head, head + len). */
  private win = new Uint8Array(0);
  private head = 0;
  private len = 0;
  // pcap
  private pcapHeader = false;
  private le = true;
  private nano = false;
  private linktype = 1;
  // pcapng
  private interfaces: PcapngInterface[] = [];

  constructor(private readonly onPacket: (p: CapturedPacket) => void) {}

  push(chunk: Uint8Array): void {
    this.octets += chunk.byteLength;
    if (this.len === 0) {
      // Nothing carried over: read the records in place, keep only the incomplete tail.
      const used = this.parse(chunk, 0, chunk.byteLength);
      this.keep(chunk.subarray(used));
      return;
    }
    this.append(chunk);
    const used = this.parse(this.win, this.head, this.head + this.len);
    this.len -= used - this.head;
    this.head = this.len === 0 ? 0 : used;
    // A window grown for one long record is not kept once it is empty.
    if (this.len === 0 && this.win.byteLength > 2 * CAPTURE_READ_CHUNK) this.win = new Uint8Array(0);
  }

  /** The end of the capture: its format (an incomplete last record is left out, as before). */
  end(): 'pcap' | 'pcapng' {
    if (this.format === undefined || (this.format === 'pcap' && !this.pcapHeader))
      throw new CaptureFormatError(
        this.octets < 4
          ? 'neither a pcap nor a pcapng file (shorter than a magic number)'
          : 'not a readable pcap file: no complete global header',
      );
    return this.format;
  }

  private keep(tail: Uint8Array): void {
    this.head = 0;
    this.len = 0;
    if (tail.byteLength > 0) this.append(tail);
  }

  private append(b: Uint8Array): void {
    const need = this.len + b.byteLength;
    if (this.head + need > this.win.byteLength) {
      if (need <= this.win.byteLength) this.win.copyWithin(0, this.head, this.head + this.len);
      else {
        const nw = new Uint8Array(Math.max(need, this.win.byteLength * 2, 64 << 10));
        nw.set(this.win.subarray(this.head, this.head + this.len));
        this.win = nw;
      }
      this.head = 0;
    }
    this.win.set(b, this.head + this.len);
    this.len = need;
  }

  /** Decodes complete records in b[pos, end); returns where the first incomplete one starts. */
  private parse(b: Uint8Array, pos: number, end: number): number {
    if (this.format === undefined) {
      if (end - pos < 4) return pos;
      const f = captureFormat(b.subarray(pos, pos + 4));
      if (!f) throw new CaptureFormatError('neither a pcap nor a pcapng file (unknown magic number)');
      this.format = f;
    }
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    return this.format === 'pcap' ? this.parsePcap(b, dv, pos, end) : this.parsePcapng(b, dv, pos, end);
  }

  private parsePcap(b: Uint8Array, dv: DataView, pos: number, end: number): number {
    if (!this.pcapHeader) {
      if (end - pos < PCAP_HEADER) return pos;
      const m = Buffer.from(b.subarray(pos, pos + 4)).toString('hex');
      this.le = m === 'd4c3b2a1' || m === '4d3cb2a1';
      // Nanosecond-resolution pcap: the same layout, the fraction in nanoseconds.
      this.nano = m === 'a1b23c4d' || m === '4d3cb2a1';
      const major = dv.getUint16(pos + 4, this.le);
      const minor = dv.getUint16(pos + 6, this.le);
      if (major !== 2 && minor !== 4)
        throw new CaptureFormatError(`not a readable pcap file: unsupported version ${major}.${minor}`);
      this.linktype = dv.getUint32(pos + 20, this.le);
      this.pcapHeader = true;
      pos += PCAP_HEADER;
    }
    const le = this.le;
    while (end - pos >= PCAP_RECORD_HEADER) {
      const caplen = dv.getUint32(pos + 8, le);
      if (caplen > MAX_CAPTURE_RECORD)
        throw new CaptureFormatError(
          `not a readable pcap file: frame ${this.packets + 1} claims ${caplen} octets (at most ${MAX_CAPTURE_RECORD})`,
        );
      if (end - pos < PCAP_RECORD_HEADER + caplen) break;
      const sec = dv.getUint32(pos, le);
      const frac = dv.getUint32(pos + 4, le);
      const orig = dv.getUint32(pos + 12, le);
      const start = pos + PCAP_RECORD_HEADER;
      this.onPacket({
        frame: ++this.packets,
        timeMicros: sec * 1e6 + (this.nano ? Math.floor(frac / 1000) : frac),
        linktype: this.linktype,
        data: copyOf(b, start, start + caplen),
        truncated: orig > caplen,
      });
      pos = start + caplen;
    }
    return pos;
  }

  private parsePcapng(b: Uint8Array, dv: DataView, pos: number, end: number): number {
    while (end - pos >= 12) {
      const shb = dv.getUint32(pos, false) === PCAPNG_SHB;
      if (shb) {
        // A Section Header Block: its byte-order magic sets the endianness of the section.
        const bom = dv.getUint32(pos + 8, false);
        if (bom === 0x1a2b3c4d) this.le = false;
        else if (bom === 0x4d3c2b1a) this.le = true;
        else
          throw new CaptureFormatError(
            `not a readable pcapng file: byte-order magic ${bom.toString(16).padStart(8, '0')}`,
          );
      }
      const le = this.le;
      const len = dv.getUint32(pos + 4, le);
      if (len < 12 || len > MAX_CAPTURE_RECORD)
        throw new CaptureFormatError(
          `not a readable pcapng file: a block of ${len} octets at octet ${this.octets - (end - pos)} (12 to ${MAX_CAPTURE_RECORD})`,
        );
      if (end - pos < len) break;
      const type = dv.getUint32(pos, le);
      if (shb)
        this.interfaces = []; // interface IDs are per section
      else if (type === PCAPNG_IDB && len >= 20) {
        let tsresol: number | undefined;
        // Options (code, length, value padded to 4 octets) up to opt_endofopt or the block's end.
        let o = pos + 16;
        const stop = pos + len - 4;
        while (o + 4 <= stop) {
          const code = dv.getUint16(o, le);
          const olen = dv.getUint16(o + 2, le);
          if (code === 0 || o + 4 + olen > stop) break;
          if (code === OPT_IF_TSRESOL && olen === 1) tsresol = b[o + 4];
          o += 4 + ((olen + 3) & ~3);
        }
        this.interfaces.push({ linktype: dv.getUint16(pos + 8, le), unit: unitMicros(tsresol) });
      } else if (type === PCAPNG_EPB) {
        if (len < PCAPNG_EPB_HEADER + 4)
          throw new CaptureFormatError(`not a readable pcapng file: an Enhanced Packet Block of ${len} octets`);
        const iface = this.interfaces[dv.getUint32(pos + 8, le)];
        const ts = dv.getUint32(pos + 12, le) * 2 ** 32 + dv.getUint32(pos + 16, le);
        const caplen = dv.getUint32(pos + 20, le);
        const orig = dv.getUint32(pos + 24, le);
        const start = pos + PCAPNG_EPB_HEADER;
        const n = Math.min(caplen, len - PCAPNG_EPB_HEADER - 4);
        this.onPacket({
          frame: ++this.packets,
          timeMicros: Math.floor(ts * (iface?.unit ?? 1)),
          linktype: iface?.linktype ?? 1,
          data: copyOf(b, start, start + n),
          truncated: orig > n,
        });
      }
      // Other blocks (Simple Packet, Name Resolution, statistics, custom, local use) are stepped over.
      pos += len;
    }
    return pos;
  }
}

export interface CaptureReadOptions {
  /** Most octets read (default MAX_CAPTURE_BYTES). */
  readonly maxBytes?: number;
}

/** Reads a capture from octets, handing on each packet as it is decoded. */
export function streamCaptureBytes(bytes: Uint8Array, onPacket: (p: CapturedPacket) => void): CaptureInfo {
  const p = new CaptureParser(onPacket);
  p.push(bytes);
  return { format: p.end(), packets: p.packets, octets: p.octets };
}

/**
 * Reads a capture file (or FIFO, or device) in CAPTURE_READ_CHUNK pieces, handing on each packet as it
 * is decoded. A regular file longer than `maxBytes` is refused before reading; anything else is cut
 * after `maxBytes` octets. Either way with a CaptureFormatError.
 */
export async function streamCaptureFile(
  path: string,
  onPacket: (p: CapturedPacket) => void,
  o: CaptureReadOptions = {},
): Promise<CaptureInfo> {
  const max = o.maxBytes ?? MAX_CAPTURE_BYTES;
  const fh = await open(path, 'r');
  try {
    const st = await fh.stat();
    if (st.isFile() && st.size > max)
      throw new CaptureFormatError(
        `${path}: ${st.size} octets, more than the ${max} read at most (--max-capture-bytes): nothing read`,
      );
    const kind = st.isFile()
      ? 'a file that grew'
      : st.isFIFO()
        ? 'a FIFO'
        : st.isCharacterDevice()
          ? 'a character device'
          : 'a stream';
    const p = new CaptureParser(onPacket);
    const buf = Buffer.allocUnsafe(CAPTURE_READ_CHUNK);
    for (;;) {
      // One octet more than allowed tells a stream that goes on from one that ends at the limit.
      const want = Math.min(buf.byteLength, max + 1 - p.octets);
      const { bytesRead } = await fh.read(buf, 0, want, null);
      if (bytesRead === 0) break;
      if (p.octets + bytesRead > max)
        throw new CaptureFormatError(
          `${path}: more than ${max} octets from ${kind} (--max-capture-bytes): read no further`,
        );
      p.push(buf.subarray(0, bytesRead));
    }
    return { format: p.end(), packets: p.packets, octets: p.octets };
  } finally {
    await fh.close();
  }
}

/** Reads a capture from octets (every packet kept: for captures already in memory). */
export async function readCaptureBytes(bytes: Uint8Array): Promise<Capture> {
  const packets: CapturedPacket[] = [];
  const { format } = streamCaptureBytes(bytes, (p) => packets.push(p));
  return { format, packets };
}

/** Reads a capture file, keeping every packet (bounded by `maxBytes`); `dissectFile` streams instead. */
export async function readCapture(path: string, o: CaptureReadOptions = {}): Promise<Capture> {
  const packets: CapturedPacket[] = [];
  const { format } = await streamCaptureFile(path, (p) => packets.push(p), o);
  return { format, packets };
}
