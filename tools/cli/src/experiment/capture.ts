/**
 * The experiment link's captures as per-message wire evidence: when each measured message's octets first
 * crossed the link, when all of them had, when all of them had in copies that were not dropped, and which
 * dropped packets carried whose octets. Pure: capture files in, a trace out.
 *
 * The link capture (veth in namespace B, before netfilter) holds every packet of both directions; the NFLOG
 * captures hold the packets the input hooks dropped. A link packet is dropped when a drop record has the
 * same IP octets within [−1 ms, +100 ms] of it (nearest first: IPv4 IDs repeat, UDP with DF sends ID 0).
 *
 * Above IP: MPA/TCP (RFC 5044: startup frames §7.1, FPDUs §4.1; Markers unsupported) or SCTP in UDP
 * (RFC 6951; DATA RFC 4960 §3.3.1, I-DATA RFC 8260 §2.1), each SCTP user message one DDP Segment
 * (RFC 5043: PPID 16; PPID 17 is session control). DDP headers per RFC 5041 §4. IPv4 only (the link is).
 * Checksums are not checked: veth leaves them partial.
 */
import { SCTP_CHUNK_NAMES } from '@rddp/conformance';
import { type CaptureRecord, networkPayload, PcapFormatError, readCapture } from './pcap.js';

/** A capture that cannot be decoded (bad file, bad address, an MPA option the decoder does not support). */
export class ExperimentCaptureError extends Error {
  readonly code = 'ERR_EXPERIMENT_CAPTURE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export type WireDir = 'request' | 'response';

export interface CaptureInput {
  /** pcapng (or classic pcap) of the link, linktype Ethernet (1): every packet of both directions, also those later dropped. */
  readonly link: Uint8Array;
  /** pcapng/pcap captures of dropped packets from NFLOG (linktype 239), one per namespace; may be empty arrays. */
  readonly drops: readonly Uint8Array[];
  /** Added to a capture timestamp (µs since the epoch) gives the host's monotonic clock in µs. */
  readonly clockOffsetUs: number;
  readonly initiator: string;
  readonly responder: string;
  readonly transport: 'sctp' | 'tcp';
}

export interface WireMessage {
  readonly dir: WireDir;
  readonly flow: number;
  readonly seq: number;
  /** The connection: "tcp I:port>R:port" or "sctp I:udpPort/sctpPort>R:udpPort/sctpPort", initiator first. */
  readonly conn: string;
  /** The first copy of its first octet passed the capture point (host monotonic µs). */
  readonly firstOctetUs: number;
  /** Every octet of it had passed the capture point, counting copies that were then dropped. */
  readonly firstCompleteUs: number;
  /** Every octet of it had passed in copies that were NOT dropped. Infinity if never. */
  readonly arrivedUs: number;
  /** One entry per dropped packet that carried octets of this message. */
  readonly lost: readonly { readonly dropUs: number; readonly repairUs: number }[];
}

export interface WireLoss {
  readonly atUs: number;
  readonly dir: WireDir;
  readonly conn: string;
  readonly kind: 'data' | 'control';
  readonly messages: readonly { readonly dir: WireDir; readonly flow: number; readonly seq: number }[];
  /** When every lost octet of measured messages had passed again undropped (Infinity if never; atUs for control). */
  readonly repairedUs: number;
  readonly summary: string;
}

export interface WireTrace {
  /** Link packets decoded (IPv4 datagrams captured whole). */
  readonly packets: number;
  /** Link packets matched to a drop record. */
  readonly dropped: number;
  /** Drop records with no link packet. */
  readonly unmatchedDrops: number;
  /** Records skipped because the capture cut them (link and drop captures). */
  readonly truncated: number;
  /** IPv4 fragments other than the first, ignored. */
  readonly fragments: number;
  /** What could not be decoded (a TCP stream gap, a connection without its SYN…), for the report. */
  readonly problems: string[];
  readonly messages: WireMessage[];
  readonly losses: WireLoss[];
}

/**
 * Drop record time minus link packet time: within [−1 ms, +3 s]. An NFLOG record of a packet that crossed
 * the veth carries no kernel timestamp (the veth clears skb->tstamp between namespaces), so libpcap stamps
 * it when read, and nfnetlink_log batches records (seen up to 0.25 s late): the record only names WHICH
 * packet was dropped; its time is the link packet's.
 */
const MATCH_BEFORE_US = 1_000;
const MATCH_AFTER_US = 3_000_000;
/** Octets of the IP datagram that key the drop matching (IP header and the transport header's start). */
const KEY_OCTETS = 48;
const PROBLEMS_MAX = 50;
const TWO_32 = 2 ** 32;

const PROTO_TCP = 6;
const PROTO_UDP = 17;
/** Workload header (workload.ts): flow u16, reserved u16, seq u32; FIN is flow 0xffff. */
const WORKLOAD_HEADER = 8;
const FIN_FLOW = 0xffff;
const RESPONSE_LENGTH = 8;

// ---- IPv4 ---------------------------------------------------------------------------------------

interface Ip {
  readonly src: number;
  readonly dst: number;
  readonly proto: number;
  /** Header length. */
  readonly hl: number;
  /** Total length (the captured length for a TSO datagram whose field is 0). */
  readonly len: number;
  readonly fragOff: number;
}

/** The IPv4 header (RFC 791 §3.1); 'truncated' when fewer octets were captured than `whole` needs. */
function parseIp(b: Uint8Array, whole: boolean): Ip | 'truncated' {
  if (b.byteLength < 20) return 'truncated';
  const hl = ((b[0] as number) & 0x0f) * 4;
  if (hl < 20 || b.byteLength < hl) return 'truncated';
  let len = be16(b, 2);
  if (len === 0) len = b.byteLength; // TSO/GSO super-packet
  if (len < hl || (whole && b.byteLength < len)) return 'truncated';
  return { src: be32(b, 12), dst: be32(b, 16), proto: b[9] as number, hl, len, fragOff: be16(b, 6) & 0x1fff };
}

function parseAddress(s: string, what: string): number {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  const parts = m ? m.slice(1).map(Number) : [];
  if (parts.length !== 4 || parts.some((p) => p > 255))
    throw new ExperimentCaptureError(`${what} address ${JSON.stringify(s)} is not a dotted IPv4 address`);
  return (
    (((parts[0] as number) << 24) |
      ((parts[1] as number) << 16) |
      ((parts[2] as number) << 8) |
      (parts[3] as number)) >>>
    0
  );
}

// ---- packets and drop matching ------------------------------------------------------------------

interface Pkt {
  readonly t: number;
  /** The datagram, [0, total length). */
  readonly ip: Uint8Array;
  readonly h: Ip;
  dropped: boolean;
}

interface Drop {
  readonly t: number;
  /** As captured, at most the total length (NFLOG may copy less). */
  readonly ip: Uint8Array;
  readonly key: string | undefined;
}

function keyOf(ip: Uint8Array, len: number): string | undefined {
  const n = Math.min(KEY_OCTETS, len);
  if (ip.byteLength < n) return undefined;
  return Buffer.from(ip.buffer, ip.byteOffset, n).toString('latin1');
}

function records(bytes: Uint8Array, what: string): CaptureRecord[] {
  try {
    return readCapture(bytes);
  } catch (e) {
    if (e instanceof PcapFormatError) throw new ExperimentCaptureError(`${what}: ${e.message}`, { cause: e });
    throw e;
  }
}

function sameOctets(a: Uint8Array, b: Uint8Array): boolean {
  const n = Math.min(a.byteLength, b.byteLength);
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, n), Buffer.from(b.buffer, b.byteOffset, n)) === 0;
}

