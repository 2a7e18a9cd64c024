/**
 * The transmit batch: FPDUs framed in one turn reach the socket as few chunks as possible, in order, with
 * every `done` settled once, after the chunk holding its FPDU's end was written.
 */
import { connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { FpduWriter } from '../src/fpdu.js';
import { TxBatch } from '../src/tx-batch.js';

async function socketPair(): Promise<{ a: Socket; b: Socket; close(): void }> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const a = connect(port, '127.0.0.1');
  await new Promise((r) => a.once('connect', r));
  const b = await accepted;
  const close = () => {
    a.destroy();
    b.destroy();
    server.close();
  };
  return { a, b, close };
}

describe('TxBatch', () => {
  it('merges pieces adjacent in memory, keeps the byte order, settles each FPDU once in order', async () => {
    const { a, b, close } = await socketPair();
    const received: Buffer[] = [];
    b.on('data', (d) => received.push(d));
    const writer = new FpduWriter({ crc: true, markers: false });
    const expected = new FpduWriter({ crc: true, markers: false });
    const batch = new TxBatch();
    const want: Uint8Array[] = [];
    const settled: number[] = [];
    const big = new Uint8Array(3000).fill(7);
    for (let i = 0; i < 50; i++) {
      const parts = i % 10 === 9 ? [new Uint8Array(18).fill(i), big] : [new Uint8Array(18 + (i % 7)).fill(i)];
      const len = parts.reduce((n, p) => n + p.byteLength, 0);
      writer.frame(parts, len, batch);
      batch.endFpdu();
      expected.frame(parts, len, { push: (c: Uint8Array) => want.push(c.slice()) });
    }
    const wantBytes = Buffer.concat(want);
    expect(batch.octets).toBe(wantBytes.length);
    let writes = 0;
    const realWrite = a.write.bind(a);
    a.write = ((...args: Parameters<Socket['write']>) => {
      writes++;
      return realWrite(...args);
    }) as Socket['write'];
    batch.flush(a, (err, k) => {
      expect(err).toBeFalsy();
      for (let i = 0; i < k; i++) settled.push(settled.length);
    });
    // 50 FPDUs: the small ones are adjacent slab pieces; the 5 large payloads break the runs.
    expect(writes).toBeLessThanOrEqual(11);
    while (Buffer.concat(received).length < wantBytes.length) await new Promise((r) => setTimeout(r, 5));
    expect(Buffer.concat(received).equals(wantBytes)).toBe(true);
    expect(settled).toHaveLength(50);
    expect(batch.empty).toBe(true);
    close();
  });

  it('discard drops what is held and counts the FPDUs whose done must fail', () => {
    const batch = new TxBatch();
    const writer = new FpduWriter({ crc: false, markers: false });
    for (let i = 0; i < 3; i++) {
      writer.frame([new Uint8Array(20)], 20, batch);
      batch.endFpdu();
    }
    writer.frame([new Uint8Array(20)], 20, batch); // no done (an RTR, say)
    expect(batch.discard()).toBe(3);
    expect(batch.empty).toBe(true);
    expect(batch.octets).toBe(0);
  });
});
