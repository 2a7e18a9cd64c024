/**
 * Known defects of the npm `sctp` 1.0.0 package, each shown on the bare package (so an upgrade that
 * fixes or changes one makes its test fail and gets noticed) and, where this plugin works around it,
 * next to a check that the plugin is not affected. docs/SCTP.md explains each one.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { verifySctpChecksum } from '../src/crc32c.js';
import { PeerSocket } from '../src/paths.js';
import { allAcked, sctpPackage } from '../src/pkg.js';
import { adaptationCodePoint, ChunkType, chunks, initChunk, outboundStreams } from '../src/wire.js';
import { barePairOnLink, barePairOnUdp, link, pattern, udpDrops, until } from './harness.js';

const packageDefaults = createRequire(import.meta.url)('@rddp/sctp/lib/defs') as { NET_SCTP: { RWND: number } };

describe('sctp 1.0.0 defects (docs/SCTP.md)', () => {
  it('defect "raw buffer": the package keeps slices of the datagram buffers it is given, so a reused receive buffer (raw-socket) corrupts messages over one packet', async () => {
    // reuse: what raw-socket does; reuse + rawCopy: raw.ts's sctpPacketOf on the same buffer; fresh: UDP.
    for (const mode of ['reuse', 'reuse + rawCopy', 'fresh'] as const) {
      const p = await barePairOnLink();
      p.clientEnd.reuseBuffer = mode !== 'fresh';
      p.clientEnd.rawCopy = mode === 'reuse + rawCopy';
      const got: Buffer[] = [];
      p.server.on('data', (d: Buffer) => got.push(Buffer.from(d)));
      const big = pattern(6000, 1);
      p.client.write(big);
      await until(() => got.length === 1, 'the message');
      expect({ mode, intact: (got[0] as Buffer).equals(big) }).toEqual({ mode, intact: mode !== 'reuse' });
      p.close();
    }
  });

  it('defect "window": the default windows are 16 KiB on a connecting socket (its readable high-water mark) and 100 KiB on an endpoint (RFC 4960 §3.3.2 a_rwnd)', async () => {
    const [init] = await captureHandshake();
    const c = initChunk(init) as NonNullable<ReturnType<typeof initChunk>>;
    expect(init.readUInt32BE(c.offset + 8)).toBe(16 * 1024); // a_rwnd of the connecting socket's INIT
    expect(packageDefaults.NET_SCTP.RWND).toBe(100 * 1024);
  });

  it('defect "streams": the connecting socket reports the OS it asked for, not the negotiated one (RFC 4960 §5.1.1)', async () => {
    const p = await barePairOnLink({ clientOS: 10, serverMIS: 2 });
    expect(p.client.OS).toBe(10);
    expect(p.clientAssociation.OS).toBe(2);
    p.close();
  });

  it('defect "streams": the INIT ACK announces the INIT\'s MIS as its OS, not the responder\'s own OS (RFC 4960 §3.3.3)', async () => {
    const [, initAck] = await captureHandshake({ clientMIS: 10, serverOS: 2 });
    const c = initChunk(initAck) as NonNullable<ReturnType<typeof initChunk>>;
    expect(outboundStreams(initAck, c)).toBe(10); // the responder will send on 2
  });

  it('defect "ordering": an unordered message on a stream blocks the ordered ones after it for ever (RFC 4960 §6.6)', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const got: string[] = [];
    p.server.on('data', (d: Buffer) => got.push(d.toString()));
    await new Promise<void>((r) =>
      a.SEND(Buffer.from('unordered'), { stream_id: 0, ppid: 0, unordered: true }, () => r()),
    );
    await new Promise<void>((r) => a.SEND(Buffer.from('ordered'), { stream_id: 0, ppid: 0 }, () => r()));
    await until(() => allAcked(a) && a.c_tsn_ack !== undefined, 'both acknowledged');
    await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual(['unordered']);
    p.close();
  });

  it('defect "close": the peer gets the same bare \'end\' for ABORT and for SHUTDOWN, no error, no cause (RFC 4960 §9)', async () => {
    const ends: unknown[][] = [];
    for (const how of ['end', 'destroy'] as const) {
      const p = await barePairOnLink();
      let errors = 0;
      p.server.on('error', () => errors++);
      p.server.once('end', (...args: unknown[]) => ends.push(args));
      p.server.resume();
      if (how === 'end') p.client.end();
      else p.client.destroy();
      await until(() => ends.length === (how === 'end' ? 1 : 2), "'end' at the peer");
      await new Promise((r) => setTimeout(r, 20));
      expect(errors).toBe(0);
      p.close();
    }
    expect(ends).toEqual([[], []]);
  });

  it('defect "readable": nothing reads the socket, it buffers everything and the window never closes (RFC 4960 §6.2)', async () => {
    const p = await barePairOnLink({ serverWindow: 16 * 1024 });
    const a = p.clientAssociation;
    for (let i = 0; i < 40; i++)
      await new Promise<void>((r) => a.SEND(pattern(8192, i), { stream_id: 0, ppid: 0 }, () => r()));
    await until(() => allAcked(a), 'all acknowledged');
    expect(p.server.readableLength).toBe(40 * 8192);
    p.close();
  });

  it('defect "adaptation": the INIT and INIT ACK the package sends carry no Adaptation Layer Indication (RFC 5061 §4.2.6)', async () => {
    const seen: (number | null)[] = [];
    const [init, initAck] = await captureHandshake();
    for (const pkt of [init, initAck])
      seen.push(adaptationCodePoint(pkt, initChunk(pkt) as NonNullable<ReturnType<typeof initChunk>>));
    expect(seen).toEqual([null, null]);
  });

  it('defect "checksum": the package delivers data from packets whose CRC32c is wrong (RFC 4960 §6.8)', async () => {
    const p = await barePairOnLink();
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(Buffer.from(d)));
    p.clientEnd.mangle = (pkt) => {
      const c = chunks(pkt).find((x) => x.type === ChunkType.DATA);
      if (!c) return pkt;
      const bad = Buffer.from(pkt);
      bad[c.offset + 16] = (bad[c.offset + 16] as number) ^ 0xff; // first user data octet
      return bad;
    };
    p.client.write(Buffer.from('hello'));
    await until(() => got.length === 1, 'the corrupted message');
    expect(got[0]?.toString()).not.toBe('hello');
    p.close();
    // This plugin's datagram layer drops such a packet before the package sees it.
    const sock = new PeerSocket(() => {}, { refused() {}, packageError() {}, violation() {} });
    let delivered = 0;
    sock.on('message', () => delivered++);
    const good = await oneDataPacket();
    expect(verifySctpChecksum(good)).toBe(true);
    const bad = Buffer.from(good);
    bad[bad.length - 1] = (bad[bad.length - 1] as number) ^ 1;
    sock.receive(bad);
    expect(delivered).toBe(0);
    expect(sock.stats.badChecksum).toBe(1);
  });
});

/**
 * Defects of sctp 1.0.0 that @rddp/sctp fixes (packages/sctp/NOTICE.md): each shown on the bare package,
 * now doing what the RFC says.
 */
