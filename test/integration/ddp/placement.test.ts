import {
  Access,
  DdpInvalidArgumentError,
  DdpStreamClosedError,
  type TaggedDeliveryEvent,
  type UntaggedDeliveryEvent,
} from '@rddp/ddp';
import { describe, expect, it } from 'vitest';
import { ddpPair, pattern, until } from './helpers.js';

const MiB = 1024 * 1024;

describe('RFC 5041 §5.1.1 / §5.2 tagged buffer model and segmentation', () => {
  for (const mulpdu of [1024, 65_536]) {
    it(`§5.2: a 16 MiB tagged message at MULPDU ${mulpdu} lands bit-exact, every segment within MULPDU, L only on the last`, async () => {
      const [a, b] = await ddpPair({ mulpdu });
      const sink = new Uint8Array(16 * MiB);
      const r = b.stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite | Access.LocalWrite });
      const data = pattern(16 * MiB, 3);
      await a.ddp.sendTagged(r.stag, 0n, [data], 0x41);
      await until(() => b.deliveries.length === 1, 20_000);
      expect(Buffer.compare(sink, data)).toBe(0);
      const max = mulpdu - 14;
      expect(b.placements.length).toBe(Math.ceil((16 * MiB) / max));
      let to = 0n;
      for (const [i, p] of b.placements.entries()) {
        expect(p.length).toBeLessThanOrEqual(max);
        expect(p.to).toBe(to); // §5.2: each segment self-describing: TO advances by the payload placed
        expect(p.last).toBe(i === b.placements.length - 1);
        expect(p.rsvdUlp).toBe(0x41);
        to += BigInt(p.length);
      }
      expect(b.deliveries[0]).toMatchObject({ tagged: true, stag: r.stag, rsvdUlp: 0x41, length: 16 * MiB });
      expect(a.ddp.stats.segmentsSent).toBe(b.placements.length);
    }, 60_000);
  }

  it('§5.1.1: address-based regions place at TO − base; parts given separately are never merged', async () => {
    const [a, b] = await ddpPair({ mulpdu: 100 });
    const sink = new Uint8Array(1000);
    const base = 0x7fff_0000_0000_1000n;
    const r = b.stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite, baseTo: base });
    const p1 = pattern(150, 1);
    const p2 = pattern(200, 2);
    await a.ddp.sendTagged(r.stag, base + 300n, [p1, p2], 0);
    await until(() => b.deliveries.length === 1);
    expect(sink.subarray(300, 450)).toEqual(p1);
    expect(sink.subarray(450, 650)).toEqual(p2);
    expect(sink.subarray(0, 300).every((x) => x === 0)).toBe(true);
    expect(sink.subarray(650).every((x) => x === 0)).toBe(true);
  });

  it('§5.1.1: TOs past 2^53 are exact (bigint all the way)', async () => {
    const [a, b] = await ddpPair();
    const sink = new Uint8Array(64);
    const base = 2n ** 60n + 3n;
    const r = b.stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite, baseTo: base });
    await a.ddp.sendTagged(r.stag, base + 1n, [pattern(8)], 0);
    await until(() => b.placements.length === 1);
    expect(b.placements[0]?.to).toBe(base + 1n);
    expect(sink[0]).toBe(0);
    expect(sink.subarray(1, 9)).toEqual(pattern(8));
  });

  it('§5.2: segment TOs carry across 2^32 and 2^53 exactly', async () => {
    for (const base of [2n ** 32n - 100n, 2n ** 53n - 100n]) {
      const [a, b] = await ddpPair({ mulpdu: 64 });
      const sink = new Uint8Array(400);
      const r = b.stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite, baseTo: base });
      const data = pattern(400, 4);
      await a.ddp.sendTagged(r.stag, base, [data], 0);
      await until(() => b.deliveries.length === 1);
      expect(sink).toEqual(data);
      expect(b.placements.map((p) => p.to)).toEqual(b.placements.map((_, i) => base + BigInt(i * 50)));
    }
  });

  it('§5.2: a zero-length tagged message is one segment with L=1 and places nothing', async () => {
    const [a, b] = await ddpPair();
    await a.ddp.sendTagged(0, 0n, [], 0);
    await until(() => b.deliveries.length === 1);
    expect(b.placements).toEqual([{ stag: 0, to: 0n, length: 0, last: true, rsvdUlp: 0 }]);
    expect(b.errors).toEqual([]);
  });

  it('§5.3: messages go out whole and in call order, also when the LLP pushes back', async () => {
    const [a, b] = await ddpPair({ mulpdu: 512, highWaterMark: 2048 });
    const sink = new Uint8Array(4 * 10_000);
    const r = b.stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite });
    const msgs = [0, 1, 2, 3].map((i) => pattern(10_000, i + 10));
    await Promise.all(msgs.map((m, i) => a.ddp.sendTagged(r.stag, BigInt(i * 10_000), [m], i)));
    await until(() => b.deliveries.length === 4);
    expect(b.deliveries.map((d) => (d as TaggedDeliveryEvent).rsvdUlp)).toEqual([0, 1, 2, 3]);
    for (let i = 0; i < 4; i++) expect(sink.subarray(i * 10_000, (i + 1) * 10_000)).toEqual(msgs[i]);
  });
});