/**
 * Marks the link packets the drop records name: each record, in time order, takes the nearest link packet
 * not yet taken with the same octets in the window. Returns the records left unmatched.
 */
function matchDrops(link: readonly Pkt[], drops: Drop[]): number {
  const wanted = new Set<string>();
  for (const d of drops) if (d.key !== undefined) wanted.add(d.key);
  const byKey = new Map<string, Pkt[]>();
  for (const p of link) {
    const k = keyOf(p.ip, p.h.len);
    if (k === undefined || !wanted.has(k)) continue;
    let list = byKey.get(k);
    if (!list) byKey.set(k, (list = []));
    list.push(p); // `link` is in time order
  }
  let unmatched = 0;
  drops.sort((a, b) => a.t - b.t);
  for (const d of drops) {
    const list = d.key === undefined ? undefined : byKey.get(d.key);
    let best: Pkt | undefined;
    if (list) {
      let i = lowerBound(list.length, (j) => (list[j] as Pkt).t >= d.t - MATCH_AFTER_US);
      for (; i < list.length; i++) {
        const p = list[i] as Pkt;
        if (p.t > d.t + MATCH_BEFORE_US) break;
        if (p.dropped || !sameOctets(p.ip, d.ip)) continue;
        if (!best || Math.abs(p.t - d.t) < Math.abs(best.t - d.t)) best = p;
      }
    }
    if (best) best.dropped = true;
    else unmatched++;
  }
  return unmatched;
}

// ---- octet streams: earliest-copy envelopes (TCP) -----------------------------------------------

/** A TCP segment's payload at stream offsets [start, end). */
interface TcpSeg {
  readonly start: number;
  readonly end: number;
  readonly t: number;
  readonly dropped: boolean;
  readonly ip: Uint8Array;
  /** Offset in `ip` of the octet at `start`. */
  readonly pay: number;
}

/**
 * Per stream offset, the earliest copy covering it: disjoint pieces [starts[i], ends[i]) in order, each
 * with that copy's time and segment. Offsets in no piece were never captured (in such copies).
 */
interface Envelope {
  readonly starts: number[];
  readonly ends: number[];
  readonly times: number[];
  readonly srcs: number[];
}

/** Lower envelope of the segments `use` admits by time: a sweep over their boundaries with a min-heap. */
function envelope(segs: readonly TcpSeg[], use: (s: TcpSeg) => boolean): Envelope {
  const env: Envelope = { starts: [], ends: [], times: [], srcs: [] };
  const idx: number[] = [];
  const xs: number[] = [];
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i] as TcpSeg;
    if (!use(s) || s.end <= s.start) continue;
    idx.push(i);
    xs.push(s.start, s.end);
  }
  idx.sort((a, b) => (segs[a] as TcpSeg).start - (segs[b] as TcpSeg).start);
  xs.sort((a, b) => a - b);
  const before = (a: number, b: number) => {
    const ta = (segs[a] as TcpSeg).t;
    const tb = (segs[b] as TcpSeg).t;
    return ta < tb || (ta === tb && a < b);
  };
  const heap = new MinHeap(before);
  let p = 0;
  for (let i = 0; i + 1 < xs.length; i++) {
    const x = xs[i] as number;
    const nx = xs[i + 1] as number;
    if (nx === x) continue;
    while (p < idx.length && (segs[idx[p] as number] as TcpSeg).start <= x) heap.push(idx[p++] as number);
    while (heap.size > 0 && (segs[heap.top] as TcpSeg).end <= x) heap.pop();
    if (heap.size === 0) continue;
    const s = heap.top;
    const n = env.starts.length;
    if (n > 0 && env.srcs[n - 1] === s && env.ends[n - 1] === x) env.ends[n - 1] = nx;
    else {
      env.starts.push(x);
      env.ends.push(nx);
      env.times.push((segs[s] as TcpSeg).t);
      env.srcs.push(s);
    }
  }
  return env;
}

