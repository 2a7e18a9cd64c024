/**
 * A raw MPA/TCP + RDMAP peer for tests against `tools/rddp` processes: the MPA handshake (RFC 5044 §7.1,
 * Rev 1, CRC, no Markers), Sends framed by hand (RFC 5041 §4.3, RFC 5040 §4.3), and the FPDUs the
 * process answers with, taken apart.
 */
import { readFileSync } from 'node:fs';
import { encodeUntaggedHeader } from '@rddp/ddp';
import { FpduWriter } from '@rddp/llp-mpa-tcp';
import { type RawPeer, rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';

export type { RawPeer };

const MPA_FRAME = 20;

/** Connects and completes the MPA Rev 1 handshake asking for CRCs; resolves after the Reply. */
export async function rawMpaPeer(port: number): Promise<RawPeer> {
  const raw = await rawConnect(port);
  const req = Buffer.alloc(MPA_FRAME);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C: CRC
  req[17] = 1;
  raw.socket.write(req);
  await raw.waitFor(MPA_FRAME);
  return raw;
}

/** One Send (RDMAP opcode 0x3, QN 0) of `payload` as one FPDU with a CRC. */
export function sendFpdu(msn: number, payload: Uint8Array): Buffer {
  const seg = new Uint8Array(18 + payload.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | 0x3) * 2 ** 32, qn: 0, msn, mo: 0 }, seg);
  seg.set(payload, 18);
  const parts: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}

export interface RxUlpdu {
  /** RDMAP opcode (RFC 5040 §4.2): 0x3 Send, 0x7 Terminate, ... */
  readonly opcode: number;
  /** DDP Tagged flag. */
  readonly tagged: boolean;
  /** What follows the DDP header (14 octets tagged, 18 untagged). */
  readonly payload: Buffer;
}

/** The ULPDUs of every FPDU received after the MPA Reply (CRCs on, no Markers). */
export function ulpdus(rx: Buffer): RxUlpdu[] {
  const out: RxUlpdu[] = [];
  let o = MPA_FRAME + rx.readUInt16BE(18); // Reply and its private data
  while (o + 2 <= rx.length) {
    const len = rx.readUInt16BE(o);
    if (o + 2 + len > rx.length) break;
    const u = rx.subarray(o + 2, o + 2 + len);
    const tagged = (u[0] as number) >> 7 === 1;
    out.push({ opcode: (u[1] as number) & 0x0f, tagged, payload: u.subarray(tagged ? 14 : 18) });
    o += 2 + len + ((4 - ((2 + len) % 4)) % 4) + 4;
  }
  return out;
}

/** Resolves with the peer's close, or rejects after `ms`. */
export function closedWithin(raw: RawPeer, ms: number): Promise<{ reset: boolean; fin: boolean }> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`still open after ${ms} ms: ${raw.received().length} octets in`)), ms);
    raw.closed.then((c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
}

/** Resident set size of process `pid` in octets (Linux /proc). */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}
