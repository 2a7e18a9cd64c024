/** The verbs API over RDMAP (RFC 5040) and the loopback LLP, for both profiles. */
import { createLoopbackPair } from '@rddp/llp-loopback';
import { Access, type DdpProfile, Device, isVerbsError, type WorkCompletion, WorkCompletionError } from '@rddp/verbs';
import { firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { code, connectedPair, until } from './helpers.js';

const text = (s: string) => new TextEncoder().encode(s);
const str = (b: Uint8Array) => new TextDecoder().decode(b);
const RW = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

/** Two hosts (two devices) with a connected queue pair each. */
const connected = (profile: DdpProfile, init: { ord?: number; ird?: number; maxSendWr?: number } = {}) =>
  connectedPair({ profile, ...init });

for (const profile of ['ietf', 'rdmac'] as const) {
  describe(`verbs: every operation through postSend/postRecv (${profile})`, () => {
    it('RFC 5040 §5.1, §5.2, §5.3: Write, Read and Send complete on the CQ with wrId, opcode, status and byte count', async () => {
      const { a, b } = await connected(profile);
      const local = a.pd.registerMr(text('0123456789'), Access.LocalWrite);
      const remote = b.pd.registerMr(new Uint8Array(10), RW);
      const rx = b.pd.registerMr(new Uint8Array(32), Access.LocalWrite);
      const msg = a.pd.registerMr(text('msg'), 0);
      b.qp.postRecv({ wrId: 'recv-1', sgList: [rx.sge()] });
      a.qp.postSend([
        { wrId: 'write-1', opcode: 'rdma-write', sgList: [local.sge(0, 4), local.sge(6, 4)], remote: remote.remote(2) },
        { wrId: 'read-1', opcode: 'rdma-read', sgList: [local.sge(0, 10)], remote: remote.remote(0) },
        { wrId: 'send-1', opcode: 'send', sgList: [msg.sge()] },
      ]);
      await until(() => a.wcs.length === 3 && b.wcs.length === 1, 'completions');
      expect(a.wcs.map((w) => [w.wrId, w.opcode, w.status, w.byteLen, w.qpNum])).toEqual([
        ['write-1', 'rdma-write', 'success', 8, a.qp.qpNum],
        ['read-1', 'rdma-read', 'success', 10, a.qp.qpNum],
        ['send-1', 'send', 'success', 3, a.qp.qpNum],
      ]);
      expect(str(local.buffer)).toBe('\0\x0001236789'); // read back what the Write placed at TO 2
      expect(b.wcs[0]).toMatchObject({
        wrId: 'recv-1',
        opcode: 'recv',
        status: 'success',
        byteLen: 3,
        solicited: false,
      });
      expect(str(rx.buffer.subarray(0, 3))).toBe('msg');
    });

    it('RFC 5040 §5.3: the four Sends: solicited flag, remote invalidation reported with the invalidated STag', async () => {
      const { a, b } = await connected(profile);
      const src = a.pd.registerMr(text('abcd'), 0);
      const target = b.pd.registerMr(new Uint8Array(4), RW);
      const target2 = b.pd.registerMr(new Uint8Array(4), RW);
      const rx = b.pd.registerMr(new Uint8Array(64), Access.LocalWrite);
      const events = firstValueFrom(b.cq.solicited$.pipe(take(2), toArray()));
      b.qp.postRecv([0, 1, 2, 3].map((i) => ({ wrId: i, sgList: [rx.sge(i * 16, 16)] as const })));
      a.qp.postSend([
        { opcode: 'send', sgList: [src.sge()] },
        { opcode: 'send', sgList: [src.sge()], solicited: true },
        { opcode: 'send-with-invalidate', sgList: [src.sge()], invalidateStag: target.stag },
        { opcode: 'send-with-invalidate', sgList: [src.sge()], invalidateStag: target2.stag, solicited: true },
      ]);
      await until(() => b.wcs.length === 4, 'four receives');
      expect(b.wcs.map((w) => [w.wrId, w.solicited, w.invalidatedStag])).toEqual([
        [0, false, undefined],
        [1, true, undefined],
        [2, false, target.stag],
        [3, true, target2.stag],
      ]);
      expect([target.valid, target2.valid]).toEqual([false, false]);
      expect((await events).map((w) => w.wrId)).toEqual([1, 3]);
    });

    it('verbs: unsignaled work requests report no success completion; a local invalidation is ordered with the queue', async () => {
      const { a, b } = await connected(profile);
      const src = a.pd.registerMr(text('xy'), 0);
      const remote = b.pd.registerMr(new Uint8Array(2), RW);
      const mine = a.pd.registerMr(new Uint8Array(2), RW);
      a.qp.postSend([
        { wrId: 'quiet', opcode: 'rdma-write', sgList: [src.sge()], remote: remote.remote(), signaled: false },
        { wrId: 'inv', opcode: 'local-invalidate', invalidateStag: mine.stag },
      ]);
      await until(() => a.wcs.length === 1, 'the signaled completion');
      expect(a.wcs.map((w) => [w.wrId, w.opcode, w.status])).toEqual([['inv', 'local-invalidate', 'success']]);
      expect(mine.valid).toBe(false);
      expect(a.qp.outstanding).toEqual({ send: 0, recv: 0 });
    });

    it('verbs: the promise conveniences resolve with the completion (write, read, send, recv)', async () => {
      const { a, b } = await connected(profile);
      const mr = a.pd.registerMr(text('hello world!'), Access.LocalWrite);
      const remote = b.pd.registerMr(new Uint8Array(12), RW);
      const rx = b.pd.registerMr(new Uint8Array(12), Access.LocalWrite);
      const got = b.qp.recv(rx.sge(), { wrId: 'r' });
      await expect(a.qp.write(mr.sge(0, 5), remote.remote())).resolves.toMatchObject({
        opcode: 'rdma-write',
        byteLen: 5,
      });
      mr.buffer.fill(0);
      await expect(a.qp.read(mr.sge(0, 5), remote.remote())).resolves.toMatchObject({
        opcode: 'rdma-read',
        byteLen: 5,
      });
      expect(str(mr.buffer.subarray(0, 5))).toBe('hello');
      await a.qp.send(mr.sge(0, 5), { solicited: true });
      expect(await got).toMatchObject({ wrId: 'r', byteLen: 5, solicited: true });
      expect(a.wcs).toEqual([]); // conveniences are unsignaled unless asked
    });

    it('RFC 5040 §5.5 rule 12, Appendix B footnote 2: a fenced Write waits for the Read before it', async () => {
      const { a, b } = await connected(profile);
      const mr = a.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
      const remote = b.pd.registerMr(text('old!'), RW);
      const read = a.qp.read(mr.sge(), remote.remote());
      await a.qp.write(a.pd.registerMr(text('new!'), 0).sge(), remote.remote(), { fence: true });
      await read;
      expect(str(mr.buffer)).toBe('old!');
      expect(str(remote.buffer)).toBe('new!');
    });
  });

  describe(`verbs: errors (${profile})`, () => {
    it('verbs: caller errors are typed: bad STag, other PD, access, range, too long, QP state, queue full, malformed WR', async () => {
      const { a, b } = await connected(profile, { maxSendWr: 2 });
      const mr = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
      const noWrite = a.pd.registerMr(new Uint8Array(8), Access.RemoteRead);
      const foreign = a.device.allocPd().registerMr(new Uint8Array(8), RW);
      const dead = a.pd.registerMr(new Uint8Array(8), RW);
      dead.deregister();
      const gone = a.pd.registerMr(new Uint8Array(8), RW);
      gone.invalidate();
      const remote = { stag: 0x100, to: 0n };
      const send = (sge: ReturnType<typeof mr.sge>) => () => a.qp.postSend({ opcode: 'send', sgList: [sge] });
      expect(code(send(dead.sge()))).toBe('ERR_VERBS_INVALID_MR');
      expect(code(send(gone.sge()))).toBe('ERR_VERBS_INVALID_MR');
      expect(code(send(foreign.sge()))).toBe('ERR_VERBS_INVALID_MR');
      expect(code(send(mr.sge(4, 8)))).toBe('ERR_VERBS_SGE_RANGE');
      expect(code(() => a.qp.postRecv({ sgList: [noWrite.sge()] }))).toBe('ERR_VERBS_ACCESS');
      expect(code(() => a.qp.postSend({ opcode: 'rdma-read', sgList: [noWrite.sge()], remote }))).toBe(
        'ERR_VERBS_ACCESS',
      );
      expect(
        code(() => a.qp.postSend({ opcode: 'rdma-write', sgList: [mr.sge()], remote: { stag: 2 ** 32, to: 0n } })),
      ).toBe('ERR_VERBS_INVALID_WR');
      expect(code(() => a.qp.postSend({ opcode: 'rdma-read', sgList: [mr.sge(), mr.sge()] as never, remote }))).toBe(
        'ERR_VERBS_INVALID_WR',
      );
      expect(code(() => a.qp.postSend({ opcode: 'bogus' } as never))).toBe('ERR_VERBS_INVALID_WR');
      const small = a.pd.createQp({ sendCq: a.cq, recvCq: a.cq, maxMessageSize: 4 });
      const [c1] = await createLoopbackPair();
      small.connect(c1);
      expect(code(() => small.postSend({ opcode: 'send', sgList: [mr.sge()] }))).toBe('ERR_VERBS_MESSAGE_TOO_LONG');
      // Nothing of a bad list is posted.
      expect(
        code(() =>
          a.qp.postSend([
            { opcode: 'send', sgList: [mr.sge()] },
            { opcode: 'send', sgList: [dead.sge()] },
          ]),
        ),
      ).toBe('ERR_VERBS_INVALID_MR');
      expect(a.qp.outstanding.send).toBe(0);
      expect(code(() => a.qp.postSend([0, 1, 2].map(() => ({ opcode: 'send' as const, sgList: [mr.sge()] }))))).toBe(
        'ERR_VERBS_QUEUE_FULL',
      );
      const fresh = a.pd.createQp({ sendCq: a.cq, recvCq: a.cq });
      expect(code(() => fresh.postSend({ opcode: 'send', sgList: [] }))).toBe('ERR_VERBS_QP_STATE');
      try {
        fresh.postSend({ opcode: 'send', sgList: [] });
      } catch (e) {
        expect(isVerbsError(e, 'ERR_VERBS_QP_STATE')).toBe(true);
        expect((e as Error).message).toBe("cannot post a send work request: the queue pair is in state 'init'");
      }
      expect(code(() => a.pd.dealloc())).toBe('ERR_VERBS_BUSY');
      b.qp.abort();
    });

    it('verbs: receives posted in INIT are handed over at connect; a queue pair closed unconnected flushes them', async () => {
      const device = new Device();
      const pd = device.allocPd();
      const cq = device.createCq();
      const wcs: WorkCompletion[] = [];
      cq.completions$.subscribe((w) => wcs.push(w));
      const qp = pd.createQp({ sendCq: cq, recvCq: cq });
      qp.postRecv({ wrId: 'early', sgList: [pd.registerMr(new Uint8Array(4), Access.LocalWrite).sge()] });
      expect(qp.state).toBe('init');
      await qp.close();
      expect(wcs.map((w) => [w.wrId, w.status])).toEqual([['early', 'flushed']]);
      expect(qp.state).toBe('closed');
    });

    it('RFC 5040 §7.1: a Read of a bad remote STag completes with a remote access error; the QP goes to error; both sides learn', async () => {
      const { a, b } = await connected(profile);
      const mr = a.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
      const rx = a.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
      a.qp.postRecv({ wrId: 'pending-recv', sgList: [rx.sge()] });
      const failure = a.qp.read(mr.sge(), { stag: 0x00bad000, to: 0n });
      await expect(failure).rejects.toBeInstanceOf(WorkCompletionError);
      const err = (await failure.catch((e) => e)) as WorkCompletionError;
      expect(err.completion).toMatchObject({ opcode: 'rdma-read', status: 'remote-access-error' });
      const [ta, tb] = await Promise.all([firstValueFrom(a.qp.terminate$), firstValueFrom(b.qp.terminate$)]);
      expect(ta).toMatchObject({ direction: 'received', description: 'RDMA: Remote Protection Error: Invalid STag' });
      expect(tb).toMatchObject({ direction: 'sent', description: 'RDMA: Remote Protection Error: Invalid STag' });
      await firstValueFrom(a.qp.closed$);
      expect(a.qp.state).toBe('error');
      expect(a.wcs.map((w) => [w.wrId, w.status])).toEqual([
        [undefined, 'remote-access-error'],
        ['pending-recv', 'flushed'],
      ]);
      expect(code(() => a.qp.postSend({ opcode: 'send', sgList: [] }))).toBe('ERR_VERBS_QP_STATE');
    });

    it('RFC 5040 §6.2: close is graceful; the peer flushes its receives; the PD can then be freed', async () => {
      const { a, b } = await connected(profile);
      const rx = b.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
      b.qp.postRecv({ wrId: 'never', sgList: [rx.sge()] });
      const states: string[] = [];
      a.qp.state$.subscribe((s) => states.push(s));
      await a.qp.close();
      await firstValueFrom(b.qp.closed$);
      expect(states).toEqual(['rts', 'closing', 'closed']);
      expect(b.wcs.map((w) => [w.wrId, w.status])).toEqual([['never', 'flushed']]);
      rx.deregister();
      expect(() => b.pd.dealloc()).not.toThrow();
    });

    it('RFC 5040 §6.2.1: terminate() sends a Terminate; the peer sees it and its work is Completed in error', async () => {
      const { a, b } = await connected(profile);
      const rx = b.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
      const got = b.qp.recv(rx.sge());
      a.qp.terminate();
      await expect(got).rejects.toMatchObject({ code: 'ERR_VERBS_WORK_COMPLETION', completion: { status: 'flushed' } });
      expect(await firstValueFrom(b.qp.terminate$)).toMatchObject({
        direction: 'received',
        description: 'RDMA: Local Catastrophic Error',
      });
    });
  });
}