/** The piece holding offset x, or -1. */
function pieceAt(env: Envelope, x: number): number {
  const i = lowerBound(env.ends.length, (j) => (env.ends[j] as number) > x);
  return i < env.starts.length && (env.starts[i] as number) <= x ? i : -1;
}

/** When the copy that first covered x passed (Infinity: never). */
function timeAt(env: Envelope, x: number): number {
  const i = pieceAt(env, x);
  return i < 0 ? Number.POSITIVE_INFINITY : (env.times[i] as number);
}

/** When every octet of [a, b) had passed: the latest of their earliest copies (Infinity: one never did). */
function timeOfRange(env: Envelope, a: number, b: number): number {
  if (b <= a) return Number.NEGATIVE_INFINITY;
  let i = lowerBound(env.ends.length, (j) => (env.ends[j] as number) > a);
  let at = a;
  let m = Number.NEGATIVE_INFINITY;
  for (; i < env.starts.length && at < b; i++) {
    if ((env.starts[i] as number) > at) return Number.POSITIVE_INFINITY;
    m = Math.max(m, env.times[i] as number);
    at = env.ends[i] as number;
  }
  return at < b ? Number.POSITIVE_INFINITY : m;
}

/** n stream octets from offset `off`, from any copy; undefined when some were never captured. */
function readStream(lane: TcpLane, off: number, n: number): Uint8Array | undefined {
  const env = lane.all;
  const out = new Uint8Array(n);
  let i = pieceAt(env, off);
  if (i < 0) return undefined;
  let got = 0;
  let x = off;
  while (got < n) {
    if (i >= env.starts.length || (env.starts[i] as number) > x) return undefined;
    const s = lane.segs[env.srcs[i] as number] as TcpSeg;
    const take = Math.min(n - got, (env.ends[i] as number) - x);
    const from = s.pay + (x - s.start);
    out.set(s.ip.subarray(from, from + take), got);
    got += take;
    x += take;
    i++;
  }
  return out;
}

// ---- lanes: one direction of one connection ------------------------------------------------------

interface RawTcp {
  readonly seq: number;
  readonly len: number;
  readonly syn: boolean;
  readonly pkt: Pkt;
  readonly pay: number;
  /** Unwrapped stream range, once the ISN is known. */
  start?: number;
  end?: number;
}

interface TcpLane {
  readonly kind: 'tcp';
  readonly uid: number;
  readonly conn: string;
  readonly dir: WireDir;
  isn: number | undefined;
  readonly raw: RawTcp[];
  segs: TcpSeg[];
  all: Envelope;
  ok: Envelope;
  /** FPDUs in stream order (disjoint). */
  readonly fpdus: { readonly start: number; readonly end: number; msg?: Msg }[];
}

interface TcpConn {
  readonly id: string;
  readonly lanes: readonly [TcpLane, TcpLane];
}

/** One DATA or I-DATA chunk (by TSN) of an SCTP association direction. */
interface Chunk {
  readonly tsn: number;
  readonly idata: boolean;
  readonly flags: number;
  readonly stream: number;
  /** SSN (DATA) or MID (I-DATA). */
  readonly ssn: number;
  /** PPID (DATA, I-DATA with B) or FSN (I-DATA without B). */
  readonly ppidOrFsn: number;
  readonly data: Uint8Array;
  first: number;
  ok: number;
  msg?: Msg;
}

interface SctpLane {
  readonly kind: 'sctp';
  readonly uid: number;
  readonly conn: string;
  readonly dir: WireDir;
  /** Highest unwrapped TSN seen (TSNs are serial numbers, RFC 1982). */
  ref: number | undefined;
  readonly chunks: Map<number, Chunk>;
}

type Lane = TcpLane | SctpLane;

/** What a DDP Segment occupies: its FPDU's stream range (TCP) or its chunks' TSNs (SCTP). */
type Span = { readonly start: number; readonly end: number } | { readonly tsns: readonly number[] };

interface Seg {
  readonly lane: Lane;
  readonly stream: number;
  readonly tagged: boolean;
  readonly qn: number;
  readonly msn: number;
  readonly mo: number;
  readonly last: boolean;
  readonly ulpLen: number;
  /** The first ULP octets (up to 8). */
  readonly head: Uint8Array;
  readonly span: Span;
}

interface Msg {
  readonly lane: Lane;
  readonly stream: number;
  readonly qn: number;
  readonly msn: number;
  readonly segs: Seg[];
  measured?: { readonly dir: WireDir; readonly flow: number; readonly seq: number };
  lost?: { dropUs: number; repairUs: number }[];
}

/** Where a dropped link packet sits above IP, for its loss entry. */
type DropSite =
  | { readonly kind: 'tcp'; readonly lane: TcpLane; readonly raw: RawTcp | undefined; readonly flags: number }
  | {
      readonly kind: 'sctp';
      readonly lane: SctpLane;
      readonly items: readonly { readonly text: string; readonly tsn?: number }[];
    }
  | { readonly kind: 'other'; readonly dir: WireDir; readonly conn: string; readonly summary: string };

// ---- the decoder --------------------------------------------------------------------------------

export function decodeCapture(input: CaptureInput): WireTrace {
  return new Decoder(input).run();
}

