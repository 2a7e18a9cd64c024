/**
 * The receive arena (socket-rx.ts): the socket reads into a ring of the connection's own, and no octet the
 * FPDU reader still holds (a partial FPDU, chunks held while stopped) is read over — for every way of
 * cutting the stream into reads (RFC 5044 §4: an FPDU may arrive in any number of TCP segments).
 */

import net from 'node:net';
import type { LlpConnection } from '@rddp/llp';
import fc from 'fast-check';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { FpduReader, FpduWriter, type MpaTcpConnection, mpaTcp } from '../src/index.js';
import { ARENA_INITIAL, ARENA_MAX, feedFromData, SocketReceiver } from '../src/socket-rx.js';
import { pattern, tcpPair } from './helpers.js';
import { rawConnect } from './raw.js';

function frames(lengths: number[], crc: boolean, markers: boolean): { wire: Buffer; ulpdus: Uint8Array[] } {
  const w = new FpduWriter({ crc, markers });
  const out: Uint8Array[] = [];
  const ulpdus = lengths.map((n, i) => pattern(n, i + 1));
  for (const u of ulpdus) w.frame([u], u.byteLength, out);
  return { wire: Buffer.concat(out), ulpdus };
}

/**
 * Plays Node and the kernel: asks the receiver for the next read's view, scribbles over all of it (the
 * view is the kernel's until the read returns), writes the next `size` octets of `wire` there and reports
 * the read. The reader copies each ULPDU out as it is handed up (valid only during the call).
 */
function drive(rx: SocketReceiver, wire: Buffer, sizes: number[]): void {
  const { buffer, callback } = rx.onread as { buffer: () => Buffer; callback: (n: number, b: Buffer) => boolean };
  let off = 0;
  let k = 0;
  while (off < wire.byteLength) {
    const view = buffer();
    view.fill(0xee);
    const want = sizes.length > 0 ? (sizes[k++ % sizes.length] as number) : view.byteLength;
    const n = Math.min(view.byteLength, Math.max(1, want), wire.byteLength - off);
    wire.copy(view, 0, off, off + n);
    off += n;
    callback(n, view);
  }
}

function readerOn(rx: SocketReceiver, crc: boolean, markers: boolean) {
  const got: Uint8Array[] = [];
  const errors: Error[] = [];
  const reader = new FpduReader(
    { crc, markers },
    (length, chunks) => {
      const u = new Uint8Array(length);
      let o = 0;
      for (const c of chunks) {
        u.set(c, o);
        o += c.byteLength;
      }
      got.push(u);
    },
    (e) => errors.push(e),
  );
  rx.held = () => reader.firstHeld;
  rx.onChunk = (c) => reader.push(c);
  return { reader, got, errors };
}

