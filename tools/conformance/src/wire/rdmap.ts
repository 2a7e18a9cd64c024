/**
 * RDMAP over DDP (RFC 5040 §4): the RDMAP control octet (RV (2 bits) | Rsvd (2) | OpCode (4)) in DDP's
 * 8-bit RsvdULP, the Invalidate STag in the untagged 32-bit RsvdULP, the RDMA Read Request Header
 * (§4.4), the Terminate Header (§4.8) and RFC 7306's Immediate Data, Atomic Request and Response
 * Headers. decodeUlpdu checks each segment alone against the rules a receiver enforces.
 */
import {
  ATOMIC_OPCODE_NAMES,
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  DDP_VERSION,
  IMMEDIATE_DATA_LENGTH,
  Opcode,
  opcodeIsTagged,
  opcodeName,
  queueOfOpcode,
  RDMAP_VERSION,
  READ_REQUEST_HEADER_LENGTH,
} from './constants.js';
import { type DdpHeader, type DdpHeaderFields, ddpHeaderLength, decodeDdpHeader, encodeDdpHeader } from './ddp.js';
import { type DecodedTerminate, decodeTerminate } from './terminate.js';
import { note, reject, type Violation, warn } from './violation.js';

export interface RdmapControl {
  /** RV: RDMA Version (1: RFC 5040). */
  readonly rv: number;
  readonly rsvd: number;
  readonly opcode: number;
}

export function encodeRdmapControl(c: { opcode: number; rv?: number; rsvd?: number }): number {
  return (((c.rv ?? RDMAP_VERSION) & 3) << 6) | (((c.rsvd ?? 0) & 3) << 4) | (c.opcode & 0xf);
}

export function decodeRdmapControl(octet: number): RdmapControl {
  return { rv: octet >>> 6, rsvd: (octet >>> 4) & 3, opcode: octet & 0xf };
}

/** RFC 5040 §4.4. */
export interface ReadRequestHeader {
  readonly sinkStag: number;
  readonly sinkTo: bigint;
  readonly size: number;
  readonly srcStag: number;
  readonly srcTo: bigint;
}

export function encodeReadRequest(h: ReadRequestHeader): Uint8Array {
  const out = new Uint8Array(READ_REQUEST_HEADER_LENGTH);
  const v = new DataView(out.buffer);
  v.setUint32(0, h.sinkStag >>> 0);
  v.setBigUint64(4, BigInt.asUintN(64, h.sinkTo));
  v.setUint32(12, h.size >>> 0);
  v.setUint32(16, h.srcStag >>> 0);
  v.setBigUint64(20, BigInt.asUintN(64, h.srcTo));
  return out;
}

export function decodeReadRequest(b: Uint8Array): ReadRequestHeader | undefined {
  if (b.byteLength < READ_REQUEST_HEADER_LENGTH) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    sinkStag: v.getUint32(0),
    sinkTo: v.getBigUint64(4),
    size: v.getUint32(12),
    srcStag: v.getUint32(16),
    srcTo: v.getBigUint64(20),
  };
}

/** RFC 7306 §5 Atomic Request Header. */
export interface AtomicRequestHeader {
  readonly atomicOpcode: number;
  readonly requestId: number;
  readonly remoteStag: number;
  readonly remoteTo: bigint;
  readonly addOrSwapData: bigint;
  readonly addOrSwapMask: bigint;
  readonly compareData: bigint;
  readonly compareMask: bigint;
}

export function encodeAtomicRequest(h: AtomicRequestHeader): Uint8Array {
  const out = new Uint8Array(ATOMIC_REQUEST_HEADER_LENGTH);
  const v = new DataView(out.buffer);
  v.setUint32(0, h.atomicOpcode & 0xf);
  v.setUint32(4, h.requestId >>> 0);
  v.setUint32(8, h.remoteStag >>> 0);
  v.setBigUint64(12, BigInt.asUintN(64, h.remoteTo));
  v.setBigUint64(20, BigInt.asUintN(64, h.addOrSwapData));
  v.setBigUint64(28, BigInt.asUintN(64, h.addOrSwapMask));
  v.setBigUint64(36, BigInt.asUintN(64, h.compareData));
  v.setBigUint64(44, BigInt.asUintN(64, h.compareMask));
  return out;
}

