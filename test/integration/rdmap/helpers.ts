/** Test fixtures: RDMAP streams over the loopback LLP, and a raw peer that writes DDP segments by hand. */
import { Access, type DdpProfile, StagTable } from '@rddp/ddp';
import type { LlpStream } from '@rddp/llp';
import { createLoopbackPair, type LoopbackOptions } from '@rddp/llp-loopback';
import {
  type RdmapCompletion,
  RdmapStream,
  type RdmapStreamOptions,
  type ReceiveCompletion,
  type SendCompletion,
} from '@rddp/rdmap';
import { filter, firstValueFrom, type Observable } from 'rxjs';

export const PROFILES: readonly DdpProfile[] = ['ietf', 'rdmac'];
/** DDP Version and RDMAP Version per profile (RFC 5041 §4.1, RFC 5040 §4.1). */
export const VERSIONS: Readonly<Record<DdpProfile, { dv: number; rv: number }>> = {
  ietf: { dv: 1, rv: 1 },
  rdmac: { dv: 0, rv: 0 },
};

export const ALL_ACCESS = Access.LocalRead | Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite;

type SideOptions = Partial<Omit<RdmapStreamOptions, 'stags' | 'profile'>>;

export interface Side {
  readonly stream: RdmapStream;
  readonly stags: StagTable;
  readonly completions: RdmapCompletion[];
  readonly llp: LlpStream;
}

function side(llp: LlpStream, profile: DdpProfile, role: 'initiator' | 'responder', o: SideOptions = {}): Side {
  const stags = new StagTable();
  const stream = new RdmapStream(llp, { profile, pdId: 1, role, stags, ...o });
  const completions: RdmapCompletion[] = [];
  stream.completions$.subscribe((c) => completions.push(c));
  return { stream, stags, completions, llp };
}

/** Two RDMAP streams on the two ends of a loopback connection, each with its own STag table (its own host). */
export async function rdmapPair(
  profile: DdpProfile,
  options: { a?: SideOptions; b?: SideOptions; loopback?: LoopbackOptions } = {},
): Promise<{ a: Side; b: Side }> {
  const [ca, cb] = await createLoopbackPair(options.loopback ?? {});
  return {
    a: side(ca.streams[0] as LlpStream, profile, 'initiator', options.a),
    b: side(cb.streams[0] as LlpStream, profile, 'responder', options.b),
  };
}

/** An RDMAP stream facing a raw LLP stream: the test writes DDP segments by hand and reads what comes back. */
export async function rawPeer(
  profile: DdpProfile,
  options: SideOptions & { loopback?: LoopbackOptions } = {},
): Promise<{ rdmap: Side; raw: LlpStream; received: string[]; send(hex: string): void }> {
  const { loopback, ...o } = options;
  const [ca, cb] = await createLoopbackPair(loopback ?? {});
  const raw = ca.streams[0] as LlpStream;
  const received: string[] = [];
  raw.setReceiver((u) => received.push(u.chunks.map((c) => Buffer.from(c).toString('hex')).join('')));
  const rdmap = side(cb.streams[0] as LlpStream, profile, 'responder', o);
  return {
    rdmap,
    raw,
    received,
    send(hex: string) {
      raw.send([bytes(hex)]);
    },
  };
}

export const bytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex.replace(/[\s_]/g, ''), 'hex'));
export const hexOf = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const h8 = (n: number) => (n & 0xff).toString(16).padStart(2, '0');
const h16 = (n: number) => (n & 0xffff).toString(16).padStart(4, '0');
export const h32 = (n: number): string => (n >>> 0).toString(16).padStart(8, '0');
const h64 = (n: bigint) => BigInt.asUintN(64, n).toString(16).padStart(16, '0');

/** RFC 5040 §4.1 Figure 3: RV (2 bits), Rsv (2), OpCode (4) — written out by hand, not with the codec. */
export const ctrl = (rv: number, opcode: number): number => ((rv & 3) << 6) | (opcode & 0xf);

