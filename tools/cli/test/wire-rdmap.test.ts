/**
 * Wire check of RDMAP over DDP over MPA: rping (Send, RDMA Read Request/Response, RDMA Write), perf Sends
 * and a provoked Terminate, captured on lo and decoded by Wireshark's iWARP dissectors.
 */
import type { LlpConnection } from '@rddp/llp';
import type { RdmapExtensions } from '@rddp/rdmap';
import { Access } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  RES_NOT_ZERO,
  REV_NOT_ONE,
  startCapture,
  summarize,
  tsharkAvailable,
  unexpected,
} from '../../../packages/llp-mpa-tcp/test/wire.js';
import { rpingClient, rpingServe, type ToolTransport, toolTransport } from '../src/index.js';

const available = tsharkAvailable();
const quiet = { log: () => {}, debug: () => {} };

async function pairOn(
  tt: ToolTransport,
): Promise<{ port: number; connect(): Promise<[LlpConnection, LlpConnection]> }> {
  const listener = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  const port = listener.address.port as number;
  return {
    port,
    async connect() {
      const accepted = firstValueFrom(listener.connections$);
      const c = await tt.transport.connect(listener.address, { params: tt.connectParams });
      const s = await accepted;
      await listener.close();
      return [c, s];
    },
  };
}

/** A queue pair on `connection` (a device of its own) through the tool transport's stack, with `extensions` enabled. */
function queuePair(tt: ToolTransport, connection: LlpConnection, extensions?: RdmapExtensions) {
  const pd = tt.stack.device().allocPd();
  return { pd, qp: tt.stack.queuePair(pd, connection, {}, extensions ? { extensions } : {}) };
}

const modes: [string, Parameters<typeof toolTransport>[0], string[]][] = [
  ['MPA rev 1 with CRC', { transport: 'tcp', mpaRev: '1', crc: true }, []],
  ['MPA rev 2 (RFC 6581) with CRC', { transport: 'tcp', mpaRev: '2', crc: true }, [REV_NOT_ONE, RES_NOT_ZERO]],
  ['MPA rev 1 without CRC', { transport: 'tcp', mpaRev: '1', crc: false }, []],
];

