/** The verbs API for the RFC 7306 extensions: atomics and Write/Send with Immediate, over the loopback LLP. */
import { Access, Device, type RdmapExtensions, type WorkCompletion, WorkCompletionError } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { code, connectedPair, until } from './helpers.js';

const EXT: RdmapExtensions = { atomics: true, immediate: true };

/** Two hosts with a connected queue pair each; each end enables what it is given (RFC 7306 §1.1). */
const connected = (ext: { a?: RdmapExtensions; b?: RdmapExtensions } = { a: EXT, b: EXT }) =>
  connectedPair(ext.a ? { extensions: ext.a } : {}, ext.b ? { extensions: ext.b } : {});

const word = (b: Uint8Array, off = 0) => new DataView(b.buffer, b.byteOffset + off, 8).getBigUint64(0);
const setWord = (b: Uint8Array, off: number, v: bigint) =>
  new DataView(b.buffer, b.byteOffset + off, 8).setBigUint64(0, v);

describe('verbs: RFC 7306 atomics', () => {
  it('RFC 7306: fetchAdd, swap and cmpSwap resolve with the original value, written into the 8-octet element too', async () => {
    const { a, b } = await connected();
    const target = b.pd.registerMr(new Uint8Array(16), Access.LocalWrite | Access.RemoteAtomic);
    setWord(target.buffer, 0, 100n);
    const result = a.pd.registerMr(new Uint8Array(24), Access.LocalWrite);
    const add = await a.qp.fetchAdd(result.sge(0, 8), target.remote(0), 5n, { wrId: 'add' });
    const swp = await a.qp.swap(result.sge(8, 8), target.remote(8), 0xffn, { wrId: 'swap' });
    const cas = await a.qp.cmpSwap(result.sge(16, 8), target.remote(0), 105n, 1n, { wrId: 'cas' });
    expect([add, swp, cas].map((w) => [w.wrId, w.opcode, w.status, w.byteLen, w.atomicResult])).toEqual([
      ['add', 'atomic-fetch-add', 'success', 8, 100n],
      ['swap', 'atomic-swap', 'success', 8, 0n],
      ['cas', 'atomic-cmp-swap', 'success', 8, 105n],
    ]);
    expect([word(result.buffer, 0), word(result.buffer, 8), word(result.buffer, 16)]).toEqual([100n, 0n, 105n]);
    expect([word(target.buffer, 0), word(target.buffer, 8)]).toEqual([1n, 0xffn]);
    expect(b.wcs).toEqual([]); // atomics are not Delivered to the responder's ULP
  });

  it('RFC 7306: atomic work requests through postSend complete on the CQ in submission order, with masks', async () => {
    const { a, b } = await connected();
    const target = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite | Access.RemoteAtomic);
    setWord(target.buffer, 0, 0x00ff_00ffn);
    const r = a.pd.registerMr(new Uint8Array(24), Access.LocalWrite);
    a.qp.postSend([
      // Two 32-bit counters: the low one wraps without carrying into the high one.
      {
        wrId: 1,
        opcode: 'atomic-fetch-add',
        sgList: [r.sge(0, 8)],
        remote: target.remote(),
        add: 0x0000_0001_ffff_ff01n,
        addMask: 0x8000_0000_8000_0000n,
      },
      { wrId: 2, opcode: 'atomic-swap', sgList: [r.sge(8, 8)], remote: target.remote(), swap: 0xabn, swapMask: 0xffn },
      {
        wrId: 3,
        opcode: 'atomic-cmp-swap',
        sgList: [r.sge(16, 8)],
        remote: target.remote(),
        compare: 0x1_0000_0000n,
        compareMask: 0xffff_ffff_0000_0000n,
        swap: 0n,
      },
    ]);
    await until(() => a.wcs.length === 3, 'three completions');
    expect(a.wcs.map((w) => [w.wrId, w.atomicResult])).toEqual([
      [1, 0x00ff_00ffn],
      [2, 0x1_00ff_0000n],
      [3, 0x1_00ff_00abn],
    ]);
    expect(word(target.buffer)).toBe(0n);
  });

  it('RFC 7306: a target without Remote Atomic access, or a misaligned TO: the atomic fails with a remote access error', async () => {
    for (const [access, offset] of [
      [Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead, 0],
      [Access.LocalWrite | Access.RemoteAtomic, 4],
    ] as const) {
      const { a, b } = await connected();
      const target = b.pd.registerMr(new Uint8Array(16), access);
      const r = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
      const err = await a.qp.fetchAdd(r.sge(), target.remote(offset), 1n).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkCompletionError);
      expect((err as WorkCompletionError).completion).toMatchObject({
        opcode: 'atomic-fetch-add',
        status: 'remote-access-error',
      });
      const t = await firstValueFrom(a.qp.terminate$);
      expect(t.header).toMatchObject({ layer: 0, errorType: 1, errorCode: offset === 0 ? 0x02 : 0x01 });
      expect(word(target.buffer, 0)).toBe(0n);
    }
  });

  it('RFC 7306 §1.1: a peer that did not enable atomics refuses them: the atomic fails with a remote operation error', async () => {
    const { a, b } = await connected({ a: EXT });
    const target = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite | Access.RemoteAtomic);
    const r = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    const err = (await a.qp.swap(r.sge(), target.remote(), 1n).catch((e: unknown) => e)) as WorkCompletionError;
    expect(err.completion.status).toBe('remote-operation-error');
    expect((await firstValueFrom(b.qp.terminate$)).description).toBe('RDMA: Remote Operation Error: Unexpected OpCode');
  });

  it('RFC 7306: caller mistakes are typed errors: extension not enabled, result element not 8 octets or not writable, bad operands', async () => {
    const { a } = await connected({ a: { immediate: true } });
    const r = a.pd.registerMr(new Uint8Array(16), Access.LocalWrite);
    const ro = a.pd.registerMr(new Uint8Array(8), 0);
    const remote = { stag: 0x100, to: 0n };
    expect(code(() => a.qp.postSend({ opcode: 'atomic-fetch-add', sgList: [r.sge(0, 8)], remote, add: 1n }))).toBe(
      'ERR_VERBS_EXTENSION_DISABLED',
    );
    const { a: ok } = await connected();
    const r2 = ok.pd.registerMr(new Uint8Array(16), Access.LocalWrite);
    const ro2 = ok.pd.registerMr(new Uint8Array(8), 0);
    expect(code(() => ok.qp.postSend({ opcode: 'atomic-swap', sgList: [r2.sge(0, 16)], remote, swap: 1n }))).toBe(
      'ERR_VERBS_SGE_RANGE',
    );
    expect(code(() => ok.qp.postSend({ opcode: 'atomic-swap', sgList: [ro2.sge()], remote, swap: 1n }))).toBe(
      'ERR_VERBS_ACCESS',
    );
    expect(
      code(() => ok.qp.postSend({ opcode: 'atomic-fetch-add', sgList: [r2.sge(0, 8)], remote, add: 1n << 64n })),
    ).toBe('ERR_VERBS_INVALID_WR');
    expect(
      code(() => ok.qp.postSend({ opcode: 'atomic-cmp-swap', sgList: [r2.sge(0, 8)], remote, compare: -1n, swap: 0n })),
    ).toBe('ERR_VERBS_INVALID_WR');
    expect(code(() => ok.qp.postSend({ opcode: 'send-with-imm', sgList: [], immData: 1n << 64n }))).toBe(
      'ERR_VERBS_INVALID_WR',
    );
    expect(ok.qp.outstanding.send).toBe(0);
    expect(ro.access).toBe(0);
  });

  it('RFC 7306: memory regions take the Remote Atomic right; other bits are refused', () => {
    const pd = new Device().allocPd();
    expect(Access.RemoteAtomic).toBe(0x10);
    expect(pd.registerMr(new Uint8Array(8), Access.RemoteAtomic | Access.LocalWrite).access).toBe(0x12);
    expect(code(() => pd.registerMr(new Uint8Array(8), 0x20))).toBe('ERR_VERBS_INVALID_WR');
  });
});

