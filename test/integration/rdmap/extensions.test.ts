/**
 * RFC 7306 extensions: the Atomic Request/Response and Immediate Data codecs as byte vectors, the atomic
 * operations' semantics, every RFC 7306 message end to end over the loopback LLP, the exact octets each
 * message puts on the wire, the Terminates the responder sends for bad atomics, and the negotiation
 * (an extension is used only when both ends enabled it).
 */
import { Access } from '@rddp/ddp';
import {
  ACCESS_REMOTE_ATOMIC,
  ATOMIC_REQUEST_HEADER_LENGTH,
  ATOMIC_RESPONSE_HEADER_LENGTH,
  ATOMIC_RESPONSE_QUEUE,
  AtomicOpcode,
  decodeAtomicRequest,
  decodeAtomicResponse,
  decodeImmediateData,
  EXTENSION_OPCODES,
  ExtensionOpcode,
  encodeAtomicRequest,
  encodeAtomicResponse,
  encodeImmediateData,
  extensionOpcodeInfo,
  isAtomicOpcode,
  RdmapOpcode as Op,
  type RdmapOperation,
  RdmapStream,
  type ReceiveCompletion,
  type SendCompletion,
} from '@rddp/rdmap';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  bytes,
  closed,
  ctrl,
  h32,
  hexOf,
  isReceive,
  isSend,
  rawPeer,
  rdmapPair,
  readRequestHex,
  terminateHex,
  untaggedHex,
  until,
} from './helpers.js';

const EXT = { atomics: true, immediate: true } as const;
const ALL_ONES = (1n << 64n) - 1n;
const h64 = (n: bigint) => BigInt.asUintN(64, n).toString(16).padStart(16, '0');
const { dv, rv } = { dv: 1, rv: 1 }; // RFC 7306 extends RDMAP Version 1 (the IETF profile)

/** An Atomic Request Header (RFC 7306 §5), written out by hand. */
function atomicRequestHex(o: {
  op: number;
  id: number;
  stag: number;
  to: bigint;
  data?: bigint;
  mask?: bigint;
  cmp?: bigint;
  cmpMask?: bigint;
}): string {
  return `${h32(o.op)}${h32(o.id)}${h32(o.stag)}${h64(o.to)}${h64(o.data ?? 0n)}${h64(o.mask ?? 0n)}${h64(o.cmp ?? 0n)}${h64(o.cmpMask ?? 0n)}`;
}
const atomicRequestSegment = (msn: number, o: Parameters<typeof atomicRequestHex>[0]) =>
  untaggedHex({ dv, c: ctrl(rv, ExtensionOpcode.AtomicRequest), qn: 1, msn, payload: atomicRequestHex(o) });
const atomicResponseSegment = (msn: number, id: number, value: bigint) =>
  untaggedHex({ dv, c: ctrl(rv, ExtensionOpcode.AtomicResponse), qn: 3, msn, payload: `${h32(id)}${h64(value)}` });
const immediateSegment = (msn: number, data: string, se = false) =>
  untaggedHex({
    dv,
    c: ctrl(rv, se ? ExtensionOpcode.ImmediateDataWithSolicitedEvent : ExtensionOpcode.ImmediateData),
    qn: 0,
    msn,
    payload: data,
  });

const word = (b: Uint8Array, off: number) => new DataView(b.buffer, b.byteOffset + off, 8).getBigUint64(0);
const setWord = (b: Uint8Array, off: number, v: bigint) =>
  new DataView(b.buffer, b.byteOffset + off, 8).setBigUint64(0, v);

function post(stream: RdmapStream, op: RdmapOperation, context?: unknown): Promise<SendCompletion> {
  return new Promise((resolve) => stream.postSend({ op, context, onComplete: resolve }));
}
const fetchAdd = (stag: number, to: bigint, add: bigint, mask?: bigint): RdmapOperation => ({
  type: 'atomic',
  atomicOpcode: AtomicOpcode.FetchAdd,
  remoteStag: stag,
  remoteTo: to,
  addOrSwapData: add,
  ...(mask !== undefined ? { addOrSwapMask: mask } : {}),
});

describe('RFC 7306 §4.1: the opcodes and queues the extensions use', () => {
  it('RFC 7306 §4.1 table: 1000b/1001b Immediate Data (QN 0), 1010b Atomic Request (QN 1), 1011b Atomic Response (QN 3), all untagged', () => {
    expect(EXTENSION_OPCODES.map((o) => [o.opcode, o.tagged ? 1 : 0, o.qn, o.extension, o.headerLength])).toEqual([
      [0b1000, 0, 0, 'immediate', 8],
      [0b1001, 0, 0, 'immediate', 8],
      [0b1010, 0, 1, 'atomics', 52],
      [0b1011, 0, 3, 'atomics', 12],
    ]);
    expect(EXTENSION_OPCODES.filter((o) => o.solicitedEvent).map((o) => o.opcode)).toEqual([0b1001]);
    expect(ATOMIC_RESPONSE_QUEUE).toBe(3);
    for (const op of [0, 7, 12, 15]) expect(extensionOpcodeInfo(op)).toBeUndefined();
  });

  it('RFC 7306 IANA registry "RDMAP Message Atomic Operation Subcodes": FetchAdd 0000b, CmpSwap 0010b; 0001b Reserved, no Swap', () => {
    expect([AtomicOpcode.FetchAdd, AtomicOpcode.CmpSwap]).toEqual([0b0000, 0b0010]);
    expect(Array.from({ length: 16 }, (_, i) => i).filter(isAtomicOpcode)).toEqual([0, 2]);
    expect(AtomicOpcode.Swap).toBe('swap'); // a posting shorthand, not a code
  });
});

