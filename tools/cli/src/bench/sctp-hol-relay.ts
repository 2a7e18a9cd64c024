/**
 * Used by the bench (./sctp-hol.ts) and by packages/llp-sctp/test/independence.test.ts.
 *
 * A UDP relay between two SCTP-over-UDP endpoints (RFC 6951 encapsulation) that loses CHOSEN data: it
 * reads the SCTP common header and chunks of each datagram (RFC 4960 §3; DATA and I-DATA, RFC 8260),
 * follows user messages across their fragments, and asks a policy whether to forward, drop or hold the
 * datagram, or to lose or hold some of its DATA chunks and forward the rest; the probe messages the
 * peers send; `heldBehind`, the measure of stream-2 messages held by stream 1.
 */
import dgram from 'node:dgram';
import { seededRandom } from '@rddp/llp';

// ---- CRC32c (RFC 4960 Appendix B) --------------------------------------------------------------

const CRC_TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  CRC_TABLE[n] = c >>> 0;
}

/** The SCTP checksum of `packet`: CRC32c over the packet with the checksum field taken as zero. */
export function sctpChecksum(packet: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < packet.byteLength; i++) {
    const octet = i >= 8 && i < 12 ? 0 : (packet[i] as number);
    c = ((CRC_TABLE[(c ^ octet) & 0xff] as number) ^ (c >>> 8)) >>> 0;
  }
  return ~c >>> 0;
}

/** Writes the checksum in place (little-endian at offset 8, as Linux and the sctp package do). */
export function signSctp(packet: Buffer): void {
  packet.writeUInt32LE(sctpChecksum(packet), 8);
}

// ---- SCTP packet reading (RFC 4960 §3) --------------------------------------------------------

export const CHUNK_DATA = 0;
export const CHUNK_I_DATA = 64;
const COMMON_HEADER = 12;

export interface ChunkHeader {
  readonly type: number;
  readonly offset: number;
  /** The Chunk Length field (without padding). */
  readonly length: number;
}

/** One DATA (RFC 4960 §3.3.1) or I-DATA (RFC 8260 §2.1) chunk of a datagram. */
export interface DataChunk {
  readonly type: typeof CHUNK_DATA | typeof CHUNK_I_DATA;
  readonly tsn: number;
  readonly stream: number;
  /** B and E flags: the first and the last fragment of a user message. */
  readonly begin: boolean;
  readonly end: boolean;
  /** I-DATA: the Message Identifier. */
  readonly mid: number | undefined;
  /** Where the chunk is in its datagram. */
  readonly header: ChunkHeader;
  /**
   * The user message it is a fragment of, as the relay follows them: stream and TSN of the first
   * fragment (DATA: a message's fragments have consecutive TSNs, RFC 4960 §6.9) or stream and MID
   * (I-DATA). Unset when the relay has not seen the first fragment.
   */
  message: string | undefined;
  /** The probe header of that message (from its first fragment). */
  probe: ProbeId | undefined;
  /** Whether this TSN went through the relay before in this direction: a retransmission. */
  retransmission: boolean;
}

/** The chunks of an SCTP packet, stopping at the first malformed one. */
export function chunkHeaders(packet: Buffer): ChunkHeader[] {
  const out: ChunkHeader[] = [];
  let off = COMMON_HEADER;
  while (off + 4 <= packet.length) {
    const length = packet.readUInt16BE(off + 2);
    if (length < 4 || off + length > packet.length) break;
    out.push({ type: packet[off] as number, offset: off, length });
    off += (length + 3) & ~3;
  }
  return out;
}

/**
 * The DATA and I-DATA chunks of a packet, read alone: `message` and `probe` are set for first fragments
 * only, `retransmission` is false (the relay completes them).
 */