export function decodeAtomicRequest(b: Uint8Array): AtomicRequestHeader | undefined {
  if (b.byteLength < ATOMIC_REQUEST_HEADER_LENGTH) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    atomicOpcode: v.getUint32(0) & 0xf,
    requestId: v.getUint32(4),
    remoteStag: v.getUint32(8),
    remoteTo: v.getBigUint64(12),
    addOrSwapData: v.getBigUint64(20),
    addOrSwapMask: v.getBigUint64(28),
    compareData: v.getBigUint64(36),
    compareMask: v.getBigUint64(44),
  };
}

/** RFC 7306 §5 Atomic Response Header. */
export interface AtomicResponseHeader {
  readonly originalRequestId: number;
  readonly originalRemoteData: bigint;
}

export function encodeAtomicResponse(h: AtomicResponseHeader): Uint8Array {
  const out = new Uint8Array(ATOMIC_RESPONSE_HEADER_LENGTH);
  const v = new DataView(out.buffer);
  v.setUint32(0, h.originalRequestId >>> 0);
  v.setBigUint64(4, BigInt.asUintN(64, h.originalRemoteData));
  return out;
}

export function decodeAtomicResponse(b: Uint8Array): AtomicResponseHeader | undefined {
  if (b.byteLength < ATOMIC_RESPONSE_HEADER_LENGTH) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { originalRequestId: v.getUint32(0), originalRemoteData: v.getBigUint64(4) };
}

/** A ULPDU: DDP header (its RsvdULP octet built from `opcode`/`rv`) followed by `payload`. */
export function encodeUlpdu(header: DdpHeaderFields, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const h = encodeDdpHeader(header);
  const out = new Uint8Array(h.byteLength + payload.byteLength);
  out.set(h, 0);
  out.set(payload, h.byteLength);
  return out;
}

export interface UntaggedSegmentFields {
  readonly opcode: number;
  readonly qn?: number;
  readonly msn: number;
  readonly mo?: number;
  readonly last?: boolean;
  readonly invalidateStag?: number;
  readonly rv?: number;
  readonly dv?: number;
}

/** An untagged RDMAP segment; QN defaults to the opcode's queue (RFC 5040 §4.1), L to 1, MO to 0. */
export function untaggedSegment(f: UntaggedSegmentFields, payload?: Uint8Array): Uint8Array {
  return encodeUlpdu(
    {
      tagged: false,
      last: f.last ?? true,
      rsvdUlp: encodeRdmapControl({ opcode: f.opcode, ...(f.rv !== undefined ? { rv: f.rv } : {}) }),
      rsvdUlp2: f.invalidateStag ?? 0,
      qn: f.qn ?? queueOfOpcode(f.opcode) ?? 0,
      msn: f.msn,
      mo: f.mo ?? 0,
      ...(f.dv !== undefined ? { dv: f.dv } : {}),
    },
    payload,
  );
}

export interface TaggedSegmentFields {
  readonly opcode: number;
  readonly stag: number;
  readonly to: bigint;
  readonly last?: boolean;
  readonly rv?: number;
  readonly dv?: number;
}

/** A tagged RDMAP segment (RDMA Write or Read Response). */
export function taggedSegment(f: TaggedSegmentFields, payload?: Uint8Array): Uint8Array {
  return encodeUlpdu(
    {
      tagged: true,
      last: f.last ?? true,
      rsvdUlp: encodeRdmapControl({ opcode: f.opcode, ...(f.rv !== undefined ? { rv: f.rv } : {}) }),
      stag: f.stag,
      to: f.to,
      ...(f.dv !== undefined ? { dv: f.dv } : {}),
    },
    payload,
  );
}

export interface DecodedSegment {
  readonly ddp: DdpHeader;
  readonly rdmap: RdmapControl & { readonly name: string };
  /** DDP payload (after the DDP header). */
  readonly payload: Uint8Array;
  /** Send with Invalidate / with SE and Invalidate: the STag to invalidate. */
  readonly invalidateStag?: number;
  readonly readRequest?: ReadRequestHeader;
  readonly terminate?: DecodedTerminate;
  readonly atomicRequest?: AtomicRequestHeader & { readonly atomicOpcodeName: string };
  readonly atomicResponse?: AtomicResponseHeader;
  readonly immediateData?: bigint;
  readonly violations: readonly Violation[];
}

const TWO_64 = 1n << 64n;
const TWO_32 = 2 ** 32;

