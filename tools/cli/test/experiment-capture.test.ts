/**
 * `rddp experiment`'s capture decoder on hand-made captures: Ethernet/IPv4 frames of MPA/TCP and SCTP-in-UDP
 * conversations in pcapng and classic pcap files, NFLOG records of the dropped ones; per-message wire times,
 * losses and their repairs, drop matching by octets and time, and malformed input.
 */
import { describe, expect, it } from 'vitest';
import {
  type CaptureInput,
  decodeCapture,
  ExperimentCaptureError,
  type WireMessage,
  type WireTrace,
} from '../src/experiment/capture.js';

const I = '10.78.0.1';
const R = '10.78.0.2';
/** Capture timestamps are BASE_US + t; the default clock offset maps them back to t. */
const BASE_US = 1_700_000_000_000_000;
const enc = new TextEncoder();

// ---- octets -------------------------------------------------------------------------------------

function concat(...parts: Uint8Array[]): Uint8Array {
  const b = Buffer.concat(parts);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function bytes(n: number, write: (v: DataView) => void): Uint8Array {
  const b = new Uint8Array(n);
  write(new DataView(b.buffer));
  return b;
}

const pad4 = (n: number) => (n + 3) & ~3;

function addr(s: string): number {
  return s.split('.').reduce((a, p) => a * 256 + Number(p), 0);
}

// ---- packets ------------------------------------------------------------------------------------

let ipId = 1;

function ipv4(src: string, dst: string, proto: number, payload: Uint8Array, id = ipId++): Uint8Array {
  const h = bytes(20, (v) => {
    v.setUint8(0, 0x45);
    v.setUint16(2, 20 + payload.byteLength);
    v.setUint16(4, id);
    v.setUint16(6, 0x4000); // DF
    v.setUint8(8, 64);
    v.setUint8(9, proto);
    v.setUint16(10, 0xbeef); // partial checksum, as veth leaves it
    v.setUint32(12, addr(src));
    v.setUint32(16, addr(dst));
  });
  return concat(h, payload);
}

const FIN = 0x01;
const SYN = 0x02;
const PSH = 0x08;
const ACK = 0x10;

function tcp(
  sport: number,
  dport: number,
  seq: number,
  ack: number,
  flags: number,
  payload: Uint8Array = new Uint8Array(0),
) {
  const h = bytes(20, (v) => {
    v.setUint16(0, sport);
    v.setUint16(2, dport);
    v.setUint32(4, seq >>> 0);
    v.setUint32(8, ack >>> 0);
    v.setUint8(12, 5 << 4);
    v.setUint8(13, flags);
    v.setUint16(14, 65535);
  });
  return concat(h, payload);
}

function udp(sport: number, dport: number, payload: Uint8Array): Uint8Array {
  const h = bytes(8, (v) => {
    v.setUint16(0, sport);
    v.setUint16(2, dport);
    v.setUint16(4, 8 + payload.byteLength);
  });
  return concat(h, payload);
}

function ether(ip: Uint8Array, vlan = false): Uint8Array {
  const macs = new Uint8Array([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
  const tag = vlan ? new Uint8Array([0x81, 0x00, 0x00, 0x07]) : new Uint8Array(0);
  return concat(macs, tag, new Uint8Array([0x08, 0x00]), ip);
}

/** Linux cooked v2 (LINKTYPE_LINUX_SLL2) header for an IPv4 packet. */
function sll2(ip: Uint8Array): Uint8Array {
  const h = bytes(20, (v) => {
    v.setUint16(0, 0x0800);
    v.setUint32(4, 3);
    v.setUint16(8, 1);
    v.setUint8(11, 6);
  });
  return concat(h, ip);
}

/** An NFLOG record (LINKTYPE_NFLOG): header, then PACKET_HDR, PREFIX and PAYLOAD TLVs (lengths LE). */
function nflog(ip: Uint8Array): Uint8Array {
  const tlv = (type: number, value: Uint8Array) => {
    const b = new Uint8Array(pad4(4 + value.byteLength));
    const v = new DataView(b.buffer);
    v.setUint16(0, 4 + value.byteLength, true);
    v.setUint16(2, type, true);
    b.set(value, 4);
    return b;
  };
  return concat(
    new Uint8Array([2, 0, 0, 7]),
    tlv(1, new Uint8Array([0x08, 0x00, 1, 0])),
    tlv(10, enc.encode('drop\0')),
    tlv(9, ip),
  );
}

// ---- capture files ------------------------------------------------------------------------------

interface Frame {
  /** µs after BASE_US (fractions kept by ns files). */
  readonly t: number;
  readonly data: Uint8Array;
  /** Length on the wire when the frame was cut. */
  readonly orig?: number;
}

function ticks(t: number, nano: boolean): bigint {
  return nano ? BigInt(BASE_US) * 1000n + BigInt(Math.round(t * 1000)) : BigInt(BASE_US + Math.round(t));
}

function pcapng(frames: readonly Frame[], o: { linktype?: number; nano?: boolean; be?: boolean } = {}): Uint8Array {
  const le = !o.be;
  const block = (type: number, body: Uint8Array) => {
    const len = 12 + pad4(body.byteLength);
    return bytes(len, (v) => {
      v.setUint32(0, type, le);
      v.setUint32(4, len, le);
      new Uint8Array(v.buffer).set(body, 8);
      v.setUint32(len - 4, len, le);
    });
  };
  const shb = block(
    0x0a0d0d0a,
    bytes(16, (v) => {
      v.setUint32(0, 0x1a2b3c4d, le);
      v.setUint16(4, 1, le);
      v.setBigInt64(8, -1n, le);
    }),
  );
  const idb = block(
    1,
    bytes(o.nano ? 20 : 12, (v) => {
      v.setUint16(0, o.linktype ?? 1, le);
      v.setUint32(4, 262144, le);
      if (o.nano) {
        v.setUint16(8, 9, le); // if_tsresol
        v.setUint16(10, 1, le);
        v.setUint8(12, 9);
      }
    }),
  );
  const epbs = frames.map((f) => {
    const ts = ticks(f.t, o.nano ?? false);
    const head = bytes(20, (v) => {
      v.setUint32(4, Number(ts >> 32n), le);
      v.setUint32(8, Number(ts & 0xffffffffn), le);
      v.setUint32(12, f.data.byteLength, le);
      v.setUint32(16, f.orig ?? f.data.byteLength, le);
    });
    return block(6, concat(head, f.data));
  });
  return concat(shb, idb, ...epbs);
}

function pcap(frames: readonly Frame[], o: { linktype?: number; nano?: boolean; be?: boolean } = {}): Uint8Array {
  const le = !o.be;
  const head = bytes(24, (v) => {
    v.setUint32(0, o.nano ? 0xa1b23c4d : 0xa1b2c3d4, le);
    v.setUint16(4, 2, le);
    v.setUint16(6, 4, le);
    v.setUint32(16, 262144, le);
    v.setUint32(20, o.linktype ?? 1, le);
  });
  const recs = frames.map((f) => {
    const ts = ticks(f.t, o.nano ?? false);
    const div = o.nano ? 1_000_000_000n : 1_000_000n;
    const h = bytes(16, (v) => {
      v.setUint32(0, Number(ts / div), le);
      v.setUint32(4, Number(ts % div), le);
      v.setUint32(8, f.data.byteLength, le);
      v.setUint32(12, f.orig ?? f.data.byteLength, le);
    });
    return concat(h, f.data);
  });
  return concat(head, ...recs);
}

/** A link capture and its drop records in the making. */
class Cap {
  readonly link: { t: number; ip: Uint8Array }[] = [];
  readonly drops: Frame[] = [];
  /** A packet on the link at t; `dropAfter`: also dropped, its NFLOG record that many µs later. */
  add(t: number, ip: Uint8Array, dropAfter?: number): void {
    this.link.push({ t, ip });
    if (dropAfter !== undefined) this.drops.push({ t: t + dropAfter, data: nflog(ip) });
  }
  input(transport: 'tcp' | 'sctp', o: Partial<CaptureInput> = {}): CaptureInput {
    return {
      link: pcapng(this.link.map((p) => ({ t: p.t, data: ether(p.ip) }))),
      drops: [pcapng(this.drops, { linktype: 239 }), pcapng([], { linktype: 239 })],
      clockOffsetUs: -BASE_US,
      initiator: I,
      responder: R,
      transport,
      ...o,
    };
  }
}

// ---- MPA, DDP, the workload ---------------------------------------------------------------------

const SEND = 0x43; // RDMAP control: RV 1, opcode Send (RFC 5040 §4.3)

/** An untagged DDP Segment (RFC 5041 §4.3), DV 1. */
function untagged(msn: number, payload: Uint8Array, o: { qn?: number; mo?: number; last?: boolean } = {}) {
  const h = bytes(18, (v) => {
    v.setUint8(0, (o.last === false ? 0 : 0x40) | 0x01);
    v.setUint8(1, SEND);
    v.setUint32(6, o.qn ?? 0);
    v.setUint32(10, msn);
    v.setUint32(14, o.mo ?? 0);
  });
  return concat(h, payload);
}

/** A workload message: flow, reserved, seq, then filler to `size` octets. */
function message(flow: number, seq: number, size: number): Uint8Array {
  return bytes(size, (v) => {
    v.setUint16(0, flow);
    v.setUint32(4, seq);
    for (let i = 8; i < size; i++) v.setUint8(i, (i * 7 + seq) & 0xff);
  });
}

const hello = (flows: number[]) => enc.encode(JSON.stringify({ flows }));

/** An FPDU (RFC 5044 §4.1): ULPDU_Length, ULPDU, pad to 4, CRC (zeros here: never checked). */
function fpdu(ulpdu: Uint8Array): Uint8Array {
  const pad = (4 - ((ulpdu.byteLength + 2) & 3)) & 3;
  return concat(
    bytes(2, (v) => v.setUint16(0, ulpdu.byteLength)),
    ulpdu,
    new Uint8Array(pad + 4),
  );
}

/** An MPA Request or Reply frame (RFC 5044 §7.1.1), Rev 1, no Private Data. */
function mpaFrame(kind: 'Req' | 'Rep', flags = 0x40): Uint8Array {
  return concat(enc.encode(`MPA ID ${kind} Frame`), new Uint8Array([flags, 1, 0, 0]));
}

/** One direction's octet stream, with where each part starts. */
function stream(parts: Uint8Array[]): { octets: Uint8Array; at: number[] } {
  const at: number[] = [];
  let o = 0;
  for (const p of parts) {
    at.push(o);
    o += p.byteLength;
  }
  at.push(o);
  return { octets: concat(...parts), at };
}

/** A TCP connection between I and R: handshake, segments cut from each direction's stream. */
class Tcp {
  constructor(
    readonly cap: Cap,
    readonly req: Uint8Array,
    readonly rep: Uint8Array,
    readonly iPort = 40000,
    readonly rPort = 31000,
    readonly iIsn = 4294967000, // wraps within the first KiB of the initiator's stream
    readonly rIsn = 5000,
  ) {}
  handshake(t: number): void {
    this.cap.add(t, ipv4(I, R, 6, tcp(this.iPort, this.rPort, this.iIsn, 0, SYN)));
    this.cap.add(t + 10, ipv4(R, I, 6, tcp(this.rPort, this.iPort, this.rIsn, this.iIsn + 1, SYN | ACK)));
    this.cap.add(t + 20, ipv4(I, R, 6, tcp(this.iPort, this.rPort, this.iIsn + 1, this.rIsn + 1, ACK)));
  }
  /** Octets [start, end) of one direction's stream at t. */
  seg(dir: 'request' | 'response', start: number, end: number, t: number, dropAfter?: number): void {
    const req = dir === 'request';
    const octets = (req ? this.req : this.rep).subarray(start, end);
    const seq = (req ? this.iIsn : this.rIsn) + 1 + start;
    const ack = (req ? this.rIsn : this.iIsn) + 1;
    const seg = req
      ? tcp(this.iPort, this.rPort, seq, ack, ACK | PSH, octets)
      : tcp(this.rPort, this.iPort, seq, ack, ACK | PSH, octets);
    this.cap.add(t, req ? ipv4(I, R, 6, seg) : ipv4(R, I, 6, seg), dropAfter);
  }
  ack(dir: 'request' | 'response', t: number, dropAfter?: number, flags = ACK): void {
    const seg =
      dir === 'request'
        ? tcp(this.iPort, this.rPort, this.iIsn + 1, this.rIsn + 1, flags)
        : tcp(this.rPort, this.iPort, this.rIsn + 1, this.iIsn + 1, flags);
    this.cap.add(t, dir === 'request' ? ipv4(I, R, 6, seg) : ipv4(R, I, 6, seg), dropAfter);
  }
}

function find(trace: WireTrace, dir: 'request' | 'response', flow: number, seq: number): WireMessage {
  const m = trace.messages.find((x) => x.dir === dir && x.flow === flow && x.seq === seq);
  if (!m)
    throw new Error(`no ${dir} ${flow}/${seq} in ${JSON.stringify(trace.messages.map((x) => [x.dir, x.flow, x.seq]))}`);
  return m;
}

const W = 1024;
const FPDU_W = 2 + 18 + W + 4; // 1048: already 4-aligned
const TCP_CONN = 'tcp 10.78.0.1:40000>10.78.0.2:31000';

/** tcp-shared: flows 0, 1, 2 on one RDMAP Stream; HELLO, three requests, FIN; READY, three responses, FIN. */
function tcpShared() {
  const req = stream([
    mpaFrame('Req'),
    fpdu(untagged(1, hello([0, 1, 2]))),
    fpdu(untagged(2, message(0, 0, W))),
    fpdu(untagged(3, message(1, 0, W))),
    fpdu(untagged(4, message(2, 0, W))),
    fpdu(untagged(5, message(0xffff, 0, 8))),
  ]);
  const rep = stream([
    mpaFrame('Rep'),
    fpdu(untagged(1, enc.encode('READY'))),
    fpdu(untagged(2, message(0, 0, 8))),
    fpdu(untagged(3, message(1, 0, 8))),
    fpdu(untagged(4, message(2, 0, 8))),
    fpdu(untagged(5, enc.encode('FIN'))),
  ]);
  const cap = new Cap();
  const c = new Tcp(cap, req.octets, rep.octets);
  c.handshake(0);
  const part = (s: { at: number[] }, i: number) => [s.at[i] as number, s.at[i + 1] as number] as const;
  c.seg('request', ...part(req, 0), 100);
  c.seg('response', ...part(rep, 0), 110);
  c.seg('request', ...part(req, 1), 200);
  c.seg('response', ...part(rep, 1), 210);
  c.seg('request', ...part(req, 2), 1000, 30); // flow 0: dropped
  c.seg('request', ...part(req, 3), 1100);
  c.ack('response', 1150, 15); // a dropped pure ACK
  c.seg('request', ...part(req, 4), 1200);
  c.seg('request', ...part(req, 2), 6000); // retransmitted 5 ms later
  c.seg('response', ...part(rep, 2), 6100);
  c.seg('response', ...part(rep, 3), 6200);
  c.seg('response', ...part(rep, 4), 6300);
  c.seg('request', ...part(req, 5), 7000);
  c.seg('response', ...part(rep, 5), 7100);
  c.ack('request', 7200, undefined, FIN | ACK);
  // A drop record of a packet the link never carried.
  cap.drops.push({ t: 7300, data: nflog(ipv4(I, R, 17, udp(1, 2, new Uint8Array(4)))) });
  return { cap, req, rep };
}

describe('experiment capture: MPA/TCP', () => {
  it('tcp-shared: a dropped segment of flow 0, the others passing; losses and repair times', () => {
    const { cap, req } = tcpShared();
    const trace = decodeCapture(cap.input('tcp'));
    expect(trace.problems).toEqual([]);
    expect(trace.packets).toBe(18);
    expect(trace.dropped).toBe(2);
    expect(trace.unmatchedDrops).toBe(1);
    const f0 = find(trace, 'request', 0, 0);
    expect(f0).toEqual({
      dir: 'request',
      flow: 0,
      seq: 0,
      conn: TCP_CONN,
      firstOctetUs: 1000,
      firstCompleteUs: 1000,
      arrivedUs: 6000,
      lost: [{ dropUs: 1000, repairUs: 6000 }],
    });
    // Arrival at the host, not in-order delivery: flows 1 and 2 are there at their own packets.
    expect(find(trace, 'request', 1, 0)).toMatchObject({ firstOctetUs: 1100, arrivedUs: 1100, lost: [] });
    expect(find(trace, 'request', 2, 0)).toMatchObject({ firstCompleteUs: 1200, arrivedUs: 1200, lost: [] });
    expect(trace.losses).toEqual([
      {
        atUs: 1000,
        dir: 'request',
        conn: TCP_CONN,
        kind: 'data',
        messages: [{ dir: 'request', flow: 0, seq: 0 }],
        repairedUs: 6000,
        summary: `TCP seq ${(req.at[2] as number) + 1}+${FPDU_W}`,
      },
      {
        atUs: 1150,
        dir: 'response',
        conn: TCP_CONN,
        kind: 'control',
        messages: [],
        repairedUs: 1150,
        summary: 'TCP ACK',
      },
    ]);
  });

  it('responses are 8-octet Sends back; HELLO, READY and FIN are not messages', () => {
    const trace = decodeCapture(tcpShared().cap.input('tcp'));
    expect(trace.messages.map((m) => [m.dir, m.flow, m.seq])).toEqual([
      ['request', 0, 0],
      ['request', 1, 0],
      ['request', 2, 0],
      ['response', 0, 0],
      ['response', 1, 0],
      ['response', 2, 0],
    ]);
    expect(find(trace, 'response', 1, 0)).toMatchObject({ firstOctetUs: 6200, arrivedUs: 6200, conn: TCP_CONN });
  });

  /** tcp-conns style, one flow: five requests cut across segments in several ways. */
  function split() {
    const parts = [0, 1, 2, 3, 4].map((s) => fpdu(untagged(2 + s, message(3, s, W))));
    const req = stream([mpaFrame('Req'), fpdu(untagged(1, hello([3]))), ...parts]);
    const rep = stream([mpaFrame('Rep'), fpdu(untagged(1, enc.encode('READY')))]);
    const cap = new Cap();
    const c = new Tcp(cap, req.octets, rep.octets, 40001, 31000);
    c.handshake(0);
    c.seg('request', 0, req.at[1] as number, 100);
    c.seg('response', 0, rep.at[2] as number, 110); // the Reply and READY in one segment
    c.seg('request', req.at[1] as number, req.at[2] as number, 200);
    const d = req.at[2] as number; // message k's FPDU is [d + k·1048, d + (k+1)·1048)
    c.seg('request', d, d + 2096, 1000); // messages 0 and 1 in one segment
    c.seg('request', d + 2096, d + 2700, 2000); // message 2 split: first part
    c.seg('request', d + 2700, d + 3700, 3000, 50); // end of 2, start of 3: dropped
    c.seg('request', d + 3700, d + 4192, 4000); // end of 3
    c.seg('request', d + 4192, d + 5240, 4500, 10); // message 4: dropped, never repaired
    c.seg('request', d + 2600, d + 3700, 6000); // the retransmission also covers octets seen before
    return { cap, d };
  }

  it('a message split across segments, two in one segment; a dropped segment carrying two messages', () => {
    const { cap, d } = split();
    const trace = decodeCapture(cap.input('tcp'));
    const conn = 'tcp 10.78.0.1:40001>10.78.0.2:31000';
    expect(find(trace, 'request', 3, 0)).toMatchObject({ firstOctetUs: 1000, firstCompleteUs: 1000, arrivedUs: 1000 });
    expect(find(trace, 'request', 3, 1)).toMatchObject({ firstOctetUs: 1000, arrivedUs: 1000, lost: [] });
    expect(find(trace, 'request', 3, 2)).toMatchObject({
      conn,
      firstOctetUs: 2000,
      firstCompleteUs: 3000,
      arrivedUs: 6000,
      lost: [{ dropUs: 3000, repairUs: 6000 }],
    });
    expect(find(trace, 'request', 3, 3)).toMatchObject({
      firstOctetUs: 3000,
      firstCompleteUs: 4000,
      arrivedUs: 6000,
      lost: [{ dropUs: 3000, repairUs: 6000 }],
    });
    expect(find(trace, 'request', 3, 4)).toMatchObject({
      firstOctetUs: 4500,
      firstCompleteUs: 4500,
      arrivedUs: Number.POSITIVE_INFINITY,
      lost: [{ dropUs: 4500, repairUs: Number.POSITIVE_INFINITY }],
    });
    expect(trace.losses).toEqual([
      {
        atUs: 3000,
        dir: 'request',
        conn,
        kind: 'data',
        messages: [
          { dir: 'request', flow: 3, seq: 2 },
          { dir: 'request', flow: 3, seq: 3 },
        ],
        repairedUs: 6000,
        summary: `TCP seq ${d + 2701}+1000`,
      },
      expect.objectContaining({ atUs: 4500, kind: 'data', repairedUs: Number.POSITIVE_INFINITY }),
    ]);
  });

  it('reads 802.1Q-tagged Ethernet and Linux cooked v2 frames alike', () => {
    const { cap } = split();
    const want = decodeCapture(cap.input('tcp'));
    const vlan = pcapng(cap.link.map((p) => ({ t: p.t, data: ether(p.ip, true) })));
    const cooked = pcapng(
      cap.link.map((p) => ({ t: p.t, data: sll2(p.ip) })),
      { linktype: 276 },
    );
    for (const link of [vlan, cooked]) {
      const got = decodeCapture({ ...cap.input('tcp'), link });
      expect(got.messages).toEqual(want.messages);
      expect(got.losses).toEqual(want.losses);
    }
  });

  it('refuses MPA Markers', () => {
    const req = stream([mpaFrame('Req', 0xc0), fpdu(untagged(1, hello([0])))]);
    const rep = stream([mpaFrame('Rep', 0x40)]);
    const cap = new Cap();
    const c = new Tcp(cap, req.octets, rep.octets);
    c.handshake(0);
    c.seg('request', 0, req.octets.byteLength, 100);
    c.seg('response', 0, rep.octets.byteLength, 110);
    expect(() => decodeCapture(cap.input('tcp'))).toThrow(/Markers/);
    expect(() => decodeCapture(cap.input('tcp'))).toThrow(ExperimentCaptureError);
  });

  it('octets never captured: a message without its end never arrives; a lost FPDU header stops the stream', () => {
    const tail = split();
    tail.cap.link.splice(
      tail.cap.link.findIndex((p) => p.t === 4000),
      1,
    );
    let trace = decodeCapture(tail.cap.input('tcp'));
    expect(trace.problems).toEqual([]);
    expect(find(trace, 'request', 3, 3)).toMatchObject({
      firstOctetUs: 3000,
      firstCompleteUs: Number.POSITIVE_INFINITY,
      arrivedUs: Number.POSITIVE_INFINITY,
    });
    expect(find(trace, 'request', 3, 4)).toMatchObject({ firstOctetUs: 4500 });
    const head = split();
    head.cap.link.splice(
      head.cap.link.findIndex((p) => p.t === 2000),
      1,
    );
    trace = decodeCapture(head.cap.input('tcp'));
    expect(trace.problems).toEqual([
      `tcp 10.78.0.1:40001>10.78.0.2:31000 request: stream octets from offset ${head.d + 2096} were not captured; the FPDUs after them are not decoded`,
    ]);
    expect(trace.messages.map((m) => m.seq)).toEqual([0, 1]);
  });
});

// ---- SCTP ---------------------------------------------------------------------------------------

const SCTP_CONN = 'sctp 10.78.0.1:40000/5000>10.78.0.2:31000/5000';

function chunk(type: number, flags: number, value: Uint8Array): Uint8Array {
  const h = bytes(4, (v) => {
    v.setUint8(0, type);
    v.setUint8(1, flags);
    v.setUint16(2, 4 + value.byteLength);
  });
  const c = concat(h, value);
  return concat(c, new Uint8Array(pad4(c.byteLength) - c.byteLength));
}

/** DATA (RFC 4960 §3.3.1); flags B|E by default. */
function data(tsn: number, stream: number, ssn: number, ppid: number, user: Uint8Array, flags = 3): Uint8Array {
  const h = bytes(12, (v) => {
    v.setUint32(0, tsn);
    v.setUint16(4, stream);
    v.setUint16(6, ssn);
    v.setUint32(8, ppid);
  });
  return chunk(0, flags, concat(h, user));
}

/** I-DATA (RFC 8260 §2.1): PPID with B, FSN otherwise. */
function idata(tsn: number, stream: number, mid: number, ppidOrFsn: number, user: Uint8Array, flags: number) {
  const h = bytes(16, (v) => {
    v.setUint32(0, tsn);
    v.setUint16(4, stream);
    v.setUint32(8, mid);
    v.setUint32(12, ppidOrFsn);
  });
  return chunk(64, flags, concat(h, user));
}

const sack = (cumTsn: number) =>
  chunk(
    3,
    0,
    bytes(12, (v) => {
      v.setUint32(0, cumTsn);
      v.setUint32(4, 65536);
    }),
  );

/** SCTP over UDP between I (UDP iUdp) and R (UDP 31000), SCTP ports 5000 both. */
function sctp(dir: 'request' | 'response', chunks: Uint8Array[], iUdp = 40000): Uint8Array {
  const common = bytes(12, (v) => {
    v.setUint16(0, 5000);
    v.setUint16(2, 5000);
    v.setUint32(4, dir === 'request' ? 0x1111 : 0x2222);
  });
  const payload = concat(common, ...chunks);
  return dir === 'request'
    ? ipv4(I, R, 17, udp(iUdp, 31000, payload), 0)
    : ipv4(R, I, 17, udp(31000, iUdp, payload), 0);
}

const DDP = 16;
const SESSION = 17;

function sctpStreams() {
  const cap = new Cap();
  cap.add(0, sctp('request', [chunk(1, 0, new Uint8Array(16))])); // INIT
  cap.add(10, sctp('response', [chunk(2, 0, new Uint8Array(16))])); // INIT ACK
  cap.add(20, sctp('request', [chunk(10, 0, new Uint8Array(8))])); // COOKIE ECHO
  cap.add(30, sctp('response', [chunk(11, 0, new Uint8Array(0))])); // COOKIE ACK
  cap.add(50, sctp('request', [data(100, 0, 0, SESSION, new Uint8Array([0, 1, 0, 0]))]));
  cap.add(60, sctp('response', [data(900, 0, 0, SESSION, new Uint8Array([0, 2, 0, 0]))]));
  cap.add(100, sctp('request', [data(101, 0, 1, DDP, untagged(1, hello([0])))]));
  cap.add(101, sctp('request', [data(102, 1, 1, DDP, untagged(1, hello([1])))]));
  cap.add(110, sctp('response', [data(901, 0, 1, DDP, untagged(1, enc.encode('READY')))]));
  cap.add(111, sctp('response', [data(902, 1, 1, DDP, untagged(1, enc.encode('READY')))]));
  cap.add(1000, sctp('request', [data(103, 0, 2, DDP, untagged(2, message(0, 0, W)))]));
  const lost = data(104, 1, 2, DDP, untagged(2, message(1, 0, W)));
  cap.add(1010, sctp('request', [lost]), 20); // stream 1's request: dropped
  cap.add(1020, sctp('response', [sack(104)]), 5); // a dropped SACK
  cap.add(1500, sctp('response', [data(903, 0, 2, DDP, untagged(2, message(0, 0, 8)))]));
  cap.add(4000, sctp('request', [sack(903), lost])); // retransmitted, bundled with a SACK
  cap.add(4100, sctp('response', [data(904, 1, 2, DDP, untagged(2, message(1, 0, 8)))]));
  // A 2048-octet request in two fragments; the second (E) dropped and retransmitted.
  const big = untagged(3, message(0, 1, 2048));
  const b = data(105, 0, 3, DDP, big.subarray(0, 1200), 2);
  const e = data(106, 0, 3, DDP, big.subarray(1200), 1);
  cap.add(5000, sctp('request', [b]));
  cap.add(5001, sctp('request', [e]), 3);
  cap.add(7000, sctp('request', [e]));
  cap.add(7100, sctp('response', [data(905, 0, 3, DDP, untagged(3, message(0, 1, 8)))]));
  // FIN and its answer on stream 0.
  cap.add(8000, sctp('request', [data(107, 0, 4, DDP, untagged(4, message(0xffff, 0, 8)))]));
  cap.add(8100, sctp('response', [data(906, 0, 4, DDP, untagged(4, enc.encode('FIN')))]));
  return cap;
}

describe('experiment capture: SCTP in UDP', () => {
  it('sctp-streams: a DATA chunk of stream 1 dropped and retransmitted with a SACK; a dropped SACK is control', () => {
    const trace = decodeCapture(sctpStreams().input('sctp'));
    expect(trace.problems).toEqual([]);
    expect(trace.dropped).toBe(3);
    expect(trace.unmatchedDrops).toBe(0);
    expect(find(trace, 'request', 0, 0)).toEqual({
      dir: 'request',
      flow: 0,
      seq: 0,
      conn: SCTP_CONN,
      firstOctetUs: 1000,
      firstCompleteUs: 1000,
      arrivedUs: 1000,
      lost: [],
    });
    expect(find(trace, 'request', 1, 0)).toMatchObject({
      firstOctetUs: 1010,
      firstCompleteUs: 1010,
      arrivedUs: 4000,
      lost: [{ dropUs: 1010, repairUs: 4000 }],
    });
    expect(find(trace, 'request', 0, 1)).toMatchObject({
      firstOctetUs: 5000,
      firstCompleteUs: 5001,
      arrivedUs: 7000,
      lost: [{ dropUs: 5001, repairUs: 7000 }],
    });
    expect(trace.messages.map((m) => [m.dir, m.flow, m.seq])).toEqual([
      ['request', 0, 0],
      ['request', 1, 0],
      ['response', 0, 0],
      ['response', 1, 0],
      ['request', 0, 1],
      ['response', 0, 1],
    ]);
    expect(find(trace, 'response', 1, 0)).toMatchObject({ firstOctetUs: 4100, arrivedUs: 4100 });
    expect(trace.losses).toEqual([
      {
        atUs: 1010,
        dir: 'request',
        conn: SCTP_CONN,
        kind: 'data',
        messages: [{ dir: 'request', flow: 1, seq: 0 }],
        repairedUs: 4000,
        summary: 'SCTP DATA TSN 104 stream 1 SSN 2',
      },
      {
        atUs: 1020,
        dir: 'response',
        conn: SCTP_CONN,
        kind: 'control',
        messages: [],
        repairedUs: 1020,
        summary: 'SCTP SACK',
      },
      {
        atUs: 5001,
        dir: 'request',
        conn: SCTP_CONN,
        kind: 'data',
        messages: [{ dir: 'request', flow: 0, seq: 1 }],
        repairedUs: 7000,
        summary: 'SCTP DATA TSN 106 stream 0 SSN 3',
      },
    ]);
  });

  it('I-DATA: fragments by MID and FSN, captured out of order, one dropped', () => {
    const cap = new Cap();
    const iUdp = 40002;
    const conn = 'sctp 10.78.0.1:40002/5000>10.78.0.2:31000/5000';
    const BE = 3;
    cap.add(50, sctp('request', [idata(10, 0, 0, SESSION, new Uint8Array([0, 1, 0, 0]), BE)], iUdp));
    cap.add(60, sctp('response', [idata(70, 0, 0, SESSION, new Uint8Array([0, 2, 0, 0]), BE)], iUdp));
    cap.add(100, sctp('request', [idata(11, 0, 1, DDP, untagged(1, hello([5])), BE)], iUdp));
    cap.add(110, sctp('response', [idata(71, 0, 1, DDP, untagged(1, enc.encode('READY')), BE)], iUdp));
    const big = untagged(2, message(5, 0, 3000));
    const f0 = idata(12, 0, 2, DDP, big.subarray(0, 1000), 2);
    const f1 = idata(13, 0, 2, 1, big.subarray(1000, 2000), 0);
    const f2 = idata(14, 0, 2, 2, big.subarray(2000), 1);
    cap.add(1000, sctp('request', [f0], iUdp));
    cap.add(1001, sctp('request', [f2], iUdp));
    cap.add(1002, sctp('request', [f1], iUdp), 1);
    cap.add(2000, sctp('request', [f1], iUdp));
    cap.add(2100, sctp('response', [idata(72, 0, 2, DDP, untagged(2, message(5, 0, 8)), BE)], iUdp));
    const trace = decodeCapture(cap.input('sctp'));
    expect(trace.messages).toEqual([
      {
        dir: 'request',
        flow: 5,
        seq: 0,
        conn,
        firstOctetUs: 1000,
        firstCompleteUs: 1002,
        arrivedUs: 2000,
        lost: [{ dropUs: 1002, repairUs: 2000 }],
      },
      { dir: 'response', flow: 5, seq: 0, conn, firstOctetUs: 2100, firstCompleteUs: 2100, arrivedUs: 2100, lost: [] },
    ]);
    expect(trace.losses).toEqual([
      {
        atUs: 1002,
        dir: 'request',
        conn,
        kind: 'data',
        messages: [{ dir: 'request', flow: 5, seq: 0 }],
        repairedUs: 2000,
        summary: 'SCTP I-DATA TSN 13 stream 0 MID 2 FSN 1',
      },
    ]);
  });
});

// ---- timestamps and drop matching ---------------------------------------------------------------

describe('experiment capture: timestamps and drop matching', () => {
  it('ns-resolution pcapng (big-endian) link, classic µs pcap drops, the clock offset applied', () => {
    const cap = sctpStreams();
    const link = pcapng(
      cap.link.map((p) => ({ t: p.t === 1000 ? 1000.25 : p.t, data: ether(p.ip) })),
      { nano: true, be: true },
    );
    const drops = [pcap(cap.drops, { linktype: 239 })];
    const offset = -BASE_US + 5_000_000;
    const trace = decodeCapture({ ...cap.input('sctp'), link, drops, clockOffsetUs: offset });
    expect(trace.dropped).toBe(3);
    expect(find(trace, 'request', 0, 0)).toMatchObject({ firstOctetUs: 5_001_000.25, arrivedUs: 5_001_000.25 });
    expect(find(trace, 'request', 1, 0)).toMatchObject({ lost: [{ dropUs: 5_001_010, repairUs: 5_004_000 }] });
    expect(trace.losses.map((l) => l.atUs)).toEqual([5_001_010, 5_001_020, 5_005_001]);
  });

  it('classic pcap with the ns magic, and a µs one', () => {
    const cap = sctpStreams();
    for (const nano of [true, false]) {
      const link = pcap(
        cap.link.map((p) => ({ t: p.t, data: ether(p.ip) })),
        { nano, be: nano },
      );
      const trace = decodeCapture({ ...cap.input('sctp'), link });
      expect(find(trace, 'request', 1, 0)).toMatchObject({ arrivedUs: 4000, lost: [{ dropUs: 1010, repairUs: 4000 }] });
    }
  });

  it('an identical datagram sent twice (IP ID 0): the drop record takes the nearest copy', () => {
    const same = () => sctp('response', [sack(500)]);
    for (const [dropAt, want] of [
      [6030, 6000],
      [1050, 1000],
    ] as const) {
      const cap = new Cap();
      cap.add(1000, same());
      cap.add(6000, same());
      cap.drops.push({ t: dropAt, data: nflog(same()) });
      const trace = decodeCapture(cap.input('sctp'));
      expect(trace.dropped).toBe(1);
      expect(trace.losses).toEqual([expect.objectContaining({ atUs: want, kind: 'control', summary: 'SCTP SACK' })]);
    }
  });

  it('drop records outside [−1 ms, +3 s] of every copy stay unmatched (NFLOG records are stamped when read)', () => {
    const cap = new Cap();
    cap.add(1000, sctp('response', [sack(1)]));
    cap.drops.push({ t: 1000 + 3_000_001, data: nflog(sctp('response', [sack(1)])) });
    cap.drops.push({ t: 1000 - 1_001, data: nflog(sctp('response', [sack(1)])) });
    const trace = decodeCapture(cap.input('sctp'));
    expect(trace).toMatchObject({ packets: 1, dropped: 0, unmatchedDrops: 2, losses: [] });
  });
});

// ---- malformed input ----------------------------------------------------------------------------

describe('experiment capture: malformed input', () => {
  const good = () => tcpShared().cap.input('tcp');

  it('a file of another format, an empty one, a truncated one: ExperimentCaptureError naming the file', () => {
    const bad = (o: Partial<CaptureInput>) => () => decodeCapture({ ...good(), ...o });
    expect(bad({ link: enc.encode('GIF89a, not a capture') })).toThrow(
      /^link capture: not a pcapng or pcap file \(first word 0x38464947\)$/,
    );
    expect(bad({ link: new Uint8Array(0) })).toThrow(ExperimentCaptureError);
    const link = good().link;
    expect(bad({ link: link.subarray(0, link.byteLength - 10) })).toThrow(
      /^link capture: truncated block at offset \d+/,
    );
    const classic = pcap([{ t: 0, data: ether(ipv4(I, R, 17, udp(1, 2, new Uint8Array(8)))) }]);
    expect(bad({ link: classic.subarray(0, classic.byteLength - 1) })).toThrow(
      /^link capture: truncated record at offset 24/,
    );
    expect(bad({ drops: [new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])] })).toThrow(
      /^drop capture 0: not a pcapng or pcap file/,
    );
    expect(bad({ initiator: '10.78.0' })).toThrow(/initiator address "10.78.0" is not a dotted IPv4 address/);
    let caught: unknown;
    try {
      bad({ link: new Uint8Array(3) })();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ExperimentCaptureError);
    expect((caught as ExperimentCaptureError).code).toBe('ERR_EXPERIMENT_CAPTURE');
    expect((caught as Error).name).toBe('ExperimentCaptureError');
    expect((caught as Error).message).toBe('link capture: 3 octets: too short for a capture file');
  });

  it('cut packets are skipped and counted, not thrown', () => {
    const { cap } = tcpShared();
    const frames: Frame[] = cap.link.map((p) => ({ t: p.t, data: ether(p.ip) }));
    const cut = frames.findIndex((f) => f.t === 1100); // flow 1's request, cut by the snap length
    const f = frames[cut] as Frame;
    frames[cut] = { t: f.t, data: f.data.subarray(0, 100), orig: f.data.byteLength };
    frames.push({ t: 9000, data: ether(new Uint8Array([0x45, 0, 0])) });
    const trace = decodeCapture({ ...cap.input('tcp'), link: pcapng(frames) });
    expect(trace.truncated).toBe(2);
    expect(trace.packets).toBe(17);
    expect(find(trace, 'request', 0, 0)).toMatchObject({ arrivedUs: 6000 });
    // Flow 1's octets were never captured whole: the stream after them is not decoded, and says so.
    expect(trace.problems).toHaveLength(1);
    expect(trace.messages.some((m) => m.flow === 1 && m.dir === 'request')).toBe(false);
  });
});

describe('experiment capture: a run-sized capture', () => {
  it('10 000 requests and their responses over one MPA/TCP connection, 1% dropped', () => {
    const n = 10_000;
    const flows = 8;
    const size = 256;
    const reqParts = [mpaFrame('Req'), fpdu(untagged(1, hello([0, 1, 2, 3, 4, 5, 6, 7])))];
    const repParts = [mpaFrame('Rep'), fpdu(untagged(1, enc.encode('READY')))];
    for (let k = 0; k < n; k++) {
      reqParts.push(fpdu(untagged(2 + k, message(k % flows, Math.floor(k / flows), size))));
      repParts.push(fpdu(untagged(2 + k, message(k % flows, Math.floor(k / flows), 8))));
    }
    const req = stream(reqParts);
    const rep = stream(repParts);
    const cap = new Cap();
    const c = new Tcp(cap, req.octets, rep.octets);
    c.handshake(0);
    c.seg('request', 0, req.at[2] as number, 100);
    c.seg('response', 0, rep.at[2] as number, 110);
    const retransmit: [number, number, number][] = [];
    for (let k = 0; k < n; k++) {
      const t = 1000 + k * 100;
      const [a, b] = [req.at[2 + k] as number, req.at[3 + k] as number];
      const lost = k % 100 === 7;
      c.seg('request', a, b, t, lost ? 20 : undefined);
      if (lost) retransmit.push([a, b, t + 5000]);
      while (retransmit.length > 0 && (retransmit[0] as [number, number, number])[2] <= t + 50) {
        const [ra, rb, rt] = retransmit.shift() as [number, number, number];
        c.seg('request', ra, rb, rt);
      }
      c.seg('response', rep.at[2 + k] as number, rep.at[3 + k] as number, t + 60);
      c.ack('request', t + 70);
    }
    const input = cap.input('tcp');
    const started = performance.now();
    const trace = decodeCapture(input);
    const ms = performance.now() - started;
    expect(trace.problems).toEqual([]);
    expect(trace.packets).toBe(3 + 2 + 3 * n + n / 100);
    expect(trace.dropped).toBe(n / 100);
    expect(trace.messages).toHaveLength(2 * n);
    expect(trace.losses).toHaveLength(n / 100);
    expect(find(trace, 'request', 7, 0)).toMatchObject({ firstOctetUs: 1700, arrivedUs: 6700 });
    expect(find(trace, 'request', 7, 0).lost).toEqual([{ dropUs: 1700, repairUs: 6700 }]);
    expect(ms).toBeLessThan(5000); // ≈0.4 s here: no quadratic scan
  });
});
