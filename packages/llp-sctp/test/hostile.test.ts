/**
 * Hostile datagrams against a listener, from raw `dgram` sockets (the attacker builds its own SCTP bytes
 * and CRC32c): the responder keeps no state for anything but a valid COOKIE ECHO (RFC 4960 §5.1.3, §8.4),
 * and a bad packet (checksum, §6.8; Verification Tag, §8.5) extends no timer.
 */
import dgram from 'node:dgram';
import type { LlpConnection, LlpListener, LlpStream } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { sctp } from '../src/index.js';
import type { SctpListener } from '../src/listener.js';
import { pattern, until } from './harness.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const HOST = '127.0.0.1';
const ATTACK_PORTS = 1200;

// ---- the attacker's SCTP bytes (RFC 4960 §3), built here without the stack's code ----------------------

/** CRC32c (RFC 4960 Appendix B), bit by bit. */
function crc32c(b: Uint8Array): number {
  let c = 0xffffffff;
  for (const x of b) {
    c ^= x;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return ~c >>> 0;
}

function chunk(type: number, flags: number, value: Uint8Array = new Uint8Array(0)): Buffer {
  const length = 4 + value.byteLength;
  const b = Buffer.alloc((length + 3) & ~3);
  b[0] = type;
  b[1] = flags;
  b.writeUInt16BE(length, 2);
  b.set(value, 4);
  return b;
}

/** A packet; the checksum (stored little-endian, as Linux and the package do) is right unless `badChecksum`. */
function sctpPacket(srcPort: number, dstPort: number, vTag: number, chunks: Buffer[], badChecksum = false): Buffer {
  const out = Buffer.concat([Buffer.alloc(12), ...chunks]);
  out.writeUInt16BE(srcPort, 0);
  out.writeUInt16BE(dstPort, 2);
  out.writeUInt32BE(vTag >>> 0, 4);
  const sum = crc32c(out);
  out.writeUInt32LE(badChecksum ? (sum ^ 0x5a5a5a5a) >>> 0 : sum, 8);
  return out;
}

/** An INIT (RFC 4960 §3.3.2) with the DDP Adaptation Layer Indication (RFC 5061 §4.2.6, code point 1). */
function initChunk(initiateTag: number): Buffer {
  const v = Buffer.alloc(24);
  v.writeUInt32BE(initiateTag, 0);
  v.writeUInt32BE(100_000, 4); // a_rwnd
  v.writeUInt16BE(1, 8); // OS
  v.writeUInt16BE(1, 10); // MIS
  v.writeUInt32BE(initiateTag, 12); // initial TSN
  v.writeUInt16BE(0xc006, 16);
  v.writeUInt16BE(8, 18);
  v.writeUInt32BE(1, 20);
  return chunk(1, 0, v);
}

const garbageChunk = () => chunk(0, 3); // a 4-octet chunk header: 12 + 4 = 16 octets in all
const heartbeat = () => chunk(4, 0, Buffer.from([0, 1, 0, 8, 1, 2, 3, 4]));
const randomTag = () => (1 + Math.floor(Math.random() * 0xfffffffe)) >>> 0;

interface Reply {
  readonly vTag: number;
  readonly type: number;
  readonly flags: number;
  readonly packet: Buffer;
}

function parseReply(p: Buffer): Reply | undefined {
  if (p.length < 16) return undefined;
  return { vTag: p.readUInt32BE(4), type: p[12] as number, flags: p[13] as number, packet: p };
}

/** The Initiate Tag and State Cookie of an INIT ACK (RFC 4960 §3.3.3). */
function initAckFields(p: Buffer): { tag: number; cookie: Buffer } {
  const end = 12 + p.readUInt16BE(14);
  let off = 12 + 20;
  while (off + 4 <= end) {
    const type = p.readUInt16BE(off);
    const length = p.readUInt16BE(off + 2);
    if (type === 7) return { tag: p.readUInt32BE(16), cookie: p.subarray(off + 4, off + length) };
    off += (length + 3) & ~3;
  }
  throw new Error('INIT ACK without a State Cookie');
}

interface Attacker {
  readonly socket: dgram.Socket;
  readonly port: number;
  readonly replies: Reply[];
}

async function attackers(n: number): Promise<Attacker[]> {
  const out: Attacker[] = [];
  for (let i = 0; i < n; i++) {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, HOST, resolve));
    const a: Attacker = { socket, port: socket.address().port, replies: [] };
    socket.on('message', (m) => {
      const r = parseReply(m);
      if (r) a.replies.push(r);
    });
    out.push(a);
  }
  cleanup.push(() => Promise.all(out.map((a) => new Promise<void>((r) => a.socket.close(() => r())))));
  return out;
}