describe('RFC 7306 §5 headers, as byte vectors', () => {
  const request = {
    atomicOpcode: AtomicOpcode.CmpSwap,
    requestId: 0x01020304,
    remoteStag: 0xaabbccdd,
    remoteTo: 0x1122334455667788n,
    addOrSwapData: 0x0101010101010101n,
    addOrSwapMask: 0x00000000ffffffffn,
    compareData: 0xfedcba9876543210n,
    compareMask: 0xffff0000ffff0000n,
  };
  const requestWire = [
    '00000002', // 28 reserved bits, Atomic OpCode CmpSwap (0010b)
    '01020304', // Request Identifier
    'aabbccdd', // Remote STag
    '1122334455667788', // Remote Tagged Offset
    '0101010101010101', // Add or Swap Data
    '00000000ffffffff', // Add or Swap Mask
    'fedcba9876543210', // Compare Data
    'ffff0000ffff0000', // Compare Mask
  ].join('');

  it('RFC 7306 §5: the Atomic Request Header is 52 octets, every field big-endian in its place', () => {
    const out = encodeAtomicRequest(request);
    expect(out.byteLength).toBe(ATOMIC_REQUEST_HEADER_LENGTH);
    expect(hexOf(out)).toBe(requestWire);
    expect(decodeAtomicRequest(bytes(requestWire))).toEqual({ ...request, reserved: 0 });
  });

  it('RFC 7306 §5: reserved bits are zero on transmit and ignored on receive; out-of-range fields are refused', () => {
    const dirty = bytes(`fffffff1${requestWire.slice(8)}`);
    expect(decodeAtomicRequest(dirty)).toMatchObject({ atomicOpcode: 1, reserved: 0x0fffffff });
    expect(hexOf(encodeAtomicRequest({ ...request, atomicOpcode: 1 })).slice(0, 8)).toBe('00000001');
    expect(() => encodeAtomicRequest({ ...request, atomicOpcode: 16 })).toThrow(RangeError);
    expect(() => encodeAtomicRequest({ ...request, remoteTo: 1n << 64n })).toThrow(RangeError);
    expect(() => encodeAtomicRequest({ ...request, compareMask: -1n })).toThrow(RangeError);
    expect(() => decodeAtomicRequest(new Uint8Array(51))).toThrow(RangeError);
  });

  it('RFC 7306 §5: the Atomic Response Header is the Original Request Identifier and the Original Remote Data Value (12 octets)', () => {
    const out = encodeAtomicResponse({ originalRequestId: 0xcafe0001, originalRemoteData: 0x8000000000000001n });
    expect(out.byteLength).toBe(ATOMIC_RESPONSE_HEADER_LENGTH);
    expect(hexOf(out)).toBe('cafe0001' + '8000000000000001');
    expect(decodeAtomicResponse(out)).toEqual({
      originalRequestId: 0xcafe0001,
      originalRemoteData: 0x8000000000000001n,
    });
  });

  it('RFC 7306 Immediate Data: 64 bits (not 32), big-endian, the whole payload', () => {
    expect(hexOf(encodeImmediateData(0x0123456789abcdefn))).toBe('0123456789abcdef');
    expect(decodeImmediateData(bytes('ffffffffffffffff'))).toBe(ALL_ONES);
    expect(() => encodeImmediateData(1n << 64n)).toThrow(RangeError);
    expect(() => encodeImmediateData(-1n)).toThrow(RangeError);
  });
});

