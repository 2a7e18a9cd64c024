/**
 * Reads a capture file (classic pcap or pcapng, told apart by their magic numbers) into packets with the
 * `pcap-parser` and `pcap-ng-parser` libraries.
 */
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import PCAPNGParser, { type PcapNgInterface, type PcapNgPacket } from 'pcap-ng-parser';
import * as pcapParser from 'pcap-parser';

export interface CapturedPacket {
  /** 1-based, as Wireshark numbers frames. */
  readonly frame: number;
  /** Microseconds since the epoch (pcapng: assuming the default microsecond resolution). */
  readonly timeMicros: number;
  /** LINKTYPE_* of the interface it was captured on. */
  readonly linktype: number;
  readonly data: Uint8Array;
  /** The packet was longer on the wire than captured (snap length). */
  readonly truncated: boolean;
}

export interface Capture {
  readonly format: 'pcap' | 'pcapng';
  readonly packets: CapturedPacket[];
}

export class CaptureFormatError extends Error {
  readonly code = 'ERR_RDDP_CAPTURE_FORMAT';
}

/** Largest capture file read (the whole file is held in memory). */
export const MAX_CAPTURE_BYTES = 1 << 30;

export function captureFormat(head: Uint8Array): 'pcap' | 'pcapng' | undefined {
  if (head.byteLength < 4) return undefined;
  const m = Buffer.from(head.subarray(0, 4)).toString('hex');
  if (m === 'a1b2c3d4' || m === 'd4c3b2a1' || m === 'a1b23c4d' || m === '4d3cb2a1') return 'pcap';
  if (m === '0a0d0d0a') return 'pcapng';
  return undefined;
}

function readPcap(bytes: Buffer): Promise<Capture> {
  return new Promise((resolve, reject) => {
    const m = bytes.toString('hex', 0, 4);
    // Nanosecond-resolution pcap: same layout, the parser only knows the microsecond magic.
    const nano = m === 'a1b23c4d' || m === '4d3cb2a1';
    const input = nano ? Buffer.from(bytes) : bytes;
    if (nano) input.write(m === 'a1b23c4d' ? 'a1b2c3d4' : 'd4c3b2a1', 0, 'hex');
    const parser = pcapParser.parse(Readable.from([input]));
    const packets: CapturedPacket[] = [];
    let linktype = 1;
    parser.on('globalHeader', (h) => {
      linktype = h.linkLayerType;
    });
    parser.on('packet', (p) => {
      const frac = nano ? Math.floor(p.header.timestampMicroseconds / 1000) : p.header.timestampMicroseconds;
      packets.push({
        frame: packets.length + 1,
        timeMicros: p.header.timestampSeconds * 1e6 + frac,
        linktype,
        data: new Uint8Array(p.data.buffer, p.data.byteOffset, p.data.byteLength),
        truncated: p.header.originalLength > p.header.capturedLength,
      });
    });
    parser.on('error', (e) => reject(new CaptureFormatError(`not a readable pcap file: ${e.message}`)));
    parser.on('end', () => resolve({ format: 'pcap', packets }));
  });
}

interface PcapNgOption {
  code: number;
  dataLength: number;
  data: Buffer;
}

/**
 * pcapng options (code, length, value padded to 4 octets, up to opt_endofopt). Installed in place of the
 * parser's own reader, which steps over an option by eight times its length.
 */
function readOptions(buf: Buffer, endian: 'LE' | 'BE'): PcapNgOption[] {
  const out: PcapNgOption[] = [];
  let pos = 0;
  while (pos + 4 <= buf.length) {
    const code = endian === 'LE' ? buf.readUInt16LE(pos) : buf.readUInt16BE(pos);
    const len = endian === 'LE' ? buf.readUInt16LE(pos + 2) : buf.readUInt16BE(pos + 2);
    if (code === 0 || pos + 4 + len > buf.length) break;
    out.push({ code, dataLength: len, data: buf.subarray(pos + 4, pos + 4 + len) });
    pos += 4 + ((len + 3) & ~3);
  }
  return out;
}

/** Microseconds per timestamp unit from an if_tsresol option value (default 10^-6 s). */
function unitMicros(tsresol: string | undefined): number {
  if (tsresol === undefined || tsresol.length !== 1) return 1;
  const r = tsresol.charCodeAt(0);
  const seconds = r & 0x80 ? 2 ** -(r & 0x7f) : 10 ** -r;
  return seconds * 1e6;
}

function readPcapng(bytes: Buffer): Promise<Capture> {
  return new Promise((resolve, reject) => {
    const parser = new PCAPNGParser();
    const p = parser as unknown as { endianess: 'LE' | 'BE'; readOptions: (b: Buffer) => PcapNgOption[] };
    p.readOptions = (b: Buffer) => readOptions(b, p.endianess);
    const packets: CapturedPacket[] = [];
    parser.on('data', (pk: PcapNgPacket) => {
      const iface = parser.interfaces[pk.interfaceId] as (PcapNgInterface & { code_9?: string }) | undefined;
      const ts = pk.timestampHigh * 2 ** 32 + pk.timestampLow;
      packets.push({
        frame: packets.length + 1,
        timeMicros: Math.floor(ts * unitMicros(iface?.code_9)),
        linktype: iface?.linkType ?? 1,
        data: new Uint8Array(pk.data.buffer, pk.data.byteOffset, pk.data.byteLength),
        truncated: false,
      });
    });
    parser.on('error', (e: Error) => reject(new CaptureFormatError(`not a readable pcapng file: ${e.message}`)));
    parser.on('end', () => resolve({ format: 'pcapng', packets }));
    parser.on('close', () => resolve({ format: 'pcapng', packets }));
    try {
      parser.end(bytes);
    } catch (e) {
      reject(new CaptureFormatError(`not a readable pcapng file: ${(e as Error).message}`));
    }
  });
}

/** Reads a capture from octets. */
export async function readCaptureBytes(bytes: Uint8Array): Promise<Capture> {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const format = captureFormat(buf);
  if (format === 'pcap') return readPcap(buf);
  if (format === 'pcapng') return readPcapng(buf);
  throw new CaptureFormatError('neither a pcap nor a pcapng file (unknown magic number)');
}

/** Reads a capture file. */
export async function readCapture(path: string): Promise<Capture> {
  const bytes = readFileSync(path);
  if (bytes.byteLength > MAX_CAPTURE_BYTES)
    throw new CaptureFormatError(`${path}: ${bytes.byteLength} octets; at most ${MAX_CAPTURE_BYTES} are read`);
  return readCaptureBytes(bytes);
}