/** Opcodes that are one DDP segment (L = 1, MO = 0): RFC 5040 §4.4 and §4.8, RFC 7306 §5. */
function singleSegment(op: number): boolean {
  return (
    op === Opcode.RdmaReadRequest ||
    op === Opcode.Terminate ||
    op === Opcode.ImmediateData ||
    op === Opcode.ImmediateDataWithSolicitedEvent ||
    op === Opcode.AtomicRequest ||
    op === Opcode.AtomicResponse
  );
}

/**
 * The DDP and RDMAP versions a stream speaks: 1 and 1 (RFC 5041 §4.2, RFC 5040 §4.1), or 0 and 0 on an
 * MPA Rev 0 connection (the RDMA Consortium profile, RFC 5044 Appendix C; RDMAC DDP 1.0 §6.1).
 */
export interface StreamVersions {
  readonly ddp: number;
  readonly rdmap: number;
}

export const IETF_VERSIONS: StreamVersions = { ddp: DDP_VERSION, rdmap: RDMAP_VERSION };
export const RDMAC_VERSIONS: StreamVersions = { ddp: 0, rdmap: 0 };

/**
 * Decodes one DDP segment carrying RDMAP and flags what a receiver must reject in it, each with its
 * clause. `error` when the ULPDU is too short to hold a DDP header (RFC 5041 §4). `versions`: what
 * the stream speaks (IETF by default).
 */