class Decoder {
  private readonly ini: number;
  private readonly resp: number;
  private readonly iName: string;
  private readonly rName: string;
  private truncated = 0;
  private fragments = 0;
  private readonly problems: string[] = [];
  private uid = 0;
  private readonly tcpConns = new Map<string, TcpConn>();
  private readonly allTcp: TcpConn[] = [];
  private readonly tcpGen = new Map<string, number>();
  private readonly assocs = new Map<string, readonly [SctpLane, SctpLane]>();
  private readonly sites = new Map<Pkt, DropSite>();
  private readonly msgs = new Map<string, Msg>();

  constructor(private readonly input: CaptureInput) {
    this.ini = parseAddress(input.initiator, 'initiator');
    this.resp = parseAddress(input.responder, 'responder');
    this.iName = input.initiator;
    this.rName = input.responder;
    if (input.transport !== 'tcp' && input.transport !== 'sctp')
      throw new ExperimentCaptureError(`transport must be tcp or sctp, got ${JSON.stringify(input.transport)}`);
  }

  private problem(text: string): void {
    if (this.problems.length < PROBLEMS_MAX) this.problems.push(text);
    else if (this.problems.length === PROBLEMS_MAX) this.problems.push('… more problems not listed');
  }

  run(): WireTrace {
    const off = this.input.clockOffsetUs;
    const link: Pkt[] = [];
    for (const rec of records(this.input.link, 'link capture')) {
      const net = networkPayload(rec);
      if (net === undefined) continue;
      const h = net === 'truncated' ? net : parseIp(net.ip, true);
      if (net === 'truncated' || h === 'truncated') {
        this.truncated++;
        continue;
      }
      link.push({ t: rec.tsUs + off, ip: net.ip.subarray(0, h.len), h, dropped: false });
    }
    link.sort((a, b) => a.t - b.t);
    const drops: Drop[] = [];
    this.input.drops.forEach((bytes, i) => {
      if (bytes.byteLength === 0) return; // no capture written
      for (const rec of records(bytes, `drop capture ${i}`)) {
        const net = networkPayload(rec);
        if (net === undefined) continue;
        const h = net === 'truncated' ? net : parseIp(net.ip, false);
        if (net === 'truncated' || h === 'truncated') {
          this.truncated++;
          continue;
        }
        const ip = net.ip.subarray(0, h.len);
        drops.push({ t: rec.tsUs + off, ip, key: keyOf(ip, h.len) });
      }
    });
    const unmatchedDrops = matchDrops(link, drops);
    for (const p of link) this.packet(p);
    for (const c of this.allTcp) this.finishTcp(c);
    for (const lanes of this.assocs.values()) for (const l of lanes) this.finishSctp(l);
    this.classify();
    const losses = this.losses(link);
    const messages = this.messages();
    return {
      packets: link.length,
      dropped: link.reduce((n, p) => n + (p.dropped ? 1 : 0), 0),
      unmatchedDrops,
      truncated: this.truncated,
      fragments: this.fragments,
      problems: this.problems,
      messages,
      losses,
    };
  }

  /** One link packet between the two ends: TCP or SCTP-in-UDP lanes (others only matter when dropped). */
  private packet(p: Pkt): void {
    const { h, ip } = p;
    if (h.fragOff !== 0) {
      this.fragments++;
      return;
    }
    let dir: WireDir;
    if (h.src === this.ini && h.dst === this.resp) dir = 'request';
    else if (h.src === this.resp && h.dst === this.ini) dir = 'response';
    else return;
    const t = this.input.transport;
    const other = (summary: string, conn = `ipv4 ${this.iName}>${this.rName}`) => {
      if (p.dropped) this.sites.set(p, { kind: 'other', dir, conn, summary });
    };
    if (h.proto === PROTO_TCP && t === 'tcp') {
      const doff = ip.byteLength < h.hl + 20 ? 0 : ((ip[h.hl + 12] as number) >> 4) * 4;
      if (doff < 20 || ip.byteLength < h.hl + doff) {
        this.truncated++;
        return;
      }
      this.tcp(p, dir);
    } else if (h.proto === PROTO_UDP) {
      if (ip.byteLength < h.hl + 8) {
        this.truncated++;
        return;
      }
      const sport = be16(ip, h.hl);
      const dport = be16(ip, h.hl + 2);
      const end = Math.min(ip.byteLength, h.hl + Math.max(8, be16(ip, h.hl + 4)));
      const payload = ip.subarray(h.hl + 8, end);
      const chunks = t === 'sctp' ? sctpChunks(payload) : undefined;
      const [ip1, ip2] = dir === 'request' ? [sport, dport] : [dport, sport];
      if (chunks) this.sctp(p, dir, payload, chunks, ip1, ip2);
      else other(`UDP ${payload.byteLength} octets`, `udp ${this.iName}:${ip1}>${this.rName}:${ip2}`);
    } else other(`IPv4 protocol ${h.proto}`);
  }

  // ---- TCP --------------------------------------------------------------------------------------

  private tcp(p: Pkt, dir: WireDir): void {
    const { ip, h } = p;
    const o = h.hl;
    const sport = be16(ip, o);
    const dport = be16(ip, o + 2);
    const seq = be32(ip, o + 4);
    const doff = ((ip[o + 12] as number) >> 4) * 4;
    const flags = ip[o + 13] as number;
    const syn = (flags & TCP_SYN) !== 0;
    const [iPort, rPort] = dir === 'request' ? [sport, dport] : [dport, sport];
    const key = `${iPort}>${rPort}`;
    let conn = this.tcpConns.get(key);
    const fresh = conn?.lanes[0];
    // A new SYN with another ISN on a used 4-tuple starts a new connection (RFC 9293 §3.4.1).
    if (
      !conn ||
      (dir === 'request' &&
        syn &&
        !(flags & TCP_ACK) &&
        fresh?.isn !== undefined &&
        fresh.isn !== seq &&
        fresh.raw.length > 0)
    ) {
      const gen = (this.tcpGen.get(key) ?? 0) + 1;
      this.tcpGen.set(key, gen);
      const id = `tcp ${this.iName}:${iPort}>${this.rName}:${rPort}${gen > 1 ? `#${gen}` : ''}`;
      conn = { id, lanes: [this.tcpLane(id, 'request'), this.tcpLane(id, 'response')] };
      this.tcpConns.set(key, conn);
      this.allTcp.push(conn);
    }
    const lane = conn.lanes[dir === 'request' ? 0 : 1];
    if (syn && lane.isn === undefined) lane.isn = seq;
    const len = ip.byteLength - o - doff;
    let raw: RawTcp | undefined;
    if (len > 0) {
      raw = { seq, len, syn, pkt: p, pay: o + doff };
      lane.raw.push(raw);
    }
    if (p.dropped) this.sites.set(p, { kind: 'tcp', lane, raw, flags });
  }

