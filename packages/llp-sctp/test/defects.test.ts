/**
 * Known defects of the npm `sctp` 1.0.0 package, each shown on the bare package (so an upgrade that
 * fixes or changes one makes its test fail and gets noticed) and, where this plugin works around it,
 * next to a check that the plugin is not affected. docs/SCTP.md explains each one.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { verifySctpChecksum } from '../src/crc32c.js';
import { resolveOptions } from '../src/options.js';
import { PeerSocket } from '../src/paths.js';
import { allAcked, sctpPackage, shimAssociation } from '../src/pkg.js';
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

  it('defect "writers": with two SENDs outstanding only the last drain callback survives (RFC 4960 §10.1 SEND has one pending callback)', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    p.clientEnd.hold = true; // no SACK can come back before both callbacks are parked
    let cb1 = false;
    let cb2 = false;
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(d));
    a.SEND(pattern(20_000, 1), { stream_id: 0, ppid: 0 }, () => (cb1 = true));
    a.SEND(pattern(20_000, 2), { stream_id: 0, ppid: 0 }, () => (cb2 = true));
    await until(() => p.clientEnd.held.length >= 28, 'both messages on the wire');
    await new Promise((r) => setImmediate(r));
    p.clientEnd.release();
    await until(() => cb2 && got.length === 2 && allAcked(a), 'delivery and the second callback');
    expect(cb1).toBe(false);
    p.close();
  });

  it('defect "writers": a stream writer hit by the cwnd check reports success and its data is dropped (RFC 4960 §6.1 B)', async () => {
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
    await until(() => a.flightsize >= a.cwnd, 'the first message in flight');
    let w2Result: unknown = 'pending';
    w2.write(pattern(30_000, 2), (e) => (w2Result = e ?? null));
    await until(() => w2Result !== 'pending', 'the second write callback');
    expect(w2Result).toBeNull(); // success reported...
    expect(String(errors[0])).toMatch(/cwnd/); // ...although SEND failed
    p.clientEnd.release();
    await until(() => got.length === 1 && allAcked(a), 'the first message acknowledged');
    expect(got[0]?.equals(pattern(30_000, 1))).toBe(true); // the second never comes
    p.close();
  });

  it('defect "window": a message larger than the receiver window deadlocks silently (RFC 4960 §6.2)', async () => {
    const p = await barePairOnLink({ serverWindow: 16 * 1024 });
    const a = p.clientAssociation;
    let called = false;
    const got: Buffer[] = [];
    p.server.on('data', (d: Buffer) => got.push(d));
    a.SEND(pattern(40_000, 3), { stream_id: 0, ppid: 0 }, () => (called = true));
    // Once the receiver has advertised a zero window holding a partial message, nothing can free it:
    // the rest of the message is dropped while the window is zero, and the window reopens only on delivery.
    await until(() => a.peer_rwnd === 0 && p.serverAssociation.reassembly.rwnd <= 0, 'a zero window');
    expect(got).toEqual([]);
    expect(called).toBe(false);
    p.close();
  });

  it('defect "window": the default windows are 16 KiB on a connecting socket (its readable high-water mark) and 100 KiB on an endpoint (RFC 4960 §3.3.2 a_rwnd)', async () => {
    const [init] = await captureHandshake();
    const c = initChunk(init) as NonNullable<ReturnType<typeof initChunk>>;
    expect(init.readUInt32BE(c.offset + 8)).toBe(16 * 1024); // a_rwnd of the connecting socket's INIT
    expect(packageDefaults.NET_SCTP.RWND).toBe(100 * 1024);
  });

  it('defect "window": over UDP a 256 KiB message overflows the default socket receive buffer', async () => {
    const p = await barePairOnUdp();
    if (udpDrops(p.serverUdpPort) === undefined) {
      p.close();
      return; // no /proc/net/udp: not Linux
    }
    const before = udpDrops(p.serverUdpPort) as number;
    p.clientAssociation.SEND(pattern(256 * 1024, 4), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => (udpDrops(p.serverUdpPort) as number) > before, 'kernel drops at the receiver');
    p.close();
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

  it('defect "streams": the sender accepts stream id == OS and the receiver delivers it without an ERROR (RFC 4960 §6.5)', async () => {
    const p = await barePairOnLink({ clientOS: 2, serverMIS: 2, serverOS: 2, clientMIS: 2 });
    const a = p.clientAssociation;
    const ids: number[] = [];
    p.server.on('stream', (s: NodeJS.ReadableStream, id: number) => s.on('data', () => ids.push(id)));
    const errors: Error[] = [];
    p.client.on('error', (e: Error) => errors.push(e));
    let err2: Error | undefined;
    let err3: Error | undefined;
    a.SEND(pattern(10, 1), { stream_id: 2, ppid: 0 }, (e) => (err2 = e));
    a.SEND(pattern(10, 1), { stream_id: 3, ppid: 0 }, (e) => (err3 = e));
    expect(String(err3)).toMatch(/wrong stream id 3/);
    await until(() => ids.length === 1 && allAcked(a), 'delivery on stream 2');
    expect(err2).toBeUndefined();
    expect(ids).toEqual([2]);
    p.close();
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

  it('defect "shutdown": DATA arriving in SHUTDOWN-SENT throws out of the packet handler (this.duplicates is undefined)', async () => {
    for (const shim of [false, true]) {
      const p = await barePairOnLink();
      if (shim) shimAssociation(p.clientAssociation, 1500, resolveOptions().rto);
      p.serverEnd.hold = true; // the server's DATA waits while the client shuts down
      await new Promise<void>((r) =>
        p.serverAssociation.SEND(Buffer.from('late'), { stream_id: 0, ppid: 0 }, () => r()),
      );
      p.clientAssociation.SHUTDOWN();
      await until(() => p.clientAssociation.state === 'SHUTDOWN-SENT', 'SHUTDOWN-SENT');
      const data = p.serverEnd.held.find((x) => chunks(x).some((c) => c.type === ChunkType.DATA)) as Buffer;
      p.serverEnd.held.length = 0;
      p.serverEnd.hold = false;
      const deliver = () => p.clientEnd.receive(data);
      if (shim) expect(deliver).not.toThrow();
      else expect(deliver).toThrow(TypeError);
      p.close();
    }
  });

  it('defect "shutdown": SHUTDOWN goes out while DATA is still unacknowledged (RFC 4960 §9.2 says after)', async () => {
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
    await until(() => sent.includes(ChunkType.SHUTDOWN), 'SHUTDOWN sent');
    expect(allAcked(a)).toBe(false);
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
