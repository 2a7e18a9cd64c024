/**
 * Caller mistakes the verbs API refuses as libibverbs does: ibv_reg_mr's access rule (Remote Write or
 * Remote Atomic need Local Write, else EINVAL), and errors that name the work request they are about.
 */
import { Access, Device, isVerbsError } from '@rddp/verbs';
import { describe, expect, it } from 'vitest';
import { connectedPair } from './helpers.js';

/** What `fn` throws. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('nothing thrown');
}

describe('verbs: registerMr access rights (ibv_reg_mr)', () => {
  it('Remote Write or Remote Atomic without Local Write is refused with ERR_VERBS_ACCESS, nothing registered', () => {
    const pd = new Device().allocPd();
    for (const access of [
      Access.RemoteWrite,
      Access.RemoteWrite | Access.RemoteRead,
      Access.RemoteAtomic,
      Access.RemoteAtomic | Access.RemoteRead | Access.LocalRead,
    ]) {
      const e = thrown(() => pd.registerMr(new Uint8Array(8), access));
      expect(isVerbsError(e, 'ERR_VERBS_ACCESS'), `access ${access}: ${String(e)}`).toBe(true);
      expect((e as Error).message).toContain('Local Write');
    }
    expect(pd.regions).toBe(0);
  });

  it('with Local Write, and for local or Remote Read regions, registration succeeds', () => {
    const pd = new Device().allocPd();
    for (const access of [
      0,
      Access.LocalWrite,
      Access.RemoteRead,
      Access.LocalWrite | Access.RemoteWrite,
      Access.LocalWrite | Access.RemoteAtomic | Access.RemoteRead,
    ])
      expect(pd.registerMr(new Uint8Array(8), access).access).toBe(access);
    expect(pd.regions).toBe(5);
  });
});

describe('verbs: errors name the work request', () => {
  it('postSend: the bad request of a list is `work request #<index>`, with its wrId when it has one, never undefined', async () => {
    const { a } = await connectedPair();
    const mr = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    const remote = { stag: 0x100, to: 0n };
    const good = { opcode: 'rdma-write' as const, sgList: [mr.sge()], remote };
    const noId = thrown(() => a.qp.postSend([good, { ...good, sgList: [mr.sge(4, 8)] }])) as Error;
    expect(isVerbsError(noId, 'ERR_VERBS_SGE_RANGE')).toBe(true);
    expect(noId.message).toMatch(/^work request #1: /);
    expect(noId.message).not.toContain('undefined');
    const withId = thrown(() =>
      a.qp.postSend([good, good, { ...good, wrId: 'w3', remote: { stag: 2 ** 32, to: 0n } }]),
    ) as Error;
    expect(isVerbsError(withId, 'ERR_VERBS_INVALID_WR')).toBe(true);
    expect(withId.message).toMatch(/^work request #2 \(wrId w3\): /);
    const single = thrown(() => a.qp.postSend({ opcode: 'bogus' } as never)) as Error;
    expect(single.message).toMatch(/^work request #0: unknown opcode/);
  });

  it('postRecv: the element without Local Write names its receive work request', async () => {
    const { a } = await connectedPair();
    const ok = a.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    const readOnly = a.pd.registerMr(new Uint8Array(8), Access.RemoteRead);
    const e = thrown(() => a.qp.postRecv([{ sgList: [ok.sge()] }, { wrId: 7, sgList: [readOnly.sge()] }])) as Error;
    expect(isVerbsError(e, 'ERR_VERBS_ACCESS')).toBe(true);
    expect(e.message).toMatch(/^work request #1 \(wrId 7\): a receive buffer/);
  });
});
