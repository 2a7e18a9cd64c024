/**
 * Queue pairs connected over an LLP (two streams joined in memory): Send/Recv, RDMA Write and RDMA Read
 * through `postSend`/`postRecv` and the promise conveniences, each completing on its CQ with its wrId,
 * opcode, status and byte count (RFC 5040 §5.1–5.3, §5.5), and the placement the target reports.
 */
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { Access, type DdpProfile } from '../src/index.js';
import { connectedHosts, str, text, until } from './support/hosts.js';

const RW = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

for (const profile of ['ietf', 'rdmac'] as const satisfies readonly DdpProfile[]) {
  describe(`verbs operations (${profile})`, () => {
    it('connect moves both queue pairs to RTS over the LLP stream, with an RDMAP Stream of the profile asked for', () => {
      const { a, b } = connectedHosts({ profile });
      expect([a.qp.state, b.qp.state]).toEqual(['rts', 'rts']);
      expect(a.qp.rdmap).toBeDefined();
      expect(b.qp.profile).toBe(profile);
    });

    it('RFC 5040 §5.3: a Send fills the peer’s posted receive; both complete with wrId, opcode, status and byte count', async () => {
      const { a, b } = connectedHosts({ profile });
      const rx = b.pd.registerMr(new Uint8Array(32), Access.LocalWrite);
      b.qp.postRecv({ wrId: 'rx', sgList: [rx.sge(4, 16)] });
      const msg = a.pd.registerMr(text('hello, verbs'), 0);
      a.qp.postSend({ wrId: 'tx', opcode: 'send', sgList: [msg.sge(0, 5), msg.sge(5)] });
      await until(() => a.wcs.length === 1 && b.wcs.length === 1, 'both completions');
      expect(a.wcs[0]).toMatchObject({ wrId: 'tx', opcode: 'send', status: 'success', byteLen: 12, qpNum: a.qp.qpNum });
      expect(b.wcs[0]).toMatchObject({
        wrId: 'rx',
        opcode: 'recv',
        status: 'success',
        byteLen: 12,
        qpNum: b.qp.qpNum,
        solicited: false,
      });
      expect(str(rx.buffer.subarray(4, 16))).toBe('hello, verbs');
      expect([a.qp.outstanding, b.qp.outstanding]).toEqual([
        { send: 0, recv: 0 },
        { send: 0, recv: 0 },
      ]);
    });

    it('RFC 5040 §5.5: receives complete in the order the Sends were sent; a Send with SE is also a solicited event', async () => {
      const { a, b } = connectedHosts({ profile });
      const rx = b.pd.registerMr(new Uint8Array(48), Access.LocalWrite);
      b.qp.postRecv([0, 1, 2].map((i) => ({ wrId: i, sgList: [rx.sge(i * 16, 16)] as const })));
      const solicited = firstValueFrom(b.cq.solicited$);
      const src = a.pd.registerMr(text('one two three'), 0);
      a.qp.postSend([
        { opcode: 'send', sgList: [src.sge(0, 3)] },
        { opcode: 'send', sgList: [src.sge(4, 3)], solicited: true },
        { opcode: 'send', sgList: [src.sge(8, 5)] },
      ]);
      await until(() => b.wcs.length === 3, 'three receives');
      expect(b.wcs.map((w) => [w.wrId, w.byteLen, w.solicited])).toEqual([
        [0, 3, false],
        [1, 3, true],
        [2, 5, false],
      ]);
      expect((await solicited).wrId).toBe(1);
      expect([str(rx.buffer.subarray(0, 3)), str(rx.buffer.subarray(16, 19)), str(rx.buffer.subarray(32, 37))]).toEqual(
        ['one', 'two', 'three'],
      );
    });

    it('RFC 5040 §5.1: an RDMA Write lands at the remote TO; its completion counts the gathered octets; the target reports the placement', async () => {
      const { a, b } = connectedHosts({ profile });
      const target = b.pd.registerMr(new Uint8Array(16), RW);
      const src = a.pd.registerMr(text('abcdefgh'), 0);
      const placed = firstValueFrom(b.qp.placement$.pipe(filter((p) => p.last)));
      a.qp.postSend({
        wrId: 7n,
        opcode: 'rdma-write',
        sgList: [src.sge(0, 2), src.sge(4, 4)],
        remote: target.remote(3),
      });
      await until(() => a.wcs.length === 1, 'the Write’s completion');
      expect(a.wcs[0]).toMatchObject({ wrId: 7n, opcode: 'rdma-write', status: 'success', byteLen: 6 });
      expect(await placed).toMatchObject({ stag: target.stag, last: true });
      expect(str(target.buffer.subarray(3, 9))).toBe('abefgh');
      expect(target.buffer[2]).toBe(0);
      expect(target.buffer[9]).toBe(0);
      expect(b.wcs).toEqual([]); // an RDMA Write consumes no receive and completes nothing at the target
    });

    it('RFC 5040 §5.2: an RDMA Read brings the remote bytes into the local element and completes with the Read size', async () => {
      const { a, b } = connectedHosts({ profile });
      const source = b.pd.registerMr(text('remote bytes here'), Access.RemoteRead, { baseTo: 0x1000n });
      const sink = a.pd.registerMr(new Uint8Array(12), Access.LocalWrite);
      a.qp.postSend({ wrId: 'rd', opcode: 'rdma-read', sgList: [sink.sge(2, 5)], remote: source.remote(7) });
      await until(() => a.wcs.length === 1, 'the Read’s completion');
      expect(a.wcs[0]).toMatchObject({ wrId: 'rd', opcode: 'rdma-read', status: 'success', byteLen: 5 });
      expect(str(sink.buffer.subarray(2, 7))).toBe('bytes');
      expect(sink.buffer[1]).toBe(0);
      expect(sink.buffer[7]).toBe(0);
    });

    it('the promise conveniences resolve with their completions, and report on the CQ only when signaled', async () => {
      const { a, b } = connectedHosts({ profile });
      const mine = a.pd.registerMr(text('0123456789'), Access.LocalWrite);
      const theirs = b.pd.registerMr(new Uint8Array(10), RW);
      const rx = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
      const got = b.qp.recv(rx.sge(), { wrId: 'r' });
      expect(await a.qp.write(mine.sge(0, 4), theirs.remote(0))).toMatchObject({ opcode: 'rdma-write', byteLen: 4 });
      mine.buffer.fill(0);
      expect(await a.qp.read(mine.sge(0, 4), theirs.remote(0))).toMatchObject({ opcode: 'rdma-read', byteLen: 4 });
      expect(str(mine.buffer.subarray(0, 4))).toBe('0123');
      expect(a.wcs).toEqual([]); // unsignaled by default
      await a.qp.send(mine.sge(0, 2), { wrId: 's', signaled: true, solicited: true });
      expect(await got).toMatchObject({ wrId: 'r', opcode: 'recv', byteLen: 2, solicited: true });
      expect(a.wcs.map((w) => [w.wrId, w.opcode])).toEqual([['s', 'send']]);
    });

    it('a queue pair created with sqSigAll false reports successful sends only when they ask (errors always)', async () => {
      const { a, b } = connectedHosts({ profile, sqSigAll: false }, { profile });
      const src = a.pd.registerMr(text('xy'), 0);
      const target = b.pd.registerMr(new Uint8Array(2), RW);
      a.qp.postSend([
        { wrId: 'quiet', opcode: 'rdma-write', sgList: [src.sge()], remote: target.remote() },
        { wrId: 'loud', opcode: 'rdma-write', sgList: [src.sge()], remote: target.remote(), signaled: true },
      ]);
      await until(() => a.wcs.length === 1, 'the signaled completion');
      await until(() => a.qp.outstanding.send === 0, 'both Writes done');
      expect(a.wcs.map((w) => w.wrId)).toEqual(['loud']);
      expect(str(target.buffer)).toBe('xy');
    });

    it('RFC 5040 §5.3: a Send with Invalidate invalidates the named region at the peer and says so in the receive', async () => {
      const { a, b } = connectedHosts({ profile });
      const granted = b.pd.registerMr(new Uint8Array(8), RW);
      const rx = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
      const got = b.qp.recv(rx.sge());
      await a.qp.send(a.pd.registerMr(text('done'), 0).sge(), { invalidateStag: granted.stag });
      expect(await got).toMatchObject({ byteLen: 4, invalidatedStag: granted.stag });
      expect(granted.valid).toBe(false);
    });

    it('a graceful close after the work completes: both queue pairs end closed, states in order', async () => {
      const { a, b } = connectedHosts({ profile });
      const states = firstValueFrom(a.qp.state$.pipe(take(3), toArray()));
      await a.qp.write(a.pd.registerMr(text('x'), 0).sge(), b.pd.registerMr(new Uint8Array(1), RW).remote());
      await a.qp.close();
      await firstValueFrom(b.qp.closed$);
      expect(await states).toEqual(['rts', 'closing', 'closed']);
      expect([a.qp.state, b.qp.state]).toEqual(['closed', 'closed']);
    });
  });
}