  private tcpLane(conn: string, dir: WireDir): TcpLane {
    const empty: Envelope = { starts: [], ends: [], times: [], srcs: [] };
    return {
      kind: 'tcp',
      uid: this.uid++,
      conn,
      dir,
      isn: undefined,
      raw: [],
      segs: [],
      all: empty,
      ok: empty,
      fpdus: [],
    };
  }

  /** Stream offsets (octet 0 follows the SYN), envelopes, then MPA frames and FPDUs both ways. */
  private finishTcp(c: TcpConn): void {
    for (const lane of c.lanes) {
      if (lane.raw.length === 0) continue;
      if (lane.isn === undefined) {
        this.problem(`${c.id} ${lane.dir}: no SYN captured, its data is not decoded`);
        continue;
      }
      let ref = 0;
      for (const r of lane.raw) {
        const rel = ((r.syn ? r.seq + 1 : r.seq) - lane.isn - 1) >>> 0;
        const start = rel + Math.round((ref - rel) / TWO_32) * TWO_32;
        const end = start + r.len;
        r.start = start;
        r.end = end;
        ref = Math.max(ref, end);
        if (end <= 0) continue;
        const clip = Math.max(0, -start);
        lane.segs.push({
          start: start + clip,
          end,
          t: r.pkt.t,
          dropped: r.pkt.dropped,
          ip: r.pkt.ip,
          pay: r.pay + clip,
        });
      }
      lane.all = envelope(lane.segs, () => true);
      lane.ok = envelope(lane.segs, (s) => !s.dropped);
    }
    // RFC 5044 §7.1.1: each side opens with its frame; "MPA ID Req Frame" initiator → responder.
    const frames = c.lanes.map((lane) => {
      if (lane.segs.length === 0) return undefined;
      const b = readStream(lane, 0, MPA_FRAME_HEADER);
      const key = lane.dir === 'request' ? MPA_KEY_REQ : MPA_KEY_REP;
      if (!b || Buffer.from(b.subarray(0, 16)).toString('latin1') !== key) {
        this.problem(`${c.id} ${lane.dir}: the stream does not start with the "${key}" frame, not decoded`);
        return undefined;
      }
      return { flags: b[16] as number, pdLength: be16(b, 18) };
    });
    if (frames.some((f) => f && (f.flags & MPA_FLAG_M) !== 0))
      throw new ExperimentCaptureError(
        `${c.id}: MPA Markers are in use (M flag, RFC 5044 §4.3); the capture decoder does not support them`,
      );
    c.lanes.forEach((lane, i) => {
      const f = frames[i];
      if (f) this.fpdus(lane, MPA_FRAME_HEADER + f.pdLength);
    });
  }

  /**
   * FPDUs (RFC 5044 §4.1): ULPDU_Length(2) | ULPDU | pad to 4 from the length field | CRC(4). The CRC field
   * is there whether or not CRCs are in use (zero and unchecked when neither frame set C).
   */
  private fpdus(lane: TcpLane, from: number): void {
    const limit = lane.all.ends.length > 0 ? (lane.all.ends[lane.all.ends.length - 1] as number) : 0;
    let off = from;
    while (off < limit) {
      const lb = readStream(lane, off, 2);
      const len = lb ? be16(lb, 0) : 0;
      const head =
        lb && len >= DDP_TAGGED_HEADER ? readStream(lane, off + 2, Math.min(len, DDP_UNTAGGED_HEADER + 8)) : undefined;
      if (!lb || !head) {
        this.problem(
          lb
            ? `${lane.conn} ${lane.dir}: FPDU at stream offset ${off} has ULPDU_Length ${len}, too short for DDP; the rest is not decoded`
            : `${lane.conn} ${lane.dir}: stream octets from offset ${off} were not captured; the FPDUs after them are not decoded`,
        );
        return;
      }
      const end = off + 2 + len + ((4 - ((len + 2) & 3)) & 3) + 4;
      const seg = this.ddp(lane, 0, head, len, { start: off, end });
      const fp: { start: number; end: number; msg?: Msg } = { start: off, end };
      if (seg) fp.msg = this.group(seg);
      lane.fpdus.push(fp);
      off = end;
    }
  }

  // ---- SCTP -------------------------------------------------------------------------------------