describe('RFC 7306 atomic operations: what each does to the 64-bit word (a raw requester against the responder)', () => {
  /**
   * Runs one Atomic Request, written out by hand, against a responder's word holding `before`: the word
   * after it, and the Original Remote Data Value of the Atomic Response (undefined when none came back).
   */
  async function atomicOn(
    before: bigint,
    o: { op: number; data?: bigint; mask?: bigint; cmp?: bigint; cmpMask?: bigint },
  ): Promise<{ after: bigint; original: bigint | undefined; received: string[] }> {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const target = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: ACCESS_REMOTE_ATOMIC });
    setWord(target.buffer, 0, before);
    peer.send(atomicRequestSegment(1, { id: 9, stag: target.stag, to: 0n, ...o }));
    await until(() => peer.received.length > 0, 'the answer');
    const answer = peer.received[0] as string;
    // An Atomic Response (RDMAP OpCode 1011b): the 8 octets after the 18-octet DDP header and the 4-octet id.
    const original =
      (parseInt(answer.slice(2, 4), 16) & 0x0f) === 0xb ? BigInt(`0x${answer.slice(44, 60)}`) : undefined;
    return { after: word(target.buffer, 0), original, received: peer.received };
  }

  it('RFC 7306 FetchAdd: a plain 64-bit add (zero Add Mask) wraps modulo 2^64', async () => {
    expect(await atomicOn(10n, { op: 0, data: 5n })).toMatchObject({ after: 15n, original: 10n });
    expect(await atomicOn(ALL_ONES, { op: 0, data: 2n })).toMatchObject({ after: 1n, original: ALL_ONES });
  });

  it('RFC 7306 FetchAdd with an Add Mask: fields end at the mask bits and carries do not cross them', async () => {
    // Two 32-bit fields: bit 31 ends the low field. 0xffffffff + 1 wraps within the low field only.
    expect((await atomicOn(0x00000001_ffffffffn, { op: 0, data: 1n, mask: 0x80000000_80000000n })).after).toBe(
      0x00000001_00000000n,
    );
    // Eight 8-bit counters, each incremented.
    expect(
      (await atomicOn(0x00ff_0102_0304_05ffn, { op: 0, data: 0x0101_0101_0101_0101n, mask: 0x8080_8080_8080_8080n }))
        .after,
    ).toBe(0x0100_0203_0405_0600n);
    // A mask bit below the carry makes no difference; the top bit's carry is dropped either way.
    expect((await atomicOn(0x7fn, { op: 0, data: 1n, mask: 1n << 63n })).after).toBe(0x80n);
  });

  it('RFC 7306 IANA subcodes: 0001b is Reserved and 0011b–1111b unassigned, so no operation runs for them (a Terminate, no Atomic Response)', async () => {
    for (const op of [1, 3, 15]) {
      const r = await atomicOn(5n, { op, data: 9n, mask: ALL_ONES });
      expect(r.after, `op ${op}`).toBe(5n);
      expect(r.original, `op ${op}`).toBeUndefined();
      expect(parseInt(r.received[0]?.slice(2, 4) ?? '', 16), `op ${op}: a Terminate`).toBe(ctrl(rv, Op.Terminate));
    }
  });

  it('RFC 7306 CmpSwap with Compare Mask 0 always swaps: the bits of the Swap Mask take the Swap Data', async () => {
    expect((await atomicOn(0xffffn, { op: 2, data: 0x1111n, mask: ALL_ONES })).after).toBe(0x1111n);
    expect((await atomicOn(0x1234n, { op: 2, data: 0xabcdn, mask: 0xff00n, cmp: 9n })).after).toBe(0xab34n);
  });

  it('RFC 7306 CmpSwap: swaps (under the Swap Mask) only if the word equals Compare Data under the Compare Mask', async () => {
    const cas = async (cmp: bigint, cmpMask: bigint, swap: bigint, swapMask: bigint, w: bigint) => {
      const r = await atomicOn(w, { op: 2, cmp, cmpMask, data: swap, mask: swapMask });
      expect(r.original).toBe(w); // the Atomic Response carries the word as it was, hit or miss
      return r.after;
    };
    expect(await cas(7n, ALL_ONES, 9n, ALL_ONES, 7n)).toBe(9n);
    expect(await cas(7n, ALL_ONES, 9n, ALL_ONES, 8n)).toBe(8n);
    expect(await cas(0x10n, 0xf0n, 0x9n, 0x0fn, 0x13n)).toBe(0x19n); // high nibble compared, low nibble swapped
    expect(await cas(0x20n, 0xf0n, 0x9n, 0x0fn, 0x13n)).toBe(0x13n);
  });
});

describe('RFC 7306 atomics end to end over the loopback LLP', () => {
  it('RFC 7306: FetchAdd, CmpSwap and the Swap shorthand change the remote word and complete with its original value', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    const target = b.stags.register({
      pdId: 1,
      buffer: new Uint8Array(24),
      access: ACCESS_REMOTE_ATOMIC,
      baseTo: 0x8000n,
    });
    setWord(target.buffer, 0, 40n);
    setWord(target.buffer, 8, 0xaaaa_bbbb_cccc_ddddn);
    const s = target.stag;
    const add = await post(a.stream, fetchAdd(s, 0x8000n, 2n));
    const swap = await post(a.stream, {
      type: 'atomic',
      atomicOpcode: AtomicOpcode.Swap,
      remoteStag: s,
      remoteTo: 0x8008n,
      addOrSwapData: 0x1111_2222_3333_4444n,
      addOrSwapMask: 0xffff_ffff_0000_0000n,
    });
    const casHit = await post(a.stream, {
      type: 'atomic',
      atomicOpcode: AtomicOpcode.CmpSwap,
      remoteStag: s,
      remoteTo: 0x8000n,
      compareData: 42n,
      addOrSwapData: 7n,
    });
    const casMiss = await post(a.stream, {
      type: 'atomic',
      atomicOpcode: AtomicOpcode.CmpSwap,
      remoteStag: s,
      remoteTo: 0x8000n,
      compareData: 42n,
      addOrSwapData: 99n,
    });
    expect([add, swap, casHit, casMiss].map((c) => [c.status, c.byteLength, c.atomicResult])).toEqual([
      ['success', 8, 40n],
      ['success', 8, 0xaaaa_bbbb_cccc_ddddn],
      ['success', 8, 42n],
      ['success', 8, 7n],
    ]);
    expect(word(target.buffer, 0)).toBe(7n);
    expect(word(target.buffer, 8)).toBe(0x1111_2222_cccc_ddddn);
    expect(b.completions).toEqual([]); // like a Read Request, an Atomic Request is not Delivered to the ULP
    expect(a.stream.atomicsInFlight).toBe(0);
  });

  it('RFC 7306 with RFC 5040 §6.1: atomics count against ORD with the Reads; more wait, all complete in submission order', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT, ord: 1 }, b: { extensions: EXT, ird: 1 } });
    const target = b.stags.register({
      pdId: 1,
      buffer: new Uint8Array(8),
      access: ACCESS_REMOTE_ATOMIC | Access.RemoteRead,
    });
    const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.LocalWrite });
    let maxInFlight = 0;
    const track = () => {
      maxInFlight = Math.max(maxInFlight, a.stream.atomicsInFlight + a.stream.readsInFlight);
    };
    a.stream.completions$.subscribe(track);
    for (let i = 0; i < 5; i++) {
      a.stream.postSend({ op: fetchAdd(target.stag, 0n, 1n), context: i });
      track();
    }
    a.stream.postSend({
      op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 8, srcStag: target.stag, srcTo: 0n },
      context: 'read',
    });
    track();
    await until(() => a.completions.length === 6, 'six completions');
    // Never more than ORD in flight, and the responder (IRD 1) never ran out of QN 1 buffers.
    expect(maxInFlight).toBe(1);
    expect(a.completions.every((c) => c.status === 'success')).toBe(true);
    expect(a.completions.filter(isSend).map((c) => [c.request.context, c.atomicResult])).toEqual([
      [0, 0n],
      [1, 1n],
      [2, 2n],
      [3, 3n],
      [4, 4n],
      ['read', undefined],
    ]);
    expect(word(sink.buffer, 0)).toBe(5n);
  });

  it('RFC 7306 with RFC 5040 §5.5 rule 20: the responder answers Read and Atomic Requests in the order they arrived', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    const src = b.stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.RemoteRead });
    const target = b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: ACCESS_REMOTE_ATOMIC });
    const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.LocalWrite });
    const order: unknown[] = [];
    a.stream.completions$.subscribe((c) => isSend(c) && order.push(c.request.context));
    const read = (ctx: string) =>
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 64, srcStag: src.stag, srcTo: 0n },
        context: ctx,
      });
    read('r1');
    a.stream.postSend({ op: fetchAdd(target.stag, 0n, 3n), context: 'a1' });
    read('r2');
    a.stream.postSend({ op: fetchAdd(target.stag, 0n, 3n), context: 'a2' });
    await until(() => order.length === 4, 'four completions');
    expect(order).toEqual(['r1', 'a1', 'r2', 'a2']);
    expect(word(target.buffer, 0)).toBe(6n);
  });

  it('RFC 7306 with RFC 5040 §5.5 rule 12: a fenced request waits for outstanding atomics, not only Reads', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    const target = b.stags.register({
      pdId: 1,
      buffer: new Uint8Array(8),
      access: ACCESS_REMOTE_ATOMIC | Access.RemoteWrite,
    });
    const seen: bigint[] = [];
    a.stream.postSend({ op: fetchAdd(target.stag, 0n, 1n) });
    // The fenced Write is withheld until the atomic completed; only then is it handed to DDP.
    a.stream.postSend({
      op: { type: 'write', sinkStag: target.stag, sinkTo: 0n, payload: [bytes('00000000000000ff')] },
      fence: true,
    });
    seen.push(BigInt(a.stream.atomicsInFlight), BigInt(a.stream.outstanding));
    await until(() => a.completions.length === 2, 'two completions');
    expect(seen).toEqual([1n, 2n]);
    expect(a.completions.map((c) => (c as SendCompletion).atomicResult)).toEqual([0n, undefined]);
    await until(() => word(target.buffer, 0) === 0xffn, 'the fenced Write placed after the atomic');
  });
});

