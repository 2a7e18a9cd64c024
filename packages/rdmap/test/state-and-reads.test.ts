import { Access, type MemoryRegion } from '@rddp/ddp';
import { describe, expect, it } from 'vitest';
import { RdmaErrorCode, RdmaErrorType, type RdmapStreamState } from '../src/index.js';
import { checkReadSource, OutstandingReads } from '../src/read.js';
import { canTransition } from '../src/state.js';
import { StreamStateMachine } from '../src/stream-state.js';

describe('RFC 5040 §6 stream states', () => {
  it('RFC 5040 §6.2: RTS may close gracefully, terminate or fail; a Terminate ends in error', () => {
    const all: RdmapStreamState[] = ['rts', 'closing', 'terminate', 'error', 'closed'];
    const allowed = all.flatMap((a) => all.filter((b) => canTransition(a, b)).map((b) => `${a}->${b}`));
    expect(allowed).toEqual([
      'rts->closing',
      'rts->terminate',
      'rts->error',
      'rts->closed',
      'closing->terminate',
      'closing->error',
      'closing->closed',
      'terminate->error',
    ]);
  });

  it('RFC 5040 §5.4: after a Terminate nothing more is accepted or sent', () => {
    const sm = new StreamStateMachine();
    const seen: string[] = [];
    sm.state$.subscribe({ next: (s) => seen.push(s), complete: () => seen.push('done') });
    expect(sm.accepting && sm.transmitting).toBe(true);
    expect(sm.to('terminate')).toBe(true);
    expect(sm.accepting || sm.transmitting).toBe(false);
    expect(sm.to('rts')).toBe(false);
    expect(sm.to('closed')).toBe(false);
    expect(sm.to('error')).toBe(true);
    expect(seen).toEqual(['rts', 'terminate', 'error', 'done']);
  });

  it('RFC 5040 §6.2: a graceful close keeps transmitting but accepts no new work', () => {
    const sm = new StreamStateMachine();
    sm.to('closing');
    expect(sm.accepting).toBe(false);
    expect(sm.transmitting).toBe(true);
  });
});

describe('RFC 5040 §6.1 ORD and §5.2.2 Read Response checks', () => {
  const read = (i: number) => ({ token: i, sinkStag: 0x100 + i, sinkTo: 1000n, size: 100, srcStag: 7, srcTo: 0n });

  it('RFC 5040 §6.1: no more than ORD reads outstanding', () => {
    const q = new OutstandingReads<number>(2);
    expect(q.canIssue()).toBe(true);
    q.add(read(1));
    q.add(read(2));
    expect(q.canIssue()).toBe(false);
    expect(q.completeOldest()?.token).toBe(1);
    expect(q.canIssue()).toBe(true);
    expect(new OutstandingReads<number>(0).canIssue()).toBe(false);
  });

  it('RFC 5040 §5.2.2: Read Response segments must continue the oldest Read: STag, TO, size, L', () => {
    const q = new OutstandingReads<number>(4);
    // Figure 10: a Read Response can cause a Remote Operation Error only.
    expect(q.checkResponseSegment(0x101, 1000n, 10, true)).toMatchObject({
      type: RdmaErrorType.RemoteOperation,
      code: RdmaErrorCode.UnexpectedOpcode,
    });
    q.add(read(1));
    q.add(read(2));
    expect(q.checkResponseSegment(0x999, 1000n, 10, false)).toMatchObject({
      type: RdmaErrorType.RemoteOperation,
      code: RdmaErrorCode.Unspecified,
    });
    expect(q.checkResponseSegment(0x101, 1001n, 10, false)?.code).toBe(RdmaErrorCode.Unspecified);
    expect(q.checkResponseSegment(0x101, 1000n, 60, false)).toBeUndefined();
    expect(q.checkResponseSegment(0x101, 1060n, 50, true)?.code).toBe(RdmaErrorCode.Unspecified); // too long
    expect(q.checkResponseSegment(0x101, 1060n, 30, true)?.code).toBe(RdmaErrorCode.Unspecified); // short at L=1
    expect(q.checkResponseSegment(0x101, 1060n, 40, true)).toBeUndefined();
    // The next segments belong to the second Read, even before the first is Delivered (§5.5 rule 20).
    expect(q.receiving?.token).toBe(2);
    expect(q.checkResponseSegment(0x102, 1000n, 100, true)).toBeUndefined();
    expect(q.completeOldest()?.token).toBe(1);
    expect(q.completeOldest()?.token).toBe(2);
    expect(q.count).toBe(0);
  });

  it('RFC 5040 §5.2.1: a zero-length Read Response is one segment of no octets with L=1', () => {
    const q = new OutstandingReads<number>(1);
    q.add({ ...read(1), size: 0 });
    expect(q.checkResponseSegment(0x101, 1000n, 0, true)).toBeUndefined();
  });

  it('RFC 5040 §6.1: a stream end drains every outstanding Read', () => {
    const q = new OutstandingReads<number>(2);
    q.add(read(1));
    q.add(read(2));
    expect(q.drain().map((x) => x.token)).toEqual([1, 2]);
    expect(q.count).toBe(0);
    expect(q.receiving).toBeUndefined();
  });
});

