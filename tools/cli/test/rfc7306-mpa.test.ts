/**
 * RFC 7306 over MPA/TCP end to end: every extension message type between two real sockets; with tshark,
 * the atomics as Wireshark decodes them.
 */
import type { LlpConnection } from '@rddp/llp';
import type { RdmapExtensions } from '@rddp/rdmap';
import { Access } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  type Capture,
  RES_NOT_ZERO,
  REV_NOT_ONE,
  startCapture,
  summarize,
  tsharkAvailable,
  unexpected,
} from '../../../packages/llp-mpa-tcp/test/wire.js';
import { type ToolTransport, toolTransport } from '../src/index.js';

async function pair(capture = false): Promise<[LlpConnection, LlpConnection, Capture | undefined, ToolTransport]> {
  const tt = toolTransport({ transport: 'tcp', mpaRev: '2', crc: true });
  const l = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  const cap = capture ? await startCapture(l.address.port as number) : undefined;
  const accepted = firstValueFrom(l.connections$);
  const c = await tt.transport.connect(l.address, { params: tt.connectParams });
  const s = await accepted;
  await l.close();
  return [c, s, cap, tt];
}

/** A queue pair on `connection` (a device of its own) through the tool transport's stack, with `extensions` enabled. */
function queuePair(tt: ToolTransport, connection: LlpConnection, extensions?: RdmapExtensions) {
  const pd = tt.stack.device().allocPd();
  return { pd, qp: tt.stack.queuePair(pd, connection, {}, extensions ? { extensions } : {}) };
}

describe('RFC 7306 over MPA/TCP (rev 2, CRC)', () => {
  it('Atomic Fetch-and-Add, Swap (sent as CmpSwap), Compare-and-Swap (hit and miss); RDMA Write with Immediate Data, with and without SE', async () => {
    const [c, s, cap, tt] = await pair(tsharkAvailable());
    try {
      const ext = { atomics: true, immediate: true };
      const client = queuePair(tt, c, ext);
      const server = queuePair(tt, s, ext);
      const word = new Uint8Array(16);
      const w = server.pd.registerMr(word, Access.LocalWrite | Access.RemoteAtomic | Access.RemoteWrite);
      const result = client.pd.registerMr(new Uint8Array(8), Access.LocalWrite).sge();
      const target = w.remote(8);
      expect((await client.qp.fetchAdd(result, target, 40n)).atomicResult).toBe(0n);
      expect((await client.qp.fetchAdd(result, target, 2n)).atomicResult).toBe(40n);
      expect((await client.qp.swap(result, target, 7n)).atomicResult).toBe(42n);
      expect((await client.qp.cmpSwap(result, target, 6n, 9n)).atomicResult).toBe(7n); // miss
      expect((await client.qp.cmpSwap(result, target, 7n, 9n)).atomicResult).toBe(7n); // hit
      expect(Buffer.from(word.subarray(8)).readBigUInt64BE()).toBe(9n);
      expect(word.subarray(0, 8).every((x) => x === 0)).toBe(true);

      const rx = server.pd.registerMr(new Uint8Array(32), Access.LocalWrite);
      const r1 = server.qp.recv(rx.sge(0, 16));
      const r2 = server.qp.recv(rx.sge(16, 16));
      const one = client.pd.registerMr(new Uint8Array([0xee]), 0).sge();
      await client.qp.writeWithImm(one, w.remote(0), 0x0102_0304_0506_0708n);
      await client.qp.writeWithImm(one, w.remote(1), 0xffff_ffff_ffff_fffen, { solicited: true });
      const [wc1, wc2] = await Promise.all([r1, r2]);
      expect([wc1.immData, wc1.solicited, wc1.byteLen]).toEqual([0x0102_0304_0506_0708n, false, 0]);
      expect([wc2.immData, wc2.solicited, wc2.byteLen]).toEqual([0xffff_ffff_ffff_fffen, true, 0]);
      expect([word[0], word[1]]).toEqual([0xee, 0xee]);
      await client.qp.close();
      if (cap !== undefined) {
        const wire = await summarize(await cap.stop());
        if (process.env.RDDP_WIRE_DUMP) console.log(wire.text);
        expect(wire.malformed).toBe(0);
        expect(unexpected(wire.expert, [REV_NOT_ONE, RES_NOT_ZERO])).toEqual([]);
        expect(wire.goodCrc).toBe(wire.fpduLengths.length);
        // rddp dissect (checked against tshark by summarize): 5 Atomic Requests and Responses, 2 Immediate
        // Data messages, each an RFC 7306 note; nothing to reject.
        expect(wire.dissect.rejects).toEqual([]);
        expect(wire.dissect.codes.filter((c) => c === 'rdmap-rfc7306')).toHaveLength(12);
        expect((wire.text.match(/OpCode: Atomic Response \(0xb\)/gi) ?? []).length).toBe(5);
        // RFC 7306 IANA subcodes: 0001b is Reserved, so the Swap went out as CmpSwap (with Compare Mask 0).
        expect([...wire.text.matchAll(/= OpCode: (\w+) \((\d+)\)$/gm)].map((m) => `${m[1]} ${m[2]}`)).toEqual([
          'FetchAdd 0',
          'FetchAdd 0',
          'CmpSwap 2',
          'CmpSwap 2',
          'CmpSwap 2',
        ]);
        expect([...wire.text.matchAll(/Compare Mask: (0x[0-9a-f]+)$/gm)].map((m) => m[1])).toEqual([
          '0x0000000000000000', // FetchAdd: unused
          '0x0000000000000000',
          '0x0000000000000000', // the Swap: every word compares equal
          '0xffffffffffffffff',
          '0xffffffffffffffff',
        ]);
      }
    } finally {
      cap?.dispose();
    }
  }, 60_000);

  it('RFC 7306 is opt-in: a peer that did not enable atomics answers one with a Terminate', async () => {
    const [c, s, , tt] = await pair();
    const client = queuePair(tt, c, { atomics: true });
    const server = queuePair(tt, s);
    const w = server.pd.registerMr(new Uint8Array(8), Access.LocalWrite | Access.RemoteWrite);
    const done = client.qp.fetchAdd(client.pd.registerMr(new Uint8Array(8), Access.LocalWrite).sge(), w.remote(), 1n);
    await expect(done).rejects.toBeInstanceOf(Error);
    const t = await firstValueFrom(server.qp.terminate$);
    expect(t.direction).toBe('sent');
  }, 30_000);
});