describe('RFC 7306 Immediate Data end to end over the loopback LLP', () => {
  it('RFC 7306: Immediate Data and Immediate Data with SE consume posted receives in order; the completion carries 64 bits', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    b.stream.postReceive(new Uint8Array(16), 'r1');
    b.stream.postReceive(new Uint8Array(16), 'r2');
    const sent = await Promise.all([
      post(a.stream, { type: 'immediate', data: 0xfedc_ba98_7654_3210n }),
      post(a.stream, { type: 'immediate', data: 1n, solicited: true }),
    ]);
    expect(sent.map((c) => [c.status, c.byteLength])).toEqual([
      ['success', 0],
      ['success', 0],
    ]);
    await until(() => b.completions.length === 2, 'two receives');
    expect(
      b.completions.filter(isReceive).map((c) => [c.id, c.status, c.byteLength, c.solicited, c.immediateData]),
    ).toEqual([
      ['r1', 'success', 0, false, 0xfedc_ba98_7654_3210n],
      ['r2', 'success', 0, true, 1n],
    ]);
  });

  it('RFC 7306 Write with Immediate: the Write is placed, then the Immediate Data completes the next receive', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.RemoteWrite });
    b.stream.postReceive(new Uint8Array(8), 'imm');
    const placedAtReceive: string[] = [];
    b.stream.completions$.subscribe(() => placedAtReceive.push(hexOf(sink.buffer)));
    const c = await post(a.stream, {
      type: 'write',
      sinkStag: sink.stag,
      sinkTo: 2n,
      payload: [bytes('c0ffee')],
      immediate: { data: 0x0000_0001_0000_0002n, solicited: true },
    });
    expect(c).toMatchObject({ status: 'success', byteLength: 3 });
    await until(() => b.completions.length === 1, 'the receive');
    expect(b.completions[0]).toMatchObject({
      id: 'imm',
      byteLength: 0,
      solicited: true,
      immediateData: 0x1_0000_0002n,
    });
    expect(placedAtReceive).toEqual(['0000c0ffee000000']); // the Write was placed before the receive completed
  });

  it('RFC 7306 Send with Immediate: the Send, then the Immediate Data (which carries the SE), each in its own receive', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    b.stream.postReceive(new Uint8Array(16), 'data');
    b.stream.postReceive(new Uint8Array(8), 'imm');
    const c = await post(a.stream, {
      type: 'send',
      payload: [bytes('68656c6c6f')],
      immediate: { data: 42n, solicited: true },
    });
    expect(c).toMatchObject({ status: 'success', byteLength: 5 });
    await until(() => b.completions.length === 2, 'two receives');
    const [d, i] = b.completions as ReceiveCompletion[];
    expect([d?.id, d?.byteLength, d?.solicited, d?.immediateData]).toEqual(['data', 5, false, undefined]);
    expect(hexOf(d?.buffer.subarray(0, 5) as Uint8Array)).toBe('68656c6c6f');
    expect([i?.id, i?.byteLength, i?.solicited, i?.immediateData]).toEqual(['imm', 0, true, 42n]);
  });
});

