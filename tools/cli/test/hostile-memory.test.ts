/**
 * Hostile peers that try to grow a server's memory through RDMAP's own queues, played from a raw TCP
 * socket against an MPA/TCP + RDMAP server: an MSN hole on the Read Request queue (RFC 5041 §5.3,
 * §7.2 "MSN range is not valid"; RFC 5040 §5.2.1 zero-length Reads need no STag), and Read Requests from
 * a requester that never reads its socket (RFC 5040 §6.1: IRD bounds Responses not yet sent).
 */
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { encodeUntaggedHeader } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { FpduWriter, mpaTcp } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest } from '@rddp/rdmap';
import { Access, Device, type Mr, type QueuePair } from '@rddp/verbs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const IRD = 8;
let port = 0;
let closeServer: () => Promise<void>;
/** The server's end of each connection: a verbs queue pair (IRD 8) and a region the peer may read. */
const servers: { qp: QueuePair; ro: Mr }[] = [];

beforeAll(async () => {
  const t = mpaTcp({ params: { revision: 1, crc: true }, handshakeTimeoutMs: 2000, closeTimeoutMs: 1000 });
  const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: { revision: 1, crc: true } });
  port = l.address.port as number;
  l.connections$.subscribe((c: LlpConnection) => {
    const device = new Device();
    const pd = device.allocPd();
    const cq = device.createCq();
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, ird: IRD });
    qp.connect(c);
    const ro = pd.registerMr(new Uint8Array(64 * 1024).fill(0x33), Access.RemoteRead, { baseTo: 0x7f00_0000_0000n });
    servers.push({ qp, ro });
  });
  closeServer = () => l.close();
});

afterAll(async () => {
  await closeServer?.();
});

/** A raw MPA peer that counts what it receives and keeps only the last FPDU's ULPDU. */
interface Attacker {
  readonly socket: net.Socket;
  readonly bytes: () => number;
  /** FPDUs after the Reply, and the ULPDU of the last one. */
  readonly fpdus: () => { count: number; last: Buffer | undefined };
  /** Resolves once at least `n` octets arrived in all. */
  until(n: number): Promise<void>;
  readonly closed: Promise<void>;
}

async function attacker(): Promise<Attacker> {
  const socket = net.connect({ host: '127.0.0.1', port });
  let count = 0;
  let waiter: { n: number; resolve(): void; reject(e: Error): void } | undefined;
  // FPDU walk (RFC 5044 §4.1: ULPDU_Length, ULPDU, pad to 4, CRC): after the 20-octet Reply.
  let pending = Buffer.alloc(0);
  let skip = 20;
  let frames = 0;
  let last: Buffer | undefined;
  socket.on('data', (c: Buffer) => {
    count += c.length;
    pending = pending.length > 0 ? Buffer.concat([pending, c]) : c;
    for (;;) {
      if (skip > 0) {
        const k = Math.min(skip, pending.length);
        skip -= k;
        pending = pending.subarray(k);
        if (skip > 0) break;
      }
      if (pending.length < 2) break;
      const n = pending.readUInt16BE(0);
      const total = 2 + n + ((4 - ((2 + n) % 4)) % 4) + 4;
      if (pending.length < total) break;
      frames++;
      last = Buffer.from(pending.subarray(2, 2 + n));
      pending = pending.subarray(total);
    }
    if (waiter && count >= waiter.n) {
      const w = waiter;
      waiter = undefined;
      w.resolve();
    }
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      waiter?.reject(new Error(`closed after ${count} octets`));
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C: CRC
  req[17] = 1; // Rev 1
  socket.write(req);
  const a: Attacker = {
    socket,
    bytes: () => count,
    fpdus: () => ({ count: frames, last }),
    until: (n) =>
      count >= n
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiter = { n, resolve, reject };
          }),
    closed,
  };
  await a.until(20); // the Reply
  return a;
}