export function dataChunksOf(packet: Buffer, headers = chunkHeaders(packet)): DataChunk[] {
  const out: DataChunk[] = [];
  for (const c of headers) {
    if (c.type !== CHUNK_DATA && c.type !== CHUNK_I_DATA) continue;
    // DATA: TSN(4) Stream(2) SSN(2) PPID(4), user data at 16. I-DATA: TSN(4) Stream(2) Reserved(2) MID(4) PPID/FSN(4), at 20.
    const userData = c.type === CHUNK_DATA ? 16 : 20;
    if (c.length < userData) continue;
    const flags = packet[c.offset + 1] as number;
    const begin = (flags & 0x02) !== 0;
    const tsn = packet.readUInt32BE(c.offset + 4);
    const stream = packet.readUInt16BE(c.offset + 8);
    const mid = c.type === CHUNK_I_DATA ? packet.readUInt32BE(c.offset + 12) : undefined;
    out.push({
      type: c.type,
      tsn,
      stream,
      begin,
      end: (flags & 0x01) !== 0,
      mid,
      header: c,
      message: mid !== undefined ? `${stream}:m${mid}` : begin ? `${stream}:${tsn}` : undefined,
      probe: begin ? readProbe(packet.subarray(c.offset + userData, c.offset + c.length)) : undefined,
      retransmission: false,
    });
  }
  return out;
}

/** A packet of `packet`'s common header and the chunks `keep` of it (padded), signed. */
export function packetOf(packet: Buffer, keep: readonly ChunkHeader[]): Buffer {
  const parts = [packet.subarray(0, COMMON_HEADER)];
  for (const c of keep)
    parts.push(packet.subarray(c.offset, Math.min(packet.length, c.offset + ((c.length + 3) & ~3))));
  const out = Buffer.concat(parts);
  signSctp(out);
  return out;
}

// ---- probe messages --------------------------------------------------------------------------

const PROBE_MAGIC = 0x484f4c31; // "HOL1"
export const PROBE_HEADER = 24;

/** Which message a probe is: stream `s`, number `q` on it (from 0), number `g` in the sender's posting order. */
export interface ProbeId {
  readonly s: number;
  readonly q: number;
  readonly g: number;
}

/**
 * A probe message of `size` octets: magic(4) stream(2) reserved(2) q(4) g(4) posting time(8, ms since the
 * epoch, sub-ms) and a body that depends on (s, q) only.
 */