/** A tagged DDP segment (RFC 5041 Figure 4), as hex: T=1, L, DV; RDMAP control; STag; TO; payload. */
export function taggedHex(o: {
  dv: number;
  c: number;
  stag: number;
  to: bigint;
  last?: boolean;
  payload?: string;
}): string {
  return `${h8(0x80 | (o.last === false ? 0 : 0x40) | o.dv)}${h8(o.c)}${h32(o.stag)}${h64(o.to)}${o.payload ?? ''}`;
}

/** An untagged DDP segment (RFC 5041 Figure 5), as hex: T=0, L, DV; control; Invalidate STag; QN; MSN; MO. */
export function untaggedHex(o: {
  dv: number;
  c: number;
  qn: number;
  msn: number;
  mo?: number;
  inv?: number;
  last?: boolean;
  payload?: string;
}): string {
  return `${h8((o.last === false ? 0 : 0x40) | o.dv)}${h8(o.c)}${h32(o.inv ?? 0)}${h32(o.qn)}${h32(o.msn)}${h32(o.mo ?? 0)}${o.payload ?? ''}`;
}

/** An RDMA Read Request Header (RFC 5040 Figure 6), as hex. */
export function readRequestHex(o: {
  sinkStag: number;
  sinkTo: bigint;
  size: number;
  srcStag: number;
  srcTo: bigint;
}): string {
  return `${h32(o.sinkStag)}${h64(o.sinkTo)}${h32(o.size)}${h32(o.srcStag)}${h64(o.srcTo)}`;
}

/**
 * The Terminate segment a stream must send (RFC 5040 Appendix A.6, Figure 16): untagged, L=1, QN 2, MSN 1,
 * MO 0, Terminate OpCode; then Terminate Control (Layer, EType, Error Code, M/D/R, 13 reserved bits), the
 * DDP Segment Length and Terminated DDP Header when present, the Terminated RDMA Header when present.
 */
export function terminateHex(o: {
  dv: number;
  rv: number;
  layer: number;
  etype: number;
  code: number;
  segment?: string;
  segmentLength?: number;
  readRequest?: string;
}): string {
  const m = o.segment !== undefined;
  const r = o.readRequest !== undefined;
  const hdrct = (m ? 0xc0 : 0) | (r ? 0x20 : 0);
  const ddp = o.segment === undefined ? '' : o.segment.slice(0, isTagged(o.segment) ? 28 : 36);
  const len = m ? h16(o.segmentLength ?? o.segment!.length / 2) : '';
  return untaggedHex({
    dv: o.dv,
    c: ctrl(o.rv, 7),
    qn: 2,
    msn: 1,
    payload: `${h8((o.layer << 4) | o.etype)}${h8(o.code)}${h8(hdrct)}00${len}${ddp}${o.readRequest ?? ''}`,
  });
}

function isTagged(segmentHex: string): boolean {
  return (Number.parseInt(segmentHex.slice(0, 2), 16) & 0x80) !== 0;
}

/** Resolves with the first completion of `stream` that `pred` accepts. */
export function nextCompletion<T extends RdmapCompletion = RdmapCompletion>(
  stream: RdmapStream,
  pred: (c: RdmapCompletion) => boolean = () => true,
): Promise<T> {
  return firstValueFrom(stream.completions$.pipe(filter(pred))) as Promise<T>;
}

export const isSend = (c: RdmapCompletion): c is SendCompletion => c.kind === 'send';
export const isReceive = (c: RdmapCompletion): c is ReceiveCompletion => c.kind === 'receive';

/** Waits until `n` completions have been collected. */
export async function until(cond: () => boolean, what = 'condition', ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

export function closed(stream: RdmapStream): Promise<unknown> {
  return firstValueFrom(stream.closed$);
}

export function last<T>(xs: readonly T[]): T {
  return xs[xs.length - 1] as T;
}

export function observe<T>(o: Observable<T>): T[] {
  const out: T[] = [];
  o.subscribe((v) => out.push(v));
  return out;
}
