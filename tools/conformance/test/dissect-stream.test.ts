/**
 * The dissector's bounds against hostile captures, in process: the capture parser reads records pushed
 * in chunks of any size (holding at most one record), the TCP reassembly looks only at the lowest held
 * segment on each arrival (counted, not timed), and the report keeps at most `maxEvents` events,
 * findings and connection summaries while counting every one. (tools/cli/test/dissect-hostile.test.ts
 * plays the hostile files against `rddp dissect` from outside.)
 */
import { describe, expect, it } from 'vitest';
import { Dissector } from '../src/dissect/dissect.js';
import { STATE_COST } from '../src/dissect/meter.js';
import { TcpDirection, tcpReassemblyWork } from '../src/dissect/tcp.js';
import {
  type CapturedPacket,
  CaptureFormatError,
  CaptureParser,
  DEFAULT_MAX_REPORT_ENTRIES,
  dissectBytes,
  dissectExitStatus,
  encodeFpdu,
  encodeMpaReply,
  encodeMpaRequest,
  encodeTerminate,
  formatDissectJson,
  formatDissectText,
  MAX_CAPTURE_RECORD,
  MAX_TCP_OUT_OF_ORDER_SEGMENTS,
  MAX_TERMINATES_LISTED,
  Opcode,
  PcapWriter,
  readCaptureBytes,
  streamCaptureBytes,
  TCP_ACK,
  TCP_PSH,
  TCP_SYN,
  tcpFlowPcap,
  tcpFrame,
  untaggedSegment,
} from '../src/index.js';

const MPA = { crc: true, markers: false } as const;

/** Parses `bytes` pushed in pieces of the given sizes (cycled). */
function parseInPieces(bytes: Uint8Array, sizes: readonly number[]): { format: string; packets: CapturedPacket[] } {
  const packets: CapturedPacket[] = [];
  const p = new CaptureParser((pk) => packets.push(pk));
  let o = 0;
  for (let i = 0; o < bytes.byteLength; i++) {
    const n = sizes[i % sizes.length] as number;
    // A reused buffer, overwritten after each push: the parser must keep no view of it.
    const chunk = new Uint8Array(bytes.subarray(o, o + n));
    p.push(chunk);
    chunk.fill(0xee);
    o += n;
  }
  return { format: p.end(), packets };
}

const plain = (ps: readonly CapturedPacket[]) => ps.map((p) => ({ ...p, data: Buffer.from(p.data).toString('hex') }));

/** A pcapng file: SHB, IDBs (with an if_tsresol option when given), EPBs; little- or big-endian. */
function pcapng(
  sections: {
    le: boolean;
    ifaces: { linktype: number; tsresol?: number }[];
    packets: { iface: number; ts: number; data: number[] }[];
  }[],
): Uint8Array {
  const out: number[] = [];
  for (const s of sections) {
    const block = (type: number, body: number[]) => {
      const len = 12 + body.length;
      const b = Buffer.alloc(len);
      const w32 = (v: number, o: number) => (s.le ? b.writeUInt32LE(v, o) : b.writeUInt32BE(v, o));
      w32(type, 0);
      w32(len, 4);
      Buffer.from(body).copy(b, 8);
      w32(len, len - 4);
      out.push(...b);
    };
    const u16 = (v: number) => {
      const b = Buffer.alloc(2);
      s.le ? b.writeUInt16LE(v) : b.writeUInt16BE(v);
      return [...b];
    };
    const u32 = (v: number) => {
      const b = Buffer.alloc(4);
      s.le ? b.writeUInt32LE(v) : b.writeUInt32BE(v);
      return [...b];
    };
    block(0x0a0d0d0a, [...u32(0x1a2b3c4d), ...u16(1), ...u16(0), ...u32(0xffffffff), ...u32(0xffffffff)]);
    for (const i of s.ifaces) {
      const opts = i.tsresol === undefined ? [] : [...u16(9), ...u16(1), i.tsresol, 0, 0, 0, ...u16(0), ...u16(0)];
      block(1, [...u16(i.linktype), ...u16(0), ...u32(262144), ...opts]);
    }
    for (const p of s.packets) {
      const pad = (4 - (p.data.length % 4)) % 4;
      block(6, [
        ...u32(p.iface),
        ...u32(Math.floor(p.ts / 2 ** 32)),
        ...u32(p.ts >>> 0),
        ...u32(p.data.length),
        ...u32(p.data.length),
        ...p.data,
        ...new Array(pad).fill(0),
      ]);
    }
    // A block the dissector does not read (Name Resolution), stepped over.
    block(4, [0, 0, 0, 0]);
  }
  return Uint8Array.from(out);
}

