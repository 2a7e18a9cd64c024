/**
 * Caller mistakes are typed errors with a stable `code` (ERR_VERBS_*), thrown by the post itself with
 * nothing posted; what goes wrong on the wire, or when a queue pair ends, arrives as work completions
 * with an error status: flushed receives and sends, a remote access error (RFC 5040 §7.1), and
 * promise-returning posts rejecting with the completion attached.
 */
import { RddpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { Access, isVerbsError, type SendWorkRequest, VerbsError, WorkCompletionError } from '../src/index.js';
import { codeOf, connectedHosts, host, text, until } from './support/hosts.js';

const RW = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

/** What `fn` throws. */
function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('nothing thrown');
}

describe('verbs: caller errors are typed, with stable codes', () => {
  it('a region that cannot serve (deregistered, invalidated, of another protection domain) is ERR_VERBS_INVALID_MR', () => {
    const { a } = connectedHosts();
    const dead = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    dead.deregister();
    const invalid = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    invalid.invalidate();
    const foreign = a.device.allocPd().registerMr(new Uint8Array(8), Access.LocalWrite);
    for (const [name, mr] of [
      ['deregistered', dead],
      ['invalidated', invalid],
      ['foreign', foreign],
    ] as const) {
      expect(
        codeOf(() => a.qp.postSend({ opcode: 'send', sgList: [mr.sge()] })),
        name,
      ).toBe('ERR_VERBS_INVALID_MR');
      expect(
        codeOf(() => a.qp.postRecv({ sgList: [mr.sge()] })),
        name,
      ).toBe('ERR_VERBS_INVALID_MR');
    }
    const e = thrown(() => a.qp.postSend({ wrId: 'w', opcode: 'send', sgList: [dead.sge()] }));
    expect(e).toBeInstanceOf(VerbsError);
    expect(e).toBeInstanceOf(RddpError);
    expect(e).toMatchObject({ code: 'ERR_VERBS_INVALID_MR', stag: dead.stag });
    expect(e.message).toMatch(/^work request #0 \(wrId w\): /);
    expect(a.qp.outstanding).toEqual({ send: 0, recv: 0 });
  });

  it('an element beyond its region (offset or length) is ERR_VERBS_SGE_RANGE, with the region’s bounds', () => {
    const { a } = connectedHosts();
    const mr = a.pd.registerMr(new Uint8Array(16), Access.LocalWrite);
    const remote = { stag: 0x1234_5600, to: 0n };
    for (const sge of [mr.sge(8, 9), mr.sge(16, 1), mr.sge(17), mr.sge(-1, 4)]) {
      const what = JSON.stringify({ offset: sge.offset, length: sge.length });
      expect(
        codeOf(() => a.qp.postSend({ opcode: 'send', sgList: [sge] })),
        what,
      ).toBe('ERR_VERBS_SGE_RANGE');
      expect(
        codeOf(() => a.qp.postSend({ opcode: 'rdma-write', sgList: [sge], remote })),
        what,
      ).toBe('ERR_VERBS_SGE_RANGE');
      expect(
        codeOf(() => a.qp.postSend({ opcode: 'rdma-read', sgList: [sge], remote })),
        what,
      ).toBe('ERR_VERBS_SGE_RANGE');
      expect(
        codeOf(() => a.qp.postRecv({ sgList: [sge] })),
        what,
      ).toBe('ERR_VERBS_SGE_RANGE');
    }
    expect(thrown(() => a.qp.postSend({ opcode: 'send', sgList: [mr.sge(8, 9)] }))).toMatchObject({
      offset: 8,
      length: 9,
      bound: { stag: mr.stag, regionLength: 16 },
    });
    expect(a.qp.outstanding).toEqual({ send: 0, recv: 0 });
  });

  it('a buffer written locally (receive, Read sink) needs Local Write: ERR_VERBS_ACCESS', () => {
    const { a } = connectedHosts();
    const readOnly = a.pd.registerMr(new Uint8Array(8), Access.RemoteRead);
    expect(codeOf(() => a.qp.postRecv({ sgList: [readOnly.sge()] }))).toBe('ERR_VERBS_ACCESS');
    expect(
      codeOf(() => a.qp.postSend({ opcode: 'rdma-read', sgList: [readOnly.sge()], remote: { stag: 1, to: 0n } })),
    ).toBe('ERR_VERBS_ACCESS');
  });

  it('malformed work requests are ERR_VERBS_INVALID_WR; too long a message ERR_VERBS_MESSAGE_TOO_LONG; RFC 7306 without the extension ERR_VERBS_EXTENSION_DISABLED', () => {
    const { a } = connectedHosts({ maxMessageSize: 8, maxSge: 2 });
    const mr = a.pd.registerMr(new Uint8Array(16), Access.LocalWrite);
    const post = (wr: unknown) => () => a.qp.postSend(wr as SendWorkRequest);
    expect(codeOf(post({ opcode: 'bogus' }))).toBe('ERR_VERBS_INVALID_WR');
    expect(codeOf(post({ opcode: 'rdma-write', sgList: [mr.sge(0, 4)], remote: { stag: 2 ** 32, to: 0n } }))).toBe(
      'ERR_VERBS_INVALID_WR',
    );
    expect(codeOf(post({ opcode: 'rdma-write', sgList: [mr.sge(0, 4)], remote: { stag: 1, to: -1n } }))).toBe(
      'ERR_VERBS_INVALID_WR',
    );
    expect(
      codeOf(post({ opcode: 'rdma-write', sgList: [mr.sge(0, 4)], remote: { stag: 1, to: 2n ** 64n - 2n } })),
    ).toBe(
      'ERR_VERBS_INVALID_WR', // TO + length wraps 2^64 (RFC 5041 §7.1)
    );
    expect(
      codeOf(post({ opcode: 'rdma-read', sgList: [mr.sge(0, 4), mr.sge(4, 4)], remote: { stag: 1, to: 0n } })),
    ).toBe('ERR_VERBS_INVALID_WR');
    expect(codeOf(post({ opcode: 'send', sgList: [mr.sge(0, 1), mr.sge(1, 1), mr.sge(2, 1)] }))).toBe(
      'ERR_VERBS_INVALID_WR', // more elements than maxSge
    );
    expect(codeOf(post({ opcode: 'send', sgList: [mr.sge(0, 9)] }))).toBe('ERR_VERBS_MESSAGE_TOO_LONG');
    expect(
      codeOf(post({ opcode: 'atomic-fetch-add', sgList: [mr.sge(0, 8)], remote: { stag: 1, to: 0n }, add: 1n })),
    ).toBe('ERR_VERBS_EXTENSION_DISABLED');
    expect(codeOf(post({ opcode: 'send-with-imm', sgList: [], immData: 1n }))).toBe('ERR_VERBS_EXTENSION_DISABLED');
    expect(a.qp.outstanding.send).toBe(0);
  });

  it('a list is checked whole before any of it is posted: one bad request, nothing sent', async () => {
    const { a, b } = connectedHosts();
    const mr = a.pd.registerMr(text('abc'), 0);
    const rx = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    b.qp.postRecv({ sgList: [rx.sge()] });
    const e = thrown(() =>
      a.qp.postSend([
        { opcode: 'send', sgList: [mr.sge()] },
        { wrId: 9, opcode: 'send', sgList: [mr.sge(0, 4)] },
      ]),
    );
    expect(e).toMatchObject({ code: 'ERR_VERBS_SGE_RANGE' });
    expect(e.message).toMatch(/^work request #1 \(wrId 9\): /);
    await new Promise((r) => setTimeout(r, 20));
    expect([a.wcs, b.wcs]).toEqual([[], []]);
    expect(a.qp.outstanding.send).toBe(0);
  });

  it('more outstanding than the queues were created for is ERR_VERBS_QUEUE_FULL', () => {
    const { a } = connectedHosts({ maxSendWr: 2, maxRecvWr: 1 });
    const mr = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    a.qp.postRecv({ sgList: [mr.sge(0, 4)] });
    expect(codeOf(() => a.qp.postRecv({ sgList: [mr.sge(4, 4)] }))).toBe('ERR_VERBS_QUEUE_FULL');
    const sends = [0, 1, 2].map(() => ({ opcode: 'send' as const, sgList: [mr.sge(0, 1)] }));
    expect(codeOf(() => a.qp.postSend(sends))).toBe('ERR_VERBS_QUEUE_FULL');
    expect(a.qp.outstanding).toEqual({ send: 0, recv: 1 });
  });

  it('posting a send on a queue pair not in RTS (before connect, after close) is ERR_VERBS_QP_STATE', async () => {
    const fresh = host();
    const mr = fresh.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
    const e = thrown(() => fresh.qp.postSend({ opcode: 'send', sgList: [mr.sge()] }));
    expect(isVerbsError(e, 'ERR_VERBS_QP_STATE')).toBe(true);
    expect(e).toMatchObject({ state: 'init' });
    expect(() => fresh.qp.postRecv({ sgList: [mr.sge()] })).not.toThrow(); // receives may be posted in INIT

    const { a } = connectedHosts();
    const buf = a.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
    await a.qp.close();
    expect(a.qp.state).toBe('closed');
    expect(codeOf(() => a.qp.postSend({ opcode: 'send', sgList: [buf.sge()] }))).toBe('ERR_VERBS_QP_STATE');
    expect(codeOf(() => a.qp.postRecv({ sgList: [buf.sge()] }))).toBe('ERR_VERBS_QP_STATE');
    await expect(a.qp.send(buf.sge())).rejects.toMatchObject({ code: 'ERR_VERBS_QP_STATE' });
    expect(codeOf(() => a.qp.connect(a.qp.rdmap as never))).toBe('ERR_VERBS_QP_STATE');
  });
});

describe('verbs: completions in error', () => {
  it('RFC 5040 §6.2: receives still posted when the connection closes are flushed, at both ends', async () => {
    const { a, b } = connectedHosts();
    const ra = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    const rb = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    a.qp.postRecv([
      { wrId: 'a1', sgList: [ra.sge(0, 4)] },
      { wrId: 'a2', sgList: [ra.sge(4, 4)] },
    ]);
    b.qp.postRecv({ wrId: 'b1', sgList: [rb.sge()] });
    await a.qp.close();
    await firstValueFrom(b.qp.closed$);
    expect(a.wcs.map((w) => [w.wrId, w.opcode, w.status, w.byteLen])).toEqual([
      ['a1', 'recv', 'flushed', 0],
      ['a2', 'recv', 'flushed', 0],
    ]);
    expect(b.wcs.map((w) => [w.wrId, w.status])).toEqual([['b1', 'flushed']]);
    expect([a.qp.outstanding, b.qp.outstanding]).toEqual([
      { send: 0, recv: 0 },
      { send: 0, recv: 0 },
    ]);
  });

  it('receives posted in INIT are flushed when a queue pair is closed unconnected', async () => {
    const h = host();
    const mr = h.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
    const got = h.qp.recv(mr.sge(), { wrId: 'early' });
    await h.qp.close();
    const e = await got.catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WorkCompletionError);
    expect((e as WorkCompletionError).completion).toMatchObject({ wrId: 'early', status: 'flushed', opcode: 'recv' });
    expect(h.wcs.map((w) => w.status)).toEqual(['flushed']);
    expect(h.qp.state).toBe('closed');
  });

  it('RFC 5040 §6.2.1: terminate() ends the queue pair in error; the peer’s posted work is Completed in error', async () => {
    const { a, b } = connectedHosts();
    const rx = b.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
    const got = b.qp.recv(rx.sge(), { wrId: 'waiting' });
    a.qp.terminate();
    await expect(got).rejects.toMatchObject({
      code: 'ERR_VERBS_WORK_COMPLETION',
      completion: { wrId: 'waiting', opcode: 'recv', status: 'flushed' },
    });
    expect(await firstValueFrom(b.qp.terminate$)).toMatchObject({ direction: 'received' });
    await firstValueFrom(a.qp.closed$);
    expect(a.qp.state).toBe('error');
    expect(b.wcs.map((w) => [w.wrId, w.status])).toEqual([['waiting', 'flushed']]);
  });

  it('RFC 5040 §7.1: a Read of an STag the peer never registered completes with a remote access error; what else was posted is flushed', async () => {
    const { a, b } = connectedHosts();
    const sink = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    a.qp.postRecv({ wrId: 'pending', sgList: [sink.sge(4, 4)] });
    a.qp.postSend({
      wrId: 'bad-read',
      opcode: 'rdma-read',
      sgList: [sink.sge(0, 4)],
      remote: { stag: 0xbad0_0000, to: 0n },
    });
    await firstValueFrom(a.qp.closed$);
    await until(() => a.wcs.length === 2, 'both completions');
    expect(a.wcs.map((w) => [w.wrId, w.opcode, w.status])).toEqual([
      ['bad-read', 'rdma-read', 'remote-access-error'],
      ['pending', 'recv', 'flushed'],
    ]);
    expect(a.wcs[0]?.error).toBeInstanceOf(Error);
    expect(await firstValueFrom(b.qp.terminate$)).toMatchObject({ direction: 'sent' });
    expect(a.qp.state).toBe('error');
    expect(codeOf(() => a.qp.postSend({ opcode: 'send', sgList: [] }))).toBe('ERR_VERBS_QP_STATE');
  });

  it('an LLP abort (RFC 5040 §6.2) ends both queue pairs; posted work is flushed, and nothing can be posted after', async () => {
    const { a, b } = connectedHosts();
    const rx = b.pd.registerMr(new Uint8Array(4), RW);
    b.qp.postRecv({ wrId: 'r', sgList: [rx.sge()] });
    a.qp.abort();
    await firstValueFrom(b.qp.closed$);
    expect(b.wcs.map((w) => [w.wrId, w.status])).toEqual([['r', 'flushed']]);
    expect(b.qp.state).toBe('error');
    expect(codeOf(() => b.qp.postRecv({ sgList: [rx.sge()] }))).toBe('ERR_VERBS_QP_STATE');
  });
});