describe('receive arena (socket-rx.ts)', () => {
  it('RFC 5044 §4.1/§4.4: every FPDU arrives intact however the stream is cut into reads (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 64768 }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1000, max: 300_000 })), {
          maxLength: 8,
        }),
        fc.boolean(),
        fc.boolean(),
        (lengths, sizes, crc, markers) => {
          const { wire, ulpdus } = frames(lengths, crc, markers);
          const rx = new SocketReceiver();
          const { got, errors } = readerOn(rx, crc, markers);
          drive(rx, wire, sizes);
          expect(errors).toEqual([]);
          // Byte comparison (Buffer.compare) rather than toEqual's element by element walk: same verdict.
          expect(got.map((u) => u.byteLength)).toEqual(ulpdus.map((u) => u.byteLength));
          for (const [i, u] of got.entries()) expect(Buffer.compare(u, ulpdus[i] as Uint8Array), `ULPDU ${i}`).toBe(0);
          // A ring, not an allocation per read: arenas grow by doubling and are replaced only when the
          // held octets leave no room, which one partial FPDU (≤ 64 KiB) in a ring of ≥ 64 KiB rarely does.
          expect(rx.arenas).toBeLessThanOrEqual(2 + Math.ceil(rx.reads / 2));
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);

  it('a peer that drips a 64 KiB FPDU one octet per read: delivered intact, two arenas at most', () => {
    const { wire, ulpdus } = frames([64768, 10], true, false);
    const rx = new SocketReceiver();
    const { got, errors } = readerOn(rx, true, false);
    drive(rx, wire, [1]);
    expect(errors).toEqual([]);
    expect(got).toEqual(ulpdus);
    expect(rx.reads).toBe(wire.byteLength);
    expect(rx.arenas).toBeLessThanOrEqual(2);
  });

  it('chunks held while the ULP has stopped reception survive later reads', () => {
    const { wire, ulpdus } = frames([3000, 40000, 5, 64000, 700], true, true);
    const rx = new SocketReceiver();
    const { reader, got, errors } = readerOn(rx, true, true);
    reader.setStopped(true);
    drive(rx, wire, [5000, 17000, 1]);
    expect(got).toEqual([]);
    reader.setStopped(false);
    expect(errors).toEqual([]);
    expect(got).toEqual(ulpdus);
  });

  it('bulk reads grow the arena to its maximum (reads of a quarter of it), and no further', () => {
    const { wire } = frames(
      Array.from({ length: 200 }, () => 64000),
      true,
      false,
    );
    const rx = new SocketReceiver();
    const { got, errors } = readerOn(rx, true, false);
    drive(rx, wire, []);
    expect(errors).toEqual([]);
    expect(got.length).toBe(200);
    expect(rx.arenaSize).toBe(ARENA_MAX);
    expect(ARENA_INITIAL).toBeLessThan(ARENA_MAX);
    // 64 → 128 → 256 → 512 → 1024 KiB, plus replacements when a partial FPDU left no room.
    expect(rx.arenas).toBeLessThanOrEqual(10);
  });

  it('a connection reads into its arenas, not a fresh buffer per read: 30 MB each way over TCP', async () => {
    const [a, b] = await tcpPair();
    const total = 512;
    const payload = pattern(60000, 7);
    let atA = 0;
    let atB = 0;
    const done = new Promise<void>((resolve) => {
      const check = () => atA === total && atB === total && resolve();
      a.stream.setReceiver((u) => {
        expect(u.length).toBe(60000);
        atA++;
        check();
      });
      b.stream.setReceiver((u) => {
        expect(u.length).toBe(60000);
        atB++;
        check();
      });
    });
    for (let i = 0; i < total; i++) {
      a.stream.send([payload]);
      b.stream.send([payload]);
      if (i % 32 === 31) await new Promise((r) => setImmediate(r));
    }
    await done;
    for (const s of [a.stream, b.stream]) {
      const st = s.readStats;
      expect(st).toBeDefined();
      expect(st?.reads).toBeGreaterThan(64);
      expect(st?.arenas).toBeLessThanOrEqual(12);
    }
    await a.close();
  });

  it('a raw peer that drips a 64 KiB FPDU in 64-octet segments: the server keeps two arenas at most, the FPDU arrives intact', async () => {
    const listener = await mpaTcp().listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    const raw = await rawConnect(listener.address.port as number);
    raw.socket.setNoDelay(true);
    const req = Buffer.alloc(20);
    Buffer.from('MPA ID Req Frame').copy(req);
    req[16] = 0x40; // C: CRCs (RFC 5044 §7.1.1)
    req[17] = 1;
    raw.socket.write(req);
    await raw.waitFor(20); // the Reply
    const server = (await accepted) as LlpConnection as MpaTcpConnection;
    const got: Uint8Array[] = [];
    server.stream.setReceiver((u) => got.push(new Uint8Array(Buffer.concat(u.chunks))));
    const { wire, ulpdus } = frames([64768], true, false);
    // Slices small enough that most reach the server as reads of their own.
    for (let o = 0; o < wire.byteLength; o += 64) {
      raw.socket.write(wire.subarray(o, o + 64));
      if ((o / 64) % 16 === 15) await new Promise((r) => setImmediate(r));
    }
    const deadline = Date.now() + 10_000;
    while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(got).toEqual(ulpdus);
    const st = server.stream.readStats;
    expect(st?.reads).toBeGreaterThan(16);
    expect(st?.arenas).toBeLessThanOrEqual(2);
    server.abort();
    await listener.close();
  });

  it('a socket that cannot read into an arena (no handle to move) hands its data chunks to the receiver', async () => {
    const server = net.createServer({ pauseOnConnect: true });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const got: Buffer[] = [];
    const rx = new SocketReceiver();
    rx.onChunk = (c) => got.push(Buffer.from(c));
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const c = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const s = feedFromData(await accepted, rx);
    c.write('MPA ID Req Frame');
    const deadline = Date.now() + 5000;
    while (Buffer.concat(got).byteLength < 16 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(Buffer.concat(got).toString()).toBe('MPA ID Req Frame');
    expect(rx.reads).toBe(0); // Node's own buffers, not the arena
    c.destroy();
    s.destroy();
    server.close();
  });
});