function mpaFlow(fpdus: number, o: { crcXor?: number; terminate?: boolean } = {}): Uint8Array {
  const seg = (msn: number) =>
    o.terminate
      ? untaggedSegment(
          { opcode: Opcode.Terminate, msn },
          encodeTerminate({ layer: 1, etype: 0, errorCode: 0, m: false, d: false, r: false }),
        )
      : untaggedSegment({ opcode: Opcode.Send, msn }, new Uint8Array(4));
  const stream = Buffer.concat(
    Array.from({ length: fpdus }, (_, i) => encodeFpdu(seg(i + 1), { ...MPA, crcXor: o.crcXor ?? 0 })),
  );
  return tcpFlowPcap(
    [
      { from: 'client', bytes: encodeMpaRequest({ ...MPA, rev: 1 }) },
      { from: 'server', bytes: encodeMpaReply({ ...MPA, rev: 1 }) },
      { from: 'client', bytes: stream, segments: new Array(fpdus).fill(stream.byteLength / fpdus) },
    ],
    { mss: 1 << 16 },
  );
}

describe('the capture is read as a stream', () => {
  it('pcap (microsecond, nanosecond, big-endian): the same packets whatever the chunks, no view kept of them', async () => {
    const whole = mpaFlow(40);
    const ref = (await readCaptureBytes(whole)).packets;
    expect(ref).toHaveLength(3 + 2 + 40 + 3);
    for (const sizes of [[1], [7, 3, 100], [4096], [whole.byteLength]])
      expect(plain(parseInPieces(whole, sizes).packets)).toEqual(plain(ref));
    // Nanosecond magic: the fraction in nanoseconds.
    const nano = new Uint8Array(whole);
    const v = new DataView(nano.buffer);
    v.setUint32(0, 0xa1b23c4d, true);
    v.setUint32(24 + 4, 123_456_789, true);
    const n = parseInPieces(nano, [5]).packets;
    expect(n[0]?.timeMicros).toBe(v.getUint32(24, true) * 1e6 + 123_456);
    // Big-endian: every header field swapped.
    const be = new Uint8Array(whole.byteLength);
    const bv = new DataView(be.buffer);
    const wv = new DataView(whole.buffer, whole.byteOffset);
    bv.setUint32(0, 0xa1b2c3d4, false);
    for (const [o, w] of [
      [4, 2],
      [6, 2],
      [8, 4],
      [12, 4],
      [16, 4],
      [20, 4],
    ] as const)
      w === 2 ? bv.setUint16(o, wv.getUint16(o, true), false) : bv.setUint32(o, wv.getUint32(o, true), false);
    let o = 24;
    while (o < whole.byteLength) {
      for (let f = 0; f < 16; f += 4) bv.setUint32(o + f, wv.getUint32(o + f, true), false);
      const len = wv.getUint32(o + 8, true);
      be.set(whole.subarray(o + 16, o + 16 + len), o + 16);
      o += 16 + len;
    }
    expect(plain(parseInPieces(be, [13]).packets)).toEqual(plain(ref));
  });

  it('pcapng: interfaces per section, if_tsresol, both byte orders, other blocks stepped over, any chunking', () => {
    const bytes = pcapng([
      {
        le: true,
        ifaces: [{ linktype: 1 }, { linktype: 101, tsresol: 9 }],
        packets: [
          { iface: 0, ts: 1_700_000_000_123_456, data: [1, 2, 3] },
          { iface: 1, ts: 1_700_000_123_456_789, data: [4, 5, 6, 7, 8] },
        ],
      },
      { le: false, ifaces: [{ linktype: 113, tsresol: 0x83 }], packets: [{ iface: 0, ts: 16, data: [9] }] },
    ]);
    const want = [
      { frame: 1, linktype: 1, timeMicros: 1_700_000_000_123_456, data: '010203' },
      { frame: 2, linktype: 101, timeMicros: 1_700_000_123_456, data: '0405060708' },
      { frame: 3, linktype: 113, timeMicros: 2_000_000, data: '09' },
    ];
    for (const sizes of [[1], [3, 11], [bytes.byteLength]]) {
      const r = parseInPieces(bytes, sizes);
      expect(r.format).toBe('pcapng');
      expect(
        r.packets.map(({ frame, linktype, timeMicros, data }) => ({
          frame,
          linktype,
          timeMicros,
          data: Buffer.from(data).toString('hex'),
        })),
      ).toEqual(want);
    }
  });

  it('refused at once: an unknown magic (zeros), a record longer than MAX_CAPTURE_RECORD, a pcapng block under 12 octets', () => {
    const parse = (b: Uint8Array) => () => streamCaptureBytes(b, () => {});
    expect(parse(new Uint8Array(1 << 20))).toThrow(/neither a pcap nor a pcapng file \(unknown magic number\)/);
    const huge = new Uint8Array(24 + 16);
    const v = new DataView(huge.buffer);
    v.setUint32(0, 0xa1b2c3d4, true);
    v.setUint16(4, 2, true);
    v.setUint16(6, 4, true);
    v.setUint32(24 + 8, MAX_CAPTURE_RECORD + 1, true);
    // Refused from the record header alone: nothing of its claimed length is waited for or held.
    expect(parse(huge)).toThrow(CaptureFormatError);
    expect(parse(huge)).toThrow(/frame 1 claims 16777217 octets/);
    const ng = pcapng([{ le: true, ifaces: [], packets: [] }]);
    const bad = new Uint8Array([...ng, 6, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]);
    expect(parse(bad)).toThrow(/a block of 8 octets/);
  });

  it('holds at most one record between pushes: a record arriving an octet at a time is kept, then let go', () => {
    const seen: number[] = [];
    const p = new CaptureParser((pk) => seen.push(pk.data.byteLength));
    const w = new PcapWriter();
    w.add(new Uint8Array(100_000), 0);
    w.add(new Uint8Array(10), 1);
    const bytes = w.bytes();
    for (let i = 0; i < bytes.byteLength; i += 1000) p.push(bytes.subarray(i, i + 1000));
    expect(seen).toEqual([100_000, 10]);
    expect(p.end()).toBe('pcap');
    expect(p.octets).toBe(bytes.byteLength);
  });
});

