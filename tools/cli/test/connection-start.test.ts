/**
 * Connection start as RDMA applications expect it, played by raw MPA peers: receives posted before the
 * first ULPDU reaches DDP (the rdma_cm order: create QP, post receives, accept), IRD/ORD as RFC 6581
 * announced them, and the MSNs after an RTR (docs/MPA.md: a Send RTR is MSN 1 on QN 0, a Read RTR MSN 1
 * on QN 1, so the ULP's first message there is MSN 2 — as Linux siw, whose RDMAP counts the RTR).
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { encodeTaggedHeader, encodeUntaggedHeader } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { FpduWriter, mpaTcp } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest } from '@rddp/rdmap';
import { Access, Device, type WorkCompletion } from '@rddp/verbs';
import { afterAll, describe, expect, it } from 'vitest';
import { type RawPeer, rawConnect, wrap } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { freePort, run } from './procs.js';
import { type RxUlpdu, ulpdus } from './raw-rdmap.js';

const writer = () => new FpduWriter({ crc: true, markers: false });
function fpdu(seg: Uint8Array): Buffer {
  const parts: Uint8Array[] = [];
  writer().frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}
function untagged(opcode: number, qn: number, msn: number, payload: Uint8Array): Buffer {
  const seg = new Uint8Array(18 + payload.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | opcode) * 2 ** 32, qn, msn, mo: 0 }, seg);
  seg.set(payload, 18);
  return fpdu(seg);
}
const send = (msn: number, payload: Uint8Array) => untagged(0x3, 0, msn, payload);
const zeroRead = (msn: number, srcStag = 0) =>
  untagged(0x1, 1, msn, encodeReadRequest({ sinkStag: 0x1234, sinkTo: 0n, size: 0, srcStag, srcTo: 0n }));
/** RFC 6581 RTRs as docs/MPA.md gives them (siw's siw_qp_mpa_rts). */
const RTR = {
  write: () => {
    const seg = new Uint8Array(14);
    encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x40, stag: 1, to: 0n }, seg);
    return fpdu(seg);
  },
  read: () => zeroRead(1, 1),
  send: () => send(1, new Uint8Array(0)),
};

/** An MPA Request; Rev 2 carries RFC 6581 enhanced data (IRD/ORD words, P and the RTR bits). */
function request(rev: 1 | 2, enhanced?: { ird: number; ord: number; rtr?: 'write' | 'read' | 'send' }): Buffer {
  const pd = enhanced
    ? Buffer.from([
        ((enhanced.rtr ? 0x80 : 0) | (enhanced.rtr === 'send' ? 0x40 : 0) | (enhanced.ird >> 8)) & 0xff,
        enhanced.ird & 0xff,
        ((enhanced.rtr === 'write' ? 0x80 : 0) | (enhanced.rtr === 'read' ? 0x40 : 0) | (enhanced.ord >> 8)) & 0xff,
        enhanced.ord & 0xff,
      ])
    : Buffer.alloc(0);
  const h = Buffer.alloc(20);
  h.write('MPA ID Req Frame');
  h[16] = 0x40 | (rev === 2 ? 0x10 : 0); // C; E (enhanced, RFC 6581) on Rev 2
  h[17] = rev;
  h.writeUInt16BE(pd.length, 18);
  return Buffer.concat([h, pd]);
}

async function initiator(port: number, req: Buffer): Promise<RawPeer> {
  const raw = await rawConnect(port);
  raw.socket.write(req);
  const head = await raw.waitFor(20);
  await raw.waitFor(20 + head.readUInt16BE(18));
  return raw;
}

/** The ULPDUs received after the Reply, once `ok` holds or the peer closed. */
async function until(raw: RawPeer, ok: (u: RxUlpdu[]) => boolean, ms = 5000): Promise<RxUlpdu[]> {
  const t0 = Date.now();
  for (;;) {
    const u = ulpdus(raw.received());
    if (ok(u) || raw.socket.destroyed || Date.now() - t0 > ms) return u;
    await new Promise((r) => setTimeout(r, 10));
  }
}
const terminates = (u: RxUlpdu[]) => u.filter((x) => x.opcode === 0x7);
/** The Terminate's layer, type and code (RFC 5040 §4.8). */
const cause = (t: RxUlpdu) => [(t.payload[0] as number) >> 4, (t.payload[0] as number) & 0xf, t.payload[1]];