const w = new FpduWriter({ crc: true, markers: false });
function readRequestFpdu(msn: number, size: number, srcStag: number, srcTo: bigint): Buffer {
  const rr = encodeReadRequest({ sinkStag: 0x1234, sinkTo: 0n, size, srcStag, srcTo });
  const seg = new Uint8Array(18 + rr.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | 1) * 2 ** 32, qn: 1, msn, mo: 0 }, seg);
  seg.set(rr, 18);
  const parts: Uint8Array[] = [];
  w.frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}

/** MPA header 2 + tagged DDP header 14, no pad, CRC 4: a zero-length Read Response's FPDU. */
const ZERO_LENGTH_RESPONSE = 20;

describe('hostile peers against the server heap', () => {
  it('RFC 5041 §5.3/§7.2: an MSN hole on QN 1 (MSN 1 never sent) pins one buffer, not every later one', async () => {
    const a = await attacker();
    const { qp } = servers.at(-1)!;
    // Warm-up, then measure: each batch stays within IRD, starts after MSN 1 and is answered in full.
    let msn = 2;
    const batches = async (n: number) => {
      for (let b = 0; b < n; b++) {
        const frames: Buffer[] = [];
        for (let i = 0; i < IRD - 1; i++) frames.push(readRequestFpdu(msn++, 0, 0, 0n));
        const want = a.bytes() + frames.length * ZERO_LENGTH_RESPONSE;
        a.socket.write(Buffer.concat(frames));
        await a.until(want);
      }
    };
    await batches(500);
    const before = heapUsed();
    await batches(12_000); // 84 000 Read Requests: ~16 MB held before the window was bounded
    const grown = heapUsed() - before;
    expect(qp.state).toBe('rts');
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    a.socket.destroy();
    await a.closed;
  }, 60_000);

  it('RFC 5040 §6.1: a requester that never reads gets at most IRD Responses queued, then "no buffer available"', async () => {
    const a = await attacker();
    const { qp, ro } = servers.at(-1)!;
    a.socket.pause(); // never reads again: every Response stays in the server
    const before = heapUsed();
    let msn = 1;
    let sent = 0;
    const LIMIT = 8000; // 500 MiB of Responses asked for
    // Batches of IRD Requests, never more than IRD outstanding per batch: the requester pretends each batch
    // was answered, and (to keep batches apart) waits up to 50 ms for the server to post its IRD buffers
    // again. The socket buffers fill after a few hundred 64 KiB Responses.
    const rdmap = qp.rdmap!;
    const ddp = rdmap.ddp as typeof rdmap.ddp & { stats: { segmentsReceived: number } };
    const seen = () => ddp.stats.segmentsReceived;
    const seen0 = seen();
    while (qp.state === 'rts' && sent < LIMIT) {
      const frames: Buffer[] = [];
      for (let i = 0; i < IRD; i++) frames.push(readRequestFpdu(msn++, 64 * 1024, ro.stag, ro.baseTo));
      a.socket.write(Buffer.concat(frames));
      sent += IRD;
      const t0 = Date.now();
      do await new Promise((r) => setImmediate(r));
      while (qp.state === 'rts' && (seen() - seen0 < sent || ddp.postedReceives(1) < IRD) && Date.now() - t0 < 50);
    }
    const grown = heapUsed() - before;
    expect(sent).toBeLessThan(LIMIT);
    expect(grown).toBeLessThan(8 * 1024 * 1024);
    // Reading at last: the Responses that could leave, then the Terminate — DDP layer (1), Untagged
    // Buffer (2), "no buffer available" (0x02): the Responses stuck in the server held their IRD buffers.
    a.socket.resume();
    await a.closed;
    const { last } = a.fpdus();
    expect(last).toBeDefined();
    const t = last as Buffer;
    expect(t[1]! & 0x0f).toBe(0x7); // RDMAP opcode Terminate
    expect([t[18]! >> 4, t[18]! & 0x0f, t[19]]).toEqual([1, 2, 0x02]);
  }, 120_000);
});