/** Client-side TCP frames of one flow, at the given sequence numbers. */
function tcpSeg(seq: number, payload: Uint8Array): Uint8Array {
  return tcpFrame({
    srcIp: [10, 0, 0, 1],
    dstIp: [10, 0, 0, 2],
    srcPort: 40000,
    dstPort: 7174,
    seq,
    ack: 5001,
    flags: TCP_ACK | TCP_PSH,
    payload,
  });
}

describe('TCP reassembly: held segments indexed by stream offset', () => {
  it('4095 segments held far ahead: each in-order arrival looks at the lowest one only (counted visits ~ arrivals)', () => {
    const run = (held: number, inOrder: number) => {
      const d = new TcpDirection();
      d.syn(999);
      for (let i = 0; i < held; i++) d.push(i, 1000 + 10_000_000 + 2 * i, Uint8Array.of(1));
      const before = tcpReassemblyWork.heldVisits;
      let delivered = 0;
      for (let i = 0; i < inOrder; i++) delivered += d.push(held + i, 1000 + i * 10, new Uint8Array(10)).length;
      expect(delivered).toBe(inOrder);
      expect(d.heldSegments).toBe(held);
      return tcpReassemblyWork.heldVisits - before;
    };
    const inOrder = 20_000;
    const none = run(0, inOrder);
    const many = run(MAX_TCP_OUT_OF_ORDER_SEGMENTS - 1, inOrder);
    expect(none).toBe(0);
    // One look per arrival (was: every held segment per arrival, 4095 × 20 000).
    expect(many).toBe(inOrder);
  });

  it('4095 segments arriving in reverse, then the first: all delivered in order, one look per segment taken', () => {
    const n = MAX_TCP_OUT_OF_ORDER_SEGMENTS - 1;
    const d = new TcpDirection();
    d.syn(999);
    for (let i = n; i >= 1; i--) expect(d.push(i, 1000 + i * 3, Uint8Array.of(i & 0xff, 0, 0))).toEqual([]);
    const before = tcpReassemblyWork.heldVisits;
    const out = d.push(0, 1000, Uint8Array.of(0, 0, 0));
    expect(out.map((x) => x.frame)).toEqual(Array.from({ length: n + 1 }, (_, i) => i));
    expect(out.every((x, i) => x.bytes[0] === (i & 0xff))).toBe(true);
    expect(d.pending).toBe(0);
    // One look per held segment taken (was: a rescan of every held segment per one taken).
    expect(tcpReassemblyWork.heldVisits - before).toBe(n);
  });

  it('overlaps and retransmissions among held segments: each octet once, the sequence space wrapping', () => {
    const d = new TcpDirection();
    const base = 0xffff_fff0;
    d.syn(base - 1);
    const octets = (from: number, n: number) => Uint8Array.from({ length: n }, (_, i) => (from + i) & 0xff);
    d.push(1, (base + 20) >>> 0, octets(20, 10));
    d.push(2, (base + 10) >>> 0, octets(10, 15)); // overlaps the one above
    d.push(3, (base + 10) >>> 0, octets(10, 15)); // same sequence number again: ignored
    d.push(4, (base + 5) >>> 0, octets(5, 5));
    const out = d.push(5, base, octets(0, 5));
    const all = Buffer.concat(out.map((x) => x.bytes));
    expect([...all]).toEqual([...octets(0, 30)]);
    expect(d.pending).toBe(0);
  });

  it('through the dissector: 4095 held segments, then 5000 FPDUs in order: every FPDU decoded, visits ~ segments', async () => {
    const w = new PcapWriter();
    let t = 0;
    const add = (f: Uint8Array) => w.add(f, t++);
    add(
      tcpFrame({
        srcIp: [10, 0, 0, 1],
        dstIp: [10, 0, 0, 2],
        srcPort: 40000,
        dstPort: 7174,
        seq: 1000,
        ack: 0,
        flags: TCP_SYN,
      }),
    );
    let seq = 1001;
    const req = encodeMpaRequest({ ...MPA, rev: 1 });
    add(tcpSeg(seq, req));
    seq += req.byteLength;
    add(
      tcpFrame({
        srcIp: [10, 0, 0, 2],
        dstIp: [10, 0, 0, 1],
        srcPort: 7174,
        dstPort: 40000,
        seq: 5001,
        ack: seq,
        flags: TCP_ACK | TCP_PSH,
        payload: encodeMpaReply({ ...MPA, rev: 1 }),
      }),
    );
    for (let i = 0; i < MAX_TCP_OUT_OF_ORDER_SEGMENTS - 1; i++) add(tcpSeg(seq + 50_000_000 + 2 * i, Uint8Array.of(0)));
    const fpdus = 5000;
    for (let i = 0; i < fpdus; i++) {
      const f = encodeFpdu(untaggedSegment({ opcode: Opcode.Send, msn: i + 1 }, new Uint8Array(4)), MPA);
      add(tcpSeg(seq, f));
      seq += f.byteLength;
    }
    const before = tcpReassemblyWork.heldVisits;
    const r = await dissectBytes(w.bytes(), { maxEvents: 20_000 });
    const visits = tcpReassemblyWork.heldVisits - before;
    expect(r.connections[0]?.segments).toBe(fpdus);
    expect(r.events.filter((e) => e.kind === 'fpdu')).toHaveLength(fpdus);
    // One look per TCP segment (was: every held segment per segment, 4095 × 5000 and more).
    expect(visits).toBeLessThanOrEqual(fpdus + MAX_TCP_OUT_OF_ORDER_SEGMENTS);
    // The octets held after the gap are a note at the end of the capture.
    expect(r.findings.map((f) => f.code)).toContain('tcp-gap');
  });
});

