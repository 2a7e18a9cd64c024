/**
 * RFC 5040 §5.4 (Terminate received), §6 stream management and §7.1 error surfacing on both sides, end
 * to end over the loopback LLP, for both profiles.
 */
import { Access } from '@rddp/ddp';
import { RdmapOpcode as Op, type RdmapTerminateEvent, type ReceiveCompletion, type SendCompletion } from '@rddp/rdmap';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  closed,
  ctrl,
  hexOf,
  isSend,
  nextCompletion,
  observe,
  PROFILES,
  rawPeer,
  rdmapPair,
  taggedHex,
  terminateHex,
  untaggedHex,
  until,
  VERSIONS,
} from './helpers.js';

const text = (s: string) => new TextEncoder().encode(s);

for (const profile of PROFILES) {
  const { dv, rv } = VERSIONS[profile];

  describe(`RFC 5040 §5.4 Terminate Message received (${profile})`, () => {
    it('RFC 5040 §5.4: a Terminate is Delivered to the ULP, outstanding work Completed in error, the LLP closed', async () => {
      const peer = await rawPeer(profile);
      const s = peer.rdmap.stream;
      s.postReceive(new Uint8Array(8), 'r0');
      s.postSend({ op: { type: 'read', sinkStag: 1, sinkTo: 0n, size: 4, srcStag: 2, srcTo: 0n }, context: 'read' });
      s.postSend({ op: { type: 'send', payload: [text('x')] }, context: 'send' });
      const terminate = firstValueFrom(s.terminate$);
      await until(() => peer.received.length === 2, 'the Read Request and the Send');
      peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Terminate), qn: 2, msn: 1, payload: '0206000000' }));
      const t = await terminate;
      expect(t).toMatchObject({
        direction: 'received',
        header: { layer: 0, errorType: 2, errorCode: 6, m: false, d: false, r: false },
        description: 'RDMA: Remote Operation Error: Unexpected OpCode',
        error: { code: 'ERR_RDMAP_TERMINATED', direction: 'received' },
      });
      expect(hexOf(t.bytes)).toBe('0206000000');
      const end = await closed(s);
      expect(end).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_TERMINATED' } });
      // The Read (waiting for its Response) and the Send behind it (sent, not yet reported) are Completed in error.
      expect(peer.rdmap.completions.map((c) => [c.kind, c.status])).toEqual([
        ['send', 'flushed'],
        ['send', 'flushed'],
        ['receive', 'flushed'],
      ]);
      expect(peer.received).toHaveLength(2); // §5.4: no Terminate back
    });

    it('RFC 5040 Figure 9, RFC 5041 §7.2: a received Terminate is named as the figures say, a code only under its Error Types', async () => {
      const cases: [string, string][] = [
        ['1101', 'DDP: Tagged Buffer Error: Base or bounds violation'],
        ['1205', 'DDP: Untagged Buffer Error: DDP Message too long for available buffer'],
        ['0109', 'RDMA: Remote Protection Error: STag cannot be Invalidated'],
        ['0209', 'RDMA: Remote Operation Error: STag cannot be Invalidated'],
        ['02ff', 'RDMA: Remote Operation Error: Unspecified Error'],
        // Figure 9 defines 0x05 (Invalid RDMAP version) under Remote Operation only, 0x02 under Remote Protection only.
        ['0105', 'RDMA: Remote Protection Error: 0x05'],
        ['0202', 'RDMA: Remote Operation Error: 0x02'],
      ];
      for (const [control, description] of cases) {
        const peer = await rawPeer(profile);
        const t = firstValueFrom(peer.rdmap.stream.terminate$);
        peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Terminate), qn: 2, msn: 1, payload: `${control}000000` }));
        expect(await t).toMatchObject({ direction: 'received', description });
        await closed(peer.rdmap.stream);
      }
    });

    it('RFC 5040 §4.8: a Terminate naming our Read Request completes that Read with a remote access error', async () => {
      const peer = await rawPeer(profile);
      const s = peer.rdmap.stream;
      s.postSend({ op: { type: 'read', sinkStag: 1, sinkTo: 0n, size: 4, srcStag: 2, srcTo: 0n }, context: 'r1' });
      s.postSend({ op: { type: 'read', sinkStag: 1, sinkTo: 0n, size: 4, srcStag: 3, srcTo: 0n }, context: 'r2' });
      await until(() => peer.received.length === 2, 'two Read Requests');
      const [first, second] = peer.received as [string, string];
      // The peer found the second Request's Data Source invalid (Remote Protection, Invalid STag, with headers).
      const term = `0100e000002e${second}`;
      expect(first).not.toBe(second);
      peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Terminate), qn: 2, msn: 1, payload: term }));
      await closed(s);
      expect(peer.rdmap.completions.map((c) => [(c as SendCompletion).request.context, c.status])).toEqual([
        ['r1', 'flushed'],
        ['r2', 'remote-access-error'],
      ]);
    });

    it('RFC 5040 §5.4, §7.1: a Terminate that cannot be decoded is surfaced as an error; none is sent back', async () => {
      const peer = await rawPeer(profile);
      const t = firstValueFrom(peer.rdmap.stream.terminate$);
      peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Terminate), qn: 2, msn: 1, payload: '1100c0' }));
      expect(await t).toMatchObject({
        direction: 'received',
        header: undefined,
        error: { code: 'ERR_RDMAP_INVALID_TERMINATE' },
      });
      expect(await closed(peer.rdmap.stream)).toMatchObject({ state: 'error' });
      expect(peer.received).toEqual([]);
    });

    it('RFC 5040 §5.4, §7.2: a Terminate of the wrong RDMAP Version is surfaced as an invalid Terminate; none is sent back', async () => {
      const peer = await rawPeer(profile);
      const t = firstValueFrom(peer.rdmap.stream.terminate$);
      peer.send(untaggedHex({ dv, c: ctrl(rv ^ 1, Op.Terminate), qn: 2, msn: 1, payload: '00000000' }));
      expect(await t).toMatchObject({ direction: 'received', error: { code: 'ERR_RDMAP_INVALID_TERMINATE' } });
      await closed(peer.rdmap.stream);
      expect(peer.received).toEqual([]);
    });
  });

  describe(`RFC 5040 §7.1 error surfacing on both sides (${profile})`, () => {
    it('RFC 5040 §7.1: both ULPs learn of an invalid RDMA Write: one sent the Terminate, the other received it', async () => {
      const { a, b } = await rdmapPair(profile);
      const sentT = observe(b.stream.terminate$);
      const gotT = firstValueFrom(a.stream.terminate$);
      a.stream.postSend({ op: { type: 'write', sinkStag: 0x00dead01, sinkTo: 0n, payload: [text('data')] } });
      const t: RdmapTerminateEvent = await gotT;
      expect(t.direction).toBe('received');
      expect(t.header).toMatchObject({
        layer: 1,
        errorType: 1,
        errorCode: 0,
        m: true,
        d: true,
        r: false,
        ddpSegmentLength: 18,
      });
      expect(hexOf(t.header!.ddpHeader!)).toBe(taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: 0x00dead01, to: 0n }));
      await Promise.all([closed(a.stream), closed(b.stream)]);
      expect(sentT.map((e) => [e.direction, e.description])).toEqual([
        ['sent', 'DDP: Tagged Buffer Error: Invalid STag'],
      ]);
      expect(hexOf(sentT[0]!.bytes)).toBe(hexOf(t.bytes));
      expect([a.stream.state, b.stream.state]).toEqual(['error', 'error']);
    });

    it('RFC 5040 §7.1 case 3: a Read of an invalid Data Source fails the Read on the requester with a remote access error', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.LocalWrite });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 8, srcStag: 0x00bad001, srcTo: 0n },
      });
      const c = await nextCompletion<SendCompletion>(a.stream, isSend);
      expect(c).toMatchObject({
        status: 'remote-access-error',
        byteLength: 0,
        error: { code: 'ERR_RDMAP_TERMINATED' },
      });
      const t = await firstValueFrom(a.stream.terminate$);
      expect(t.header).toMatchObject({ layer: 0, errorType: 1, errorCode: 0, m: true, d: true, r: true });
      await closed(b.stream);
    });

    it('RFC 5040 §5.2.2, §6.1: a requester whose ORD exceeds the responder IRD gets its extra Read refused: DDP no buffer', async () => {
      const { a, b } = await rdmapPair(profile, { a: { ord: 2 }, b: { ird: 1 } });
      const src = b.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.RemoteRead });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(16), access: Access.LocalWrite });
      for (const to of [0n, 8n])
        a.stream.postSend({
          op: { type: 'read', sinkStag: sink.stag, sinkTo: to, size: 8, srcStag: src.stag, srcTo: 0n },
          context: to,
        });
      const [sent, got] = await Promise.all([firstValueFrom(b.stream.terminate$), firstValueFrom(a.stream.terminate$)]);
      expect(sent.description).toBe('DDP: Untagged Buffer Error: Invalid MSN - no buffer available');
      expect(got.header).toMatchObject({ layer: 1, errorType: 2, errorCode: 2, m: true, d: true, r: false });
      await closed(a.stream);
      // The first Read was answered before the Terminate; the second (QN 1, MSN 2) is the one it names (§4.8).
      expect(a.completions.map((c) => [(c as SendCompletion).request.context, c.status])).toEqual([
        [0n, 'success'],
        [8n, 'remote-operation-error'],
      ]);
    });

    it('RFC 5040 §7.1 case 1: a local buffer invalidated before its message is built: Terminate without headers instead of the request', async () => {
      const peer = await rawPeer(profile);
      const s = peer.rdmap.stream;
      const local = peer.rdmap.stags.register({ pdId: 1, buffer: text('payload'), access: Access.LocalRead });
      const sink = peer.rdmap.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.LocalWrite });
      // A Read holds the fenced Send back; the Send's buffer is invalidated meanwhile.
      s.postSend({ op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 4, srcStag: 2, srcTo: 0n } });
      s.postSend({
        op: { type: 'send', payload: [local.buffer] },
        fence: true,
        localStags: [local.stag],
        context: 'send',
      });
      await until(() => peer.received.length === 1, 'the Read Request');
      peer.rdmap.stags.invalidate(local.stag);
      peer.send(taggedHex({ dv, c: ctrl(rv, Op.RdmaReadResponse), stag: sink.stag, to: 0n, payload: '00000000' }));
      await closed(s);
      expect(peer.received).toHaveLength(2);
      expect(peer.received[1]).toBe(terminateHex({ dv, rv, layer: 0, etype: 0, code: 0 }));
      expect(peer.rdmap.completions.map((c) => [c.kind, c.status])).toEqual([
        ['send', 'success'],
        ['send', 'local-protection-error'],
      ]);
      expect(s.error).toMatchObject({ code: 'ERR_RDMAP_LOCAL_PROTECTION' });
    });
  });

  describe(`RFC 5040 §6 stream management (${profile})`, () => {
    it('RFC 5040 §6.1: with initiatorSendsFirst the responder holds its messages until the initiator has sent', async () => {
      const peer = await rawPeer(profile, { initiatorSendsFirst: true, role: 'responder' });
      const s = peer.rdmap.stream;
      s.postReceive(new Uint8Array(8));
      s.postSend({ op: { type: 'send', payload: [text('hi')] } });
      expect(s.held).toBe(true);
      await new Promise((r) => setTimeout(r, 20));
      expect(peer.received).toEqual([]);
      peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1, payload: '00' }));
      await until(() => peer.received.length === 1, 'the held Send');
      expect(s.held).toBe(false);
      expect(peer.received[0]).toBe(untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1, payload: '6869' }));
    });

    it('RFC 5040 §6.1: the initiator is never held', async () => {
      const { a } = await rdmapPair(profile, { a: { initiatorSendsFirst: true } });
      expect(a.stream.held).toBe(false);
    });

    it('RFC 5040 §6.2: graceful teardown: posted work completes first, then the LLP closes; the peer flushes its receives', async () => {
      const { a, b } = await rdmapPair(profile);
      const sink = b.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.RemoteWrite });
      b.stream.postReceive(new Uint8Array(8), 'used');
      b.stream.postReceive(new Uint8Array(8), 'spare');
      a.stream.postSend({ op: { type: 'write', sinkStag: sink.stag, sinkTo: 0n, payload: [text('abcd')] } });
      a.stream.postSend({ op: { type: 'send', payload: [text('bye')] } });
      const states = observe(a.stream.state$);
      await a.stream.close();
      await closed(b.stream);
      expect(states).toEqual(['rts', 'closing', 'closed']);
      expect(a.completions.map((c) => c.status)).toEqual(['success', 'success']);
      expect((b.completions as ReceiveCompletion[]).map((c) => [c.id, c.status])).toEqual([
        ['used', 'success'],
        ['spare', 'flushed'],
      ]);
      expect(new TextDecoder().decode(sink.buffer)).toBe('abcd');
      expect(b.stream.state).toBe('closed');
      await expect(b.stream.close()).resolves.toBeUndefined();
      expect(() => a.stream.postSend({ op: { type: 'send', payload: [] } })).toThrowError(
        expect.objectContaining({ code: 'ERR_RDMAP_STATE' }),
      );
    });

    it('RFC 5040 §6.2: a graceful close waits for the owed Read Responses of the peer', async () => {
      const { a, b } = await rdmapPair(profile, { loopback: { mulpdu: 64 } });
      const src = b.stags.register({ pdId: 1, buffer: new Uint8Array(4096).fill(7), access: Access.RemoteRead });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(4096), access: Access.LocalWrite });
      a.stream.postSend({
        op: { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 4096, srcStag: src.stag, srcTo: 0n },
      });
      await until(() => b.stream.state === 'rts' && a.stream.readsInFlight === 1, 'the Read in flight');
      await new Promise((r) => setImmediate(r));
      const closing = b.stream.close();
      const c = await nextCompletion<SendCompletion>(a.stream);
      expect(c.status).toBe('success');
      await closing;
      expect(sink.buffer.every((x) => x === 7)).toBe(true);
    });

    it('RFC 5040 §6.2: LLP Abortive Termination: no Terminate, both streams end in error, outstanding work flushed', async () => {
      const { a, b } = await rdmapPair(profile);
      a.stream.postSend({ op: { type: 'read', sinkStag: 1, sinkTo: 0n, size: 4, srcStag: 2, srcTo: 0n } });
      b.stream.postReceive(new Uint8Array(4), 'rx');
      const ta = observe(a.stream.terminate$);
      a.stream.abort();
      const [ea, eb] = await Promise.all([closed(a.stream), closed(b.stream)]);
      expect(ea).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_LLP_FAILED' } });
      expect(eb).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_LLP_FAILED' } });
      expect(ta).toEqual([]);
      expect(a.completions.map((c) => c.status)).toEqual(['flushed']);
      expect(b.completions.map((c) => c.status)).toEqual(['flushed']);
      await expect(a.stream.close()).rejects.toMatchObject({ code: 'ERR_RDMAP_LLP_FAILED' });
    });

    it('RFC 5040 §6.2.1: RDMAP Abortive Termination by the ULP sends a Local Catastrophic Terminate and closes the LLP gracefully', async () => {
      const peer = await rawPeer(profile);
      const s = peer.rdmap.stream;
      s.postReceive(new Uint8Array(4), 'rx');
      const states = observe(s.state$);
      s.terminate();
      s.terminate(); // at most one Terminate per stream (§5.4)
      const end = await closed(s);
      expect(peer.received).toEqual([terminateHex({ dv, rv, layer: 0, etype: 0, code: 0 })]);
      expect(end).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_TERMINATED', direction: 'sent' } });
      expect(states).toEqual(['rts', 'terminate', 'error']);
      expect(peer.raw.state).toBe('closed');
      expect(peer.rdmap.completions.map((c) => c.status)).toEqual(['flushed']);
    });

    it('RFC 5040 §6.2.1: the peer of an abortive termination sees the Terminate and its own work Completed in error', async () => {
      const { a, b } = await rdmapPair(profile);
      b.stream.postReceive(new Uint8Array(4), 'waiting');
      const t = firstValueFrom(b.stream.terminate$);
      a.stream.terminate();
      expect(await t).toMatchObject({ direction: 'received', description: 'RDMA: Local Catastrophic Error' });
      await Promise.all([closed(a.stream), closed(b.stream)]);
      expect(b.completions.map((c) => [(c as ReceiveCompletion).id, c.status])).toEqual([['waiting', 'flushed']]);
      expect([a.stream.state, b.stream.state]).toEqual(['error', 'error']);
    });

    it('RFC 5040 §5.5, §6: a withdrawn request (AbortSignal) completes as aborted, in order', async () => {
      const { a, b } = await rdmapPair(profile, { a: { ord: 1 } });
      const src = b.stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.RemoteRead });
      const sink = a.stags.register({ pdId: 1, buffer: new Uint8Array(8), access: Access.LocalWrite });
      const read = (to: bigint) =>
        ({ type: 'read', sinkStag: sink.stag, sinkTo: to, size: 4, srcStag: src.stag, srcTo: 0n }) as const;
      const ac = new AbortController();
      a.stream.postSend({ op: read(0n), context: 1 });
      a.stream.postSend({ op: read(4n), context: 2, signal: ac.signal }); // waits behind ORD 1
      ac.abort();
      await until(() => a.completions.length === 2, 'two completions');
      expect(a.completions.map((c) => [(c as SendCompletion).request.context, c.status])).toEqual([
        [1, 'success'],
        [2, 'aborted'],
      ]);
    });
  });
}