  private sctp(p: Pkt, dir: WireDir, pl: Uint8Array, chunks: readonly ChunkRef[], iUdp: number, rUdp: number): void {
    const sp = be16(pl, 0);
    const dp = be16(pl, 2);
    const [iSctp, rSctp] = dir === 'request' ? [sp, dp] : [dp, sp];
    const id = `sctp ${this.iName}:${iUdp}/${iSctp}>${this.rName}:${rUdp}/${rSctp}`;
    let lanes = this.assocs.get(id);
    if (!lanes) {
      const mk = (d: WireDir): SctpLane => ({
        kind: 'sctp',
        uid: this.uid++,
        conn: id,
        dir: d,
        ref: undefined,
        chunks: new Map(),
      });
      lanes = [mk('request'), mk('response')] as const;
      this.assocs.set(id, lanes);
    }
    const lane = lanes[dir === 'request' ? 0 : 1];
    const items: { text: string; tsn?: number }[] = [];
    for (const c of chunks) {
      const idata = c.type === SCTP_IDATA;
      if ((c.type === SCTP_DATA && c.len >= 16) || (idata && c.len >= 20)) {
        const o = c.off;
        const tsn = be32(pl, o + 4);
        const stream = be16(pl, o + 8);
        const ssn = idata ? be32(pl, o + 12) : be16(pl, o + 10);
        const ppidOrFsn = be32(pl, o + (idata ? 16 : 12));
        const u = unwrapTsn(lane, tsn);
        let ch = lane.chunks.get(u);
        if (!ch) {
          const data = pl.subarray(o + (idata ? 20 : 16), o + c.len);
          ch = { tsn, idata, flags: c.flags, stream, ssn, ppidOrFsn, data, first: p.t, ok: Number.POSITIVE_INFINITY };
          lane.chunks.set(u, ch);
        }
        ch.first = Math.min(ch.first, p.t);
        if (!p.dropped) ch.ok = Math.min(ch.ok, p.t);
        items.push({
          text: idata
            ? `I-DATA TSN ${tsn} stream ${stream} MID ${ssn} ${c.flags & DATA_B ? 'PPID' : 'FSN'} ${ppidOrFsn}`
            : `DATA TSN ${tsn} stream ${stream} SSN ${ssn}`,
          tsn: u,
        });
      } else items.push({ text: SCTP_CHUNK_NAMES[c.type] ?? `chunk type ${c.type}` });
    }
    if (p.dropped) this.sites.set(p, { kind: 'sctp', lane, items });
  }

  /**
   * User messages from fragments (RFC 4960 §6.9: a DATA message's fragments have consecutive TSNs, B first,
   * E last; RFC 8260 §2.1: I-DATA fragments share a MID and count FSN from 0), each a DDP Segment when its
   * PPID is 16 (RFC 5043).
   */
  private finishSctp(lane: SctpLane): void {
    const tsns = [...lane.chunks.keys()].sort((a, b) => a - b);
    const pending = new Map<number, number[]>();
    const idata = new Map<string, number[]>();
    for (const u of tsns) {
      const c = lane.chunks.get(u) as Chunk;
      if (c.idata) {
        const k = `${c.stream}/${c.flags & DATA_U}/${c.ssn}`;
        let l = idata.get(k);
        if (!l) idata.set(k, (l = []));
        l.push(u);
        continue;
      }
      const k = c.stream * 2 + (c.flags & DATA_U ? 1 : 0);
      let l = pending.get(k);
      if (c.flags & DATA_B) l = [u];
      else if (l && l[l.length - 1] === u - 1) l.push(u);
      else l = undefined;
      if (l && c.flags & DATA_E) {
        this.userMessage(lane, l);
        l = undefined;
      }
      if (l) pending.set(k, l);
      else pending.delete(k);
    }
    for (const l of idata.values()) {
      const fsn = (u: number) => {
        const c = lane.chunks.get(u) as Chunk;
        return c.flags & DATA_B ? 0 : c.ppidOrFsn;
      };
      l.sort((a, b) => fsn(a) - fsn(b));
      const b = lane.chunks.get(l[0] as number) as Chunk;
      const e = lane.chunks.get(l[l.length - 1] as number) as Chunk;
      if (!(b.flags & DATA_B) || !(e.flags & DATA_E) || l.some((u, i) => fsn(u) !== i)) continue;
      this.userMessage(lane, l);
    }
  }

  private userMessage(lane: SctpLane, tsns: readonly number[]): void {
    const chunks = tsns.map((u) => lane.chunks.get(u) as Chunk);
    const first = chunks[0] as Chunk;
    if (first.ppidOrFsn !== PPID_DDP_SEGMENT) return; // session control (17) or other: control
    const total = chunks.reduce((n, c) => n + c.data.byteLength, 0);
    const head = new Uint8Array(Math.min(total, DDP_UNTAGGED_HEADER + 8));
    let got = 0;
    for (const c of chunks) {
      if (got >= head.byteLength) break;
      const take = Math.min(c.data.byteLength, head.byteLength - got);
      head.set(c.data.subarray(0, take), got);
      got += take;
    }
    const seg = this.ddp(lane, first.stream, head, total, { tsns });
    if (!seg) return;
    const m = this.group(seg);
    if (m) for (const c of chunks) c.msg = m;
  }

  // ---- DDP and messages -------------------------------------------------------------------------

  /** A DDP Segment from its first octets and length (RFC 5041 §4.2 tagged, §4.3 untagged). */
  private ddp(lane: Lane, stream: number, head: Uint8Array, len: number, span: Span): Seg | undefined {
    if (head.byteLength < 1) return undefined;
    const tagged = ((head[0] as number) & DDP_T) !== 0;
    const hl = tagged ? DDP_TAGGED_HEADER : DDP_UNTAGGED_HEADER;
    if (len < hl || head.byteLength < hl) return undefined;
    return {
      lane,
      stream,
      tagged,
      qn: tagged ? -1 : be32(head, 6),
      msn: tagged ? -1 : be32(head, 10),
      mo: tagged ? -1 : be32(head, 14),
      last: ((head[0] as number) & DDP_L) !== 0,
      ulpLen: len - hl,
      head: head.subarray(hl),
      span,
    };
  }

