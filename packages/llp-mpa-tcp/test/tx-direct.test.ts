/**
 * The direct transmit queue (`DirectTx`, `@rddp/writev`), checked from a TCP peer: what arrives is exactly
 * the FPDU stream the array-sink framing produces (RFC 5044 §4.1 framing, §4.3 Markers, §4.4 CRC — that
 * framing is itself checked against byte vectors in fpdu.test.ts and by tshark in wire.test.ts), also when
 * the peer stops reading and the kernel takes part of a range (the rest then waits behind one piece handed
 * to Node's socket); every `done` is settled once, in order; the FIN follows the last queued octet; a
 * dropped socket settles what was sent as sent and the rest as not.
 */
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { FpduWriter } from '../src/fpdu.js';
import { DirectTx, markedPiece, socketFd, writeRanges } from '../src/tx-direct.js';
import { marked, pattern } from './helpers.js';

const required = process.env.RDDP_REQUIRE_WRITEV === '1';
if (!writeRanges && !required) console.warn('@rddp/writev not built here: the direct queue is not tested');

const open: net.Socket[] = [];
const servers: net.Server[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
});

interface Rig {
  readonly socket: net.Socket;
  readonly peer: net.Socket;
  readonly tx: DirectTx;
  /** `done` outcomes in the order they were settled: true written, else the error. */
  readonly settled: (true | Error)[];
  progress: number;
  /** Called as each batch of `done`s is settled. */
  onSettle?: () => void;
  /** The peer's octets once it has seen our FIN. */
  readonly all: Promise<Buffer>;
}

async function rig(): Promise<Rig> {
  const server = net.createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const peer = await accepted;
  open.push(socket, peer);
  socket.on('error', () => {});
  peer.on('error', () => {});
  const chunks: Buffer[] = [];
  peer.on('data', (c: Buffer) => chunks.push(c));
  const all = new Promise<Buffer>((r) => peer.on('end', () => r(Buffer.concat(chunks))));
  const settled: (true | Error)[] = [];
  const r: Rig = {
    socket,
    peer,
    settled,
    progress: 0,
    all,
    tx: new DirectTx(
      socket,
      socketFd(socket),
      writeRanges as NonNullable<typeof writeRanges>,
      (err, k) => {
        for (let i = 0; i < k; i++) settled.push(err ?? true);
        r.onSettle?.();
      },
      () => r.progress++,
    ),
  };
  return r;
}

/** ULPDUs as the ULP gives them: a short header part and payload parts, some empty. */
const ulpdus = fc.array(
  fc.record({
    header: fc.integer({ min: 0, max: 28 }),
    payload: fc.array(fc.integer({ min: 0, max: 20_000 }), { maxLength: 3 }),
  }),
  { minLength: 1, maxLength: 40 },
);

