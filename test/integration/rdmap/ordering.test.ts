/**
 * RFC 5040 §5.5 ordering and completions and every row of Appendix B (Figure 17, "Operation Ordering"),
 * end to end over the loopback LLP, for both profiles.
 */
import { Access } from '@rddp/ddp';
import { RdmapOpcode as Op, type ReceiveCompletion, type SendCompletion } from '@rddp/rdmap';
import { describe, expect, it } from 'vitest';
import {
  ctrl,
  isReceive,
  PROFILES,
  rawPeer,
  rdmapPair,
  readRequestHex,
  taggedHex,
  untaggedHex,
  until,
  VERSIONS,
} from './helpers.js';

const text = (s: string) => new TextEncoder().encode(s);
const str = (b: Uint8Array) => new TextDecoder().decode(b);
const ctx = (c: unknown) => (c as SendCompletion).request.context;
/** The RDMA OpCode of a segment received as hex (RFC 5040 §4.1: low 4 bits of the second octet). */
const opOf = (hex: string) => Number.parseInt(hex.slice(2, 4), 16) & 0x0f;

for (const profile of PROFILES) {
  const { dv, rv } = VERSIONS[profile];

  describe(`RFC 5040 Appendix B, Figure 17 (${profile})`, () => {
    it('Appendix B row Send → Send: Completed in order at the Remote Peer (§5.5 rule 10)', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 40 } });
      for (let i = 0; i < 5; i++) b.stream.postReceive(new Uint8Array(100), i);
      for (let i = 0; i < 5; i++)
        a.stream.postSend({ op: { type: 'send', payload: [text(`message ${i} `.repeat(i + 1))] } });
      await until(() => b.completions.length === 5, 'five receives');
      const rc = b.completions as ReceiveCompletion[];
      expect(rc.map((c) => c.id)).toEqual([0, 1, 2, 3, 4]);
      expect(rc.map((c) => str(c.buffer.subarray(0, c.byteLength)))).toEqual(
        [0, 1, 2, 3, 4].map((i) => `message ${i} `.repeat(i + 1)),
      );
    });

    it('Appendix B row Send → RDMA Write: no ordering guarantee needed; both arrive, completed locally in order (rule 15)', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.RemoteWrite });
      b.stream.postReceive(new Uint8Array(8), 'rx');
      a.stream.postSend({ op: { type: 'send', payload: [text('send')] }, context: 'send' });
      a.stream.postSend({
        op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [text('wrt!')] },
        context: 'write',
      });
      await until(() => a.completions.length === 2 && b.completions.length === 1, 'completions');
      expect(a.completions.map(ctx)).toEqual(['send', 'write']);
      await until(() => str(sink.buffer) === 'wrt!', 'the Write placed');
    });

    it('Appendix B row Send → RDMA Read: the Read Response is not generated until the Send is placed: the Read sees the Send', async () => {
      const { a, b } = await rdmapPair(profile);
      // The remote receive buffer is part of a region the peer may read (rule 12's note).
      const shared = b.stags.register({
        pdId: 1,
        buffer: new Uint8Array(16),
        access: Access.RemoteRead | Access.LocalWrite,
      });
      b.stream.postReceive(shared.buffer.subarray(0, 8), 'rx');
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.LocalWrite });
      a.stream.postSend({ op: { type: 'send', payload: [text('ordered!')] }, context: 'send' });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 8, srcStag: shared.stag, srcTo: 0n },
        context: 'read',
      });
      await until(() => a.completions.length === 2, 'both completions');
      expect(a.completions.map(ctx)).toEqual(['send', 'read']);
      expect(str(sink.buffer)).toBe('ordered!');
    });

    it('Appendix B row RDMA Write → Send: when the Send is Delivered, the Write before it is placed (§5.5 rule 10 note)', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 32 } });
      const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(256), access: Access.RemoteWrite });
      const data = Uint8Array.from({ length: 256 }, (_, i) => 255 - i);
      const seen: boolean[] = [];
      b.stream.completions$.subscribe((c) => {
        if (isReceive(c)) seen.push(sink.buffer.every((x, i) => x === data[i]));
      });
      b.stream.postReceive(new Uint8Array(4));
      a.stream.postSend({ op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [data] } });
      a.stream.postSend({ op: { type: 'send', payload: [text('done')] } });
      await until(() => seen.length === 1, 'the Send');
      expect(seen).toEqual([true]);
    });

    it('Appendix B row RDMA Write → RDMA Write: both placed, completed locally in submission order (rule 15)', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.RemoteWrite });
      a.stream.postSend({
        op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [text('1111')] },
        context: 1,
      });
      a.stream.postSend({
        op: { type: 'write', sinkStag: sink.stag, sinkTo: 4n, payload: [text('2222')] },
        context: 2,
      });
      await until(() => a.completions.length === 2, 'two completions');
      expect(a.completions.map(ctx)).toEqual([1, 2]);
      await until(() => str(sink.buffer) === '11112222', 'both Writes placed');
    });

    it('Appendix B row RDMA Write → RDMA Read: the Read returns what the Write placed (§5.5 rule 12 note)', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 48 } });
      const remote = b.stags.register({
        pdId: 1,
        buffer: new Uint8Array(300),
        access: Access.RemoteWrite | Access.RemoteRead,
      });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(300), access: Access.LocalWrite });
      const data = Uint8Array.from({ length: 300 }, (_, i) => (i * 13) & 0xff);
      a.stream.postSend({
        op: { type: 'write', sinkStag: remote.stag, sinkTo: 0n, payload: [data] },
        context: 'write',
      });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 300, srcStag: remote.stag, srcTo: 0n },
        context: 'read',
      });
      await until(() => a.completions.length === 2, 'both completions');
      expect(a.completions.map(ctx)).toEqual(['write', 'read']);
      expect(sink.buffer).toEqual(data);
    });

    for (const later of ['send', 'write'] as const) {
      const name = later === 'send' ? 'Send' : 'RDMA Write';
      it(`Appendix B row RDMA Read → ${name}: the ${name} may go before the Read Response is generated; a fence (footnote 2) holds it back`, async () => {
        for (const fence of [false, true]) {
          const peer = await rawPeer(profile);
          const s = peer.rdmap.stream;
          const sink = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.LocalWrite });
          s.postSend({
            op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 4, srcStag: 0x900, srcTo: 0n },
            context: 'read',
          });
          s.postSend({
            op:
              later === 'send'
                ? { type: 'send', payload: [text('later')] }
                : { type: 'write', sinkStag: 0x901, sinkTo: 0n, payload: [text('later')] },
            context: later,
            fence,
          });
          await until(() => peer.received.length >= 1, 'the Read Request');
          await new Promise((r) => setTimeout(r, 10));
          // Without a fence, the later message is on the wire before any Read Response exists.
          expect(peer.received.map(opOf)).toEqual(
            fence ? [Op.RdmaReadRequest] : [Op.RdmaReadRequest, later === 'send' ? Op.Send : Op.RdmaWrite],
          );
          peer.send(taggedHex({ dv, c: ctrl(rv, Op.RdmaReadResponse), stag: sink.stag, to: 0n, payload: '72656164' }));
          await until(() => peer.received.length === 2, 'the later message');
          await until(() => peer.rdmap.completions.length === 2, 'both completions');
          expect(peer.rdmap.completions.map(ctx)).toEqual(['read', later]);
          expect(str(sink.buffer)).toBe('read');
        }
      });
    }

    it('Appendix B row RDMA Read → RDMA Read: the second Read Response is not generated until the first is (§5.5 rule 20)', async () => {
      const peer = await rawPeer(profile, { loopback: { mulpdu: 64 }, ird: 2 });
      const big = peer.rdmap.stags.register({
        pdId: 1,
        buffer: Uint8Array.from({ length: 500 }, (_, i) => i & 0xff),
        access: Access.RemoteRead,
      });
      const small = peer.rdmap.stags.register({ pdId: 1, buffer: text('z'), access: Access.RemoteRead });
      const rq = (msn: number, sinkStag: number, size: number, srcStag: number) =>
        untaggedHex({
          dv,
          c: ctrl(rv, Op.RdmaReadRequest),
          qn: 1,
          msn,
          payload: readRequestHex({ sinkStag, sinkTo: 0n, size, srcStag, srcTo: 0n }),
        });
      peer.send(rq(1, 0xaaa, 500, big.stag));
      peer.send(rq(2, 0xbbb, 1, small.stag));
      // 500 octets in segments of 64 - 14 = 50: ten segments, then the second Response.
      await until(() => peer.received.length === 11, 'eleven Read Response segments');
      const stags = peer.received.map((h) => Number.parseInt(h.slice(4, 12), 16));
      expect(stags).toEqual([...Array(10).fill(0xaaa), 0xbbb]);
      expect(peer.received.map((h) => (Number.parseInt(h.slice(0, 2), 16) & 0x40) !== 0)).toEqual([
        ...Array(9).fill(false),
        true,
        true,
      ]);
    });

    it('RFC 5040 §5.5 rules 15 and 19: a Read completes on Delivery of its Response; later work completes after it', async () => {
      const peer = await rawPeer(profile);
      const s = peer.rdmap.stream;
      const sink = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(2), access: Access.LocalWrite });
      s.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 2, srcStag: 0x77, srcTo: 0n },
        context: 'read',
      });
      s.postSend({ op: { type: 'send', payload: [text('s')] }, context: 'send' });
      await until(() => peer.received.length === 2, 'both messages on the wire');
      await new Promise((r) => setTimeout(r, 10));
      // The Send is done at DDP, but it is not reported ahead of the Read (rule 15); the Read waits (rule 19).
      expect(peer.rdmap.completions).toEqual([]);
      peer.send(taggedHex({ dv, c: ctrl(rv, Op.RdmaReadResponse), stag: sink.stag, to: 0n, payload: 'abcd' }));
      await until(() => peer.rdmap.completions.length === 2, 'both completions');
      expect(peer.rdmap.completions.map(ctx)).toEqual(['read', 'send']);
    });

    it('RFC 5040 §5.5 rule 12, §5.2.1: Read Requests start processing only once Delivered (a segmented Request)', async () => {
      const peer = await rawPeer(profile);
      const src = peer.rdmap.stags.register({ pdId: 1, buffer: text('ABCD'), access: Access.RemoteRead });
      const header = readRequestHex({ sinkStag: 0x31, sinkTo: 0n, size: 4, srcStag: src.stag, srcTo: 0n });
      // The 28-octet Read Request Header in two DDP segments (RFC 5041 §5.2): nothing happens after the first.
      peer.send(
        untaggedHex({
          dv,
          c: ctrl(rv, Op.RdmaReadRequest),
          qn: 1,
          msn: 1,
          mo: 0,
          last: false,
          payload: header.slice(0, 20),
        }),
      );
      await new Promise((r) => setTimeout(r, 10));
      expect(peer.received).toEqual([]);
      peer.send(untaggedHex({ dv, c: ctrl(rv, Op.RdmaReadRequest), qn: 1, msn: 1, mo: 10, payload: header.slice(20) }));
      await until(() => peer.received.length === 1, 'the Read Response');
      expect(peer.received[0]).toBe(
        taggedHex({ dv, c: ctrl(rv, Op.RdmaReadResponse), stag: 0x31, to: 0n, payload: '41424344' }),
      );
    });
  });
}