/** Sends one packet from each attacker, in batches so that the listener's socket buffer is not the limit. */
async function sendFromEach(from: readonly Attacker[], to: number, build: (a: Attacker, i: number) => Buffer) {
  for (let i = 0; i < from.length; i++) {
    const a = from[i] as Attacker;
    a.socket.send(build(a, i), to, HOST);
    if (i % 50 === 49) await new Promise((r) => setTimeout(r, 1));
  }
}

async function listenSctp(options: Parameters<typeof sctp>[0] = {}): Promise<SctpListener> {
  const listener = (await sctp(options).listen({ host: HOST, port: 0 })) as LlpListener as SctpListener;
  listener.errors$.subscribe(() => {});
  cleanup.push(() => listener.close());
  return listener;
}

/** An honest client: connects, moves data both ways on the rddp SCTP LLP, and closes. */
async function honestExchange(listener: SctpListener): Promise<void> {
  const accepted = firstValueFrom(listener.connections$);
  accepted.catch(() => {}); // awaited below; only a failed connect leaves it unawaited
  const a = await sctp().connect(
    { host: HOST, port: listener.address.port as number },
    { privateData: Buffer.from('hello'), timeoutMs: 8000 },
  );
  const b: LlpConnection = await accepted;
  cleanup.push(() => {
    a.abort();
    b.abort();
  });
  const got = { a: [] as Buffer[], b: [] as Buffer[] };
  const collect = (s: LlpStream, into: Buffer[]) =>
    s.setReceiver((u) => into.push(Buffer.concat(u.chunks.map((c) => Buffer.from(c)))));
  collect(a.streams[0] as LlpStream, got.a);
  collect(b.streams[0] as LlpStream, got.b);
  const there = [pattern(3000, 1), pattern(100, 2)];
  const back = [pattern(5000, 3)];
  for (const u of there) (a.streams[0] as LlpStream).send([u]);
  for (const u of back) (b.streams[0] as LlpStream).send([u]);
  await until(() => got.b.length === there.length && got.a.length === back.length, 'data both ways');
  expect(got.b).toEqual(there);
  expect(got.a).toEqual(back);
  await a.close();
}