describe('sctp 1.0.0 defects fixed in @rddp/sctp (packages/sctp/NOTICE.md)', () => {
  it('RFC 4960 §10.1 E: every SEND completes, once its data is handed to the wire (was: one pending callback, the earlier ones lost)', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    p.clientEnd.hold = true; // nothing reaches the peer, no SACK comes back
    let cb1 = false;
    let cb2 = false;
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(d));
    // Two messages inside the initial cwnd (RFC 9260 §7.2.1: 4404 octets at this PMTU).
    a.SEND(pattern(1000, 1), { stream_id: 0, ppid: 0 }, () => (cb1 = true));
    a.SEND(pattern(1000, 2), { stream_id: 0, ppid: 0 }, () => (cb2 = true));
    // Completion at hand-over: both complete while the link still holds their packets.
    await until(() => cb1 && cb2, 'both SENDs handed over');
    expect(p.clientEnd.held.length).toBeGreaterThan(0);
    expect(allAcked(a)).toBe(false);
    p.clientEnd.release();
    await until(() => cb1 && cb2 && got.length === 2 && allAcked(a), 'delivery and both callbacks');
    p.close();
  });

  it("RFC 4960 §6.1 B: a SEND beyond cwnd waits in its stream's queue, nothing is dropped (was: failed, and a stream writer reported success)", async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const errors: unknown[] = [];
    const send = a.SEND.bind(a);
    a.SEND = (b, o, cb) =>
      send(b, o, (e) => {
        if (e) errors.push(e);
        cb(e);
      });
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(Buffer.from(d)));
    const w1 = p.client.createStream(1);
    const w2 = p.client.createStream(2);
    p.clientEnd.hold = true;
    w1.write(pattern(30_000, 1));
    await until(() => a.flightsize >= a.cwnd, 'the first message filling cwnd');
    w2.write(pattern(30_000, 2));
    p.clientEnd.release();
    await until(() => got.length === 2 && allAcked(a), 'both messages acknowledged');
    expect(errors).toEqual([]);
    expect(got.map((g) => g.length)).toEqual([30_000, 30_000]);
    p.close();
  });

  it('RFC 4960 §6.2: a message larger than the receiver window cannot be delivered (no partial delivery): it stalls with the window closed, so llp-sctp keeps MULPDU below the peer window', async () => {
    const p = await barePairOnLink({ serverWindow: 16 * 1024 });
    const a = p.clientAssociation;
    let called = false;
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(d));
    a.SEND(pattern(40_000, 3), { stream_id: 0, ppid: 0 }, () => (called = true));
    await until(() => p.serverAssociation.reassembly.rwnd < 1500 && a.peer_rwnd < 1500, 'the window closed');
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toEqual([]);
    expect(called).toBe(false); // not all of it could be handed over
    p.close();
  });

  it('RFC 9260 §7.2.1: cwnd starts at a few packets, so a 256 KiB message does not overflow the default socket receive buffer (was: all of it in one burst, dropped by the kernel)', async () => {
    const p = await barePairOnUdp();
    const before = udpDrops(p.serverUdpPort);
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(d));
    p.clientAssociation.SEND(pattern(256 * 1024, 4), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => got.length === 1, 'the message');
    expect(got[0]?.equals(pattern(256 * 1024, 4))).toBe(true);
    if (before !== undefined) expect(udpDrops(p.serverUdpPort)).toBe(before);
    p.close();
  });

  it('RFC 4960 §6.5: the sender refuses stream id == OS (was: sent, and delivered without an ERROR)', async () => {
    const p = await barePairOnLink({ clientOS: 2, serverMIS: 2, serverOS: 2, clientMIS: 2 });
    const a = p.clientAssociation;
    let err2: Error | undefined;
    let err1: Error | undefined = new Error('not called');
    a.SEND(pattern(10, 1), { stream_id: 2, ppid: 0 }, (e) => (err2 = e));
    a.SEND(pattern(10, 1), { stream_id: 1, ppid: 0 }, (e) => (err1 = e));
    expect(String(err2)).toMatch(/wrong stream id 2/);
    await until(() => err1 === undefined, 'the SEND on stream 1');
    p.close();
  });

  it('RFC 4960 §9.2: DATA arriving in SHUTDOWN-SENT is processed (was: a TypeError out of the packet handler)', async () => {
    const p = await barePairOnLink();
    p.serverEnd.hold = true; // the server's DATA waits while the client shuts down
    await new Promise<void>((r) => p.serverAssociation.SEND(Buffer.from('late'), { stream_id: 0, ppid: 0 }, () => r()));
    p.clientAssociation.SHUTDOWN();
    await until(() => p.clientAssociation.state === 'SHUTDOWN-SENT', 'SHUTDOWN-SENT');
    const data = p.serverEnd.held.find((x) => chunks(x).some((c) => c.type === ChunkType.DATA)) as Buffer;
    p.serverEnd.held.length = 0;
    p.serverEnd.hold = false;
    expect(() => p.clientEnd.receive(data)).not.toThrow();
    p.close();
  });

  it('RFC 4960 §9.2: SHUTDOWN waits until all DATA is acknowledged (was: sent at once)', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const sent: number[] = [];
    p.clientEnd.tap = (pkt) => {
      for (const c of chunks(pkt)) sent.push(c.type);
    };
    p.clientEnd.hold = true;
    a.SEND(pattern(5000, 1), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => !allAcked(a), 'DATA in flight');
    a.SHUTDOWN();
    await new Promise((r) => setTimeout(r, 50));
    expect(sent.includes(ChunkType.SHUTDOWN)).toBe(false);
    expect(a.state).toBe('SHUTDOWN-PENDING');
    p.clientEnd.release();
    await until(() => sent.includes(ChunkType.SHUTDOWN), 'SHUTDOWN after the SACK');
    expect(allAcked(a)).toBe(true);
    p.close();
  });
});

