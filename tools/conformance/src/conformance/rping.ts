/**
 * librdmacm rping's application protocol, played by the kit in either role: the client advertises a
 * buffer (16 octets: be64 addr, be32 rkey, be32 size) in a Send, the server RDMA Reads it and answers
 * with a go-ahead Send; the client advertises its sink, the server RDMA Writes the ping back and sends
 * "done". Every message the target sends is checked against RFC 5040/5041 on the way (MSNs per queue,
 * opcodes, STags and TOs the kit advertised).
 */
import { Opcode } from '../wire/constants.js';
import { ConformanceProtocolError } from './errors.js';
import { decodeReadRequestHeader, describe, type KitSession, type RxMessage, terminateOf } from './session.js';

export const RPING_INFO_LENGTH = 16;
/** The kit's ping size: rping's default (-S 64). */
export const KIT_PING_SIZE = 64;
/** STags and TOs the kit advertises (any values will do: the target must echo them back). */
export const KIT_SOURCE_STAG = 0x0000_1a00;
export const KIT_SINK_STAG = 0x0000_2b00;
export const KIT_SOURCE_TO = 0x7f00_0000_0000n;
export const KIT_SINK_TO = 0x7f00_0010_0000n;

export interface RpingInfo {
  readonly addr: bigint;
  readonly rkey: number;
  readonly size: number;
}

export function encodeInfo(i: RpingInfo): Uint8Array {
  const b = new Uint8Array(RPING_INFO_LENGTH);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, i.addr);
  v.setUint32(8, i.rkey >>> 0);
  v.setUint32(12, i.size >>> 0);
  return b;
}

export function decodeInfo(b: Uint8Array): RpingInfo | undefined {
  if (b.byteLength !== RPING_INFO_LENGTH) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, RPING_INFO_LENGTH);
  return { addr: v.getBigUint64(0), rkey: v.getUint32(8), size: v.getUint32(12) };
}

/** rping's ping text for ping `n`: "rdma-ping-n: " then characters from 'A' upwards, NUL last. */
export function pingText(n: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  const head = new TextEncoder().encode(`rdma-ping-${n}: `);
  b.set(head.subarray(0, Math.min(head.length, size)));
  let c = 65 + (n % 58);
  for (let i = head.length; i < size; i++) {
    b[i] = c;
    c = c >= 122 ? 65 : c + 1;
  }
  b[size - 1] = 0;
  return b;
}

/**
 * Checks what the target sends: untagged MSNs run 1, 2, 3… per queue (RFC 5041 §5.1), DDP and RDMAP
 * version 1 (0 at MPA Rev 0: RFC 5044 Appendix C), CRC and Markers as agreed (RFC 5044 §4), no
 * Terminate where the protocol goes on.
 */
export class RxCheck {
  private readonly expectedMsn = new Map<number, number>();
  constructor(
    private readonly s: KitSession,
    /** MSNs the RFC 6581 RTR took on each queue before the ULP's first message. */
    rtrMsns: ReadonlyMap<number, number> = new Map(),
  ) {
    for (const [qn, msn] of rtrMsns) this.expectedMsn.set(qn, msn + 1);
  }

  /** The next message, checked; a Terminate or a framing fault throws with what it said. */
  async next(what: string): Promise<RxMessage> {
    const m = await this.s.next(what);
    const bad = m.fpdu.violations.find((v) => v.severity === 'reject');
    if (bad) throw new ConformanceProtocolError(`${bad.clause}: ${bad.message} (while waiting for ${what})`);
    const t = terminateOf(m);
    if (t) throw new ConformanceProtocolError(`the target sent a Terminate (${t.name}) where ${what} was due`);
    if (!m.ddp)
      throw new ConformanceProtocolError(`RFC 5041 §4: a ULPDU of ${m.fpdu.ulpduLength} octets has no DDP header`);
    const v = this.s.versions;
    const rdmac = v.ddp === 0 ? ' (MPA Rev 0: the RDMAC profile, RFC 5044 Appendix C)' : '';
    if (m.ddp.dv !== v.ddp)
      throw new ConformanceProtocolError(`RFC 5041 §4.2: DDP version ${m.ddp.dv} where ${v.ddp} was due${rdmac}`);
    if (m.rv !== v.rdmap)
      throw new ConformanceProtocolError(`RFC 5040 §4.1: RDMAP version ${m.rv} where ${v.rdmap} was due${rdmac}`);
    if (!m.ddp.tagged) {
      const want = this.expectedMsn.get(m.ddp.qn) ?? 1;
      if (m.ddp.msn !== want)
        throw new ConformanceProtocolError(
          `RFC 5041 §5.1: MSN ${m.ddp.msn} on QN ${m.ddp.qn} where ${want} was due (${describe(m)})`,
        );
      if (m.ddp.last) this.expectedMsn.set(m.ddp.qn, want + 1);
    }
    return m;
  }