describe('hostile datagrams against an SCTP listener (RFC 4960 §5.1.3, §8.4, §8.5)', () => {
  it('16-octet garbage with bad checksums from 1200 source ports, repeated, makes no state; an honest client connects and moves data', async () => {
    const listener = await listenSctp();
    const port = listener.address.port as number;
    const from = await attackers(ATTACK_PORTS);
    const garbage = (a: Attacker) => sctpPacket(a.port, port, randomTag(), [garbageChunk()], true);
    expect(garbage(from[0] as Attacker).length).toBe(16);
    let spraying = true;
    let rounds = 0;
    const spray = (async () => {
      while (spraying) {
        await sendFromEach(from, port, garbage);
        rounds++;
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    cleanup.push(async () => {
      spraying = false;
      await spray;
    });
    // Two rounds' worth have arrived (or the old code's peer table is full).
    await until(
      () => listener.outOfTheBlueDiscards.badChecksum >= 2 * ATTACK_PORTS || listener.peerCount >= 1000,
      'the garbage reaching the listener',
    );
    expect(listener.peerCount).toBe(0);
    expect(listener.pendingPeers).toBe(0);

    await honestExchange(listener);
    expect(rounds).toBeGreaterThanOrEqual(2);
    expect(listener.pendingPeers).toBe(0);
    await until(() => listener.peerCount === 0, 'the honest peer state gone after its close');
  }, 60_000);

  it('valid packets other than an INIT from unknown sources make no state and get no answer; INITs are answered statelessly', async () => {
    const listener = await listenSctp();
    const port = listener.address.port as number;
    const from = await attackers(ATTACK_PORTS);
    const kinds: ((a: Attacker) => Buffer)[] = [
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(0, 3, Buffer.alloc(16, 7))]), // DATA
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(3, 0, Buffer.alloc(12))]), // SACK
      (a) => sctpPacket(a.port, port, randomTag(), [heartbeat()]),
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(7, 0, Buffer.alloc(4))]), // SHUTDOWN
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(10, 0, Buffer.alloc(80, 9))]), // forged COOKIE ECHO
      (a) => sctpPacket(a.port, port, randomTag(), [initChunk(randomTag())]), // INIT, tag not 0
      (a) => sctpPacket(a.port, port, 0, [initChunk(randomTag()), chunk(0, 3, Buffer.alloc(16))]), // INIT bundled
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(11, 0)]), // COOKIE ACK
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(9, 0)]), // ERROR
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(0x40, 0, Buffer.alloc(4))]), // unknown, "report"
      (a) => sctpPacket(a.port, port, randomTag(), [chunk(6, 0)]), // ABORT
    ];
    const discarded = () => {
      const d = listener.outOfTheBlueDiscards;
      return d.notInit + d.badCookie;
    };
    await sendFromEach(from, port, (a, i) => (kinds[i % kinds.length] as (a: Attacker) => Buffer)(a));
    await until(() => discarded() >= 1000 || listener.peerCount >= 1000, 'the packets reaching the listener');
    // Those lost on the way are sent again until every one has arrived.
    await sendFromEach(from, port, (a, i) => (kinds[i % kinds.length] as (a: Attacker) => Buffer)(a));
    await until(() => discarded() >= ATTACK_PORTS || listener.peerCount >= 1000, 'every kind discarded');
    expect(listener.peerCount).toBe(0);
    // RFC 4960 §8.4: silently discarded, so no answer to reflect at a forged source.
    await new Promise((r) => setTimeout(r, 200));
    expect(from.reduce((n, a) => n + a.replies.length, 0)).toBe(0);

    // An out-of-the-blue SHUTDOWN ACK gets SHUTDOWN COMPLETE, T bit set, its tag reflected (§8.4 (5)).
    const one = from[0] as Attacker;
    one.socket.send(sctpPacket(one.port, port, 0x01020304, [chunk(8, 0)]), port, HOST);
    await until(() => one.replies.some((r) => r.type === 14), 'SHUTDOWN COMPLETE');
    expect(one.replies.find((r) => r.type === 14)).toMatchObject({ vTag: 0x01020304, flags: 1 });

    // Valid INITs from every port: each gets an INIT ACK (retransmitted like T1-init until it does), and the
    // listener still keeps nothing (§5.1.3).
    const tags = from.map(() => randomTag());
    const initAcked = (a: Attacker) => a.replies.some((r) => r.type === 2);
    for (let attempt = 0; attempt < 20 && !from.every(initAcked) && listener.peerCount < 1000; attempt++) {
      await sendFromEach(
        from.filter((a) => !initAcked(a)),
        port,
        (a) => sctpPacket(a.port, port, 0, [initChunk(tags[from.indexOf(a)] as number)]),
      );
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(from.every(initAcked)).toBe(true);
    expect(listener.peerCount).toBe(0);
    for (const [i, a] of from.entries()) expect(a.replies.find((r) => r.type === 2)?.vTag).toBe(tags[i]);

    await honestExchange(listener);
  }, 90_000);

  it('a State Cookie is good only from its source; bad checksums and wrong tags to a live association are discarded silently and extend no timer', async () => {
    const listener = await listenSctp({ handshakeTimeoutMs: 1000 });
    const port = listener.address.port as number;
    const [peer, thief] = (await attackers(2)) as [Attacker, Attacker];
    const myTag = randomTag();
    peer.socket.send(sctpPacket(peer.port, port, 0, [initChunk(myTag)]), port, HOST);
    await until(() => peer.replies.some((r) => r.type === 2), 'INIT ACK');
    const initAck = peer.replies.find((r) => r.type === 2) as Reply;
    const { tag: peerTag, cookie } = initAckFields(initAck.packet);
    const cookieEcho = (a: Attacker) => sctpPacket(a.port, port, peerTag, [chunk(10, 0, cookie)]);

    // The cookie replayed from another source port (SCTP ports and tag unchanged) creates nothing.
    const before = listener.outOfTheBlueDiscards.badCookie;
    thief.socket.send(cookieEcho(thief), port, HOST);
    await until(
      () => listener.outOfTheBlueDiscards.badCookie > before || listener.peerCount > 0,
      'the replayed cookie handled',
    );
    expect(listener.peerCount).toBe(0);
    expect(thief.replies).toEqual([]);

    // From its own source it makes the association: COOKIE ACK with our tag (§5.1.5).
    peer.socket.send(cookieEcho(peer), port, HOST);
    await until(() => peer.replies.some((r) => r.type === 11), 'COOKIE ACK');
    expect(peer.replies.find((r) => r.type === 11)?.vTag).toBe(myTag);
    expect(listener.peerCount).toBe(1);
    expect(listener.pendingPeers).toBe(1);

    // No Session Initiate follows. Bad checksums with the right tag and good checksums with a wrong tag keep
    // coming from the peer's own address: the responder's handshake timer fires anyway (ABORT, §9.1), and
    // its state for the peer goes although they go on.
    let spraying = true;
    const spray = (async () => {
      while (spraying) {
        peer.socket.send(sctpPacket(peer.port, port, peerTag, [heartbeat()], true), port, HOST);
        peer.socket.send(sctpPacket(peer.port, port, peerTag ^ 0x00ff00ff, [heartbeat()]), port, HOST);
        // An unrecognized chunk whose type asks for a report (RFC 4960 §3.2): with a wrong tag, not even that.
        const report = chunk(0x40, 0, Buffer.alloc(4));
        peer.socket.send(sctpPacket(peer.port, port, peerTag ^ 0x00ff00ff, [report]), port, HOST);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    cleanup.push(async () => {
      spraying = false;
      await spray;
    });
    await until(() => peer.replies.some((r) => r.type === 6 && r.vTag === myTag), 'the ABORT');
    // It is the handshake timer's ABORT: the wrong-tag packets did not end the association either.
    const abort = peer.replies.find((r) => r.type === 6) as Reply;
    expect(abort.packet.subarray(16).toString('latin1')).toContain('no Session Initiate');
    await until(() => listener.peerCount === 0, 'the peer state gone while bad packets keep coming', 15_000);
    expect(listener.pendingPeers).toBe(0);
    // RFC 4960 §8.5: the wrong-tag packets were discarded silently (no ERROR, no HEARTBEAT ACK).
    expect(peer.replies.filter((r) => r.type === 9 || r.type === 5)).toEqual([]);
  }, 60_000);
});

describe('RFC 4960 §5.1.3 State Cookie MAC', () => {
  it('HMAC-SHA-256 over the cookie information and the INIT, compared in constant time; the key rotates and the one before still checks', async () => {
    const { createHmac } = await import('node:crypto');
    const { EventEmitter } = await import('node:events');
    const { createEndpoint } = await import('../src/pkg.js');
    const { createRequire } = await import('node:module');
    const Chunk = createRequire(import.meta.url)('@rddp/sctp/lib/chunk') as new (
      type: string,
      o: object,
    ) => { toBuffer(): Buffer };
    const ep = createEndpoint(
      { localPort: 7001, streams: 1, aRwnd: 65_536, idata: false, scheduler: 'rr' },
      new EventEmitter(),
    ) as unknown as {
      cookieSecretKey: Buffer;
      createCookie(init: object, header: object, tag: number): Buffer;
      validateCookie(cookie: Buffer, header: object): unknown;
      rotateCookieSecret(): void;
      DESTROY(): void;
    };
    try {
      const init = new Chunk('init', {
        initiate_tag: 7,
        a_rwnd: 65_536,
        outbound_streams: 1,
        inbound_streams: 1,
        initial_tsn: 1,
      });
      const header = { src_port: 7002, dst_port: 7001, v_tag: 0 };
      const cookie = ep.createCookie(init, header, 99);
      const info = cookie.subarray(32, 48);
      const initBytes = cookie.subarray(48);
      expect(cookie.subarray(0, 32)).toEqual(
        createHmac('sha256', ep.cookieSecretKey).update(info).update(initBytes).digest(),
      );
      const echo = { src_port: 7002, dst_port: 7001, v_tag: 99 };
      expect(ep.validateCookie(cookie, echo)).toBeTruthy();
      const forged = Buffer.from(cookie);
      forged[5] = (forged[5] as number) ^ 1;
      expect(ep.validateCookie(forged, echo)).toBeFalsy();
      ep.rotateCookieSecret();
      expect(ep.validateCookie(cookie, echo)).toBeTruthy(); // made under the key before
      ep.rotateCookieSecret();
      expect(ep.validateCookie(cookie, echo)).toBeFalsy(); // two rotations ago
    } finally {
      ep.DESTROY();
    }
  });
});