/** The INIT and INIT ACK of a bare package handshake, as sent. */
async function captureHandshake(o: { clientMIS?: number; serverOS?: number } = {}): Promise<[Buffer, Buffer]> {
  const seen: Buffer[] = [];
  const [ce, se] = link();
  ce.tap = (p) => seen.push(p);
  se.tap = (p) => seen.push(p);
  const server = sctpPackage.connect({
    passive: true,
    localPort: 30_001,
    port: 30_002,
    udpTransport: se,
    udpPeer: { address: 'l', port: 1 },
    ...(o.serverOS ? { OS: o.serverOS } : {}),
  });
  const client = sctpPackage.connect({
    localPort: 30_002,
    port: 30_001,
    udpTransport: ce,
    udpPeer: { address: 'l', port: 1 },
    ...(o.clientMIS ? { MIS: o.clientMIS } : {}),
  });
  await new Promise<void>((r) => client.once('connect', () => r()));
  client.destroy();
  server.destroy();
  const init = seen.find((p) => chunks(p)[0]?.type === ChunkType.INIT) as Buffer;
  const ack = seen.find((p) => chunks(p)[0]?.type === ChunkType.INIT_ACK) as Buffer;
  return [init, ack];
}

/** A DATA packet as the package sends it. */
async function oneDataPacket(): Promise<Buffer> {
  const p = await barePairOnLink();
  let pkt: Buffer | undefined;
  p.clientEnd.tap = (x) => {
    if (!pkt && chunks(x).some((c) => c.type === ChunkType.DATA)) pkt = x;
  };
  p.client.write(Buffer.from('payload'));
  await until(() => pkt !== undefined, 'a DATA packet');
  p.close();
  return pkt as Buffer;
}