export function makeProbe(id: ProbeId, size: number, postedAtMs: number): Buffer {
  const b = Buffer.alloc(Math.max(size, PROBE_HEADER));
  b.writeUInt32BE(PROBE_MAGIC, 0);
  b.writeUInt16BE(id.s, 4);
  b.writeUInt32BE(id.q >>> 0, 8);
  b.writeUInt32BE(id.g >>> 0, 12);
  b.writeDoubleBE(postedAtMs, 16);
  let x = (Math.imul(id.s + 1, 0x9e3779b1) ^ Math.imul(id.q + 1, 0x85ebca6b)) >>> 0;
  for (let i = PROBE_HEADER; i < b.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** The probe header at the start of `data`, if it is one. */
export function readProbe(data: Uint8Array): ProbeId | undefined {
  if (data.byteLength < PROBE_HEADER) return undefined;
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (b.readUInt32BE(0) !== PROBE_MAGIC) return undefined;
  return { s: b.readUInt16BE(4), q: b.readUInt32BE(8), g: b.readUInt32BE(12) };
}

/** A received probe: its id and posting time, and whether its body is what the sender made. */
export function checkProbe(data: Buffer): { id: ProbeId; postedAtMs: number; intact: boolean } | undefined {
  const id = readProbe(data);
  if (!id) return undefined;
  const postedAtMs = data.readDoubleBE(16);
  return { id, postedAtMs, intact: makeProbe(id, data.length, postedAtMs).equals(data) };
}

/** Milliseconds since the epoch with sub-millisecond resolution, comparable between processes of one host. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

// ---- the relay ----------------------------------------------------------------------------------

/** `out`: from the endpoint that connects to the relay (the initiator) to the target; `back`: the reverse. */
export type Direction = 'out' | 'back';

/** What a policy sees of one datagram. */
export interface Datagram {
  readonly dir: Direction;
  /** Datagrams seen so far in this direction (from 0). */
  readonly seen: number;
  readonly chunkTypes: readonly number[];
  readonly data: readonly DataChunk[];
  /** Whether any DATA chunk in it is a retransmission. */
  readonly retransmission: boolean;
}

/**
 * What to do with a datagram: forward, drop or hold it whole, or lose or hold some of its DATA chunks
 * (by TSN) and forward the rest (if any chunk is left). Losing a chunk alone is what a loss of its packet
 * would do had the sender not bundled other chunks with it (RFC 4960 §6.10); held chunks go on, as
 * packets of their own, at `UdpRelay.flushHeld()`.
 */
export type Verdict =
  | 'forward'
  | 'drop'
  | 'hold'
  | { readonly lose?: readonly number[]; readonly hold?: readonly number[] };

export type DropPolicy = (d: Datagram) => Verdict;

/** What the relay did with one datagram. */
export interface RelayRecord {
  readonly dir: Direction;
  readonly seen: number;
  readonly data: readonly DataChunk[];
  readonly retransmission: boolean;
  /** DATA chunks lost (all of them when the datagram was dropped). */
  readonly lost: readonly DataChunk[];
  /** DATA chunks held (all of them when the datagram was held). */
  readonly held: readonly DataChunk[];
}

/** One datagram the relay sent on: its place among those forwarded in its direction, and its DATA chunks. */
export interface ForwardRecord {
  readonly dir: Direction;
  readonly index: number;
  readonly data: readonly DataChunk[];
}

export const forwardAll: DropPolicy = () => 'forward';

/** Whether the datagram carries DATA and all of it is on `stream`. */
export function onlyOnStream(d: Datagram, stream: number): boolean {
  return d.data.length > 0 && d.data.every((c) => c.stream === stream);
}

/** What loss hits: whole datagrams carrying DATA of the lossy stream only, or that stream's DATA chunks alone. */
export type LossUnit = 'datagram' | 'chunk';

/**
 * Loses one user message of `stream` in direction `out`, once, in one of two ways:
 * - `unit: 'datagram'`: the first datagram whose DATA chunks are all on `stream`, after `after` such
 *   datagrams went through (first transmissions only);
 * - `unit: 'chunk'` (default): every first transmission of a fragment of the `after`-th message (from 0)
 *   begun on `stream`; the other chunks of their datagrams go on.
 * With `holdRepairs`, retransmissions of what was lost are held while `holding` (the repair waits for
 * `holding = false` and `UdpRelay.flushHeld()`), then forwarded; `heldRepairs` counts them.
 */
export class LoseOnce {
  /** The chunks lost. */
  readonly lost: DataChunk[] = [];
  heldRepairs = 0;
  holding: boolean;
  private readonly unit: LossUnit;
  private passed = 0;
  private target: string | undefined;

  constructor(
    readonly stream: number,
    readonly after: number,
    options: { unit?: LossUnit; holdRepairs?: boolean } = {},
  ) {
    this.unit = options.unit ?? 'chunk';
    this.holding = options.holdRepairs ?? false;
  }

  readonly policy: DropPolicy = (d) => {
    if (d.dir !== 'out') return 'forward';
    const lostTsns = new Set(this.lost.map((c) => c.tsn));
    const repairs = d.data.filter((c) => c.retransmission && lostTsns.has(c.tsn)).map((c) => c.tsn);
    if (this.unit === 'datagram') {
      if (this.lost.length === 0 && !d.retransmission && onlyOnStream(d, this.stream) && this.passed++ === this.after) {
        this.lost.push(...d.data);
        return 'drop';
      }
      if (this.holding && repairs.length > 0) {
        this.heldRepairs++;
        return 'hold';
      }
      return 'forward';
    }
    const lose: number[] = [];
    for (const c of d.data) {
      if (c.stream !== this.stream || c.retransmission) continue;
      if (this.target === undefined && c.begin && this.passed++ === this.after) this.target = c.message;
      if (this.target !== undefined && c.message === this.target) {
        lose.push(c.tsn);
        this.lost.push(c);
      }
    }
    const hold = this.holding ? repairs : [];
    this.heldRepairs += hold.length;
    return lose.length > 0 || hold.length > 0 ? { lose, hold } : 'forward';
  };
}

/**
 * Loses stream-`stream` data in direction `out` with probability `p` from a PRNG seeded with `seed`:
 * with `unit: 'chunk'` (default) each first transmission of a DATA chunk on `stream` (the rest of its
 * datagram goes on); with `unit: 'datagram'` each datagram that carries DATA on `stream` only. Never a
 * retransmission, so no chunk is lost twice and each loss takes one repair. The PRNG is drawn once per
 * eligible chunk (datagram), so one seed loses the same ones of the same flow.
 */
export function randomLossOnStream(stream: number, p: number, seed: number, unit: LossUnit = 'chunk'): DropPolicy {
  const random = seededRandom(seed);
  return (d) => {
    if (d.dir !== 'out') return 'forward';
    if (unit === 'datagram') {
      if (d.retransmission || !onlyOnStream(d, stream)) return 'forward';
      return random() < p ? 'drop' : 'forward';
    }
    const lose = d.data.filter((c) => c.stream === stream && !c.retransmission && random() < p).map((c) => c.tsn);
    return lose.length > 0 ? { lose } : 'forward';
  };
}

interface Held {
  readonly dir: Direction;
  readonly packet: Buffer;
  readonly data: readonly DataChunk[];
}

/** Follows user messages across their fragments (`DataChunk.message`, `probe`), per direction. */
class MessageTracker {
  private readonly byTsn = new Map<number, { message: string | undefined; probe: ProbeId | undefined }>();
  private readonly probes = new Map<string, ProbeId>();

  complete(c: DataChunk): void {
    const known = this.byTsn.get(c.tsn);
    c.retransmission = known !== undefined;
    if (known) {
      c.message = known.message;
      c.probe = known.probe;
      return;
    }
    if (c.type === CHUNK_DATA && !c.begin) {
      // The previous TSN is the previous fragment of the same message (no interleaving with DATA).
      const prev = this.byTsn.get((c.tsn - 1) >>> 0);
      c.message = prev?.message;
      c.probe = prev?.probe;
    } else if (c.message !== undefined) {
      if (c.begin && c.probe) this.probes.set(c.message, c.probe);
      c.probe ??= this.probes.get(c.message);
    }
    this.byTsn.set(c.tsn, { message: c.message, probe: c.probe });
  }
}

/**
 * The relay: the initiator connects to `port`; datagrams go on to `target` and back. One association at
 * a time (replies go to the last address that sent to `port`).
 */
export class UdpRelay {
  /** Every datagram and what became of it. */
  readonly log: RelayRecord[] = [];
  /** Every datagram sent on, in order, per direction. */
  readonly forwards: ForwardRecord[] = [];
  private readonly trackers: Record<Direction, MessageTracker> = {
    out: new MessageTracker(),
    back: new MessageTracker(),
  };
  private readonly seenCount: Record<Direction, number> = { out: 0, back: 0 };
  private readonly forwardedCount: Record<Direction, number> = { out: 0, back: 0 };
  private readonly heldPackets: Held[] = [];
  private client: { port: number; address: string } | undefined;
  private closed = false;

  private constructor(
    private readonly front: dgram.Socket,
    private readonly rear: dgram.Socket,
    private readonly target: { host: string; port: number },
    public policy: DropPolicy,
  ) {
    front.on('message', (m, r) => {
      this.client = { port: r.port, address: r.address };
      this.onDatagram('out', m);
    });
    rear.on('message', (m) => this.onDatagram('back', m));
    for (const s of [front, rear]) s.on('error', () => {});
  }

  static async open(target: { host?: string; port: number }, policy: DropPolicy = forwardAll): Promise<UdpRelay> {
    const host = target.host ?? '127.0.0.1';
    const bind = () =>
      new Promise<dgram.Socket>((resolve, reject) => {
        const s = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 << 20, sendBufferSize: 4 << 20 });
        s.once('error', reject);
        s.bind(0, '127.0.0.1', () => {
          s.off('error', reject);
          resolve(s);
        });
      });
    const front = await bind();
    const rear = await bind();
    await new Promise<void>((r) => rear.connect(target.port, host, () => r()));
    return new UdpRelay(front, rear, { host, port: target.port }, policy);
  }

  /** The UDP port (and SCTP port) the initiator connects to. */
  get port(): number {
    return this.front.address().port;
  }

  /** Datagrams held now. */
  get holding(): number {
    return this.heldPackets.length;
  }

  /** Every DATA chunk lost so far. */
  get lost(): DataChunk[] {
    return this.log.flatMap((r) => r.lost);
  }

  /** Forwards the held datagrams (and packets of held chunks), in the order they came. */
  flushHeld(): void {
    for (const h of this.heldPackets.splice(0)) this.forward(h.dir, h.packet, h.data);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.heldPackets.length = 0;
    for (const s of [this.front, this.rear]) {
      try {
        s.close();
      } catch {
        // already closed
      }
    }
  }

  private onDatagram(dir: Direction, m: Buffer): void {
    if (this.closed || m.length < COMMON_HEADER) return;
    const headers = chunkHeaders(m);
    const data = dataChunksOf(m, headers);
    for (const c of data) this.trackers[dir].complete(c);
    const d: Datagram = {
      dir,
      seen: this.seenCount[dir]++,
      chunkTypes: headers.map((h) => h.type),
      data,
      retransmission: data.some((c) => c.retransmission),
    };
    const verdict = this.policy(d);
    const record = { dir, seen: d.seen, data, retransmission: d.retransmission };
    const packet = Buffer.from(m);
    if (verdict === 'drop' || verdict === 'hold' || verdict === 'forward') {
      this.log.push({ ...record, lost: verdict === 'drop' ? data : [], held: verdict === 'hold' ? data : [] });
      if (verdict === 'hold') this.heldPackets.push({ dir, packet, data });
      else if (verdict === 'forward') this.forward(dir, packet, data);
      return;
    }
    const lose = new Set(verdict.lose ?? []);
    const hold = new Set(verdict.hold ?? []);
    const lost = data.filter((c) => lose.has(c.tsn));
    const held = data.filter((c) => hold.has(c.tsn) && !lose.has(c.tsn));
    this.log.push({ ...record, lost, held });
    const gone = new Set([...lost, ...held].map((c) => c.header.offset));
    const kept = headers.filter((h) => !gone.has(h.offset));
    if (held.length > 0) {
      this.heldPackets.push({
        dir,
        packet: packetOf(
          packet,
          held.map((c) => c.header),
        ),
        data: held,
      });
    }
    if (kept.length > 0) {
      this.forward(
        dir,
        packetOf(packet, kept),
        data.filter((c) => !gone.has(c.header.offset)),
      );
    }
  }

  private forward(dir: Direction, packet: Buffer, data: readonly DataChunk[]): void {
    if (this.closed) return;
    // The initiator addressed the relay's port; the target answers from its own.
    if (dir === 'out' && packet.readUInt16BE(2) === this.port) packet.writeUInt16BE(this.target.port, 2);
    if (dir === 'back' && packet.readUInt16BE(0) === this.target.port) packet.writeUInt16BE(this.port, 0);
    signSctp(packet);
    this.forwards.push({ dir, index: this.forwardedCount[dir]++, data });
    if (dir === 'out') this.rear.send(packet);
    else if (this.client) this.front.send(packet, this.client.port, this.client.address);
  }
}

