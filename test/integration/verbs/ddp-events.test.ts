/**
 * The queue pair's documented path to DDP's events (RFC 5041 §5.1.1 placement, §7 errors), and what its
 * work requests leave in RDMAP's and DDP's events: opaque tokens, never the verbs' own records.
 */
import { createLoopbackPair } from '@rddp/llp-loopback';
import { Access, Device, type PlacementEvent, type QueuePair } from '@rddp/verbs';
import { firstValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { connectedPair, until } from './helpers.js';

const RW = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead;

/** Whether `needle` (or any function) is reachable from `x` through own properties, `depth` levels down. */
function reaches(x: unknown, needle: unknown, depth = 4): boolean {
  if (x === needle || typeof x === 'function') return true;
  if (depth === 0 || typeof x !== 'object' || x === null || ArrayBuffer.isView(x)) return false;
  return Object.values(x).some((v) => reaches(v, needle, depth - 1));
}

describe('verbs: DDP events of a queue pair', () => {
  it('RFC 5041 §5.1.1: placement$, subscribed before connect, reports the peer Write and the Read Response placed here', async () => {
    const [ca, cb] = await createLoopbackPair();
    const make = () => {
      const pd = new Device().allocPd();
      const cq = pd.device.createCq();
      return { pd, qp: pd.createQp({ sendCq: cq, recvCq: cq }) };
    };
    const a = make();
    const b = make();
    const atB: PlacementEvent[] = [];
    const atA: PlacementEvent[] = [];
    b.qp.placement$.subscribe((p) => atB.push(p));
    a.qp.placement$.subscribe((p) => atA.push(p));
    a.qp.connect(ca);
    b.qp.connect(cb);
    const src = a.pd.registerMr(new TextEncoder().encode('0123456789'), Access.LocalWrite);
    const target = b.pd.registerMr(new Uint8Array(16), RW);
    await a.qp.write(src.sge(0, 10), target.remote(2));
    await until(() => atB.length > 0, 'the Write placed at B');
    expect(atB).toEqual([expect.objectContaining({ stag: target.stag, to: 2n, length: 10, last: true })]);
    await a.qp.read(src.sge(0, 4), target.remote(4));
    expect(atA).toEqual([expect.objectContaining({ stag: src.stag, to: 0n, length: 4, last: true })]);
  });

  it('RFC 5041 §7.2: ddpErrors$ reports the peer Write to an STag that does not exist (Tagged Buffer, Invalid STag)', async () => {
    const { a, b } = await connectedPair();
    const error = firstValueFrom(b.qp.ddpErrors$);
    const src = a.pd.registerMr(new Uint8Array(4), 0);
    a.qp.write(src.sge(), { stag: 0x00bad000, to: 0n }).catch(() => {});
    expect(await error).toMatchObject({ header: { tagged: true, stag: 0x00bad000 } });
    expect(await firstValueFrom(b.qp.terminate$)).toMatchObject({ direction: 'sent' });
  });

  it('verbs: placement$ and ddpErrors$ of a queue pair closed unconnected complete with no event', async () => {
    const pd = new Device().allocPd();
    const cq = pd.device.createCq();
    const qp: QueuePair = pd.createQp({ sendCq: cq, recvCq: cq });
    const placements = firstValueFrom(qp.placement$.pipe(toArray()));
    const errors = firstValueFrom(qp.ddpErrors$.pipe(toArray()));
    await qp.close();
    expect(await placements).toEqual([]);
    expect(await errors).toEqual([]);
  });

  it('verbs: RDMAP completions and DDP deliveries carry an opaque token, never the work request record or its promise', async () => {
    const { a, b } = await connectedPair();
    const wrId = { mine: true };
    const rx = b.pd.registerMr(new Uint8Array(8), Access.LocalWrite);
    const src = a.pd.registerMr(new Uint8Array(4), 0);
    const deliveries: unknown[] = [];
    const completions: unknown[] = [];
    b.qp.rdmap?.ddp.delivery$.subscribe((d) => deliveries.push((d as { receiveId?: unknown }).receiveId));
    b.qp.rdmap?.completions$.subscribe((c) => completions.push(c));
    a.qp.rdmap?.completions$.subscribe((c) => completions.push(c));
    const received = b.qp.recv(rx.sge(), { wrId });
    await a.qp.send(src.sge(), { wrId });
    expect((await received).wrId).toBe(wrId);
    expect(deliveries.length).toBeGreaterThan(0);
    expect(completions.length).toBe(2);
    for (const x of [...deliveries, ...completions]) expect(reaches(x, wrId)).toBe(false);
  });
});