describe('markedPiece: what goes to Node’s socket when the kernel stops inside a range with Markers', () => {
  it('RFC 5044 §4.3: piece after piece from any octet, the range’s wire octets (payload pieces as views, Markers framed)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 0, max: 508 }),
        fc.nat({ max: 0xf000 }),
        fc.nat(),
        (len, room, ptr, startSeed) => {
          const payload = pattern(len + 7, len);
          const want = marked(payload.subarray(7, 7 + len), room, ptr);
          const marks = room * 65536 + ptr;
          let skip = startSeed % want.length;
          const from = skip;
          const got: Uint8Array[] = [];
          while (skip < want.length) {
            const piece = markedPiece(payload.buffer as ArrayBuffer, payload.byteOffset + 7, len, marks, skip);
            expect(piece.byteLength).toBeGreaterThan(0);
            expect(piece.byteLength).toBeLessThanOrEqual(508);
            got.push(piece);
            skip += piece.byteLength;
          }
          expect(Buffer.compare(Buffer.concat(got), want.subarray(from))).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe.skipIf(!writeRanges && !required)('DirectTx: straight to the descriptor', () => {
  it('RFC 5044 §4.1, §4.3, §4.4: the peer receives exactly the array-sink FPDU stream, with and without Markers, also when it stalls', async () => {
    await fc.assert(
      fc.asyncProperty(
        ulpdus,
        fc.boolean(),
        fc.boolean(),
        fc.nat({ max: 3 }),
        async (specs, markers, stall, perTurn) => {
          const r = await rig();
          if (stall) r.peer.pause();
          const direct = new FpduWriter({ crc: true, markers, deferCrc: true });
          const reference = new FpduWriter({ crc: true, markers });
          const expected: Uint8Array[] = [];
          let seed = 1;
          for (let i = 0; i < specs.length; i++) {
            const s = specs[i] as { header: number; payload: number[] };
            const parts = [pattern(s.header, seed++), ...s.payload.map((n) => pattern(n, seed++))];
            const length = parts.reduce((a, p) => a + p.byteLength, 0);
            if (length > 64768) continue;
            direct.frame(parts, length, r.tx);
            r.tx.endFpdu();
            reference.frame(parts, length, expected);
            // A turn of perTurn + 1 FPDUs, then the batch goes (sealed first, as the stream does).
            if (i % (perTurn + 1) === perTurn || i === specs.length - 1) {
              direct.seal();
              r.tx.flush();
            }
          }
          const framed = expected.length;
          const want = Buffer.concat(expected);
          if (stall) setTimeout(() => r.peer.resume(), 20);
          r.tx.end();
          const got = await r.all;
          expect(got.length).toBe(want.length);
          expect(Buffer.compare(got, want)).toBe(0);
          await new Promise((res) => setImmediate(res));
          expect(r.settled.length).toBeLessThanOrEqual(framed);
          expect(r.settled.every((x) => x === true)).toBe(true);
          expect(r.tx.octets).toBe(0);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('a peer that stops reading: the kernel takes part, the rest waits (octets counted) and goes in order once it reads', async () => {
    const r = await rig();
    r.peer.pause();
    const w = new FpduWriter({ crc: true, markers: true, deferCrc: true });
    const ref = new FpduWriter({ crc: true, markers: true });
    const expected: Uint8Array[] = [];
    const n = 400; // 400 × 32 KiB: far more than loopback's socket buffers
    for (let i = 0; i < n; i++) {
      const u = pattern(32 * 1024, i);
      w.frame([u], u.byteLength, r.tx);
      r.tx.endFpdu();
      ref.frame([u], u.byteLength, expected);
      if (i % 16 === 15) {
        w.seal();
        r.tx.flush();
      }
    }
    await new Promise((res) => setTimeout(res, 100));
    expect(r.tx.octets, 'a backlog waits in the queue').toBeGreaterThan(1 << 20);
    expect(r.tx.idle).toBe(false);
    expect(r.settled.length).toBeLessThan(n);
    r.peer.resume();
    r.tx.end();
    const got = await r.all;
    expect(Buffer.compare(got, Buffer.concat(expected))).toBe(0);
    await new Promise((res) => setImmediate(res));
    expect(r.settled).toHaveLength(n);
    expect(r.settled.every((x) => x === true)).toBe(true);
    expect(r.progress, 'the stream heard of the backlog shrinking').toBeGreaterThan(0);
    expect(r.tx.sent + (r.socket.bytesWritten as number)).toBe(got.length);
  });

  it('a long backlog of many ranges (compacted while a piece is with Node’s socket): every octet in order, every done once', async () => {
    const r = await rig();
    r.peer.pause();
    const w = new FpduWriter({ crc: true, markers: true, deferCrc: true, inline: 0 });
    const ref = new FpduWriter({ crc: true, markers: true, inline: 0 });
    const expected: Uint8Array[] = [];
    const n = 12_000; // ≈ 3 ranges each: far past the queue's compaction point, while the peer stalls
    const payload = pattern(3000, 5);
    const ends: number[] = []; // where each FPDU ends in the stream
    /** No `done` before the kernel has every octet of its FPDU: `done`s settled beyond the complete FPDUs. */
    const early: number[] = [];
    const noneEarly = () => {
      const written = r.tx.sent + r.socket.bytesWritten - r.socket.writableLength;
      const complete = ends.filter((e) => e <= written).length;
      if (r.settled.length > complete) early.push(r.settled.length - complete);
    };
    r.onSettle = noneEarly;
    for (let i = 0; i < n; i++) {
      const u = payload.subarray(i % 7, 2900 + (i % 97));
      w.frame([u], u.byteLength, r.tx);
      r.tx.endFpdu();
      ends.push((ends.at(-1) ?? 0) + ref.frame([u], u.byteLength, expected));
      if (i % 64 === 63) {
        w.seal();
        r.tx.flush();
        if (i % 2048 === 2047) {
          await new Promise((res) => setTimeout(res, 5));
          noneEarly();
        }
      }
    }
    w.seal();
    r.tx.flush();
    await new Promise((res) => setTimeout(res, 20));
    noneEarly();
    // A slow reader: the kernel keeps taking part, the queue keeps handing pieces over.
    r.peer.on('data', () => {
      r.peer.pause();
      setTimeout(() => r.peer.resume(), 1);
    });
    setTimeout(() => r.peer.resume(), 10);
    r.tx.end();
    const got = await r.all;
    expect(Buffer.compare(got, Buffer.concat(expected))).toBe(0);
    await new Promise((res) => setImmediate(res));
    expect(r.settled).toHaveLength(n);
    expect(early, 'dones settled before their FPDU was written').toEqual([]);
    expect(r.tx.octets).toBe(0);
  }, 30_000);

  it('payload in a SharedArrayBuffer (memory shared with workers) goes as any other, Markers and all', async () => {
    const r = await rig();
    const shared = new Uint8Array(new SharedArrayBuffer(70_000));
    shared.set(pattern(70_000, 9));
    const w = new FpduWriter({ crc: true, markers: true, deferCrc: true });
    const ref = new FpduWriter({ crc: true, markers: true });
    const expected: Uint8Array[] = [];
    for (const [a, b] of [
      [0, 60_000],
      [100, 30_100],
      [5, 9],
    ] as const) {
      const u = shared.subarray(a, b);
      w.frame([u], u.byteLength, r.tx);
      r.tx.endFpdu();
      ref.frame([u], u.byteLength, expected);
    }
    w.seal();
    r.tx.flush();
    r.tx.end();
    expect(Buffer.compare(await r.all, Buffer.concat(expected))).toBe(0);
    await new Promise((res) => setImmediate(res));
    expect(r.settled).toEqual([true, true, true]);
  });

  it('dropped with a backlog: what was sent settles as sent, the rest is reported unsent, nothing twice', async () => {
    const r = await rig();
    r.peer.pause();
    const w = new FpduWriter({ crc: true, markers: false });
    const n = 300;
    for (let i = 0; i < n; i++) {
      const u = pattern(48 * 1024, i);
      w.frame([u], u.byteLength, r.tx);
      r.tx.endFpdu();
    }
    r.tx.flush();
    await new Promise((res) => setTimeout(res, 50));
    const unsent = r.tx.discard();
    r.socket.destroy();
    expect(unsent).toBeGreaterThan(0);
    expect(r.settled.length + unsent).toBe(n);
    await new Promise((res) => setTimeout(res, 50));
    expect(r.settled.length + unsent, 'no late callback after discard').toBe(n);
    expect(r.tx.octets).toBe(0);
  });

  it('a socket error on send (our side already shut down): the socket is destroyed with that errno', async () => {
    const r = await rig();
    r.socket.end();
    await new Promise((res) => r.socket.once('finish', res));
    const error = new Promise<NodeJS.ErrnoException>((res) => r.socket.once('error', res));
    const u = pattern(1000, 1);
    new FpduWriter({ crc: true, markers: false }).frame([u], u.byteLength, r.tx);
    r.tx.flush();
    const e = await error;
    expect(e.code).toBe('EPIPE');
    expect(r.socket.destroyed).toBe(true);
  });
});