  /** The next message, which must be `opcode` (whole, in one segment when `single`). */
  async expect(opcode: number, what: string): Promise<RxMessage> {
    const m = await this.next(what);
    if (m.opcode !== opcode) throw new ConformanceProtocolError(`${describe(m)} where ${what} was due`);
    return m;
  }

  /** A whole tagged message (Write or Read Response) at `stag`, gathered segment by segment up to L. */
  async tagged(opcode: number, stag: number, to: bigint, max: number, what: string): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let at = to;
    let total = 0;
    for (;;) {
      const m = await this.expect(opcode, what);
      const d = m.ddp;
      if (!d?.tagged) throw new ConformanceProtocolError(`${describe(m)}: ${what} must be tagged (RFC 5040 §4.1)`);
      if (d.stag !== stag || d.to !== at)
        throw new ConformanceProtocolError(
          `${what}: STag 0x${d.stag.toString(16)} TO ${d.to}, the kit advertised STag 0x${stag.toString(16)} TO ${at}`,
        );
      total += m.payload.byteLength;
      if (total > max) throw new ConformanceProtocolError(`${what}: ${total} octets, more than the ${max} advertised`);
      parts.push(m.payload);
      at += BigInt(m.payload.byteLength);
      if (d.last) break;
    }
    return Buffer.concat(parts);
  }
}

export interface PingResult {
  readonly pings: number;
  readonly octets: number;
}

/**
 * The kit as rping client: `pings` pings of `size` octets (RFC 5040 §5: Send, Read Response, Write
 * placement checked), then an orderly close.
 */
export async function rpingClient(s: KitSession, rx: RxCheck, pings = 1, size = KIT_PING_SIZE): Promise<PingResult> {
  for (let n = 0; n < pings; n++) {
    const src = pingText(n, size);
    s.send(encodeInfo({ addr: KIT_SOURCE_TO, rkey: KIT_SOURCE_STAG, size }));
    const rr = await readRequest(rx, 'the RDMA Read Request of the source buffer');
    checkReadOfSource(rr, size);
    respondRead(s, rr, src);
    await rx.expect(Opcode.Send, 'the go-ahead Send');
    s.send(encodeInfo({ addr: KIT_SINK_TO, rkey: KIT_SINK_STAG, size }));
    const back = await rx.tagged(Opcode.RdmaWrite, KIT_SINK_STAG, KIT_SINK_TO, size, 'the RDMA Write of the ping');
    const want = src.subarray(0, src.indexOf(0) + 1);
    if (Buffer.compare(back, want) !== 0)
      throw new ConformanceProtocolError(`the ping written back (${back.length} octets) is not the ping read`);
    await rx.expect(Opcode.Send, 'the done Send');
  }
  return { pings, octets: pings * size };
}

/** The next RDMA Read Request's header (RFC 5040 §4.4). */
export async function readRequest(rx: RxCheck, what: string) {
  const m = await rx.expect(Opcode.RdmaReadRequest, what);
  if (m.ddp?.tagged !== false || m.ddp.qn !== 1)
    throw new ConformanceProtocolError(`RFC 5040 §4.1: ${describe(m)}: a Read Request goes on QN 1`);
  const rr = decodeReadRequestHeader(m.payload);
  if (!rr) throw new ConformanceProtocolError(`a Read Request of ${m.payload.byteLength} octets (28 due)`);
  return rr;
}

const swap32 = (n: number) => Buffer.from(Uint32Array.of(n).buffer).readUInt32BE(0);
const swap64 = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n);
  return b.readBigUInt64BE(0);
};

/**
 * The target's Read Request must name the source the kit advertised (STag, TO, size). Fields that match
 * only byte-swapped are a byte-order fault (RFC 5040 §4.4 fields go in network byte order: RFC 791 Appendix B),
 * named as such rather than as three wrong values.
 */
