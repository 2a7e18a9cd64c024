/**
 * RFC 7306 over MPA/TCP end to end: every extension message type between two real sockets; with tshark,
 * the atomics as Wireshark decodes them.
 */
import type { LlpConnection } from '@rddp/llp';
import { ACCESS_REMOTE_ATOMIC, AtomicOpcode, type AtomicOperation } from '@rddp/rdmap';
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
import { Access, RdmaSession } from '../src/rping/session.js';
import { toolTransport } from '../src/transports.js';

async function pair(capture = false): Promise<[LlpConnection, LlpConnection, Capture | undefined]> {
  const tt = toolTransport({ transport: 'tcp', mpaRev: '2', crc: true });
  const l = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  const cap = capture ? await startCapture(l.address.port as number) : undefined;
  const accepted = firstValueFrom(l.connections$);
  const c = await tt.transport.connect(l.address, { params: tt.connectParams });
  const s = await accepted;
  await l.close();
  return [c, s, cap];
}

describe('RFC 7306 over MPA/TCP (rev 2, CRC)', () => {
  it('Atomic Fetch-and-Add, Swap (sent as CmpSwap), Compare-and-Swap (hit and miss); Immediate Data and Immediate Data with SE', async () => {
    const [c, s, cap] = await pair(tsharkAvailable());
    try {
      const ext = { atomics: true, immediate: true };
      const client = new RdmaSession(c, { profile: 'ietf', extensions: ext });
      const server = new RdmaSession(s, { profile: 'ietf', extensions: ext });
      const word = new Uint8Array(16);
      const w = server.register(word, ACCESS_REMOTE_ATOMIC);
      const at = (op: AtomicOperation['atomicOpcode'], extra: object) =>
        client.post({
          type: 'atomic',
          atomicOpcode: op,
          remoteStag: w.stag,
          remoteTo: w.addr + 8n,
          addOrSwapData: 0n,
          ...extra,
        });
      expect((await at(AtomicOpcode.FetchAdd, { addOrSwapData: 40n })).atomicResult).toBe(0n);
      expect((await at(AtomicOpcode.FetchAdd, { addOrSwapData: 2n })).atomicResult).toBe(40n);
      expect((await at(AtomicOpcode.Swap, { addOrSwapData: 7n })).atomicResult).toBe(42n);
      expect((await at(AtomicOpcode.CmpSwap, { compareData: 6n, addOrSwapData: 9n })).atomicResult).toBe(7n); // miss
      expect((await at(AtomicOpcode.CmpSwap, { compareData: 7n, addOrSwapData: 9n })).atomicResult).toBe(7n); // hit
      expect(Buffer.from(word.subarray(8)).readBigUInt64BE()).toBe(9n);
      expect(word.subarray(0, 8).every((x) => x === 0)).toBe(true);

      server.postReceive(new Uint8Array(16));
      server.postReceive(new Uint8Array(16));
      await client.post({ type: 'immediate', data: 0x0102_0304_0506_0708n });
      await client.post({ type: 'immediate', data: 0xffff_ffff_ffff_fffen, solicited: true });
      const r1 = await server.recv();
      const r2 = await server.recv();
      expect([r1.immediateData, r1.solicited]).toEqual([0x0102_0304_0506_0708n, false]);
      expect([r2.immediateData, r2.solicited]).toEqual([0xffff_ffff_ffff_fffen, true]);
      await client.close();
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
    const [c, s] = await pair();
    const client = new RdmaSession(c, { profile: 'ietf', extensions: { atomics: true } });
    const server = new RdmaSession(s, { profile: 'ietf' });
    const w = server.register(new Uint8Array(8), Access.RemoteWrite);
    const done = client.post({
      type: 'atomic',
      atomicOpcode: AtomicOpcode.FetchAdd,
      remoteStag: w.stag,
      remoteTo: w.addr,
      addOrSwapData: 1n,
    });
    await expect(done).rejects.toBeInstanceOf(Error);
    const t = await firstValueFrom(server.rdmap.terminate$);
    expect(t.direction).toBe('sent');
  }, 30_000);
});