// ---- the measure --------------------------------------------------------------------------------

/** A delivery at the receiver: the probe and its place in the receiver's delivery order (all streams). */
export interface Delivery {
  readonly s: number;
  readonly q: number;
  /** Index in the receiver's delivery order, over all streams. */
  readonly d: number;
}

/** One stream-`victim` message delivered after a stream-`lossy` message that reached the receiver after it. */
export interface HeldPair {
  readonly held: { s: number; q: number };
  readonly behind: { s: number; q: number };
}

/**
 * Stream-`victim` messages held by stream `lossy`, from the relay's forwarding order and the receiver's
 * delivery order alone (no clocks). For each message, per fragment (TSN), the places among the datagrams
 * the relay forwarded towards the receiver that carried it. The relay forwards over one socket to one
 * socket on the loopback, so the receiver gets datagrams in that order:
 * - a `victim` message m was surely whole at the receiver once the last copy of each of its fragments was
 *   forwarded: `late(m)` = the largest place of any copy of any fragment;
 * - a `lossy` message j could not be whole before the first copy of each of its fragments was forwarded:
 *   `early(j)` = the largest, over its fragments, of the first place.
 * m counts when some j was delivered before it although early(j) > late(m): m was in the receiver's hands
 * before j could be, and a receiver that delivers streams independently hands m up first. A receiver that
 * held m for a repair on `lossy` (head-of-line blocking between streams) delivers it after the repaired
 * message: counted. Without loss nothing can be counted (j came after m and is delivered after it): the
 * control.
 */