const servers: ChildProcess[] = [];
afterAll(() => {
  for (const s of servers) if (s.exitCode === null) s.kill('SIGKILL');
});

/** `rping -s` in a process of its own, listening. */
async function rpingServer(...flags: string[]): Promise<number> {
  const port = await freePort();
  const p = run(['rping', '-s', '-a', '127.0.0.1', '-p', String(port), ...flags]);
  servers.push(p.child);
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return port;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('rping -s did not start listening');
}

/** rping's advertisement of a 64-octet source buffer (struct rping_rdma_info). */
function advert(): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(0x7f00_0000_0000n, 0);
  b.writeUInt32BE(0x4242, 8);
  b.writeUInt32BE(64, 12);
  return b;
}

describe('receives before data (the rdma_cm order, RFC 5040 §6.1)', () => {
  it('verbs: receives posted in INIT take a Send sent right after the Reply, even with an await before connect', async () => {
    const device = new Device();
    const pd = device.allocPd();
    const cq = device.createCq();
    const wcs: WorkCompletion[] = [];
    cq.completions$.subscribe((wc) => wcs.push(wc));
    const buf = new Uint8Array(64);
    const mr = pd.registerMr(buf, Access.LocalWrite);
    const l = await mpaTcp().listen({ host: '127.0.0.1', port: 0 }, { params: { revision: 1, crc: true } });
    let connectError: unknown;
    l.connections$.subscribe(async (c: LlpConnection) => {
      const qp = pd.createQp({ sendCq: cq, recvCq: cq });
      qp.postRecv({ wrId: 7, sgList: [{ mr }] });
      await new Promise((r) => setTimeout(r, 30)); // the application's accept path awaits something
      try {
        qp.connect(c);
      } catch (e) {
        connectError = e;
      }
    });
    const raw = await initiator(l.address.port as number, request(1));
    raw.socket.write(send(1, Buffer.from('first Send, right after the Reply')));
    const t0 = Date.now();
    while (wcs.length === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
    expect(connectError).toBeUndefined();
    expect(wcs[0]).toMatchObject({ wrId: 7, status: 'success', opcode: 'recv' });
    expect(Buffer.from(buf.subarray(0, 33)).toString()).toBe('first Send, right after the Reply');
    expect(terminates(ulpdus(raw.received()))).toEqual([]);
    raw.socket.destroy();
    await l.close();
  });

  it('rping -s --mpa-rev 2: a Write RTR followed at once by the first Send is served (a Read Request comes back)', async () => {
    const port = await rpingServer('--mpa-rev', '2');
    const raw = await initiator(port, request(2, { ird: 16, ord: 16, rtr: 'write' }));
    raw.socket.write(Buffer.concat([RTR.write(), send(1, advert())]));
    const u = await until(raw, (x) => x.some((f) => f.opcode === 0x1) || terminates(x).length > 0);
    expect(terminates(u).map(cause)).toEqual([]);
    expect(u.some((f) => f.opcode === 0x1 && !f.tagged)).toBe(true); // rping's RDMA Read of our buffer
    raw.socket.destroy();
  });
});

describe('IRD/ORD as RFC 6581 announced them', () => {
  it('16 outstanding Read Requests against a server that announced IRD 16 get 16 Responses and no Terminate', async () => {
    const port = await rpingServer('--mpa-rev', '2');
    const raw = await initiator(port, request(2, { ird: 16, ord: 16 }));
    const reply = raw.received();
    const irdAnnounced = reply.readUInt16BE(20) & 0x3fff; // the Reply's IRD word
    expect(irdAnnounced).toBe(16);
    raw.socket.write(Buffer.concat(Array.from({ length: 16 }, (_, i) => zeroRead(i + 1))));
    const u = await until(raw, (x) => x.filter((f) => f.opcode === 0x2).length >= 16 || terminates(x).length > 0);
    expect(terminates(u).map(cause)).toEqual([]);
    expect(u.filter((f) => f.opcode === 0x2)).toHaveLength(16); // RDMA Read Responses
    raw.socket.destroy();
  });
});

describe('MSNs after an RTR (docs/MPA.md, as siw)', () => {
  it('Send RTR: the first Send carries MSN 2 and is delivered; MSN 1 would be "MSN range is not valid"', async () => {
    const ok = await rpingServer('--mpa-rev', '2');
    const a = await initiator(ok, request(2, { ird: 16, ord: 16, rtr: 'send' }));
    a.socket.write(Buffer.concat([RTR.send(), send(2, advert())]));
    const u = await until(a, (x) => x.some((f) => f.opcode === 0x1) || terminates(x).length > 0);
    expect(terminates(u).map(cause)).toEqual([]);
    expect(u.some((f) => f.opcode === 0x1)).toBe(true);
    a.socket.destroy();

    const bad = await rpingServer('--mpa-rev', '2');
    const b = await initiator(bad, request(2, { ird: 16, ord: 16, rtr: 'send' }));
    b.socket.write(Buffer.concat([RTR.send(), send(1, advert())]));
    const v = await until(b, (x) => terminates(x).length > 0);
    // DDP layer (1), Untagged Buffer (2), MSN range is not valid (0x03): RFC 5041 §7.2.
    expect(terminates(v).map(cause)).toEqual([[1, 2, 0x03]]);
    b.socket.destroy();
  });

  it("Read RTR: the next Read Request is MSN 2 on QN 1; MSN 1 (the RTR's) is not taken again", async () => {
    const port = await rpingServer('--mpa-rev', '2');
    const raw = await initiator(port, request(2, { ird: 16, ord: 16, rtr: 'read' }));
    raw.socket.write(Buffer.concat([RTR.read(), zeroRead(2)]));
    // The LLP answers the RTR with a zero-length Read Response; RDMAP answers MSN 2 with another.
    const u = await until(raw, (x) => x.filter((f) => f.opcode === 0x2).length >= 2 || terminates(x).length > 0);
    expect(terminates(u).map(cause)).toEqual([]);
    expect(u.filter((f) => f.opcode === 0x2)).toHaveLength(2);
    raw.socket.write(zeroRead(1));
    const v = await until(raw, (x) => terminates(x).length > 0);
    expect(terminates(v).map(cause)).toEqual([[1, 2, 0x03]]);
    raw.socket.destroy();
  });

  it('an rddp initiator after a Send RTR sends its first Send with MSN 2 (checked by a raw responder)', async () => {
    const seen: Buffer[] = [];
    const server = net.createServer((s) => {
      const peer = wrap(s);
      void (async () => {
        const head = await peer.waitFor(20);
        await peer.waitFor(20 + head.readUInt16BE(18));
        const rep = Buffer.alloc(24);
        rep.write('MPA ID Rep Frame');
        rep[16] = 0x40 | 0x10; // C, E
        rep[17] = 2;
        rep.writeUInt16BE(4, 18);
        rep.writeUInt16BE(0x8000 | 0x4000 | 16, 20); // P, S (Send RTR), IRD 16
        rep.writeUInt16BE(16, 22); // ORD 16
        s.write(rep);
        seen.push(
          // Request (24) + Send RTR FPDU (24) + the first Send, a 16-octet advertisement (40).
          await peer.waitFor(88, 5000).catch(() => peer.received()),
        );
        s.destroy();
      })();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const client = run([
      'rping',
      '-c',
      '-a',
      '127.0.0.1',
      '-p',
      String(port),
      '--mpa-rev',
      '2',
      '--p2p',
      'send',
      '-C',
      '1',
    ]);
    servers.push(client.child);
    const t0 = Date.now();
    while (seen.length === 0 && Date.now() - t0 < 8000) await new Promise((r) => setTimeout(r, 20));
    server.close();
    const rx = seen[0] as Buffer;
    // After the Request (20 + 4 octets of private data): the Send RTR (MSN 1), then the first Send.
    let o = 24;
    const msns: number[] = [];
    while (o + 2 <= rx.length) {
      const len = rx.readUInt16BE(o);
      if (o + 2 + len > rx.length) break;
      const u = rx.subarray(o + 2, o + 2 + len);
      if (((u[0] as number) & 0x80) === 0 && ((u[1] as number) & 0x0f) === 0x3) msns.push(u.readUInt32BE(10));
      o += 2 + len + ((4 - ((2 + len) % 4)) % 4) + 4;
    }
    expect(msns.slice(0, 2)).toEqual([1, 2]);
  });
});