describe('the report is bounded, the counts are not', () => {
  it('more events than maxEvents: the first kept, the rest counted; the summary counts every FPDU', async () => {
    const bytes = mpaFlow(3000);
    const all = await dissectBytes(bytes);
    const cut = await dissectBytes(bytes, { maxEvents: 1000 });
    expect(all.omitted).toBeUndefined();
    expect(all.events.length).toBeGreaterThan(3000);
    expect(cut.events).toEqual(all.events.slice(0, 1000));
    expect(cut.omitted).toEqual({
      events: all.events.length - 1000,
      findings: 0,
      findingsBySeverity: { reject: 0, warn: 0, note: 0 },
      connections: 0,
    });
    expect(cut.connections).toEqual(all.connections);
    expect(cut.connections[0]?.segments).toBe(3000);
    const text = formatDissectText(cut);
    expect(text).toContain(`… ${all.events.length - 1000} more events not listed (--max-events 1000)`);
    expect(JSON.parse(formatDissectJson(cut)).omitted.events).toBe(all.events.length - 1000);
    // A capture within the bound prints as before: no "more" line, no `omitted` in the JSON.
    expect(formatDissectText(all)).not.toContain('not listed');
    expect(formatDissectJson(all)).not.toContain('omitted');
    expect(DEFAULT_MAX_REPORT_ENTRIES).toBe(10_000);
  });

  it('findings past the bound still count: a bad CRC in every FPDU, exit status 3 and the count of those to reject', async () => {
    const r = await dissectBytes(mpaFlow(3000, { crcXor: 1 }), { maxEvents: 100 });
    expect(r.findings).toHaveLength(100);
    expect(r.omitted?.findingsBySeverity.reject).toBe(2900);
    expect(r.connections[0]?.findings.reject).toBe(3000);
    expect(dissectExitStatus(r)).toBe(3);
    expect(formatDissectText(r)).toMatch(/… 2900 more findings not listed: 2900 to reject, 0 warnings, 0 notes/);
    expect(formatDissectText(r)).toMatch(/^3000 finding\(s\) a receiver must reject$/m);
  });

  it(`a connection's Terminates: the first ${MAX_TERMINATES_LISTED} listed, the rest counted`, async () => {
    const r = await dissectBytes(mpaFlow(200, { terminate: true }));
    const c = r.connections[0];
    expect(c?.terminates).toHaveLength(MAX_TERMINATES_LISTED);
    expect(c?.terminatesOmitted).toBe(200 - MAX_TERMINATES_LISTED);
    expect(formatDissectText(r)).toContain(`  … ${200 - MAX_TERMINATES_LISTED} more Terminates not listed`);
  });

  it('connection summaries past the bound are counted: the first line says how many connections in all', async () => {
    const flows = Array.from({ length: 30 }, (_, i) =>
      tcpFlowPcap(
        [
          { from: 'client', bytes: encodeMpaRequest({ ...MPA, rev: 1 }) },
          { from: 'server', bytes: encodeMpaReply({ ...MPA, rev: 1 }) },
        ],
        { clientPort: 41000 + i },
      ),
    );
    const bytes = Buffer.concat([flows[0] as Uint8Array, ...flows.slice(1).map((f) => f.subarray(24))]);
    const r = await dissectBytes(bytes, { maxEvents: 10 });
    expect(r.connections).toHaveLength(10);
    expect(r.omitted?.connections).toBe(20);
    const text = formatDissectText(r);
    expect(text).toMatch(/^capture: pcap, \d+ packets, 30 iWARP connection\(s\)$/m);
    expect(text).toContain('… 20 more connections not listed (--max-events)');
  });
});

