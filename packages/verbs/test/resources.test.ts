/**
 * The device, its protection domains and memory regions (ibv_context, ibv_pd, ibv_mr), through the
 * package's public entry: registration and its access rule, STags, remote descriptors and scatter/gather
 * elements, invalidation and deregistration, and the protection domain's lifetime.
 */
import { isRddpError, RddpInvalidArgumentError } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { Access, Device, isVerbsError } from '../src/index.js';
import { codeOf, host } from './support/hosts.js';

describe('memory regions (ibv_reg_mr)', () => {
  it('a region is the caller’s own bytes, with its access rights and an STag the peer names it by', () => {
    const pd = new Device().allocPd();
    const buffer = new Uint8Array(64);
    const mr = pd.registerMr(buffer, Access.LocalWrite | Access.RemoteRead);
    // Not a copy: the region's bytes are the caller's memory, where placement goes.
    mr.buffer[5] = 0x5a;
    expect(buffer[5]).toBe(0x5a);
    expect(mr.length).toBe(64);
    expect(mr.access).toBe(Access.LocalWrite | Access.RemoteRead);
    expect(mr.pd).toBe(pd);
    expect(Number.isInteger(mr.stag) && mr.stag >= 0 && mr.stag <= 0xffff_ffff).toBe(true);
    expect([mr.valid, mr.isDeregistered]).toEqual([true, false]);
    expect(pd.regions).toBe(1);
  });

  it('every region has an STag of its own, across protection domains of one device', () => {
    const device = new Device();
    const [p1, p2] = [device.allocPd(), device.allocPd()];
    const stags = [p1, p2, p1, p2].map((pd) => pd.registerMr(new Uint8Array(8), Access.LocalWrite).stag);
    expect(new Set(stags).size).toBe(4);
    expect(p1.id).not.toBe(p2.id);
  });

  it('zero-based by default; `baseTo` makes a region address-based; `remote` and `sge` describe parts of it', () => {
    const pd = new Device().allocPd();
    const zero = pd.registerMr(new Uint8Array(16), Access.LocalWrite | Access.RemoteWrite);
    expect(zero.baseTo).toBe(0n);
    expect(zero.remote()).toEqual({ stag: zero.stag, to: 0n });
    const based = pd.registerMr(new Uint8Array(16), Access.RemoteRead, { baseTo: 0x7f00_0000_1000n });
    expect(based.remote(4)).toEqual({ stag: based.stag, to: 0x7f00_0000_1004n });
    expect(based.sge()).toEqual({ mr: based, offset: 0 });
    expect(based.sge(2, 8)).toEqual({ mr: based, offset: 2, length: 8 });
  });

  it('ibv_reg_mr’s rule: Remote Write or Remote Atomic without Local Write throws ERR_VERBS_ACCESS and registers nothing', () => {
    const pd = new Device().allocPd();
    for (const access of [Access.RemoteWrite, Access.RemoteAtomic, Access.RemoteWrite | Access.RemoteRead])
      expect(codeOf(() => pd.registerMr(new Uint8Array(8), access))).toBe('ERR_VERBS_ACCESS');
    for (const access of [
      0,
      Access.LocalRead,
      Access.RemoteRead,
      Access.LocalWrite | Access.RemoteWrite,
      Access.LocalWrite | Access.RemoteAtomic,
    ])
      expect(pd.registerMr(new Uint8Array(8), access).access).toBe(access);
    expect(pd.regions).toBe(5);
  });

  it('what is not a combination of Access flags, or not a Uint8Array, is ERR_VERBS_INVALID_WR (an invalid argument)', () => {
    const pd = new Device().allocPd();
    for (const access of [-1, 0x20, 1.5, Number.NaN])
      expect(
        codeOf(() => pd.registerMr(new Uint8Array(8), access)),
        `access ${access}`,
      ).toBe('ERR_VERBS_INVALID_WR');
    expect(codeOf(() => pd.registerMr(new ArrayBuffer(8) as never, Access.LocalWrite))).toBe('ERR_VERBS_INVALID_WR');
    try {
      pd.registerMr([1, 2, 3] as never, Access.LocalWrite);
    } catch (e) {
      expect(isVerbsError(e, 'ERR_VERBS_INVALID_WR')).toBe(true);
      expect(isRddpError(e)).toBe(true);
      expect(e).toBeInstanceOf(RddpInvalidArgumentError); // the invalid-argument family every package shares
    }
    expect(pd.regions).toBe(0);
  });

  it('invalidate, revalidate and deregister: `valid` follows; deregistration is final and idempotent', () => {
    const pd = new Device().allocPd();
    const mr = pd.registerMr(new Uint8Array(8), Access.LocalWrite | Access.RemoteWrite);
    mr.invalidate();
    expect(mr.valid).toBe(false);
    mr.revalidate();
    expect(mr.valid).toBe(true);
    mr.deregister();
    mr.deregister();
    expect([mr.valid, mr.isDeregistered]).toEqual([false, true]);
    mr.revalidate();
    expect(mr.valid).toBe(false);
    expect(pd.regions).toBe(0);
  });

  it('a device registers at most `maxRegions` regions at once; a freed slot can be registered again', () => {
    const pd = new Device({ maxRegions: 2 }).allocPd();
    const first = pd.registerMr(new Uint8Array(4), 0);
    pd.registerMr(new Uint8Array(4), 0);
    let refused: unknown;
    try {
      pd.registerMr(new Uint8Array(4), 0);
    } catch (e) {
      refused = e;
    }
    expect(isRddpError(refused), String(refused)).toBe(true);
    first.deregister();
    expect(() => pd.registerMr(new Uint8Array(4), 0)).not.toThrow();
  });
});