export function checkReadOfSource(
  rr: { srcStag: number; srcTo: bigint; size: number; sinkStag: number; sinkTo: bigint },
  size: number,
): void {
  if (rr.srcStag === KIT_SOURCE_STAG && rr.srcTo === KIT_SOURCE_TO && rr.size === size) return;
  const swapped = [
    swap32(rr.srcStag) === KIT_SOURCE_STAG ? 'Data Source STag' : '',
    swap64(rr.srcTo) === KIT_SOURCE_TO ? 'Data Source Tagged Offset' : '',
    swap32(rr.size) === size ? 'RDMA Read Message Size' : '',
  ].filter(Boolean);
  if (swapped.length > 0)
    throw new ConformanceProtocolError(
      `RFC 5040 §4.4 (network byte order, the IETF transmission order of RFC 791 Appendix B): the Read Request's ${swapped.join(', ')} ${swapped.length > 1 ? 'are' : 'is'} in little-endian (host) byte order, not network byte order: STag 0x${rr.srcStag.toString(16)} TO 0x${rr.srcTo.toString(16)} size ${rr.size} read as 0x${KIT_SOURCE_STAG.toString(16)}, 0x${KIT_SOURCE_TO.toString(16)} and ${size} once swapped`,
    );
  throw new ConformanceProtocolError(
    `Read Request of STag 0x${rr.srcStag.toString(16)} TO 0x${rr.srcTo.toString(16)} size ${rr.size}: not the advertised buffer (STag 0x${KIT_SOURCE_STAG.toString(16)} TO 0x${KIT_SOURCE_TO.toString(16)} size ${size})`,
  );
}

/** Answers a Read Request with `data` in Read Response segments of at most 16 KiB (RFC 5040 §5.2.2). */
export function respondRead(
  s: KitSession,
  rr: { sinkStag: number; sinkTo: bigint; size: number },
  data: Uint8Array,
): void {
  const SEG = 16 * 1024;
  let off = 0;
  do {
    const n = Math.min(SEG, rr.size - off);
    const last = off + n >= rr.size;
    const seg = s.tagged(Opcode.RdmaReadResponse, rr.sinkStag, rr.sinkTo + BigInt(off), data.subarray(off, off + n));
    if (!last) seg[0] = (seg[0] as number) & ~0x40; // RFC 5041 §4.2: L only on the last segment
    s.sendUlpdu(seg);
    off += n;
  } while (off < rr.size);
}

/** The kit as rping server for one ping: Read, go-ahead, Write back, done. Returns the ping text read. */
export async function rpingServer(s: KitSession, rx: RxCheck): Promise<Uint8Array> {
  const adv = await rx.expect(Opcode.Send, "the client's source advertisement");
  const src = decodeInfo(adv.payload);
  if (!src) throw new ConformanceProtocolError(`an advertisement of ${adv.payload.byteLength} octets (16 due)`);
  if (src.size === 0 || src.size > 1 << 20)
    throw new ConformanceProtocolError(`an advertised ping size of ${src.size} octets`);
  s.readRequest({ sinkStag: KIT_SINK_STAG, sinkTo: KIT_SINK_TO, size: src.size, srcStag: src.rkey, srcTo: src.addr });
  const data = await rx.tagged(Opcode.RdmaReadResponse, KIT_SINK_STAG, KIT_SINK_TO, src.size, 'the Read Response');
  if (data.byteLength !== src.size)
    throw new ConformanceProtocolError(`a Read Response of ${data.byteLength} octets for a Read of ${src.size}`);
  s.send(new Uint8Array(RPING_INFO_LENGTH)); // go ahead
  const adv2 = await rx.expect(Opcode.Send, "the client's sink advertisement");
  const dst = decodeInfo(adv2.payload);
  if (!dst) throw new ConformanceProtocolError(`an advertisement of ${adv2.payload.byteLength} octets (16 due)`);
  const z = data.indexOf(0);
  const wlen = Math.min(z < 0 ? data.length : z + 1, dst.size);
  s.write(dst.rkey, dst.addr, data.subarray(0, wlen));
  s.send(new Uint8Array(RPING_INFO_LENGTH)); // done
  return data;
}
