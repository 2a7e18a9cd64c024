/**
 * What an independent decoder sees: a loopback capture of DDP-over-SCTP connections (UDP encapsulation),
 * decoded by tshark as SCTP. tshark absent, or capturing on lo not allowed (not root, dumpcap without
 * capabilities): skipped with a message, except in CI (.ci/run installs tshark and runs as root), where
 * either fails the test.
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LlpStream } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { dissectFile } from '../../../tools/conformance/src/index.js';
import { tsharkOn } from '../../llp-mpa-tcp/test/wire.js';
import { sctp } from '../src/index.js';
import { until } from './harness.js';

const TSHARK = process.env.TSHARK ?? '/usr/bin/tshark';
const haveTshark = existsSync(TSHARK);

/** Starts `tshark -i lo`; resolves once it captures, rejects with its stderr when it cannot. */
const startCapture = (file: string, filter: string): Promise<ChildProcess> =>
  tsharkOn(file, filter, { settleMs: 1000 });

/** One SCTP user message as tshark reassembled it, with the header fields of its DATA chunks. */
interface Message {
  readonly sid: number;
  readonly ppid: number;
  readonly unordered: boolean;
  readonly bytes: Buffer;
}

interface Decoded {
  /** Chunk types of each packet, in order. */
  readonly types: number[][];
  /** Adaptation Layer Indication of each packet ('' when absent). */
  readonly adaptation: string[];
  /** Checksum status of each packet (Wireshark: 1 good, 0 bad, 2 unverified). */
  readonly checksum: string[];
  /** Every DATA chunk's (stream, PPID, U bit). */
  readonly chunks: { sid: number; ppid: number; unordered: boolean }[];
  /** Every user message, in the order its last fragment (E bit) was captured. */
  readonly messages: Message[];
}