describe('decoding state: one bound over every connection (maxStateOctets)', () => {
  /** Client frames of connection `port`: a SYN, then `n` segments of `size` octets held far ahead of a gap. */
  function holder(w: PcapWriter, port: number, n: number, size: number, t: { t: number }): void {
    const f = (seq: number, flags: number, payload?: Uint8Array) =>
      w.add(
        tcpFrame({
          srcIp: [10, 0, 1, 1],
          dstIp: [10, 0, 0, 2],
          srcPort: port,
          dstPort: 7174,
          seq,
          ack: 0,
          flags,
          ...(payload ? { payload } : {}),
        }),
        t.t++,
      );
    f(999, TCP_SYN);
    for (let i = 0; i < n; i++) f(1000 + 1_000_000 + i * size, TCP_ACK | TCP_PSH, new Uint8Array(size));
  }

  it('connections holding out-of-order octets: the one that takes the sum over the bound is given up, the sum never stays over it', () => {
    const max = 4 << 20;
    const perConn = 1000 * (1000 + STATE_COST.segment);
    const w = new PcapWriter();
    const t = { t: 0 };
    for (let c = 0; c < 8; c++) holder(w, 42000 + c, 1000, 1000, t);
    const d = new Dissector({ maxStateOctets: max });
    let peak = 0;
    const packets = readCaptureBytesSync(w.bytes());
    for (const p of packets) {
      d.packet(p);
      expect(d.stateOctets).toBeLessThanOrEqual(max);
      peak = Math.max(peak, d.stateOctets);
    }
    const r = d.finish('pcap');
    // Three fit (3 × 1.29 MB); the fourth and each later one goes over as it grows and is given up.
    expect(peak).toBeGreaterThan(3 * perConn - 2 * (1000 + STATE_COST.segment));
    const notes = r.findings.filter((f) => f.code === 'dissect-state-limit');
    expect(notes).toHaveLength(1);
    expect(notes[0]?.message).toMatch(
      /over 4194304 octets at once \(--max-state\): 5 connection\(s\) given up, \d+ later packets skipped$/,
    );
    expect(r.events.find((e) => e.connection === 'capture')?.summary).toBe(
      'decoding state over 4194304 octets: 5 connection(s) given up',
    );
  });

  it('a connection given up lets go of its state: a later MPA connection still fits and is decoded to the end', async () => {
    const w = new PcapWriter();
    const t = { t: 0 };
    for (let c = 0; c < 6; c++) holder(w, 43000 + c, 1000, 1000, t);
    const mpa = await readCaptureBytes(mpaFlow(500));
    for (const p of mpa.packets) w.add(p.data, t.t++);
    const max = 4 << 20;
    const d = new Dissector({ maxStateOctets: max });
    for (const p of readCaptureBytesSync(w.bytes())) d.packet(p);
    // Three holders still hold theirs; the three given up, and the MPA connection (ended by FINs), nothing.
    expect(d.stateOctets).toBe(3 * 1000 * (1000 + STATE_COST.segment));
    const r = d.finish('pcap');
    const c = r.connections.find((x) => x.transport === 'mpa-tcp');
    expect(c?.segments).toBe(500);
    expect(c?.findings.reject).toBe(0);
    expect(r.findings.filter((f) => f.code === 'dissect-state-limit')).toHaveLength(1);
    // Under the default bound (64 MiB) nothing is given up.
    const all = await dissectBytes(w.bytes());
    expect(all.findings.filter((f) => f.code === 'dissect-state-limit')).toEqual([]);
  });
});

/** Every packet of a capture in memory (the parser is synchronous). */
function readCaptureBytesSync(bytes: Uint8Array): CapturedPacket[] {
  const out: CapturedPacket[] = [];
  streamCaptureBytes(bytes, (p) => out.push(p));
  return out;
}