describe('RFC 7306 messages on the wire, octet by octet', () => {
  it('RFC 7306 Appendix A: an Atomic Request segment (QN 1, MSN 1) and the Atomic Response it gets back', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const done = post(peer.rdmap.stream, {
      type: 'atomic',
      atomicOpcode: AtomicOpcode.CmpSwap,
      remoteStag: 0x00000301,
      remoteTo: 0x10n,
      compareData: 5n,
      addOrSwapData: 6n,
    });
    await until(() => peer.received.length === 1, 'the Atomic Request');
    expect(peer.received[0]).toBe(
      [
        '41', // DDP control: T=0, L=1, DV=1
        '4a', // RDMAP control: RV=1, OpCode 1010b Atomic Request
        '00000000', // Invalidate STag field: zero
        '00000001', // QN 1 (shared with RDMA Read Requests)
        '00000001', // MSN 1
        '00000000', // MO 0
        '00000002', // Atomic OpCode CmpSwap
        '00000001', // Request Identifier
        '00000301', // Remote STag
        '0000000000000010', // Remote Tagged Offset
        '0000000000000006', // Swap Data
        'ffffffffffffffff', // Swap Mask (default: every bit)
        '0000000000000005', // Compare Data
        'ffffffffffffffff', // Compare Mask (default: every bit)
      ].join(''),
    );
    peer.send(atomicResponseSegment(1, 1, 5n));
    expect(await done).toMatchObject({ status: 'success', atomicResult: 5n });
  });

  it('RFC 7306 IANA subcodes (0001b Reserved): the Swap shorthand goes on the wire as CmpSwap with Compare Mask 0', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const done = post(peer.rdmap.stream, {
      type: 'atomic',
      atomicOpcode: AtomicOpcode.Swap,
      remoteStag: 0x00000301,
      remoteTo: 0x18n,
      addOrSwapData: 0xabn,
      addOrSwapMask: 0xffn,
      compareData: 0x55n, // ignored: Swap compares nothing
    });
    await until(() => peer.received.length === 1, 'the Atomic Request');
    expect(peer.received[0]).toBe(
      [
        '41', // DDP control: T=0, L=1, DV=1
        '4a', // RDMAP control: RV=1, OpCode 1010b Atomic Request
        '00000000', // Invalidate STag field: zero
        '00000001', // QN 1
        '00000001', // MSN 1
        '00000000', // MO 0
        '00000002', // Atomic OpCode CmpSwap (0010b), never 0001b
        '00000001', // Request Identifier
        '00000301', // Remote STag
        '0000000000000018', // Remote Tagged Offset
        '00000000000000ab', // Swap Data
        '00000000000000ff', // Swap Mask
        '0000000000000000', // Compare Data
        '0000000000000000', // Compare Mask 0: every word compares equal
      ].join(''),
    );
    peer.send(atomicResponseSegment(1, 1, 0x1234n));
    expect(await done).toMatchObject({ status: 'success', atomicResult: 0x1234n });
  });

  it('RFC 7306 IANA subcodes (0001b Reserved): the responder leaves the word alone and sends no Atomic Response', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const target = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: ACCESS_REMOTE_ATOMIC });
    setWord(target.buffer, 0, 0x1234n);
    const seg = atomicRequestSegment(1, { op: 1, id: 5, stag: target.stag, to: 0n, data: 0xabn, mask: ALL_ONES });
    peer.send(seg);
    await closed(peer.rdmap.stream);
    expect(peer.received).toEqual([terminateHex({ dv, rv, layer: 0, etype: 2, code: 0x06, segment: seg })]);
    expect(word(target.buffer, 0)).toBe(0x1234n);
  });

  it('RFC 7306 Appendix A: the responder executes an Atomic Request and sends the Atomic Response on QN 3', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const target = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(16), access: ACCESS_REMOTE_ATOMIC });
    setWord(target.buffer, 8, 0x00000000_fffffffen);
    peer.send(atomicRequestSegment(1, { op: 0, id: 0x77, stag: target.stag, to: 8n, data: 3n }));
    await until(() => peer.received.length === 1, 'the Atomic Response');
    expect(peer.received[0]).toBe(
      [
        '41', // DDP control: T=0, L=1, DV=1
        '4b', // RDMAP control: RV=1, OpCode 1011b Atomic Response
        '00000000', // Invalidate STag field: zero
        '00000003', // QN 3
        '00000001', // MSN 1
        '00000000', // MO 0
        '00000077', // Original Request Identifier
        '00000000fffffffe', // Original Remote Data Value
      ].join(''),
    );
    expect(word(target.buffer, 8)).toBe(0x1_0000_0001n);
  });

  it('RFC 7306: Immediate Data with SE is an untagged QN 0 segment whose payload is the 8 octets', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    peer.rdmap.stream.postSend({ op: { type: 'immediate', data: 0x0102030405060708n, solicited: true } });
    await until(() => peer.received.length === 1, 'the Immediate Data');
    expect(peer.received[0]).toBe(
      ['41', '49', '00000000', '00000000', '00000001', '00000000', '0102030405060708'].join(''),
    );
  });

  it('RFC 7306: an Immediate Data segment from the peer completes the posted receive with its 64 bits', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    peer.rdmap.stream.postReceive(new Uint8Array(32), 'r');
    peer.send(immediateSegment(1, '8000000000000001'));
    await until(() => peer.rdmap.completions.length === 1, 'the receive');
    expect(peer.rdmap.completions[0]).toMatchObject({
      id: 'r',
      status: 'success',
      byteLength: 0,
      solicited: false,
      immediateData: 0x8000000000000001n,
    });
  });
});