describe.runIf(available)('RDMAP wire check with tshark (RFC 5040 §4 as Wireshark decodes it)', () => {
  for (const [name, flags, allowed] of modes) {
    it(`${name}: rping's Sends, Read Request/Response and Writes decode cleanly${flags.crc ? ', every FPDU Good CRC32' : ''}`, async () => {
      const tt = toolTransport(flags);
      const p = await pairOn(tt);
      const cap = await startCapture(p.port);
      try {
        const [c, s] = await p.connect();
        const served = rpingServe(s, tt, { size: 64, verbose: false }, quiet);
        await rpingClient(c, tt, { count: 5, size: 3000, verbose: false, validate: true }, quiet);
        expect(await served).toBe(5);
        const w = await summarize(await cap.stop());
        if (process.env.RDDP_WIRE_DUMP) console.log(w.text);
        expect(w.malformed).toBe(0);
        expect(unexpected(w.expert, allowed)).toEqual([]);
        // Per ping: 4 Sends (2 advertisements, go-ahead, done), 1 Read Request, 1 Read Response, 1 Write.
        const ops = (re: RegExp) => (w.text.match(re) ?? []).length;
        expect(ops(/OpCode: Send \(0x3\)/g)).toBe(20);
        expect(ops(/OpCode: Read Request \(0x1\)/g)).toBe(5);
        expect(ops(/OpCode: Read Response \(0x2\)/g)).toBe(5);
        expect(ops(/OpCode: Write \(0x0\)/g)).toBe(5);
        expect(ops(/RDMA Read Message Size: 3000 bytes/g)).toBe(5);
        expect(w.dissect.rejects).toEqual([]);
        expect(w.dissect.report.connections[0]?.operations).toMatchObject({
          Send: 20,
          'RDMA Read Request': 5,
          'RDMA Read Response': 5,
          'RDMA Write': 5,
        });
        if (flags.crc) expect(w.goodCrc).toBe(w.fpduLengths.length);
        else expect(w.goodCrc).toBe(0);
        expect(w.badCrc).toBe(0);
      } finally {
        cap.dispose();
      }
    }, 60_000);
  }

  it('RFC 5040 §4.8: a Terminate (DDP tagged error: Invalid STag) decodes with its layer, type and code', async () => {
    const tt = toolTransport({ transport: 'tcp', mpaRev: '1', crc: true });
    const p = await pairOn(tt);
    const cap = await startCapture(p.port);
    try {
      const [c, s] = await p.connect();
      const client = queuePair(tt, c);
      const server = queuePair(tt, s);
      server.pd.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteWrite);
      const closed = firstValueFrom(server.qp.closed$);
      const data = client.pd.registerMr(new Uint8Array(16), 0);
      await client.qp.write(data.sge(), { stag: 0x00ab_cd00, to: 0n }).catch(() => {});
      await closed;
      await firstValueFrom(client.qp.closed$);
      const w = await summarize(await cap.stop());
      expect(w.malformed).toBe(0);
      expect(unexpected(w.expert)).toEqual([]);
      if (process.env.RDDP_WIRE_DUMP) console.log(w.text);
      expect((w.text.match(/OpCode: Terminate \(0x7\)/g) ?? []).length).toBe(1);
      expect(w.text).toContain('Layer: DDP (0x1)');
      expect(w.text).toContain('Error Types for DDP layer: Tagged Buffer Error (0x1)');
      expect(w.text).toContain('Error Code for DDP Tagged Buffer: Invalid STag (0x00)');
      expect(w.text).toMatch(/Terminated DDP Header: c14000abcd00/);
      // rddp dissect: the Write to the unknown STag is not a wire fault; the Terminate names the error.
      expect(w.dissect.rejects).toEqual([]);
      expect(w.dissect.report.connections[0]?.terminates.map((t) => t.name)).toEqual([
        'DDP: Tagged Buffer Error: Invalid STag',
      ]);
      expect(w.goodCrc).toBe(w.fpduLengths.length);
    } finally {
      cap.dispose();
    }
  }, 60_000);

  it('RFC 7306: Atomic Fetch-and-Add and Compare-and-Swap Requests and Responses decode cleanly (opcodes 0xA/0xB), Good CRC32', async () => {
    const tt = toolTransport({ transport: 'tcp', mpaRev: '1', crc: true });
    const p = await pairOn(tt);
    const cap = await startCapture(p.port);
    try {
      const [c, s] = await p.connect();
      const client = queuePair(tt, c, { atomics: true });
      const server = queuePair(tt, s, { atomics: true });
      const word = new Uint8Array(8);
      const w = server.pd.registerMr(word, Access.LocalWrite | Access.RemoteAtomic | Access.RemoteRead);
      const result = client.pd.registerMr(new Uint8Array(8), Access.LocalWrite).sge();
      const add = await client.qp.fetchAdd(result, w.remote(), 5n);
      const cas = await client.qp.cmpSwap(result, w.remote(), 5n, 0x1122334455667788n);
      expect(add.atomicResult).toBe(0n);
      expect(cas.atomicResult).toBe(5n);
      expect(Buffer.from(word).toString('hex')).toBe('1122334455667788');
      await client.qp.close();
      const wire = await summarize(await cap.stop());
      if (process.env.RDDP_WIRE_DUMP) console.log(wire.text);
      expect(wire.malformed).toBe(0);
      expect(unexpected(wire.expert)).toEqual([]);
      expect((wire.text.match(/OpCode: Atomic Request \(0xa\)/gi) ?? []).length).toBe(2);
      expect((wire.text.match(/OpCode: Atomic Response \(0xb\)/gi) ?? []).length).toBe(2);
      expect(wire.goodCrc).toBe(wire.fpduLengths.length);
      // rddp dissect: RFC 7306 opcodes are notes (valid where both ends enabled them), nothing to reject.
      expect(wire.dissect.rejects).toEqual([]);
      expect(wire.dissect.codes.filter((c) => c === 'rdmap-rfc7306')).toHaveLength(4);
    } finally {
      cap.dispose();
    }
  }, 60_000);
});