describe('protection domains (ibv_pd)', () => {
  it('dealloc is refused with ERR_VERBS_BUSY while regions or queue pairs remain, then succeeds; a freed domain refuses new work', async () => {
    const h = host();
    const mr = h.pd.registerMr(new Uint8Array(4), Access.LocalWrite);
    expect(codeOf(() => h.pd.dealloc())).toBe('ERR_VERBS_BUSY');
    mr.deregister();
    expect(codeOf(() => h.pd.dealloc())).toBe('ERR_VERBS_BUSY'); // the queue pair
    await h.qp.close(); // never connected: it ends at once
    expect(h.qp.state).toBe('closed');
    expect(() => h.pd.dealloc()).not.toThrow();
    expect(() => h.pd.dealloc()).not.toThrow(); // idempotent
    expect(codeOf(() => h.pd.registerMr(new Uint8Array(4), 0))).toBe('ERR_VERBS_BUSY');
    expect(codeOf(() => h.pd.createQp({ sendCq: h.cq, recvCq: h.cq }))).toBe('ERR_VERBS_BUSY');
  });
});

describe('queue pair creation (ibv_create_qp)', () => {
  it('a new queue pair is in `init` with its attributes; numbers are unique on a device; bad limits are ERR_VERBS_INVALID_WR', () => {
    const device = new Device();
    const pd = device.allocPd();
    const cq = device.createCq();
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 2, ord: 1, ird: 3, profile: 'rdmac' });
    expect(qp.state).toBe('init');
    expect([qp.maxSendWr, qp.maxRecvWr, qp.ord, qp.ird, qp.profile]).toEqual([4, 2, 1, 3, 'rdmac']);
    expect(qp.sendCq).toBe(cq);
    expect(qp.rdmap).toBeUndefined();
    expect(qp.outstanding).toEqual({ send: 0, recv: 0 });
    const other = device.allocPd().createQp({ sendCq: cq, recvCq: cq });
    expect(other.qpNum).not.toBe(qp.qpNum);
    expect([other.maxSendWr, other.maxRecvWr, other.sqSigAll, other.profile]).toEqual([256, 256, true, 'ietf']);
    for (const init of [{ maxSendWr: 0 }, { maxRecvWr: -1 }, { maxSge: 1.5 }, { ord: -1 }])
      expect(
        codeOf(() => pd.createQp({ sendCq: cq, recvCq: cq, ...init })),
        JSON.stringify(init),
      ).toBe('ERR_VERBS_INVALID_WR');
  });
});
