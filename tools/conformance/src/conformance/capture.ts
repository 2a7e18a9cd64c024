/**
 * --pcap DIR: one capture per case, written by the kit from the octets it sent and received on each of
 * the case's connections (no capture tool needed): each connection a TCP flow of its own.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type FlowRecord, tcpFlowPcap } from '../wire/pcap-write.js';
import type { WireConn } from './conn.js';

/** Classic pcap global header length: later flows' files are appended without it. */
const PCAP_HEADER = 24;

/** One pcap file holding every connection's flow, in the order they were opened. */
export function capturePcap(conns: readonly WireConn[]): Uint8Array {
  const files = conns.map((c) => {
    const kitIsClient = c.role === 'client';
    const records: FlowRecord[] = c.records.map((r) => ({
      from: (r.dir === 'tx') === kitIsClient ? 'client' : 'server',
      bytes: r.bytes,
    }));
    const client = kitIsClient ? c.kitAddress : c.peerAddress;
    const server = kitIsClient ? c.peerAddress : c.kitAddress;
    return tcpFlowPcap(records, { clientPort: client.port, serverPort: server.port });
  });
  const total = files.reduce((n, f, i) => n + f.byteLength - (i === 0 ? 0 : PCAP_HEADER), 0);
  const out = new Uint8Array(total);
  let o = 0;
  files.forEach((f, i) => {
    const part = i === 0 ? f : f.subarray(PCAP_HEADER);
    out.set(part, o);
    o += part.byteLength;
  });
  return out;
}

/** Writes `<dir>/<case>.pcap`; returns its path. */
export async function writeCasePcap(dir: string, caseName: string, conns: readonly WireConn[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${caseName.replace(/[^A-Za-z0-9._-]/g, '_')}.pcap`);
  await writeFile(file, capturePcap(conns));
  return file;
}