describe('RFC 5040 §7.2 checks 4a–4e of an incoming RDMA Read Request', () => {
  const region = (over: Partial<MemoryRegion> = {}): MemoryRegion => ({
    stag: 0x1000,
    pdId: 1,
    buffer: new Uint8Array(100),
    baseTo: 500n,
    length: 100,
    access: Access.RemoteRead,
    valid: true,
    ...over,
  });
  const rr = { sinkStag: 1, sinkTo: 0n, size: 10, srcStag: 0x1000, srcTo: 500n };

  it('RFC 5040 §5.2.1: a zero-length Read is not validated', () => {
    expect(checkReadSource({ ...rr, size: 0, srcStag: 0xdead }, undefined, 1)).toBeUndefined();
  });
  it('RFC 5040 §7.2 4a: the Data Source STag must be valid', () => {
    expect(checkReadSource(rr, undefined, 1)?.code).toBe(RdmaErrorCode.InvalidStag);
    expect(checkReadSource(rr, region({ valid: false }), 1)?.code).toBe(RdmaErrorCode.InvalidStag);
  });
  it('RFC 5040 §7.2 4b: the Data Source STag must be associated with this stream', () => {
    expect(checkReadSource(rr, region({ pdId: 2 }), 1)?.code).toBe(RdmaErrorCode.StagNotAssociatedWithStream);
  });
  it('RFC 5040 §3.2: the Data Source must allow remote reads', () => {
    expect(checkReadSource(rr, region({ access: Access.RemoteWrite }), 1)?.code).toBe(
      RdmaErrorCode.AccessRightsViolation,
    );
  });
  it('RFC 5040 §7.2 4c: the Data Source TO must be within the region', () => {
    expect(checkReadSource({ ...rr, srcTo: 499n }, region(), 1)?.code).toBe(RdmaErrorCode.BaseOrBoundsViolation);
    expect(checkReadSource({ ...rr, srcTo: 600n }, region(), 1)?.code).toBe(RdmaErrorCode.BaseOrBoundsViolation);
  });
  it('RFC 5040 §7.2 4d: TO + size must be within the region', () => {
    expect(checkReadSource({ ...rr, srcTo: 591n }, region(), 1)?.code).toBe(RdmaErrorCode.BaseOrBoundsViolation);
    expect(checkReadSource({ ...rr, srcTo: 590n }, region(), 1)).toBeUndefined();
  });
  it('RFC 5040 §7.2 4e: TO + size must not wrap', () => {
    const top = (1n << 64n) - 50n;
    const high = region({ baseTo: top, length: 50 });
    expect(checkReadSource({ ...rr, srcTo: top + 10n, size: 100 }, high, 1)?.code).toBe(RdmaErrorCode.ToWrap);
    // Reading up to the last octet, TO 2^64-1, does not wrap.
    expect(checkReadSource({ ...rr, srcTo: top + 10n, size: 40 }, high, 1)).toBeUndefined();
  });
});