export function heldBehind(forwards: readonly ForwardRecord[], deliveries: readonly Delivery[], victim = 2, lossy = 1) {
  const key = (s: number, q: number) => `${s}/${q}`;
  /** message → TSN → places of the datagrams that carried it. */
  const places = new Map<string, Map<number, number[]>>();
  for (const f of forwards) {
    if (f.dir !== 'out') continue;
    for (const c of f.data) {
      if (!c.probe) continue;
      const k = key(c.probe.s, c.probe.q);
      const byTsn = places.get(k) ?? new Map<number, number[]>();
      places.set(k, byTsn);
      const list = byTsn.get(c.tsn) ?? [];
      list.push(f.index);
      byTsn.set(c.tsn, list);
    }
  }
  const early = (k: string) => {
    const byTsn = places.get(k);
    return byTsn ? Math.max(...[...byTsn.values()].map((l) => Math.min(...l))) : undefined;
  };
  const late = (k: string) => {
    const byTsn = places.get(k);
    return byTsn ? Math.max(...[...byTsn.values()].flat()) : undefined;
  };
  const pairs: HeldPair[] = [];
  // Walk the deliveries in order, keeping the stream-`lossy` messages delivered so far.
  const lossyDelivered: { q: number; early: number }[] = [];
  let victims = 0;
  let matched = 0;
  for (const dl of [...deliveries].sort((a, b) => a.d - b.d)) {
    const k = key(dl.s, dl.q);
    if (dl.s === lossy) {
      const e = early(k);
      if (e !== undefined) lossyDelivered.push({ q: dl.q, early: e });
      continue;
    }
    if (dl.s !== victim) continue;
    victims++;
    const l = late(k);
    if (l === undefined) continue;
    matched++;
    const j = lossyDelivered.find((x) => x.early > l);
    if (j) pairs.push({ held: { s: dl.s, q: dl.q }, behind: { s: lossy, q: j.q } });
  }
  /** victims: `victim` messages delivered; matched: those the relay saw forwarded; held: those counted. */
  return { victims, matched, held: pairs.length, pairs };
}