function decode(file: string, port: number): Decoded {
  const fields = [
    'sctp.chunk_type',
    'sctp.adaptation_layer_indication',
    'sctp.checksum.status',
    'sctp.data_sid',
    'sctp.data_payload_proto_id',
    'sctp.data_u_bit',
    'sctp.data_e_bit',
    'data.data',
  ];
  const out = execFileSync(
    TSHARK,
    [
      '-r',
      file,
      '-d',
      `udp.port==${port},sctp`,
      '-o',
      'sctp.checksum:CRC 32c',
      '-T',
      'fields',
      '-E',
      'separator=;',
      ...fields.flatMap((f) => ['-e', f]),
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const list = (x: string | undefined) => (x ? x.split(',') : []);
  const d: Decoded = { types: [], adaptation: [], checksum: [], chunks: [], messages: [] };
  for (const line of out.trim().split('\n')) {
    const [types, adaptation, checksum, sids, ppids, ubits, ebits, payloads] = line.split(';');
    d.types.push(list(types).map(Number));
    d.adaptation.push(adaptation ?? '');
    d.checksum.push(checksum ?? '');
    const sid = list(sids).map(Number);
    const ppid = list(ppids).map(Number);
    const u = list(ubits).map((x) => x === '1');
    const e = list(ebits).map((x) => x === '1');
    // tshark reassembles each user message and shows its octets in the packet of its last fragment.
    const bytes = list(payloads);
    expect(e.filter(Boolean).length).toBe(bytes.length);
    for (let i = 0; i < sid.length; i++) {
      const c = { sid: sid[i] as number, ppid: ppid[i] as number, unordered: u[i] as boolean };
      d.chunks.push(c);
      if (e[i]) d.messages.push({ ...c, bytes: Buffer.from(bytes.shift() ?? '', 'hex') });
    }
  }
  return d;
}

/** Starts capturing the port's UDP; outside CI a machine that cannot capture on lo skips the test. */
async function captureOrSkip(ctx: { skip(note: string): void }, file: string, port: number): Promise<ChildProcess> {
  try {
    return await startCapture(file, `udp port ${port}`);
  } catch (e) {
    if (process.env.CI) throw e;
    ctx.skip(`cannot capture on lo here (${(e as Error).message.split('\n')[0]}); CI runs it as root`);
    throw e; // not reached: skip() ends the test
  }
}

describe('tshark decodes the wire format', () => {
  it.skipIf(!haveTshark && !process.env.CI)(
    "RFC 5043: DATA chunks carry PPID 16 and 17 on the DDP Stream's SCTP stream, INIT and INIT ACK the DDP adaptation code point, SHUTDOWN and ABORT as mapped (tshark)",
    async (ctx) => {
      if (!haveTshark) throw new Error(`${TSHARK} is required in CI (.ci/run installs Debian's tshark)`);
      const dir = mkdtempSync(join(tmpdir(), 'rddp-sctp-'));
      const file = join(dir, 'ddp-sctp.pcap');
      const t = sctp({ pmtu: 1472 }); // Ethernet-size packets: the 3000-octet segment takes several chunks
      const listener = await t.listen({ host: '127.0.0.1', port: 0 });
      const port = listener.address.port as number;
      let cap: ChildProcess | undefined;
      try {
        cap = await captureOrSkip(ctx, file, port);
        // 1. Setup with private data both ways, a 3000-octet DDP Segment on DDP Stream 1, graceful close.
        const accepted = firstValueFrom(listener.connections$);
        const a = await t.connect({ host: '127.0.0.1', port }, { streams: 2, privateData: Buffer.from('hello') });
        const b = await accepted;
        let got = 0;
        (b.streams[1] as LlpStream).setReceiver(() => got++);
        (a.streams[1] as LlpStream).send([Buffer.alloc(3000, 0xab)]);
        await until(() => got === 1, 'delivery');
        await a.close();
        // 2. A second association, aborted.
        const accepted2 = firstValueFrom(listener.connections$);
        const a2 = await t.connect({ host: '127.0.0.1', port });
        const b2 = await accepted2;
        const b2Closed = firstValueFrom(b2.closed$);
        a2.abort();
        await b2Closed;
        await new Promise((r) => setTimeout(r, 500)); // let the last packets reach the capture
        const exited = new Promise<void>((r) => cap?.once('exit', () => r()));
        cap.kill('SIGINT');
        await exited;
        cap = undefined;

        const d = decode(file, port);
        const inits = d.types.flatMap((ts, i) => (ts[0] === 1 ? [i] : []));
        const initAcks = d.types.flatMap((ts, i) => (ts[0] === 2 ? [i] : []));
        expect(inits.length).toBe(2);
        expect(initAcks.length).toBe(2);
        // RFC 5043 §5.1 / RFC 5061 §4.2.6: the Adaptation Layer Indication with the DDP code point (1).
        for (const i of [...inits, ...initAcks]) expect(d.adaptation[i]).toBe('0x00000001');
        // RFC 4960 §6.8: tshark verifies every CRC32c, the re-signed INIT and INIT ACK included.
        expect(new Set(d.checksum)).toEqual(new Set(['1']));
        // RFC 5043 §5.2: PPID 17 (session control) and 16 (DDP Segments) only, all ordered.
        expect(new Set(d.chunks.map((x) => x.ppid))).toEqual(new Set([16, 17]));
        expect(d.chunks.some((x) => x.unordered)).toBe(false);
        // The DDP Segment: one 3000-octet message of PPID 16 on SCTP stream 1 (DDP Stream 1), in several chunks.
        expect(d.chunks.filter((x) => x.ppid === 16).length).toBeGreaterThan(1);
        expect(new Set(d.chunks.filter((x) => x.ppid === 16).map((x) => x.sid))).toEqual(new Set([1]));
        const segments = d.messages.filter((x) => x.ppid === 16);
        expect(segments.map((x) => [x.sid, x.bytes.length])).toEqual([[1, 3000]]);
        expect(segments[0]?.bytes.equals(Buffer.alloc(3000, 0xab))).toBe(true);
        // Session control (rfc5043.ts): Initiate and Accept on stream 0 with the private data, then a
        // Session Terminate each way on each of the two streams; the aborted association only sets up.
        const control = d.messages.filter((x) => x.ppid === 17).map((x) => `${x.sid}:${x.bytes.toString('hex')}`);
        expect(control.slice(0, 2)).toEqual([`0:00010005${Buffer.from('hello').toString('hex')}`, '0:00020000']);
        expect(control.slice(2, 6).sort()).toEqual(['0:00040000', '0:00040000', '1:00040000', '1:00040000']);
        expect(control.slice(6)).toEqual(['0:00010000', '0:00020000']);
        // RFC 4960 §9.2 graceful close: SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE; §9.1 abort: ABORT.
        const all = d.types.flat();
        for (const type of [7, 8, 14]) expect(all).toContain(type);
        expect(all.filter((x) => x === 6).length).toBe(1);
        expect(d.types.findIndex((ts) => ts.includes(6))).toBeGreaterThan(inits[1] as number);

        // rddp dissect (tools/conformance, its own codec) reads the same capture and agrees with tshark:
        // every packet, both associations, every checksum good, the same session control messages in
        // the same order, the one DDP Segment.
        const r = await dissectFile(file);
        expect(r.packets).toBe(d.types.length);
        expect(r.connections.map((c) => c.transport)).toEqual(['sctp-udp', 'sctp-udp']);
        expect(r.connections.map((c) => c.setup)).toEqual([
          'SCTP over UDP (RFC 6951), DDP adaptation on',
          'SCTP over UDP (RFC 6951), DDP adaptation on',
        ]);
        expect(r.findings.filter((f) => f.code.startsWith('sctp-'))).toEqual([]);
        const hex4 = (n: number) => n.toString(16).padStart(4, '0');
        const ours = r.events
          .filter((e) => e.kind === 'session-control')
          .map((e) => {
            const x = e.detail as { sid: number; function: number; privateData: Uint8Array };
            return `${x.sid}:${hex4(x.function)}${hex4(x.privateData.byteLength)}${Buffer.from(x.privateData).toString('hex')}`;
          });
        expect(ours).toEqual(control);
        expect(r.connections.map((c) => c.segments)).toEqual([1, 0]);
        expect(r.events.filter((e) => e.kind === 'segment').map((e) => e.summary.split(' · ')[0])).toEqual([
          'SCTP stream 1 PPID 16',
        ]);
      } finally {
        cap?.kill('SIGKILL');
        await listener.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it.skipIf(!haveTshark && !process.env.CI)(
    'RFC 8260 I-DATA, negotiated, and packets sized from the route: tshark decodes every packet (Good CRC, nothing malformed), a large message interleaved with small ones',
    async (ctx) => {
      if (!haveTshark) throw new Error(`${TSHARK} is required in CI (.ci/run installs Debian's tshark)`);
      const dir = mkdtempSync(join(tmpdir(), 'rddp-sctp-idata-'));
      const file = join(dir, 'idata.pcap');
      const t = sctp({ interleaving: true });
      const listener = await t.listen({ host: '127.0.0.1', port: 0 });
      const port = listener.address.port as number;
      let cap: ChildProcess | undefined;
      try {
        cap = await captureOrSkip(ctx, file, port);
        const accepted = firstValueFrom(listener.connections$);
        const a = await t.connect({ host: '127.0.0.1', port }, { streams: 3 });
        const b = await accepted;
        const order: string[] = [];
        (b.streams[1] as LlpStream).setReceiver((u) => order.push(`1:${u.length}`));
        (b.streams[2] as LlpStream).setReceiver((u) => order.push(`2:${u.length}`));
        const big = (a.streams[1] as LlpStream).mulpdu;
        (a.streams[1] as LlpStream).send([Buffer.alloc(big, 1)]);
        for (let i = 0; i < 3; i++) (a.streams[2] as LlpStream).send([Buffer.alloc(100, 2)]);
        await until(() => order.length === 4, 'delivery');
        await a.close();
        await new Promise((r) => setTimeout(r, 500));
        const exited = new Promise<void>((r) => cap?.once('exit', () => r()));
        cap.kill('SIGINT');
        await exited;
        cap = undefined;
        // RFC 8260 §2.1: the small messages on stream 2 need not wait for the large one on stream 1.
        expect(order[0]).toBe('2:100');
        expect(order).toContain(`1:${big}`);
        const out = execFileSync(
          TSHARK,
          [
            ...['-r', file, '-d', `udp.port==${port},sctp`, '-o', 'sctp.checksum:CRC 32c', '-T', 'fields'],
            ...['-E', 'separator=;'],
            ...['frame.len', 'sctp.chunk_type', 'sctp.checksum.status', '_ws.malformed', '_ws.expert.severity'].flatMap(
              (f) => ['-e', f],
            ),
          ],
          { encoding: 'utf8' },
        );
        const rows = out
          .trim()
          .split('\n')
          .map((l) => l.split(';'));
        // Every packet checksummed good, nothing malformed, no expert finding.
        expect(rows.every((r) => r[2] === '1' && !r[3] && !r[4])).toBe(true);
        const types = rows.flatMap((r) => (r[1] ?? '').split(',').map(Number));
        expect(types).toContain(64); // I-DATA
        expect(types).not.toContain(0); // no DATA once I-DATA is negotiated (RFC 8260 §2.2)
        expect(types).toContain(132); // RFC 8899 §6.2 probes: HEARTBEAT padded with a PAD chunk (RFC 4820)
        // Loopback's MTU: the large message's first packet is a 64 KiB-class datagram.
        expect(Math.max(...rows.map((r) => Number(r[0])))).toBeGreaterThan(60_000);
      } finally {
        cap?.kill('SIGKILL');
        await listener.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
