/** RFC 5040 §5 data transfer, end to end over the loopback LLP, for both profiles. */
import { Access } from '@rddp/ddp';
import { OrdExceededError, RdmapOpcode, type ReceiveCompletion, type SendCompletion } from '@rddp/rdmap';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  ALL_ACCESS,
  ctrl,
  h32,
  isReceive,
  isSend,
  nextCompletion,
  PROFILES,
  rawPeer,
  rdmapPair,
  readRequestHex,
  untaggedHex,
  until,
  VERSIONS,
} from './helpers.js';

const text = (s: string) => new TextEncoder().encode(s);
const str = (b: Uint8Array) => new TextDecoder().decode(b);

for (const profile of PROFILES) {
  const { dv, rv } = VERSIONS[profile];

  describe(`RFC 5040 §5.1 RDMA Write (${profile})`, () => {
    it('RFC 5040 §5.1: the Write is placed into the Data Sink STag at its TO, completes locally, and is not Delivered to the remote ULP', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = b.stags.register({
        pdId: 1,
        buffer: new Uint8Array(32),
        access: Access.RemoteWrite,
        baseTo: 0x1000n,
      });
      const done = nextCompletion<SendCompletion>(a.stream);
      a.stream.postSend({
        op: { type: 'write', sinkStag: sink.stag, sinkTo: 0x1004n, payload: [text('hel'), text('lo')] },
      });
      const c = await done;
      expect(c).toMatchObject({ kind: 'send', status: 'success', byteLength: 5 });
      await until(() => str(sink.buffer.subarray(4, 9)) === 'hello', 'placement');
      expect(b.completions).toEqual([]); // §5.1: a valid RDMA Write MUST NOT be delivered to the Data Sink's ULP
    });

    it('RFC 5040 §5.1: a zero-length RDMA Write completes; a Write larger than MULPDU is segmented (RFC 5041 §5.2)', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 64 } });
      const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(1000), access: Access.RemoteWrite });
      const big = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff);
      a.stream.postSend({ op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [] } });
      a.stream.postSend({ op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [big] } });
      await until(() => a.completions.length === 2, 'two completions');
      expect(a.completions.map((c) => [c.status, c.byteLength])).toEqual([
        ['success', 0],
        ['success', 1000],
      ]);
      expect(sink.buffer).toEqual(big);
    });
  });

  describe(`RFC 5040 §5.2 RDMA Read (${profile})`, () => {
    it('RFC 5040 §5.2.1/§5.2.2: the Read Request goes on QN 1, the Response lands in the local Data Sink, the Read completes on Delivery', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 100 } });
      const src = b.stags.register({
        pdId: 1,
        buffer: Uint8Array.from({ length: 500 }, (_, i) => i & 0xff),
        access: Access.RemoteRead,
        baseTo: 7000n,
      });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(600), access: Access.LocalWrite });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 50n, size: 400, srcStag: src.stag, srcTo: 7100n },
      });
      const c = await nextCompletion<SendCompletion>(a.stream);
      expect(c).toMatchObject({ status: 'success', byteLength: 400 });
      expect(sink.buffer.subarray(50, 450)).toEqual(src.buffer.subarray(100, 500));
      expect(a.stream.readsInFlight).toBe(0);
      expect(b.completions).toEqual([]); // §5.2.1: a valid Read Request is not delivered to the ULP
    });

    it('RFC 5040 §5.2.1: a zero-length Read is not validated at the Data Source and gets a zero-length Response', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.LocalWrite });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 0, srcStag: 0xdeadbe00, srcTo: 99n },
      });
      expect(await nextCompletion(a.stream)).toMatchObject({ status: 'success', byteLength: 0 });
      expect(b.stream.state).toBe('rts');
    });

    it('RFC 5040 §6.1: ORD bounds the Reads in flight; further Reads wait (queue policy) and all complete in order', async () => {
      const { a, b } = await rdmapPair(profile, { a: { ord: 1 } });
      const src = b.stags.register({ pdId: 1, buffer: text('abcdefgh'), access: Access.RemoteRead });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.LocalWrite });
      const maxInFlight: number[] = [];
      for (let i = 0; i < 4; i++) {
        a.stream.postSend({
          op: {
            type: 'read',
            sinkStag: sink.stag,
            sinkTo: BigInt(i * 2),
            size: 2,
            srcStag: src.stag,
            srcTo: BigInt(i * 2),
          },
          context: i,
        });
        maxInFlight.push(a.stream.readsInFlight);
      }
      await until(() => a.completions.length === 4, 'four reads');
      expect(Math.max(...maxInFlight)).toBe(1);
      expect(a.completions.map((c) => (c as SendCompletion).request.context)).toEqual([0, 1, 2, 3]);
      expect(str(sink.buffer)).toBe('abcdefgh');
    });

    it('RFC 5040 §6.1: with the error policy a Read beyond ORD is refused with OrdExceededError; ORD 0 refuses every Read', async () => {
      const { a } = await rdmapPair(profile, { a: { ord: 1, ordPolicy: 'error' } });
      const read = { type: 'read', sinkStag: 1, sinkTo: 0n, size: 1, srcStag: 2, srcTo: 0n } as const;
      a.stream.postSend({ op: read });
      expect(() => a.stream.postSend({ op: read })).toThrow(OrdExceededError);
      const { a: z } = await rdmapPair(profile, { a: { ord: 0 } });
      expect(() => z.stream.postSend({ op: read })).toThrowError(
        expect.objectContaining({ code: 'ERR_RDMAP_ORD_EXCEEDED' }),
      );
    });

    it('RFC 5040 §5.2.2/§5.5 rule 20: the Data Source answers Read Requests in the order they arrived', async () => {
      const peer = await rawPeer(profile, { ird: 4 });
      const src = peer.rdmap.stags.register({ pdId: 1, buffer: text('0123456789'), access: Access.RemoteRead });
      for (let i = 0; i < 3; i++)
        peer.send(
          untaggedHex({
            dv,
            c: ctrl(rv, RdmapOpcode.RdmaReadRequest),
            qn: 1,
            msn: i + 1,
            payload: readRequestHex({
              sinkStag: 0x100 + i,
              sinkTo: 0n,
              size: 3,
              srcStag: src.stag,
              srcTo: BigInt(i * 3),
            }),
          }),
        );
      await until(() => peer.received.length === 3, 'three Read Responses');
      // Read Responses (Figure 13): tagged, L=1, Read Response OpCode, the Data Sink STag and TO copied.
      const hx = (s: string) => Buffer.from(s).toString('hex');
      expect(peer.received).toEqual([
        `${(0xc0 | dv).toString(16)}${ctrl(rv, 2).toString(16).padStart(2, '0')}${h32(0x100)}0000000000000000${hx('012')}`,
        `${(0xc0 | dv).toString(16)}${ctrl(rv, 2).toString(16).padStart(2, '0')}${h32(0x101)}0000000000000000${hx('345')}`,
        `${(0xc0 | dv).toString(16)}${ctrl(rv, 2).toString(16).padStart(2, '0')}${h32(0x102)}0000000000000000${hx('678')}`,
      ]);
    });
  });

  describe(`RFC 5040 §5.3 Send Message Type (${profile})`, () => {
    it('RFC 5040 §5.3: Send, Send with SE, Send with Invalidate and Send with SE and Invalidate each consume one buffer, in order', async () => {
      const { a, b } = await rdmapPair(profile);
      const regions = [0, 1].map(() => b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: ALL_ACCESS }));
      const [r1, r2] = regions as [(typeof regions)[0], (typeof regions)[0]];
      const bufs = [0, 1, 2, 3, 4].map(() => new Uint8Array(16));
      for (const [i, buf] of bufs.entries()) b.stream.postReceive(buf, `rq${i}`);
      a.stream.postSend({ op: { type: 'send', payload: [text('plain')] } });
      a.stream.postSend({ op: { type: 'send', payload: [text('se')], solicited: true } });
      a.stream.postSend({ op: { type: 'send', payload: [text('inv')], invalidateStag: r1.stag } });
      a.stream.postSend({ op: { type: 'send', payload: [text('se+inv')], solicited: true, invalidateStag: r2.stag } });
      a.stream.postSend({ op: { type: 'send', payload: [] } }); // §5.3: a zero-length Send consumes a buffer
      await until(() => b.completions.length === 5, 'five receives');
      const rc = b.completions as ReceiveCompletion[];
      expect(rc.map((c) => [c.id, c.status, c.byteLength, c.solicited, c.invalidatedStag])).toEqual([
        ['rq0', 'success', 5, false, undefined],
        ['rq1', 'success', 2, true, undefined],
        ['rq2', 'success', 3, false, r1.stag],
        ['rq3', 'success', 6, true, r2.stag],
        ['rq4', 'success', 0, false, undefined],
      ]);
      expect(str(bufs[3]!.subarray(0, 6))).toBe('se+inv');
      // §5.3: the named STags are invalidated at the Data Sink.
      expect([r1.valid, r2.valid]).toEqual([false, false]);
      await until(() => a.completions.length === 5, 'five send completions');
      expect(a.completions.every((c) => isSend(c) && c.status === 'success')).toBe(true);
    });

    it('RFC 5040 §5.3: a segmented Send with Invalidate invalidates its STag once, on Delivery; the ULP may refuse remote invalidation', async () => {
      const { a, b } = await rdmapPair(profile, {
        loopback: { mulpdu: 24 },
        b: { canRemoteInvalidate: (r) => r.length !== 13 },
      });
      const target = b.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.RemoteWrite });
      const guarded = b.stags.register({ pdId: 1, buffer: new Uint8Array(13), access: Access.RemoteWrite });
      const buf = new Uint8Array(64);
      b.stream.postReceive(buf, 'rx');
      b.stream.postReceive(new Uint8Array(64), 'rx2');
      a.stream.postSend({ op: { type: 'send', payload: [text('x'.repeat(40))], invalidateStag: target.stag } });
      const c = await nextCompletion<ReceiveCompletion>(b.stream, isReceive);
      expect(c).toMatchObject({ id: 'rx', status: 'success', byteLength: 40, invalidatedStag: target.stag });
      expect(target.valid).toBe(false);
      a.stream.postSend({ op: { type: 'send', payload: [text('y')], invalidateStag: guarded.stag } });
      const t = await firstValueFrom(b.stream.terminate$);
      expect(t.description).toBe('RDMA: Remote Protection Error: STag cannot be Invalidated');
      expect(guarded.valid).toBe(true);
    });

    it('RFC 5040 §4.1/§5.3: each Send type travels on QN 0 with its OpCode; only the Invalidate types carry the STag', async () => {
      const peer = await rawPeer(profile);
      const sent = peer.received;
      const s = peer.rdmap.stream;
      s.postSend({ op: { type: 'send', payload: [text('a')] } });
      s.postSend({ op: { type: 'send', payload: [text('b')], solicited: true } });
      s.postSend({ op: { type: 'send', payload: [text('c')], invalidateStag: 0x12345678 } });
      s.postSend({ op: { type: 'send', payload: [text('d')], solicited: true, invalidateStag: 0x9abcdef0 } });
      await until(() => sent.length === 4, 'four Sends');
      expect(sent).toEqual([
        untaggedHex({ dv, c: ctrl(rv, RdmapOpcode.Send), qn: 0, msn: 1, payload: '61' }),
        untaggedHex({ dv, c: ctrl(rv, RdmapOpcode.SendWithSolicitedEvent), qn: 0, msn: 2, payload: '62' }),
        untaggedHex({ dv, c: ctrl(rv, RdmapOpcode.SendWithInvalidate), qn: 0, msn: 3, inv: 0x12345678, payload: '63' }),
        untaggedHex({
          dv,
          c: ctrl(rv, RdmapOpcode.SendWithSolicitedEventAndInvalidate),
          qn: 0,
          msn: 4,
          inv: 0x9abcdef0,
          payload: '64',
        }),
      ]);
    });

    it('RFC 5040 §4.4/Appendix A.2: the Read Request goes out on QN 1 with the Figure 6 header', async () => {
      const peer = await rawPeer(profile);
      peer.rdmap.stream.postSend({
        op: { type: 'read', sinkStag: 0x11223344, sinkTo: 0x55n, size: 0x1000, srcStag: 0xaabbccdd, srcTo: 0x66n },
      });
      await until(() => peer.received.length === 1, 'the Read Request');
      expect(peer.received[0]).toBe(
        untaggedHex({
          dv,
          c: ctrl(rv, RdmapOpcode.RdmaReadRequest),
          qn: 1,
          msn: 1,
          payload: readRequestHex({
            sinkStag: 0x11223344,
            sinkTo: 0x55n,
            size: 0x1000,
            srcStag: 0xaabbccdd,
            srcTo: 0x66n,
          }),
        }),
      );
    });

    it('RFC 5040 §5.3: the RDMAP layer tells the ULP how much of the buffer the Send filled', async () => {
      const { a, b } = await rdmapPair(profile);
      const buf = new Uint8Array(100);
      b.stream.postReceive(buf, 'only');
      a.stream.postSend({ op: { type: 'send', payload: [text('tiny')] } });
      const c = await nextCompletion<ReceiveCompletion>(b.stream, isReceive);
      expect(c).toMatchObject({ id: 'only', byteLength: 4, buffer: buf });
    });
  });
}