describe('RFC 5041 §5.1.2 untagged buffer model', () => {
  it('§5.1.2: MSN starts at 1 on every queue and counts messages per queue', async () => {
    const [a, b] = await ddpPair({ queues: 3 });
    for (let qn = 0; qn < 3; qn++) for (let i = 0; i < 3; i++) b.ddp.postReceive(qn, new Uint8Array(16), `${qn}/${i}`);
    const msns: number[] = [];
    for (const qn of [0, 1, 0, 2, 0, 1]) msns.push(await a.ddp.sendUntagged(qn, [pattern(4, qn)], 0));
    expect(msns).toEqual([1, 1, 2, 1, 3, 2]);
    await until(() => b.deliveries.length === 6);
    const d = b.deliveries as UntaggedDeliveryEvent[];
    expect(d.map((x) => [x.qn, x.msn, x.receiveId])).toEqual([
      [0, 1, '0/0'],
      [1, 1, '1/0'],
      [0, 2, '0/1'],
      [2, 1, '2/0'],
      [0, 3, '0/2'],
      [1, 2, '1/1'],
    ]);
  });

  it('§5.2/§5.3: an untagged message of many segments is delivered exactly once, after all its octets, with its RsvdULP', async () => {
    const [a, b] = await ddpPair({ mulpdu: 256, faults: { chunking: { seed: 9, maxChunk: 37 } } });
    const buf = new Uint8Array(100_000);
    b.ddp.postReceive(0, buf, 'r1');
    const data = pattern(99_999, 5);
    await a.ddp.sendUntagged(0, [data.subarray(0, 5000), data.subarray(5000)], 0x12_3456_789a);
    await until(() => b.deliveries.length === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(b.deliveries).toHaveLength(1);
    const d = b.deliveries[0] as UntaggedDeliveryEvent;
    expect(d).toMatchObject({ tagged: false, qn: 0, msn: 1, length: 99_999, rsvdUlp: 0x12_3456_789a, receiveId: 'r1' });
    expect(d.buffer).toBe(buf);
    expect(buf.subarray(0, 99_999)).toEqual(data);
    expect(buf[99_999]).toBe(0);
    expect(b.ddp.postedReceives(0)).toBe(0);
  });

  it('§5.1.2: a zero-length untagged message consumes a buffer and is delivered with length 0', async () => {
    const [a, b] = await ddpPair();
    b.ddp.postReceive(0, new Uint8Array(8), 'z');
    await a.ddp.sendUntagged(0, [], 0);
    await until(() => b.deliveries.length === 1);
    expect(b.deliveries[0]).toMatchObject({ qn: 0, msn: 1, length: 0, receiveId: 'z' });
  });

  it('the IETF and RDMA Consortium profiles both carry traffic', async () => {
    for (const profile of ['ietf', 'rdmac'] as const) {
      const [a, b] = await ddpPair({ profile });
      b.ddp.postReceive(0, new Uint8Array(8));
      await a.ddp.sendUntagged(0, [pattern(8)], 0);
      await until(() => b.deliveries.length === 1);
      expect(b.errors).toEqual([]);
      expect(a.ddp.profile).toBe(profile);
    }
  });
});

describe('RFC 5041 §6 stream setup and teardown', () => {
  it('§6.2.1: graceful teardown delivers what was sent first, then hands back unconsumed buffers', async () => {
    const [a, b] = await ddpPair();
    b.ddp.postReceive(0, new Uint8Array(8), 'used');
    b.ddp.postReceive(0, new Uint8Array(8), 'unused');
    void a.ddp.sendUntagged(0, [pattern(8)], 0);
    const closed = new Promise((r) => b.ddp.closed$.subscribe(r));
    await a.ddp.close();
    const ev = (await closed) as { graceful: boolean; flushed: { receiveId: unknown; msn: number }[] };
    expect(b.deliveries.map((d) => (d as UntaggedDeliveryEvent).receiveId)).toEqual(['used']);
    expect(ev.graceful).toBe(true);
    expect(ev.flushed.map((f) => [f.receiveId, f.msn])).toEqual([['unused', 2]]);
    expect(b.ddp.state).toBe('closed');
    await expect(b.ddp.sendUntagged(0, [], 0)).rejects.toBeInstanceOf(DdpStreamClosedError);
    await expect(a.ddp.sendTagged(1, 0n, [], 0)).rejects.toBeInstanceOf(DdpStreamClosedError);
  });

  it('§6.2.2: abortive teardown mid-message reports the error and the partly placed buffer', async () => {
    const [a, b] = await ddpPair({ mulpdu: 64, faults: { abortAfterUlpdus: 3 } });
    b.ddp.postReceive(0, new Uint8Array(1000), 'partial');
    const sending = a.ddp.sendUntagged(0, [pattern(1000)], 0).catch((e: unknown) => e);
    const ev = await new Promise<{
      graceful: boolean;
      error?: Error;
      flushed: { placed: number; receiveId: unknown }[];
    }>((r) => b.ddp.closed$.subscribe(r));
    expect(ev.graceful).toBe(false);
    expect(ev.error).toBeInstanceOf(Error);
    expect(ev.flushed).toHaveLength(1);
    expect(ev.flushed[0]?.receiveId).toBe('partial');
    expect(ev.flushed[0]?.placed).toBe(3 * (64 - 18));
    expect(b.deliveries).toEqual([]);
    expect(await sending).toBeInstanceOf(Error);
  });
});

describe('caller errors are typed', () => {
  it('bad QN, RsvdULP, TO, STag, buffers and profile throw DdpInvalidArgumentError with a clear message', async () => {
    const [a] = await ddpPair({ queues: 3 });
    expect(() => a.ddp.postReceive(3, new Uint8Array(1))).toThrow(/QN 3/);
    expect(() => a.ddp.postReceive(0, [] as unknown as Uint8Array)).toThrow(DdpInvalidArgumentError);
    await expect(a.ddp.sendUntagged(0, [], 2 ** 40)).rejects.toThrow(/40 bits/);
    await expect(a.ddp.sendTagged(1, 0n, [], 256)).rejects.toThrow(/8 bits/);
    await expect(a.ddp.sendTagged(1, -1n, [], 0)).rejects.toBeInstanceOf(DdpInvalidArgumentError);
    await expect(a.ddp.sendTagged(1, 2n ** 64n - 1n, [new Uint8Array(2)], 0)).rejects.toThrow(/wraps/);
    await expect(a.ddp.sendTagged(2 ** 32, 0n, [], 0)).rejects.toThrow(/STag/);
    await expect(a.ddp.sendUntagged(-1, [], 0)).rejects.toThrow(/QN/);
    await expect(a.ddp.sendTagged(1, 0n, [], 0, AbortSignal.abort())).rejects.toMatchObject({
      code: 'ERR_DDP_ABORTED',
    });
  });
});