export function decodeUlpdu(
  bytes: Uint8Array,
  versions: StreamVersions = IETF_VERSIONS,
): DecodedSegment | { readonly error: Violation } {
  const ddp = decodeDdpHeader(bytes);
  if (!ddp)
    return {
      error: reject(
        'ddp-short-segment',
        'RFC 5041 §4',
        bytes.byteLength === 0
          ? 'zero-length ULPDU: no DDP header'
          : `ULPDU of ${bytes.byteLength} octets cannot hold a DDP ${bytes.byteLength > 0 && (bytes[0] as number) & 0x80 ? 'tagged (14)' : 'untagged (18)'} header`,
      ),
    };
  const payload = bytes.subarray(ddpHeaderLength(ddp.tagged));
  const c = decodeRdmapControl(ddp.rsvdUlp);
  const op = c.opcode;
  const v: Violation[] = [];
  const rdmac = versions.ddp === 0 ? ' (MPA Rev 0: RDMAC DDP 1.0 §6.1)' : '';
  if (ddp.dv !== versions.ddp)
    v.push(
      reject(
        'ddp-version',
        'RFC 5041 §4.2, §7.2',
        `DDP version ${ddp.dv}, not ${versions.ddp}${rdmac} (Terminate: ${ddp.tagged ? 'Tagged' : 'Untagged'} Buffer Error, Invalid DDP version)`,
      ),
    );
  if (ddp.rsvd !== 0) v.push(warn('ddp-reserved', 'RFC 5041 §4.2', `DDP reserved bits 0x${ddp.rsvd.toString(16)}`));
  if (c.rv !== versions.rdmap)
    v.push(
      reject(
        'rdmap-version',
        'RFC 5040 §4.1, §7.2',
        `RDMA version ${c.rv}, not ${versions.rdmap}${versions.rdmap === 0 ? ' (MPA Rev 0: the RDMAC profile)' : ''} (Terminate: Remote Operation Error, Invalid RDMAP version)`,
      ),
    );
  if (c.rsvd !== 0) v.push(warn('rdmap-reserved', 'RFC 5040 §4.1', `RDMAP reserved bits ${c.rsvd}`));
  if (op > Opcode.AtomicResponse)
    v.push(
      reject(
        'rdmap-opcode-reserved',
        'RFC 5040 §4.1',
        `reserved OpCode 0x${op.toString(16)} (Terminate: Unexpected OpCode)`,
      ),
    );
  else {
    if (op >= Opcode.ImmediateData)
      v.push(note('rdmap-rfc7306', 'RFC 7306 §8', `${opcodeName(op)}: valid only where both ends enabled RFC 7306`));
    if (opcodeIsTagged(op) !== ddp.tagged)
      v.push(
        reject(
          'rdmap-opcode-t-bit',
          'RFC 5040 §4.1',
          `${opcodeName(op)} in a${ddp.tagged ? ' tagged' : 'n untagged'} DDP segment (Terminate: Unexpected OpCode)`,
        ),
      );
  }
  let invalidateStag: number | undefined;
  if (!ddp.tagged) {
    const q = queueOfOpcode(op);
    if (ddp.qn > 3)
      v.push(reject('ddp-invalid-qn', 'RFC 5040 §3.1, RFC 5041 §7.2', `QN ${ddp.qn} (Terminate: Invalid QN)`));
    else if (q !== undefined && q !== ddp.qn)
      v.push(reject('rdmap-queue', 'RFC 5040 §4.1', `${opcodeName(op)} on QN ${ddp.qn}, not QN ${q}`));
    if (ddp.mo + payload.byteLength > TWO_32)
      v.push(reject('ddp-invalid-mo', 'RFC 5041 §7.2', `MO ${ddp.mo} + ${payload.byteLength} octets passes 2^32`));
    if (op === Opcode.SendWithInvalidate || op === Opcode.SendWithSolicitedEventAndInvalidate)
      invalidateStag = ddp.rsvdUlp2;
    else if (ddp.rsvdUlp2 !== 0)
      v.push(
        warn(
          'rdmap-invalidate-stag',
          'RFC 5040 §4.2',
          `Invalidate STag field 0x${ddp.rsvdUlp2.toString(16)} on ${opcodeName(op)}`,
        ),
      );
  } else if (ddp.to + BigInt(payload.byteLength) > TWO_64)
    v.push(reject('ddp-to-wrap', 'RFC 5041 §7.2', `TO ${ddp.to} + ${payload.byteLength} octets passes 2^64 (TO wrap)`));
  if (singleSegment(op) && !ddp.tagged && (!ddp.last || ddp.mo !== 0))
    v.push(
      reject(
        'rdmap-single-segment',
        op === Opcode.RdmaReadRequest ? 'RFC 5040 §4.4' : op === Opcode.Terminate ? 'RFC 5040 §4.8' : 'RFC 7306 §5',
        `${opcodeName(op)} with L=${ddp.last ? 1 : 0}, MO=${ddp.mo}: it must be one DDP segment (L=1, MO=0)`,
      ),
    );
  const out: {
    -readonly [K in keyof DecodedSegment]?: DecodedSegment[K];
  } = { ddp, rdmap: { ...c, name: opcodeName(op) }, payload };
  if (invalidateStag !== undefined) out.invalidateStag = invalidateStag;
  const exact = (len: number, code: string, clause: string, what: string) => {
    if (payload.byteLength !== len) v.push(reject(code, clause, `${what} of ${payload.byteLength} octets, not ${len}`));
  };
  if (op === Opcode.RdmaReadRequest && !ddp.tagged) {
    exact(READ_REQUEST_HEADER_LENGTH, 'rdmap-read-request-length', 'RFC 5040 §4.4', 'RDMA Read Request');
    const rr = decodeReadRequest(payload);
    if (rr) out.readRequest = rr;
  } else if (op === Opcode.Terminate && !ddp.tagged) {
    const t = decodeTerminate(payload);
    if ('error' in t) v.push(t.error);
    else {
      out.terminate = t;
      v.push(...t.violations);
    }
  } else if ((op === Opcode.ImmediateData || op === Opcode.ImmediateDataWithSolicitedEvent) && !ddp.tagged) {
    exact(IMMEDIATE_DATA_LENGTH, 'rdmap-immediate-length', 'RFC 7306 §5', 'Immediate Data');
    if (payload.byteLength >= IMMEDIATE_DATA_LENGTH)
      out.immediateData = new DataView(payload.buffer, payload.byteOffset, 8).getBigUint64(0);
  } else if (op === Opcode.AtomicRequest && !ddp.tagged) {
    exact(ATOMIC_REQUEST_HEADER_LENGTH, 'rdmap-atomic-length', 'RFC 7306 §5', 'Atomic Request');
    const a = decodeAtomicRequest(payload);
    if (a) {
      out.atomicRequest = { ...a, atomicOpcodeName: ATOMIC_OPCODE_NAMES[a.atomicOpcode] ?? 'Reserved' };
      if (ATOMIC_OPCODE_NAMES[a.atomicOpcode] === undefined)
        v.push(reject('rdmap-atomic-opcode', 'RFC 7306 §5', `Atomic OpCode ${a.atomicOpcode} is not defined`));
    }
  } else if (op === Opcode.AtomicResponse && !ddp.tagged) {
    exact(ATOMIC_RESPONSE_HEADER_LENGTH, 'rdmap-atomic-length', 'RFC 7306 §5', 'Atomic Response');
    const a = decodeAtomicResponse(payload);
    if (a) out.atomicResponse = a;
  }
  out.violations = v;
  return out as DecodedSegment;
}
