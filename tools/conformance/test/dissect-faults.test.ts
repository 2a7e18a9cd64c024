/**
 * `rddp dissect` against captures with planted faults, written by the kit's pcap writer: each fault a
 * receiver must reject is flagged with its clause, and faults tshark's iWARP dissectors miss are caught.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  crc32c,
  type DissectReport,
  dissectBytes,
  encodeFpdu,
  encodeMpaReply,
  encodeMpaRequest,
  encodeReadRequest,
  encodeTerminate,
  type FlowRecord,
  ipv4Frame,
  Opcode,
  PcapWriter,
  TCP_ACK,
  TCP_FIN,
  TCP_PSH,
  TCP_SYN,
  taggedSegment,
  tcpFlowPcap,
  tcpFrame,
  udpFrame,
  untaggedSegment,
  writeMpaCrc,
} from '../src/index.js';
import {
  concat,
  fpduStream,
  haveTshark,
  tempDir,
  tsharkExpert,
  tsharkFpdus,
  tsharkVerbose,
} from './dissect-helpers.js';

const tmp = tempDir();
afterAll(() => tmp.dispose());

/** RFC 793 §3.1: the RST control bit. */
const TCP_RST = 0x04;

const send = (msn: number, n: number, fill = 0x5a) =>
  untaggedSegment({ opcode: Opcode.Send, msn }, new Uint8Array(n).fill(fill));

interface Flow {
  readonly crc?: boolean;
  readonly markers?: boolean;
  /** Initiator FPDUs (wire octets, one TCP segment each unless `segments`). */
  readonly fromClient: Uint8Array[];
  readonly fromServer?: Uint8Array[];
  /** Put all client FPDUs in one TCP segment. */
  readonly oneSegment?: boolean;
  readonly earlyClient?: boolean;
  /** MPA Rev of the Request and Reply (default 1). */
  readonly rev?: number;
}

function flowPcap(f: Flow): Uint8Array {
  const crc = f.crc ?? true;
  const markers = f.markers ?? false;
  const rev = f.rev ?? 1;
  const recs: FlowRecord[] = [{ from: 'client', bytes: encodeMpaRequest({ markers, crc, rev }) }];
  const client = f.oneSegment ? [concat(f.fromClient)] : f.fromClient;
  if (f.earlyClient) recs.push({ from: 'client', bytes: client.shift() as Uint8Array });
  recs.push({ from: 'server', bytes: encodeMpaReply({ markers, crc, rev }) });
  for (const b of client) recs.push({ from: 'client', bytes: b });
  for (const b of f.fromServer ?? []) recs.push({ from: 'server', bytes: b });
  return tcpFlowPcap(recs);
}

/** The classic pcap without its frame `n` (1-based). */
function dropFrame(pcap: Uint8Array, n: number): Uint8Array {
  const v = new DataView(pcap.buffer, pcap.byteOffset, pcap.byteLength);
  const keep: Uint8Array[] = [pcap.subarray(0, 24)];
  let o = 24;
  for (let i = 1; o < pcap.byteLength; i++) {
    const len = 16 + v.getUint32(o + 8, true);
    if (i !== n) keep.push(pcap.subarray(o, o + len));
    o += len;
  }
  return concat(keep);
}

function rejects(r: DissectReport): string[] {
  return r.findings.filter((x) => x.severity === 'reject').map((x) => `${x.code} ${x.clause}`);
}

function save(name: string, bytes: Uint8Array): string {
  const p = join(tmp.dir, name);
  writeFileSync(p, bytes);
  return p;
}