describe('verbs: RFC 7306 Immediate Data', () => {
  it('RFC 7306: writeWithImm places the data, then the peer receive completes with the 64-bit immData and a Solicited Event', async () => {
    const { a, b } = await connected();
    const sink = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite | Access.RemoteWrite);
    const rx = b.pd.registerMr(new Uint8Array(16), Access.LocalWrite);
    const src = a.pd.registerMr(new TextEncoder().encode('data'), 0);
    const events: WorkCompletion[] = [];
    b.cq.solicited$.subscribe((wc) => events.push(wc));
    const recv = b.qp.recv(rx.sge(), { wrId: 'imm' });
    const wc = await a.qp.writeWithImm(src.sge(), sink.remote(2), 0xffff_ffff_0000_0001n, { solicited: true });
    expect(wc).toMatchObject({ opcode: 'rdma-write', status: 'success', byteLen: 4 });
    const r = await recv;
    expect(r).toMatchObject({
      wrId: 'imm',
      opcode: 'recv',
      byteLen: 0,
      solicited: true,
      immData: 0xffff_ffff_0000_0001n,
    });
    expect(new TextDecoder().decode(sink.buffer.subarray(2, 6))).toBe('data');
    expect(events.map((e) => e.wrId)).toEqual(['imm']);
  });

  it('RFC 7306: sendWithImm gives the peer two receive completions, the Send and then the Immediate Data', async () => {
    const { a, b } = await connected();
    const rx = b.pd.registerMr(new Uint8Array(32), Access.LocalWrite);
    const msg = a.pd.registerMr(new TextEncoder().encode('hello'), 0);
    b.qp.postRecv([
      { wrId: 'send', sgList: [rx.sge(0, 16)] },
      { wrId: 'imm', sgList: [rx.sge(16, 16)] },
    ]);
    a.qp.postSend({ wrId: 's', opcode: 'send-with-imm', sgList: [msg.sge()], immData: 7n });
    await until(() => b.wcs.length === 2 && a.wcs.length === 1, 'completions');
    expect(a.wcs.map((w) => [w.wrId, w.opcode, w.byteLen])).toEqual([['s', 'send', 5]]);
    expect(b.wcs.map((w) => [w.wrId, w.byteLen, w.immData])).toEqual([
      ['send', 5, undefined],
      ['imm', 0, 7n],
    ]);
  });

  it('RFC 7306 §1.1: Immediate Data work requests need the extension on this queue pair', async () => {
    const { a } = await connected({ a: { atomics: true }, b: { atomics: true } });
    const m = a.pd.registerMr(new Uint8Array(4), 0);
    expect(
      code(() =>
        a.qp.postSend({ opcode: 'rdma-write-with-imm', sgList: [m.sge()], remote: { stag: 1, to: 0n }, immData: 1n }),
      ),
    ).toBe('ERR_VERBS_EXTENSION_DISABLED');
    expect(code(() => a.qp.postSend({ opcode: 'send-with-imm', sgList: [m.sge()], immData: 1n }))).toBe(
      'ERR_VERBS_EXTENSION_DISABLED',
    );
  });
});