interface ErrCase {
  readonly rfc: string;
  readonly what: string;
  readonly options?: Parameters<typeof rawPeer>[1];
  readonly setup?: (p: Awaited<ReturnType<typeof rawPeer>>) => number;
  readonly segments: (stag: number) => string[];
  readonly etype: number;
  readonly code: number;
  readonly layer?: number;
  /** Segments the stream sends before its Terminate (the Response to an earlier good Request). */
  readonly before?: number;
}

const atomicTarget =
  (access: number, length = 16) =>
  (p: Awaited<ReturnType<typeof rawPeer>>) =>
    p.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(length), access }).stag;
const withReceive = (p: Awaited<ReturnType<typeof rawPeer>>) => {
  p.rdmap.stream.postReceive(new Uint8Array(32));
  return 0;
};

const ERR_CASES: ErrCase[] = [
  {
    rfc: 'RFC 7306 (64-bit operands naturally aligned)',
    what: 'an Atomic Request at a TO not aligned to 8 octets: Remote Protection, Base or bounds violation',
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC),
    segments: (stag) => [atomicRequestSegment(1, { op: 0, id: 1, stag, to: 4n, data: 1n })],
    etype: 1,
    code: 0x01,
  },
  {
    rfc: 'RFC 7306 (Remote Atomic access), RFC 5040 Figure 9',
    what: 'an Atomic Request on an STag without the atomic access right: Remote Protection, Access rights violation',
    setup: atomicTarget(Access.RemoteWrite | Access.RemoteRead),
    segments: (stag) => [atomicRequestSegment(1, { op: 2, id: 1, stag, to: 0n, data: 1n, mask: ALL_ONES })],
    etype: 1,
    code: 0x02,
  },
  {
    rfc: 'RFC 7306 with RFC 5040 §5.2.2, RFC 5041 §7.2 (untagged 0x02)',
    what: 'an Atomic Request beyond the outstanding limit (IRD 1) finds no QN 1 buffer: DDP no buffer available',
    options: { extensions: EXT, ird: 1 },
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC),
    segments: (stag) => [
      atomicRequestSegment(1, { op: 0, id: 1, stag, to: 0n, data: 1n }),
      atomicRequestSegment(2, { op: 0, id: 2, stag, to: 0n, data: 1n }),
    ],
    layer: 1,
    etype: 2,
    code: 0x02,
    before: 1, // the Atomic Response to the first Request
  },
  {
    rfc: 'RFC 7306 with RFC 5041 §7.2 (untagged 0x02)',
    what: 'a Read Request beyond IRD after an Atomic Request: the two share the IRD buffers of QN 1',
    options: { extensions: EXT, ird: 1 },
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC),
    segments: (stag) => [
      atomicRequestSegment(1, { op: 0, id: 1, stag, to: 0n, data: 1n }),
      untaggedHex({
        dv,
        c: ctrl(rv, Op.RdmaReadRequest),
        qn: 1,
        msn: 2,
        payload: readRequestHex({ sinkStag: 0x500, sinkTo: 0n, size: 0, srcStag: 0, srcTo: 0n }),
      }),
    ],
    layer: 1,
    etype: 2,
    code: 0x02,
    before: 1,
  },
  {
    rfc: 'RFC 7306, RFC 5040 §7.2 4a',
    what: 'an Atomic Request naming an unregistered STag: Remote Protection, Invalid STag',
    segments: () => [atomicRequestSegment(1, { op: 0, id: 1, stag: 0x00abcd01, to: 0n, data: 1n })],
    etype: 1,
    code: 0x00,
  },
  {
    rfc: 'RFC 7306, RFC 5040 §7.2 4b',
    what: "an Atomic Request on another protection domain's STag: Remote Protection, STag not associated",
    setup: (p) => p.rdmap.stags.register({ pdId: 2, buffer: new Uint8Array(8), access: ACCESS_REMOTE_ATOMIC }).stag,
    segments: (stag) => [atomicRequestSegment(1, { op: 0, id: 1, stag, to: 0n, data: 1n })],
    etype: 1,
    code: 0x03,
  },
  {
    rfc: 'RFC 7306, RFC 5040 §7.2 4d',
    what: 'an Atomic Request whose word ends past the region: Remote Protection, Base or bounds violation',
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC, 16),
    segments: (stag) => [atomicRequestSegment(1, { op: 0, id: 1, stag, to: 16n, data: 1n })],
    etype: 1,
    code: 0x01,
  },
  {
    rfc: 'RFC 7306 IANA "RDMAP Message Atomic Operation Subcodes" (0001b Reserved)',
    what: 'an Atomic Request with Atomic OpCode 0001b (no Swap in RFC 7306): Remote Operation, Unexpected OpCode',
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC),
    segments: (stag) => [atomicRequestSegment(1, { op: 1, id: 1, stag, to: 0n, data: 1n, mask: ALL_ONES })],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 IANA "RDMAP Message Atomic Operation Subcodes" (0011b–1111b unassigned)',
    what: 'an Atomic Request with an unassigned Atomic OpCode: Remote Operation, Unexpected OpCode',
    setup: atomicTarget(ACCESS_REMOTE_ATOMIC),
    segments: (stag) => [atomicRequestSegment(1, { op: 3, id: 1, stag, to: 0n })],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306, RFC 5040 §7.2 2',
    what: 'an Atomic Response with no Atomic Request outstanding: Remote Operation, Unexpected OpCode',
    segments: () => [atomicResponseSegment(1, 1, 0n)],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 §4.1 table, RFC 5040 §7.2 2',
    what: 'an Atomic Request on QN 0: Remote Operation, Unexpected OpCode',
    setup: withReceive,
    segments: () => [
      untaggedHex({
        dv,
        c: ctrl(rv, ExtensionOpcode.AtomicRequest),
        qn: 0,
        msn: 1,
        payload: atomicRequestHex({ op: 0, id: 1, stag: 1, to: 0n }),
      }),
    ],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 (Immediate Data is 64 bits)',
    what: 'an Immediate Data message of 4 octets: Remote Operation, Unspecified Error',
    setup: withReceive,
    segments: () => [immediateSegment(1, 'a1a2a3a4')],
    etype: 2,
    code: 0xff,
  },
  {
    rfc: 'RFC 7306 (Immediate Data is 64 bits)',
    what: 'an Immediate Data message of 12 octets: Remote Operation, Unspecified Error, before placement',
    setup: withReceive,
    segments: () => [immediateSegment(1, '0102030405060708090a0b0c', true)],
    etype: 2,
    code: 0xff,
  },
  // ----- negotiation: a stream that did not enable the extension refuses its messages (RFC 5040 §7.2 2) -----
  {
    rfc: 'RFC 7306 §1.1, RFC 5040 §7.2 2',
    what: 'an Atomic Request to a stream without atomics: Remote Operation, Unexpected OpCode',
    options: { extensions: { immediate: true } },
    segments: () => [atomicRequestSegment(1, { op: 0, id: 1, stag: 0x100, to: 0n, data: 1n })],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 §1.1, RFC 5040 §7.2 2',
    what: 'an Atomic Response (QN 3) to a stream without atomics: Unexpected OpCode, not DDP Invalid QN',
    options: {},
    segments: () => [atomicResponseSegment(1, 1, 0n)],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 §1.1, RFC 5040 §7.2 2',
    what: 'Immediate Data to a stream without Immediate Data: Remote Operation, Unexpected OpCode',
    options: { extensions: { atomics: true } },
    setup: withReceive,
    segments: () => [immediateSegment(1, '0000000000000001')],
    etype: 2,
    code: 0x06,
  },
  {
    rfc: 'RFC 7306 §1.1, RFC 5040 §7.2 2',
    what: 'Immediate Data with SE to a stream with no extension enabled: Remote Operation, Unexpected OpCode',
    options: {},
    setup: withReceive,
    segments: () => [immediateSegment(1, '0000000000000001', true)],
    etype: 2,
    code: 0x06,
  },
];