describe('planted faults a receiver must reject', () => {
  it('a clean flow: no finding, every FPDU decoded with a good CRC', async () => {
    const r = await dissectBytes(
      flowPcap({ markers: true, fromClient: fpduStream([send(1, 600), send(2, 30)], { crc: true, markers: true }) }),
    );
    expect(rejects(r)).toEqual([]);
    expect(r.connections).toHaveLength(1);
    expect(r.connections[0]).toMatchObject({
      transport: 'mpa-tcp',
      segments: 2,
      crc: { good: 2, bad: 0 },
      operations: { Send: 2 },
    });
  });

  it('bad CRC: flagged with RFC 5044 §4.4; tshark reads "Bad CRC32" but raises no expert error', async () => {
    const bytes = flowPcap({
      fromClient: fpduStream([send(1, 40), send(2, 40)], { crc: true, markers: false }, (i) =>
        i === 1 ? { crcXor: 0x100 } : {},
      ),
    });
    const r = await dissectBytes(bytes);
    expect(rejects(r)).toEqual(['mpa-crc RFC 5044 §4.4']);
    expect(r.connections[0]?.crc).toEqual({ good: 1, bad: 1, off: 0 });
    if (haveTshark()) {
      const file = save('bad-crc.pcap', bytes);
      expect(await tsharkVerbose(file)).toContain('Bad CRC32');
      expect(await tsharkExpert(file)).not.toMatch(/^(Errors|Warns) /m);
    }
  });

  it('misplaced Marker: flagged with RFC 5044 §4.3', async () => {
    const r = await dissectBytes(
      flowPcap({
        markers: true,
        fromClient: fpduStream([send(1, 700), send(2, 20)], { crc: true, markers: true }, (i) =>
          i === 0 ? { markerPtr: (k, right) => (k === 1 ? right - 8 : right) } : {},
        ),
      }),
    );
    expect(rejects(r)).toEqual(['mpa-marker RFC 5044 §4.3']);
  });

  it('wrong pad making a stray zero-length FPDU: flagged (a ULPDU with no DDP header); tshark takes it for an FPDU', async () => {
    // CRC off, a Send of 18 + 2 octets (pad 0) written with 8 octets of pad: the receiver reads the
    // FPDU, then 00 00 | 00 00 | 00 00 00 00 — a zero-length FPDU.
    const u = send(1, 2);
    const bytes = flowPcap({
      crc: false,
      fromClient: [
        concat([encodeFpdu(u, { crc: false, markers: false, padOverride: 8 })]),
        encodeFpdu(send(2, 2), { crc: false, markers: false }),
      ],
    });
    const r = await dissectBytes(bytes);
    expect(rejects(r)).toEqual(['ddp-short-segment RFC 5041 §4']);
    expect(r.events.some((e) => e.kind === 'fpdu' && e.summary.startsWith('FPDU ULPDU_Length 0 '))).toBe(true);
    if (haveTshark()) {
      const fp = await tsharkFpdus(save('stray.pcap', bytes));
      expect(fp.map((f) => f.ulpduLength)).toContain(0);
    }
  });

  it('several FPDUs in one segment with Markers: every FPDU, Marker and CRC right (tshark 4.0 decodes none of them)', async () => {
    const fpdus = fpduStream([send(1, 300), send(2, 400), send(3, 100), send(4, 900), send(5, 5)], {
      crc: true,
      markers: true,
    });
    const bytes = flowPcap({ markers: true, oneSegment: true, fromClient: fpdus });
    const r = await dissectBytes(bytes);
    expect(rejects(r)).toEqual([]);
    expect(r.connections[0]).toMatchObject({ segments: 5, crc: { good: 5, bad: 0 }, operations: { Send: 5 } });
    const markers = r.events.filter((e) => e.kind === 'fpdu').map((e) => /(\d+) Markers?/.exec(e.summary)?.[1] ?? '0');
    expect(markers.map(Number).reduce((a, b) => a + b, 0)).toBe(Math.ceil(concat(fpdus).byteLength / 512));
  });

  it('over-long ULPDU (64769 octets): flagged with RFC 5044 §3', async () => {
    const r = await dissectBytes(
      flowPcap({ fromClient: [encodeFpdu(send(1, 64769 - 18), { crc: true, markers: false })] }),
    );
    expect(rejects(r)).toEqual(['mpa-ulpdu-too-long RFC 5044 §3 (MULPDU)']);
  });

  it('RFC 7306 opcodes 0x8/0x9 decode as Immediate Data (tshark does not know them); reserved 0xC is rejected', async () => {
    const imm = (opcode: number, msn: number) =>
      untaggedSegment({ opcode, msn }, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
    const bytes = flowPcap({
      fromClient: fpduStream(
        [
          imm(Opcode.ImmediateData, 1),
          imm(Opcode.ImmediateDataWithSolicitedEvent, 2),
          untaggedSegment({ opcode: 0xc, msn: 3, qn: 0 }),
        ],
        {
          crc: true,
          markers: false,
        },
      ),
    });
    const r = await dissectBytes(bytes);
    const fp = r.events.filter((e) => e.kind === 'fpdu').map((e) => e.summary);
    expect(fp[0]).toContain('RDMAP Immediate Data 0x0102030405060708');
    expect(fp[1]).toContain('RDMAP Immediate Data with Solicited Event');
    expect(rejects(r)).toEqual(['rdmap-opcode-reserved RFC 5040 §4.1']);
    expect(r.findings.filter((f) => f.code === 'rdmap-rfc7306')).toHaveLength(2);
  });

  it('DDP and RDMAP rule violations, each with its clause', async () => {
    const rr = encodeReadRequest({ sinkStag: 1, sinkTo: 0n, size: 8, srcStag: 2, srcTo: 0n });
    const ulpdus = [
      untaggedSegment({ opcode: Opcode.Send, msn: 1, dv: 2 }, new Uint8Array(4)),
      untaggedSegment({ opcode: Opcode.Send, msn: 2, rv: 0 }, new Uint8Array(4)),
      untaggedSegment({ opcode: Opcode.Send, msn: 3, qn: 5 }, new Uint8Array(4)),
      untaggedSegment({ opcode: Opcode.RdmaReadRequest, msn: 1, last: false }, rr),
      untaggedSegment({ opcode: Opcode.Send, msn: 9 }, new Uint8Array(4)),
      taggedSegment({ opcode: Opcode.Send, stag: 1, to: 0n }, new Uint8Array(4)),
    ];
    const r = await dissectBytes(flowPcap({ fromClient: fpduStream(ulpdus, { crc: true, markers: false }) }));
    expect(rejects(r)).toEqual([
      'ddp-version RFC 5041 §4.2, §7.2',
      'rdmap-version RFC 5040 §4.1, §7.2',
      'ddp-invalid-qn RFC 5040 §3.1, RFC 5041 §7.2',
      'rdmap-single-segment RFC 5040 §4.4',
      'ddp-msn RFC 5041 §4.4, §7.2',
      'rdmap-opcode-t-bit RFC 5040 §4.1',
    ]);
  });

  it('MPA Rev 0 (RDMAC profile): DDP/RDMAP version 0 accepted, version 1 flagged; the Rev 0 frames a note', async () => {
    const ulpdus = [
      untaggedSegment({ opcode: Opcode.Send, msn: 1, dv: 0, rv: 0 }, new Uint8Array(4)),
      untaggedSegment({ opcode: Opcode.Send, msn: 2, dv: 1, rv: 0 }, new Uint8Array(4)),
      untaggedSegment({ opcode: Opcode.Send, msn: 3, dv: 0, rv: 1 }, new Uint8Array(4)),
    ];
    // RFC 5044 Appendix C: Markers and CRCs both ways at Rev 0.
    const r = await dissectBytes(
      flowPcap({ rev: 0, markers: true, fromClient: fpduStream(ulpdus, { crc: true, markers: true }) }),
    );
    expect(r.connections[0]?.setup).toBe('MPA Rev 0/0, CRC on, Markers to responder on, to initiator on');
    expect(r.connections[0]?.crc).toEqual({ good: 3, bad: 0, off: 0 });
    expect(rejects(r)).toEqual(['ddp-version RFC 5041 §4.2, §7.2', 'rdmap-version RFC 5040 §4.1, §7.2']);
    expect(r.findings.find((f) => f.code === 'ddp-version')?.message).toContain('DDP version 1, not 0');
    expect(r.findings.filter((f) => f.code === 'mpa-rev0').map((f) => f.severity)).toEqual(['note', 'note']);
    // The same segments at Rev 1: version 0 is the fault there.
    const ietf = await dissectBytes(flowPcap({ fromClient: fpduStream(ulpdus, { crc: true, markers: false }) }));
    expect(rejects(ietf)).toEqual([
      'ddp-version RFC 5041 §4.2, §7.2',
      'rdmap-version RFC 5040 §4.1, §7.2',
      'rdmap-version RFC 5040 §4.1, §7.2',
      'ddp-version RFC 5041 §4.2, §7.2',
    ]);
  });

  it('a Read Response beyond what the Read Request asked for, and a Terminate named from the RFC table', async () => {
    const rr = encodeReadRequest({ sinkStag: 0x77, sinkTo: 4096n, size: 8, srcStag: 2, srcTo: 0n });
    const term = encodeTerminate({
      layer: 1,
      etype: 2,
      errorCode: 1,
      m: true,
      d: true,
      r: false,
      ddpSegmentLength: 18,
      ddpHeader: send(9, 0),
    });
    const r = await dissectBytes(
      flowPcap({
        fromClient: fpduStream([untaggedSegment({ opcode: Opcode.RdmaReadRequest, msn: 1 }, rr)], {
          crc: true,
          markers: false,
        }),
        fromServer: fpduStream(
          [
            taggedSegment({ opcode: Opcode.RdmaReadResponse, stag: 0x77, to: 4096n }, new Uint8Array(16)),
            untaggedSegment({ opcode: Opcode.Terminate, msn: 1 }, term),
          ],
          { crc: true, markers: false },
        ),
      }),
    );
    expect(rejects(r)).toEqual(['rdmap-read-response-beyond RFC 5040 §4.4', 'rdmap-read-response-size RFC 5040 §4.4']);
    expect(r.connections[0]?.terminates).toEqual([
      expect.objectContaining({ name: 'DDP: Untagged Buffer Error: Invalid QN' }),
    ]);
  });

  it('an FPDU from the Initiator before the MPA Reply: flagged with RFC 5044 §7.1.2', async () => {
    const r = await dissectBytes(
      flowPcap({ earlyClient: true, fromClient: fpduStream([send(1, 8), send(2, 8)], { crc: true, markers: false }) }),
    );
    expect(rejects(r)).toEqual(['mpa-initiator-early RFC 5044 §7.1.2']);
  });

  it('an FPDU from the Responder before the Initiator sent one: flagged with RFC 5044 §7.1.2', async () => {
    const recs: FlowRecord[] = [
      { from: 'client', bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
      { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
      { from: 'server', bytes: encodeFpdu(send(1, 8), { crc: true, markers: false }) },
      { from: 'client', bytes: encodeFpdu(send(1, 8), { crc: true, markers: false }) },
    ];
    const r = await dissectBytes(tcpFlowPcap(recs));
    expect(rejects(r)).toEqual(['mpa-responder-first RFC 5044 §7.1.2']);
  });
});

describe('a capture that lost segments', () => {
  it('a Read Response whose Read Request the capture lost is a note; with nothing lost, a finding to reject', async () => {
    const rr = encodeReadRequest({ sinkStag: 0x77, sinkTo: 0n, size: 16, srcStag: 2, srcTo: 0n });
    const flow = (withRequest: boolean) =>
      tcpFlowPcap([
        { from: 'client', bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
        { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
        {
          from: 'client',
          bytes: concat(
            fpduStream(
              [...(withRequest ? [untaggedSegment({ opcode: Opcode.RdmaReadRequest, msn: 1 }, rr)] : []), send(1, 8)],
              { crc: true, markers: false },
            ),
          ),
          segments: withRequest ? [52] : [],
        },
        {
          from: 'server',
          bytes: encodeFpdu(
            taggedSegment({ opcode: Opcode.RdmaReadResponse, stag: 0x77, to: 0n }, new Uint8Array(16)),
            {
              crc: true,
              markers: false,
            },
          ),
        },
      ]);
    // Frame 6 (the Read Request's segment) never reached the capture.
    const lost = await dissectBytes(dropFrame(flow(true), 6));
    expect(rejects(lost)).toEqual([]);
    expect(lost.findings.map((f) => f.code)).toEqual(
      expect.arrayContaining(['rdmap-read-response-unmatched', 'tcp-gap']),
    );
    const none = await dissectBytes(flow(false));
    expect(rejects(none)).toEqual(['rdmap-unexpected-read-response RFC 5040 §4.4']);
  });
});

describe('bounds and other transports', () => {
  it('a TCP gap never filled: at most 8 MiB held out of order, then the direction is given up with a note', async () => {
    const w = new PcapWriter();
    const c = [10, 0, 0, 1];
    const sv = [10, 0, 0, 2];
    let t = 0;
    const seg = (from: 'c' | 's', seq: number, ack: number, flags: number, payload?: Uint8Array) =>
      w.add(
        tcpFrame({
          srcIp: from === 'c' ? c : sv,
          dstIp: from === 'c' ? sv : c,
          srcPort: from === 'c' ? 40000 : 7174,
          dstPort: from === 'c' ? 7174 : 40000,
          seq,
          ack,
          flags,
          ...(payload ? { payload } : {}),
        }),
        (t += 10),
      );
    seg('c', 999, 0, TCP_SYN);
    seg('s', 4999, 1000, TCP_SYN | TCP_ACK);
    seg('c', 1000, 5000, TCP_ACK | TCP_PSH, encodeMpaRequest({ markers: false, crc: true, rev: 1 }));
    seg('s', 5000, 1020, TCP_ACK | TCP_PSH, encodeMpaReply({ markers: false, crc: true, rev: 1 }));
    // 100 octets never captured, then 150 segments of 60000 octets; on another connection, 5000 of 1 octet.
    for (let i = 0; i < 150; i++) seg('c', 1020 + 100 + i * 60000, 5020, TCP_ACK, new Uint8Array(60000));
    const r = await dissectBytes(w.bytes());
    const gap = r.findings.filter((f) => f.code === 'tcp-gap');
    expect(gap).toHaveLength(1);
    expect(gap[0]?.message).toMatch(/^more than 8388608 octets or 4096 segments after a gap/);
    expect(gap[0]?.frame).toBeLessThan(4 + 150);
  });

  it('a TCP gap followed by many small segments: at most 4096 segments held', async () => {
    const parts = [encodeMpaRequest({ markers: false, crc: true, rev: 1 })];
    const w = tcpFlowPcap([
      { from: 'client', bytes: parts[0] as Uint8Array },
      { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
      // The first 8 octets of the FPDU stream are cut into their own segment, dropped below.
      { from: 'client', bytes: new Uint8Array(8 + 5000), segments: [8, ...Array.from({ length: 5000 }, () => 1)] },
    ]);
    const r = await dissectBytes(dropFrame(w, 6));
    const gap = r.findings.filter((f) => f.code === 'tcp-gap');
    expect(gap).toHaveLength(1);
    // Frames renumber after the dropped one: the 4097th held segment is frame 6 + 4096.
    expect(gap[0]?.frame).toBe(6 + 4096);
  });

  /** An SCTP packet (RFC 4960 §3) with its CRC32c. */
  function sctp(srcPort: number, dstPort: number, chunks: Uint8Array[], corrupt = false): Uint8Array {
    const body = concat(chunks);
    const p = new Uint8Array(12 + body.byteLength);
    const v = new DataView(p.buffer);
    v.setUint16(0, srcPort);
    v.setUint16(2, dstPort);
    v.setUint32(4, 0x1234);
    p.set(body, 12);
    writeMpaCrc(p, 8, crc32c(p) ^ (corrupt ? 1 : 0));
    return p;
  }
  function chunk(type: number, flags: number, value: Uint8Array): Uint8Array {
    const c = new Uint8Array((4 + value.byteLength + 3) & ~3);
    c[0] = type;
    c[1] = flags;
    new DataView(c.buffer).setUint16(2, 4 + value.byteLength);
    c.set(value, 4);
    return c;
  }
  function data(tsn: number, sid: number, ppid: number, flags: number, payload: Uint8Array): Uint8Array {
    const v = new Uint8Array(12 + payload.byteLength);
    const d = new DataView(v.buffer);
    d.setUint32(0, tsn);
    d.setUint16(4, sid);
    d.setUint32(8, ppid);
    v.set(payload, 12);
    return chunk(0, flags, v);
  }
  function init(type: number): Uint8Array {
    const v = new Uint8Array(16 + 8);
    const d = new DataView(v.buffer);
    d.setUint32(0, 0x1234);
    d.setUint32(4, 65536);
    d.setUint16(8, 2);
    d.setUint16(10, 2);
    d.setUint16(16, 0xc006);
    d.setUint16(18, 8);
    d.setUint32(20, 1);
    return chunk(type, 0, v);
  }

  it('raw SCTP (IP protocol 132): the adaptation indication, session control, a DDP Segment in two fragments, a retransmission, a bad checksum', async () => {
    const c = [10, 0, 0, 1];
    const sv = [10, 0, 0, 2];
    const w = new PcapWriter();
    let t = 0;
    const up = (p: Uint8Array) => w.add(ipv4Frame(c, sv, 132, p), (t += 10));
    const down = (p: Uint8Array) => w.add(ipv4Frame(sv, c, 132, p), (t += 10));
    const seg1 = send(1, 3000);
    up(sctp(5000, 7174, [init(1)]));
    down(sctp(7174, 5000, [init(2)]));
    up(sctp(5000, 7174, [data(1, 0, 17, 3, Uint8Array.of(0, 1, 0, 0))]));
    down(sctp(7174, 5000, [data(1, 0, 17, 3, Uint8Array.of(0, 2, 0, 0))]));
    up(sctp(5000, 7174, [data(2, 1, 16, 2, seg1.subarray(0, 1000))]));
    up(sctp(5000, 7174, [data(3, 1, 16, 1, seg1.subarray(1000))]));
    up(sctp(5000, 7174, [data(3, 1, 16, 1, seg1.subarray(1000))])); // retransmitted
    up(sctp(5000, 7174, [data(4, 1, 16, 3, send(3, 10))])); // MSN 3 after 1
    up(sctp(5000, 7174, [data(5, 1, 16, 3, send(4, 10))], true));
    const r = await dissectBytes(w.bytes());
    expect(r.connections).toHaveLength(1);
    const conn = r.connections[0];
    expect(conn).toMatchObject({ transport: 'sctp', initiator: '10.0.0.1:5000', operations: { Send: 2 } });
    expect(conn?.setup).toContain('DDP adaptation on');
    expect(r.events.filter((e) => e.kind === 'session-control').map((e) => e.summary)).toEqual([
      'SCTP stream 0 PPID 17 · Session Initiate, 0 octets of private data',
      'SCTP stream 0 PPID 17 · Session Accept, 0 octets of private data',
    ]);
    expect(
      r.events.some(
        (e) =>
          e.summary.includes('SCTP stream 1 PPID 16 · DDP untagged QN 0 MSN 1') &&
          e.summary.endsWith('payload 3000 octets'),
      ),
    ).toBe(true);
    expect(rejects(r)).toEqual(['ddp-msn RFC 5041 §4.4, §7.2', 'sctp-checksum RFC 4960 §6.8']);
  });

  it('SCTP fragments that never complete: at most 65536 held per direction, then the oldest dropped with a note', async () => {
    const w = new PcapWriter();
    let tsn = 1;
    for (let p = 0; p < 23; p++) {
      const chunks = Array.from({ length: 3000 }, () => data(tsn++, 1, 16, 2, Uint8Array.of(0)));
      w.add(ipv4Frame([10, 0, 0, 1], [10, 0, 0, 2], 132, sctp(5000, 7174, chunks)), p);
    }
    const r = await dissectBytes(w.bytes());
    const dropped = r.findings.filter((f) => f.code === 'sctp-reassembly-limit');
    expect(dropped).toHaveLength(1);
    expect(dropped[0]?.frame).toBe(22);
  });

  it('per connection: at most 1 MiB before the MPA Reply, 1024 messages open and 4096 Read Requests outstanding per direction', async () => {
    const opts = { crc: true, markers: false } as const;
    const mpa = [
      { from: 'client' as const, bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
      { from: 'server' as const, bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
    ];
    // 1.2 MiB from the Initiator between its Request and the Reply: the octets past 1 MiB are dropped.
    const early = await dissectBytes(
      tcpFlowPcap([mpa[0] as FlowRecord, { from: 'client', bytes: new Uint8Array(1_200_000) }, mpa[1] as FlowRecord], {
        mss: 60_000,
      }),
    );
    const dropped = early.findings.filter((f) => f.code === 'mpa-early-dropped');
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped[0]?.message).toBe('more than 1048576 octets before the MPA Reply');
    // 1100 Sends begun (L = 0) and never finished: 1024 are still open at the end, the oldest forgotten.
    const begun = Array.from({ length: 1100 }, (_, i) =>
      untaggedSegment({ opcode: Opcode.Send, msn: i + 1, last: false }, new Uint8Array(4)),
    );
    const open = await dissectBytes(tcpFlowPcap([...mpa, { from: 'client', bytes: concat(fpduStream(begun, opts)) }]));
    expect(open.findings.filter((f) => f.code === 'ddp-incomplete-message')).toHaveLength(1024);
    // 4097 Read Requests, then the Read Response to the first: its request is no longer tracked, so the
    // response is matched against the second (another Data Sink STag).
    const requests = Array.from({ length: 4097 }, (_, i) =>
      untaggedSegment(
        { opcode: Opcode.RdmaReadRequest, msn: i + 1 },
        encodeReadRequest({ sinkStag: i + 1, sinkTo: 0n, size: 4, srcStag: 0x99, srcTo: 0n }),
      ),
    );
    const response = taggedSegment({ opcode: Opcode.RdmaReadResponse, stag: 1, to: 0n }, new Uint8Array(4));
    const reads = await dissectBytes(
      tcpFlowPcap([
        ...mpa,
        { from: 'client', bytes: concat(fpduStream(requests, opts)) },
        { from: 'server', bytes: encodeFpdu(response, opts) },
      ]),
    );
    expect(rejects(reads)).toEqual(['rdmap-read-response-stag RFC 5040 §4.4']);
  });

  it('SCTP: at most 65536 TSNs remembered per direction to drop retransmissions; an older one is read again', async () => {
    const w = new PcapWriter();
    let tsn = 1;
    // 65537 one-chunk user messages (PPID 99: a note each), then TSN 1 again and TSN 65537 again.
    for (let p = 0; tsn <= 65_537; p++) {
      const chunks = Array.from({ length: Math.min(3000, 65_538 - tsn) }, () =>
        data(tsn++, 1, 99, 3, Uint8Array.of(0)),
      );
      w.add(ipv4Frame([10, 0, 0, 1], [10, 0, 0, 2], 132, sctp(5000, 7174, chunks)), p);
    }
    w.add(ipv4Frame([10, 0, 0, 1], [10, 0, 0, 2], 132, sctp(5000, 7174, [data(1, 1, 99, 3, Uint8Array.of(0))])), 99);
    w.add(
      ipv4Frame([10, 0, 0, 1], [10, 0, 0, 2], 132, sctp(5000, 7174, [data(65_537, 1, 99, 3, Uint8Array.of(0))])),
      100,
    );
    // Every note listed: more than the report keeps by default (DEFAULT_MAX_REPORT_ENTRIES).
    const r = await dissectBytes(w.bytes(), { maxEvents: 100_000 });
    expect(r.findings.filter((f) => f.code === 'sctp-ppid')).toHaveLength(65_537 + 1);
  });

  /** Frames of several flows written into one capture, in the order the test calls them. */
  function capture() {
    const w = new PcapWriter();
    let t = 0;
    const c = [10, 0, 0, 1];
    const sv = [10, 0, 0, 2];
    const add = (frame: Uint8Array) => w.add(frame, (t += 10));
    /** One TCP connection from client port `port` to 7174, carrying MPA with CRCs. */
    const tcp = (port: number) => {
      let cs = 1000;
      let ss = 5000;
      const seg = (from: 'c' | 's', flags: number, payload?: Uint8Array) => {
        const isC = from === 'c';
        add(
          tcpFrame({
            srcIp: isC ? c : sv,
            dstIp: isC ? sv : c,
            srcPort: isC ? port : 7174,
            dstPort: isC ? 7174 : port,
            seq: isC ? cs : ss,
            ack: isC ? ss : cs,
            flags,
            ...(payload ? { payload } : {}),
          }),
        );
        const n = (payload?.byteLength ?? 0) + (flags & (TCP_SYN | TCP_FIN) ? 1 : 0);
        if (isC) cs += n;
        else ss += n;
      };
      let msn = 0;
      return {
        open() {
          seg('c', TCP_SYN);
          seg('s', TCP_SYN | TCP_ACK);
          seg('c', TCP_ACK);
          seg('c', TCP_ACK | TCP_PSH, encodeMpaRequest({ markers: false, crc: true, rev: 1 }));
          seg('s', TCP_ACK | TCP_PSH, encodeMpaReply({ markers: false, crc: true, rev: 1 }));
        },
        send() {
          seg('c', TCP_ACK | TCP_PSH, encodeFpdu(send(++msn, 16), { crc: true, markers: false }));
        },
        /** FIN both ways, then the last ACK (RFC 793 §3.5). */
        fin() {
          seg('c', TCP_FIN | TCP_ACK);
          seg('s', TCP_FIN | TCP_ACK);
          seg('c', TCP_ACK);
        },
        rst() {
          seg('s', TCP_RST | TCP_ACK);
        },
      };
    };
    /** One SCTP association (raw, IP protocol 132) from port `port` to 7174. */
    const sctpAssoc = (port: number) => {
      let tsn = 0;
      const up = (chunks: Uint8Array[]) => add(ipv4Frame(c, sv, 132, sctp(port, 7174, chunks)));
      const down = (chunks: Uint8Array[]) => add(ipv4Frame(sv, c, 132, sctp(7174, port, chunks)));
      return {
        open() {
          up([init(1)]);
          down([init(2)]);
        },
        send() {
          up([data(++tsn, 1, 16, 3, send(tsn, 16))]);
        },
        abort() {
          down([chunk(6, 0, new Uint8Array(0))]);
        },
        shutdown() {
          up([chunk(7, 0, Uint8Array.of(0, 0, 0, tsn))]);
          down([chunk(8, 0, new Uint8Array(0))]);
          up([chunk(14, 0, new Uint8Array(0))]);
        },
      };
    };
    /** One UDP LLP flow (docs/UDP-LLP.md) from port `port` to 7174, CRC off. */
    const llp = (port: number) => {
      let seq = 0;
      const datagram = (from: 'c' | 's', type: number, streamId: number, body: Uint8Array) => {
        const d = new Uint8Array(16 + body.byteLength);
        const v = new DataView(d.buffer);
        d[0] = 0x10 | type;
        v.setUint16(2, streamId);
        v.setUint32(4, from === 'c' ? 0xb : 0xa);
        v.setUint32(8, from === 'c' ? 0xa : 0xb);
        v.setUint32(12, ++seq);
        d.set(body, 16);
        const isC = from === 'c';
        add(
          udpFrame({
            srcIp: isC ? c : sv,
            dstIp: isC ? sv : c,
            srcPort: isC ? port : 7174,
            dstPort: isC ? 7174 : port,
            payload: d,
          }),
        );
      };
      // Setup body: streams 1, datagram size 1400, window 64, CRC off, no private data.
      const setup = Uint8Array.of(0, 1, 0x05, 0x78, 0, 0, 0, 64, 0, 0, 0, 0);
      let msn = 0;
      return {
        open() {
          datagram('c', 1, 0, setup);
          datagram('s', 2, 0, setup);
        },
        send(streamId = 0) {
          datagram('c', 4, streamId, send(++msn, 16));
        },
        /** ABORT of every stream (Stream id 65535), code 0. */
        abort() {
          datagram('s', 9, 65535, Uint8Array.of(0, 0));
        },
      };
    };
    return { tcp, sctpAssoc, llp, bytes: () => w.bytes() };
  }

  it('DDP Streams: at most 1024 followed per SCTP association and per UDP LLP connection, then one note', async () => {
    // UDP LLP: 1100 DATA datagrams, each on its own stream.
    const cap = capture();
    const flow = cap.llp(6001);
    flow.open();
    for (let sid = 0; sid < 1100; sid++) flow.send(sid);
    const r1 = await dissectBytes(cap.bytes());
    const llpNotes = r1.findings.filter((f) => f.code === 'udp-llp-stream-limit');
    expect(llpNotes).toHaveLength(1);
    expect(r1.events.filter((e) => e.kind === 'segment' && e.summary.includes('RDMAP Send'))).toHaveLength(1024);

    // SCTP: 1100 one-chunk DDP Segments, each on its own stream.
    const s = new PcapWriter();
    for (let p = 0; p < 11; p++) {
      const chunks = Array.from({ length: 100 }, (_, i) => data(p * 100 + i + 1, p * 100 + i, 16, 3, send(1, 4)));
      s.add(ipv4Frame([10, 0, 0, 1], [10, 0, 0, 2], 132, sctp(5000, 7174, chunks)), p);
    }
    const r2 = await dissectBytes(s.bytes());
    expect(r2.findings.filter((f) => f.code === 'sctp-stream-limit')).toHaveLength(1);
    expect(r2.events.filter((e) => e.kind === 'segment' && e.summary.includes('RDMAP Send'))).toHaveLength(1024);
  });

  const limitNotes = (r: DissectReport) => r.findings.filter((f) => f.code === 'dissect-connection-limit');

  it('more connections, associations and UDP flows at once than maxConnections: the first decoded to the end, the rest skipped with one note and their count', async () => {
    const cap = capture();
    const first = [cap.tcp(40001), cap.tcp(40002), cap.tcp(40003)];
    for (const c of first) c.open();
    const later = [cap.tcp(40004), cap.tcp(40005)];
    for (const c of later) c.open();
    const assoc = cap.sctpAssoc(5001);
    assoc.open();
    const flow = cap.llp(6001);
    flow.open();
    // Traffic on all of them afterwards: the first three go on being decoded.
    for (const c of [...first, ...later]) {
      c.send();
      c.send();
    }
    assoc.send();
    flow.send();
    const r = await dissectBytes(cap.bytes(), { maxConnections: 3 });
    expect(r.connections.map((c) => [c.id, c.initiator, c.operations])).toEqual([
      ['tcp-1', '10.0.0.1:40001', { Send: 2 }],
      ['tcp-2', '10.0.0.1:40002', { Send: 2 }],
      ['tcp-3', '10.0.0.1:40003', { Send: 2 }],
    ]);
    expect(rejects(r)).toEqual([]);
    const notes = limitNotes(r);
    expect(notes).toHaveLength(1);
    // Frame 16: the SYN of the fourth connection (three connections of five frames before it).
    expect(notes[0]).toMatchObject({ frame: 16, connection: 'capture', severity: 'note' });
    expect(notes[0]?.message).toMatch(/^more than 3 connections, associations and UDP flows at once .*: 4 not decoded/);
    // Without the limit, all seven are decoded.
    const all = await dissectBytes(cap.bytes());
    expect(all.connections).toHaveLength(7);
    expect(limitNotes(all)).toEqual([]);
  });

  it('a connection that ends frees its place: TCP FIN both ways or RST, SCTP ABORT or SHUTDOWN COMPLETE, UDP LLP ABORT of every stream', async () => {
    const cap = capture();
    const finished = cap.tcp(40001);
    finished.open();
    finished.send();
    finished.fin();
    const reset = cap.tcp(40002);
    reset.open();
    reset.send();
    reset.rst();
    const aborted = cap.sctpAssoc(5001);
    aborted.open();
    aborted.send();
    aborted.abort();
    const shut = cap.sctpAssoc(5002);
    shut.open();
    shut.send();
    shut.shutdown();
    const flow = cap.llp(6001);
    flow.open();
    flow.send();
    flow.abort();
    // Two places: two connections open at once fit, a third does not.
    const open = [cap.tcp(40003), cap.tcp(40004), cap.tcp(40005)];
    for (const c of open) c.open();
    for (const c of open) c.send();
    const r = await dissectBytes(cap.bytes(), { maxConnections: 2 });
    expect(r.connections.map((c) => [c.initiator, c.operations])).toEqual([
      ['10.0.0.1:40001', { Send: 1 }],
      ['10.0.0.1:40002', { Send: 1 }],
      ['10.0.0.1:5001', { Send: 1 }],
      ['10.0.0.1:5002', { Send: 1 }],
      ['10.0.0.1:6001', { Send: 1 }],
      ['10.0.0.1:40003', { Send: 1 }],
      ['10.0.0.1:40004', { Send: 1 }],
    ]);
    const notes = limitNotes(r);
    expect(notes).toHaveLength(1);
    expect(notes[0]?.message).toMatch(/: 1 not decoded/);
  });
});