  /** Untagged segments grouped into messages by (lane, DDP Stream, QN, MSN); tagged ones stay alone. */
  private group(seg: Seg): Msg | undefined {
    if (seg.tagged) return undefined;
    const k = `${seg.lane.uid}/${seg.stream}/${seg.qn}/${seg.msn}`;
    let m = this.msgs.get(k);
    if (!m) {
      m = { lane: seg.lane, stream: seg.stream, qn: seg.qn, msn: seg.msn, segs: [] };
      this.msgs.set(k, m);
    }
    m.segs.push(seg);
    return m;
  }

  /**
   * Measured requests (initiator → responder, QN 0, a workload header of a flow, not the channel's first
   * message: HELLO) and responses (back, 8 ULP octets, not the first: READY). The rest is control.
   */
  private classify(): void {
    const firstMsn = new Map<string, number>();
    const chanKey = (m: Msg) => `${m.lane.uid}/${m.stream}`;
    for (const m of this.msgs.values()) {
      if (m.qn !== 0 || !m.segs.some((s) => s.ulpLen > 0)) continue; // an RFC 6581 zero-length RTR Send
      const k = chanKey(m);
      const f = firstMsn.get(k);
      if (f === undefined || m.msn < f) firstMsn.set(k, m.msn);
    }
    for (const m of this.msgs.values()) {
      if (m.qn !== 0 || firstMsn.get(chanKey(m)) === m.msn) continue;
      const s0 = m.segs.find((s) => s.mo === 0);
      if (!s0 || s0.head.byteLength < WORKLOAD_HEADER) continue;
      const flow = be16(s0.head, 0);
      const seq = be32(s0.head, 4);
      if (m.lane.dir === 'request' && flow !== FIN_FLOW) m.measured = { dir: 'request', flow, seq };
      else if (m.lane.dir === 'response' && totalLength(m) === RESPONSE_LENGTH)
        m.measured = { dir: 'response', flow, seq };
    }
  }

  private losses(link: readonly Pkt[]): WireLoss[] {
    const out: WireLoss[] = [];
    for (const p of link) {
      const site = this.sites.get(p);
      if (!p.dropped || !site) continue;
      if (site.kind === 'other') {
        out.push({
          atUs: p.t,
          dir: site.dir,
          conn: site.conn,
          kind: 'control',
          messages: [],
          repairedUs: p.t,
          summary: site.summary,
        });
        continue;
      }
      const lane = site.lane;
      const touched = new Map<Msg, number>();
      const touch = (m: Msg | undefined, repair: number) => {
        if (m?.measured) touched.set(m, Math.max(touched.get(m) ?? p.t, repair));
      };
      let summary: string;
      if (site.kind === 'tcp') {
        const r = site.raw;
        const l = lane as TcpLane;
        if (r?.start !== undefined && r.end !== undefined) {
          const { start, end } = r;
          const fp = l.fpdus;
          for (let i = lowerBound(fp.length, (j) => (fp[j]?.end as number) > start); i < fp.length; i++) {
            const f = fp[i] as { start: number; end: number; msg?: Msg };
            if (f.start >= end) break;
            if (f.msg?.measured) touch(f.msg, timeOfRange(l.ok, Math.max(start, f.start), Math.min(end, f.end)));
          }
          summary = `TCP seq ${start + 1}+${r.len}`; // relative: the SYN is 0 (as Wireshark shows it)
        } else summary = r ? `TCP seq ${r.seq}+${r.len} (absolute: no SYN captured)` : `TCP ${tcpFlags(site.flags)}`;
      } else {
        const l = lane as SctpLane;
        for (const it of site.items) {
          if (it.tsn === undefined) continue;
          const c = l.chunks.get(it.tsn);
          if (c) touch(c.msg, c.ok);
        }
        summary = `SCTP ${site.items.map((i) => i.text).join(', ')}`;
      }
      let repairedUs = p.t;
      const messages: { dir: WireDir; flow: number; seq: number }[] = [];
      for (const [m, repairUs] of touched) {
        (m.lost ??= []).push({ dropUs: p.t, repairUs });
        messages.push({ ...(m.measured as { dir: WireDir; flow: number; seq: number }) });
        repairedUs = Math.max(repairedUs, repairUs);
      }
      out.push({
        atUs: p.t,
        dir: lane.dir,
        conn: lane.conn,
        kind: messages.length > 0 ? 'data' : 'control',
        messages,
        repairedUs,
        summary,
      });
    }
    return out;
  }

  private messages(): WireMessage[] {
    const out: WireMessage[] = [];
    for (const m of this.msgs.values()) {
      if (!m.measured) continue;
      const complete = isComplete(m);
      const s0 = m.segs.find((s) => s.mo === 0) as Seg;
      let firstCompleteUs = Number.NEGATIVE_INFINITY;
      let arrivedUs = Number.NEGATIVE_INFINITY;
      for (const s of m.segs) {
        firstCompleteUs = Math.max(firstCompleteUs, spanTime(s, 'all'));
        arrivedUs = Math.max(arrivedUs, spanTime(s, 'ok'));
      }
      out.push({
        ...m.measured,
        conn: m.lane.conn,
        firstOctetUs: spanFirstOctet(s0),
        firstCompleteUs: complete ? firstCompleteUs : Number.POSITIVE_INFINITY,
        arrivedUs: complete ? arrivedUs : Number.POSITIVE_INFINITY,
        lost: m.lost ?? [],
      });
    }
    return out.sort(
      (a, b) =>
        a.firstOctetUs - b.firstOctetUs ||
        (a.dir === b.dir ? 0 : a.dir === 'request' ? -1 : 1) ||
        a.flow - b.flow ||
        a.seq - b.seq,
    );
  }
}