describe('RFC 7306 errors → the exact Terminate (RFC 5040 §4.8, Figure 10: DDP header and length, no RDMA header)', () => {
  for (const c of ERR_CASES) {
    it(`${c.rfc}: ${c.what}`, async () => {
      const peer = await rawPeer('ietf', c.options ?? { extensions: EXT });
      const stag = c.setup?.(peer) ?? 0;
      const segments = c.segments(stag);
      for (const seg of segments) peer.send(seg);
      const end = await closed(peer.rdmap.stream);
      const bad = segments[segments.length - 1] as string;
      expect(peer.received.length).toBe((c.before ?? 0) + 1);
      expect(peer.received[peer.received.length - 1]).toBe(
        terminateHex({ dv, rv, layer: c.layer ?? 0, etype: c.etype, code: c.code, segment: bad }),
      );
      expect(end).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_TERMINATED' } });
    });
  }

  it('RFC 7306: a misaligned FetchAdd, octet by octet: RDMA layer, Remote Protection, code 0x01, M and D, 70-octet segment', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const stag = atomicTarget(ACCESS_REMOTE_ATOMIC)(peer);
    const seg = atomicRequestSegment(1, { op: 0, id: 9, stag, to: 4n, data: 1n });
    peer.send(seg);
    await closed(peer.rdmap.stream);
    expect(peer.received[0]).toBe(
      [
        '41', // DDP control: T=0, L=1, DV=1
        '47', // RDMAP control: RV=1, Terminate
        '00000000', // Invalidate STag field
        '00000002', // QN 2
        '00000001', // MSN 1
        '00000000', // MO 0
        '01', // Layer RDMA, EType Remote Protection
        '01', // Error Code: Base or bounds violation
        'c0', // M=1, D=1, R=0 (the R header is the 28-octet Read Request Header only, RFC 5040 §4.8)
        '00', // reserved
        '0046', // DDP Segment Length: 18 + 52
        seg.slice(0, 36), // Terminated DDP Header: the Atomic Request's, QN 1, MSN 1
      ].join(''),
    );
  });
});