/** Total ULP octets of a message whose Last segment was seen, else undefined (RFC 5041 §4.3: MO + length). */
function totalLength(m: Msg): number | undefined {
  const last = m.segs.find((s) => s.last);
  return last ? last.mo + last.ulpLen : undefined;
}

/** Every segment of the message seen: MOs cover [0, total) with the Last one at its end. */
function isComplete(m: Msg): boolean {
  const total = totalLength(m);
  if (total === undefined) return false;
  const segs = [...m.segs].sort((a, b) => a.mo - b.mo);
  let at = 0;
  for (const s of segs) {
    if (s.mo > at) return false;
    at = Math.max(at, s.mo + s.ulpLen);
  }
  return at >= total;
}

function spanTime(s: Seg, which: 'all' | 'ok'): number {
  const span = s.span;
  if ('start' in span) {
    const l = s.lane as TcpLane;
    return timeOfRange(which === 'all' ? l.all : l.ok, span.start, span.end);
  }
  const l = s.lane as SctpLane;
  let m = Number.NEGATIVE_INFINITY;
  for (const u of span.tsns) {
    const c = l.chunks.get(u) as Chunk;
    m = Math.max(m, which === 'all' ? c.first : c.ok);
  }
  return m;
}

function spanFirstOctet(s: Seg): number {
  const span = s.span;
  if ('start' in span) return timeAt((s.lane as TcpLane).all, span.start);
  return ((s.lane as SctpLane).chunks.get(span.tsns[0] as number) as Chunk).first;
}

function unwrapTsn(lane: SctpLane, tsn: number): number {
  if (lane.ref === undefined) {
    lane.ref = tsn;
    return tsn;
  }
  const u = tsn + Math.round((lane.ref - tsn) / TWO_32) * TWO_32;
  if (u > lane.ref) lane.ref = u;
  return u;
}

// ---- wire constants and small readers -----------------------------------------------------------

const TCP_FIN = 0x01;
const TCP_SYN = 0x02;
const TCP_RST = 0x04;
const TCP_ACK = 0x10;

function tcpFlags(f: number): string {
  const names: string[] = [];
  if (f & TCP_SYN) names.push('SYN');
  if (f & TCP_FIN) names.push('FIN');
  if (f & TCP_RST) names.push('RST');
  if (f & TCP_ACK) names.push('ACK');
  return names.length > 0 ? names.join(' ') : 'segment without data';
}

/** RFC 5044 §7.1.1: 16-octet key, flags (M C R Res), Rev, PD_Length. */
const MPA_FRAME_HEADER = 20;
const MPA_KEY_REQ = 'MPA ID Req Frame';
const MPA_KEY_REP = 'MPA ID Rep Frame';
const MPA_FLAG_M = 0x80;

/** RFC 5041 §4.1 control octet; §4.2 tagged header 14 octets; §4.3 untagged 18. */
const DDP_T = 0x80;
const DDP_L = 0x40;
const DDP_TAGGED_HEADER = 14;
const DDP_UNTAGGED_HEADER = 18;

/** RFC 4960 §3.3.1 DATA, RFC 8260 §2.1 I-DATA; flags U B E. */
const SCTP_DATA = 0;
const SCTP_IDATA = 64;
const DATA_U = 0x04;
const DATA_B = 0x02;
const DATA_E = 0x01;
/** RFC 5043 §5.2 (IANA): DDP Segment. */
const PPID_DDP_SEGMENT = 16;

interface ChunkRef {
  readonly type: number;
  readonly flags: number;
  /** Chunk Length: header and value, without padding. */
  readonly len: number;
  readonly off: number;
}

/** The chunks of an SCTP packet (RFC 4960 §3: common header 12 octets, chunks padded to 4), or undefined. */
function sctpChunks(p: Uint8Array): ChunkRef[] | undefined {
  if (p.byteLength < 16) return undefined;
  const out: ChunkRef[] = [];
  let off = 12;
  while (off < p.byteLength) {
    if (off + 4 > p.byteLength) return undefined;
    const len = be16(p, off + 2);
    if (len < 4 || off + len > p.byteLength) return undefined;
    out.push({ type: p[off] as number, flags: p[off + 1] as number, len, off });
    off += (len + 3) & ~3; // the last chunk's padding may be left out
  }
  return out;
}

/** A binary min-heap of indices under `before`. */
class MinHeap {
  private readonly a: number[] = [];
  constructor(private readonly before: (x: number, y: number) => boolean) {}
  get size(): number {
    return this.a.length;
  }
  get top(): number {
    return this.a[0] as number;
  }
  push(v: number): void {
    const a = this.a;
    let i = a.push(v) - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.before(a[i] as number, a[up] as number)) break;
      [a[i], a[up]] = [a[up] as number, a[i] as number];
      i = up;
    }
  }
  pop(): void {
    const a = this.a;
    const last = a.pop() as number;
    if (a.length === 0) return;
    a[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.before(a[l] as number, a[m] as number)) m = l;
      if (r < a.length && this.before(a[r] as number, a[m] as number)) m = r;
      if (m === i) return;
      [a[i], a[m]] = [a[m] as number, a[i] as number];
      i = m;
    }
  }
}

/** The first index in [0, n) where `ok` holds (ok is false then true). */
function lowerBound(n: number, ok: (i: number) => boolean): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function be16(b: Uint8Array, o: number): number {
  return ((b[o] as number) << 8) | (b[o + 1] as number);
}

function be32(b: Uint8Array, o: number): number {
  return (
    (((b[o] as number) << 24) | ((b[o + 1] as number) << 16) | ((b[o + 2] as number) << 8) | (b[o + 3] as number)) >>> 0
  );
}