describe('RFC 7306 errors seen by the requester', () => {
  it('RFC 7306, RFC 5040 §7.1: the responder refuses an atomic without the access right; the requester completes it with a remote access error', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT }, b: { extensions: EXT } });
    const target = b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.RemoteWrite });
    const [c, t] = await Promise.all([
      post(a.stream, fetchAdd(target.stag, 0n, 1n)),
      firstValueFrom(a.stream.terminate$),
    ]);
    expect(c).toMatchObject({ status: 'remote-access-error', error: { code: 'ERR_RDMAP_TERMINATED' } });
    expect(t.description).toBe('RDMA: Remote Protection Error: Access rights violation');
    expect(word(target.buffer, 0)).toBe(0n);
  });

  it('RFC 7306: an Atomic Response that does not carry the outstanding Request Identifier: Terminate, the atomic fails', async () => {
    const peer = await rawPeer('ietf', { extensions: EXT });
    const done = post(peer.rdmap.stream, fetchAdd(0x100, 0n, 1n));
    await until(() => peer.received.length === 1, 'the Atomic Request');
    const response = atomicResponseSegment(1, 0x99, 0n);
    peer.send(response);
    expect(await done).toMatchObject({ status: 'remote-operation-error' });
    await closed(peer.rdmap.stream);
    expect(peer.received[1]).toBe(terminateHex({ dv, rv, layer: 0, etype: 2, code: 0xff, segment: response }));
  });

  it('RFC 7306 §1.1: with only one end enabling atomics, its Atomic Request is refused and completes with a remote operation error', async () => {
    const { a, b } = await rdmapPair('ietf', { a: { extensions: EXT } });
    const [c, t] = await Promise.all([post(a.stream, fetchAdd(0x100, 0n, 1n)), firstValueFrom(b.stream.terminate$)]);
    expect(t).toMatchObject({ direction: 'sent', description: 'RDMA: Remote Operation Error: Unexpected OpCode' });
    expect(c).toMatchObject({ status: 'remote-operation-error' });
  });
});

describe('RFC 7306 §1.1 negotiation on the posting side', () => {
  it('RFC 7306 §1.1: posting an extension operation the stream did not enable throws a typed error, and nothing is sent', async () => {
    const peer = await rawPeer('ietf', { extensions: { immediate: true } });
    const s = peer.rdmap.stream;
    const err = (op: RdmapOperation) => {
      try {
        s.postSend({ op });
      } catch (e) {
        return [(e as { code?: string }).code, (e as { extension?: string }).extension];
      }
      return undefined;
    };
    expect(err(fetchAdd(1, 0n, 1n))).toEqual(['ERR_RDMAP_EXTENSION_DISABLED', 'atomics']);
    const plain = await rawPeer('ietf');
    const s2 = plain.rdmap.stream;
    const err2 = (op: RdmapOperation) => {
      try {
        s2.postSend({ op });
      } catch (e) {
        return (e as { code?: string }).code;
      }
      return undefined;
    };
    expect(err2({ type: 'immediate', data: 1n })).toBe('ERR_RDMAP_EXTENSION_DISABLED');
    expect(err2({ type: 'write', sinkStag: 1, sinkTo: 0n, payload: [], immediate: { data: 1n } })).toBe(
      'ERR_RDMAP_EXTENSION_DISABLED',
    );
    expect(err2({ type: 'send', payload: [], immediate: { data: 1n } })).toBe('ERR_RDMAP_EXTENSION_DISABLED');
    expect(s.outstanding + s2.outstanding).toBe(0);
    await new Promise((r) => setImmediate(r));
    expect(peer.received).toEqual([]);
    expect(plain.received).toEqual([]);
  });

  it('RFC 7306: bad operands and ORD 0 are refused at the call', async () => {
    const { a } = await rdmapPair('ietf', { a: { extensions: EXT, ord: 0 } });
    const code = (op: RdmapOperation) => {
      try {
        a.stream.postSend({ op });
      } catch (e) {
        return (e as { code?: string }).code;
      }
      return undefined;
    };
    expect(code(fetchAdd(1, 0n, 1n))).toBe('ERR_RDMAP_ORD_EXCEEDED');
    for (const atomicOpcode of [1, 3, 16])
      expect(code({ ...fetchAdd(1, 0n, 1n), atomicOpcode } as RdmapOperation)).toBe('ERR_RDMAP_INVALID_ARGUMENT');
    expect(code(fetchAdd(1, 0n, 1n << 64n))).toBe('ERR_RDMAP_INVALID_ARGUMENT');
    expect(code({ type: 'immediate', data: -1n })).toBe('ERR_RDMAP_INVALID_ARGUMENT');
  });

  it('RFC 5041 §7.1: an RDMA Write whose Data Sink TO + length passes 2^64 is refused at the call; one ending at 2^64 is taken', async () => {
    const { a } = await rdmapPair('ietf');
    const write = (sinkTo: bigint) => () =>
      a.stream.postSend({ op: { type: 'write', sinkStag: 0x100, sinkTo, payload: [new Uint8Array(8)] } });
    expect(write((1n << 64n) - 4n)).toThrow(expect.objectContaining({ code: 'ERR_RDMAP_INVALID_ARGUMENT' }));
    expect(write((1n << 64n) - 8n)).not.toThrow();
  });

  it('RFC 7306 extends RDMAP Version 1: the RDMA Consortium profile refuses the extensions', async () => {
    const peer = await rawPeer('ietf');
    expect(
      () => new RdmapStream(peer.raw, { profile: 'rdmac', pdId: 1, stags: peer.rdmap.stags, extensions: EXT }),
    ).toThrow(expect.objectContaining({ code: 'ERR_RDMAP_INVALID_ARGUMENT' }));
  });

  it('RFC 7306: enabling atomics gives the DDP Stream a fourth queue and ORD Atomic Response buffers on it', async () => {
    const { a } = await rdmapPair('ietf', { a: { extensions: { atomics: true }, ord: 3, ird: 2 } });
    expect(a.stream.extensions).toEqual({ atomics: true, immediate: false });
    expect(a.stream.ddp.postedReceives(ATOMIC_RESPONSE_QUEUE)).toBe(3);
    expect(a.stream.ddp.postedReceives(1)).toBe(2);
    const { b } = await rdmapPair('ietf');
    expect(() => b.stream.ddp.postedReceives(ATOMIC_RESPONSE_QUEUE)).toThrow();
  });
});
