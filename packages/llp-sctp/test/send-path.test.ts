/**
 * The transmit path of @rddp/sctp (packages/sctp/lib/transmit.js, scheduler.js), seen on the wire: the
 * order the stream schedulers give DATA (RFC 8260 §3), fragments of one message on consecutive TSNs
 * without I-DATA (RFC 4960 §6.9) and interleaved with it (RFC 8260 §2), the SACK policy (RFC 4960 §6.2,
 * RFC 7053), T3-rtx expiries the peer shows to be spurious, and the packet size taken from the route.
 */

import dgram from 'node:dgram';
import type { LlpStream } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { SctpConnection } from '../src/connection.js';
import { signSctpPacket } from '../src/crc32c.js';
import { sctp } from '../src/index.js';
import type { PkgAssociation } from '../src/pkg.js';
import { linkMtuTowards, sctpPacketSize } from '../src/pmtu.js';
import { ChunkType, chunks } from '../src/wire.js';
import { barePairOnLink, pattern, until } from './harness.js';

const I_DATA = 64;

/** The DATA / I-DATA chunks of a packet: type, flags, TSN, stream. */
function dataOf(p: Buffer): { type: number; flags: number; tsn: number; sid: number }[] {
  return chunks(p)
    .filter((c) => c.type === ChunkType.DATA || c.type === I_DATA)
    .map((c) => ({
      type: c.type,
      flags: c.flags,
      tsn: p.readUInt32BE(c.offset + 4),
      sid: p.readUInt16BE(c.offset + 8),
    }));
}

/** Queues `sends` in one turn on a held link and returns the stream of each DATA chunk in TSN order. */
async function wireOrder(
  setup: (a: PkgAssociation) => void,
  sends: { sid: number; size: number }[],
): Promise<number[]> {
  const p = await barePairOnLink();
  const a = p.clientAssociation;
  setup(a);
  const seen: { tsn: number; sid: number }[] = [];
  p.clientEnd.tap = (pkt) => seen.push(...dataOf(pkt));
  p.clientEnd.hold = true;
  let done = 0;
  for (const [i, s] of sends.entries()) a.SEND(pattern(s.size, i), { stream_id: s.sid, ppid: 0 }, () => done++);
  await until(() => done === sends.length, 'every SEND handed over');
  p.close();
  return seen.sort((x, y) => (x.tsn - y.tsn) | 0).map((x) => x.sid);
}

describe('RFC 8260 §3 stream schedulers', () => {
  const sends = [
    { sid: 1, size: 300 },
    { sid: 1, size: 300 },
    { sid: 1, size: 300 },
    { sid: 2, size: 300 },
  ];

  it('RFC 8260 §3.2 round-robin (the default): one message per stream in turn', async () => {
    expect(await wireOrder(() => {}, sends)).toEqual([1, 2, 1, 1]);
  });

  it('RFC 8260 §3.1 first-come, first-served: the order of SEND', async () => {
    expect(await wireOrder((a) => a.SETSCHEDULER('fcfs'), sends)).toEqual([1, 1, 1, 2]);
  });

  it('RFC 8260 §3.4 priority: the lowest priority value first', async () => {
    const order = await wireOrder((a) => {
      a.SETSCHEDULER('priority');
      a.SETPRIORITY(1, 5);
      a.SETPRIORITY(2, 0);
    }, sends);
    expect(order).toEqual([2, 1, 1, 1]);
  });

  it('RFC 4960 §6.9: without I-DATA the fragments of one message take consecutive TSNs, whatever the scheduler', async () => {
    const order = await wireOrder(() => {}, [
      { sid: 1, size: 4000 }, // three fragments at this PMTU (1500)
      { sid: 2, size: 100 },
    ]);
    expect(order).toEqual([1, 1, 1, 2]);
  });
});

describe('RFC 8260 I-DATA through the transport', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  async function pair(initiatorInterleaving: boolean, responderInterleaving: boolean) {
    const wire: Buffer[] = [];
    const trace = (pkt: Uint8Array, dir: 'in' | 'out') => {
      if (dir === 'out') wire.push(Buffer.from(pkt));
    };
    const tr = sctp({ interleaving: responderInterleaving });
    const listener = await tr.listen({ host: '127.0.0.1', port: 0 });
    cleanup.push(() => listener.close());
    const accepted = firstValueFrom(listener.connections$);
    const ti = sctp({ interleaving: initiatorInterleaving, trace, pmtu: 1472 });
    const a = (await ti.connect(
      { host: '127.0.0.1', port: listener.address.port as number },
      { streams: 3 },
    )) as SctpConnection;
    const b = (await accepted) as SctpConnection;
    cleanup.push(() => {
      a.abort();
      b.abort();
    });
    return { a, b, wire };
  }

  it('RFC 8260 §2.2: used only when both INIT and INIT ACK offer it; otherwise DATA', async () => {
    for (const [i, r, used] of [
      [true, true, true],
      [true, false, false],
      [false, true, false],
    ] as const) {
      const { a, b, wire } = await pair(i, r);
      expect({ i, r, a: a.sctpAssociation.interleaving, b: b.sctpAssociation.interleaving }).toEqual({
        i,
        r,
        a: used,
        b: used,
      });
      const got: Buffer[] = [];
      (b.streams[1] as LlpStream).setReceiver((u) => got.push(Buffer.concat(u.chunks.map((c) => Buffer.from(c)))));
      (a.streams[1] as LlpStream).send([pattern(5000, 1)]);
      await until(() => got.length === 1, 'the message');
      expect(got[0]?.equals(pattern(5000, 1))).toBe(true);
      const types = new Set(wire.flatMap((p) => dataOf(p).map((d) => d.type)));
      expect([...types]).toEqual([used ? I_DATA : ChunkType.DATA]);
    }
  });

  it('RFC 8260 §2.1: a small message on stream 2 goes between the fragments of a large one on stream 1, and arrives first', async () => {
    const { a, b, wire } = await pair(true, true);
    const order: number[] = [];
    (b.streams[1] as LlpStream).setReceiver(() => order.push(1));
    (b.streams[2] as LlpStream).setReceiver(() => order.push(2));
    (a.streams[1] as LlpStream).send([pattern(20_000, 1)]); // 14 fragments of 1452 octets
    (a.streams[2] as LlpStream).send([pattern(100, 2)]);
    await until(() => order.length === 2, 'both messages');
    expect(order).toEqual([2, 1]);
    const sids = wire
      .flatMap((p) => dataOf(p))
      .sort((x, y) => (x.tsn - y.tsn) | 0)
      .map((d) => d.sid)
      .filter((s) => s !== 0);
    // round-robin per fragment: stream 2's only fragment right after stream 1's first
    expect(sids.slice(0, 3)).toEqual([1, 2, 1]);
  });
});

describe('RFC 4960 §6.2 SACK policy', () => {
  it('a lone packet waits for the delayed-SACK timer; the second packet is acknowledged at once', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const s = p.serverAssociation;
    // the first DATA is acknowledged at once (§6.2); start from there
    await new Promise<void>((r) => a.SEND(pattern(100, 0), { stream_id: 0, ppid: 0 }, () => r()));
    await until(
      () => s.stats.sacksSent === 1 && (s as unknown as { _sack_timer: unknown })._sack_timer == null,
      'the first SACK',
    );
    const received = s.stats.packetsReceived;
    a.SEND(pattern(100, 1), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => s.stats.packetsReceived === received + 1, 'a lone packet');
    expect(s.stats.sacksSent).toBe(1);
    expect((s as unknown as { _sack_timer: unknown })._sack_timer).toBeTruthy();
    a.SEND(pattern(100, 2), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => s.stats.packetsReceived === received + 2, 'the second packet');
    expect(s.stats.sacksSent).toBe(2);
    expect((s as unknown as { _sack_timer: unknown })._sack_timer).toBeFalsy();
    p.close();
  });

  it('RFC 7053: a sender that waits for window sets the I bit on its last packet', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const flagged: number[] = [];
    p.clientEnd.tap = (pkt) => {
      for (const d of dataOf(pkt)) if (d.flags & 0x08) flagged.push(d.tsn);
    };
    p.clientEnd.hold = true;
    // more than the initial cwnd (RFC 9260 §7.2.1: 4404 octets at this PMTU)
    let done = 0;
    for (let i = 0; i < 8; i++) a.SEND(pattern(1000, i), { stream_id: 0, ppid: 0 }, () => done++);
    await until(() => flagged.length === 1, 'a packet with the I bit');
    expect(done).toBeLessThan(8);
    expect(a.stats.immediateSacksRequested).toBe(1);
    p.clientEnd.release();
    await until(() => done === 8 && a.outstandingCount === 0, 'everything acknowledged');
    p.close();
  });

  it('RFC 7053: a lone packet with the I bit is acknowledged at once', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    const s = p.serverAssociation;
    await new Promise<void>((r) => a.SEND(pattern(100, 0), { stream_id: 0, ppid: 0 }, () => r()));
    await until(
      () => s.stats.sacksSent === 1 && (s as unknown as { _sack_timer: unknown })._sack_timer == null,
      'the first SACK',
    );
    p.clientEnd.mangle = (pkt) => {
      const out = Buffer.from(pkt);
      for (const c of chunks(out))
        if (c.type === ChunkType.DATA) out[c.offset + 1] = (out[c.offset + 1] as number) | 0x08;
      return signSctpPacket(out);
    };
    const received = s.stats.packetsReceived;
    a.SEND(pattern(100, 1), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => s.stats.packetsReceived === received + 1, 'the lone packet');
    expect(s.stats.sacksSent).toBe(2);
    expect((s as unknown as { _sack_timer: unknown })._sack_timer).toBeFalsy();
    p.close();
  });
});

describe('RFC 4960 §6.3.3 T3-rtx', () => {
  it('an expiry whose retransmission the peer reports as a duplicate (RFC 4960 §6.2 Duplicate TSN) is counted as spurious', async () => {
    const p = await barePairOnLink();
    const a = p.clientAssociation;
    a.SETPROTOCOLPARAMETERS({ rto_initial: 100, rto_min: 100, rto_max: 400 });
    await new Promise<void>((r) => a.SEND(pattern(100, 0), { stream_id: 0, ppid: 0 }, () => r()));
    await until(() => a.outstandingCount === 0, 'the first message acknowledged');
    const chunksBefore = p.serverAssociation.stats.dataChunksReceived;
    p.serverEnd.hold = true; // the data arrives, its SACK does not: T3-rtx fires
    a.SEND(pattern(100, 1), { stream_id: 0, ppid: 0 }, () => {});
    await until(() => a.stats.t3Expiries === 1, 'T3-rtx');
    await until(() => p.serverAssociation.stats.dataChunksReceived === chunksBefore + 2, 'the retransmission');
    p.serverEnd.release();
    await until(() => a.outstandingCount === 0 && a.stats.spuriousT3 === 1, 'the duplicate report');
    expect(a.stats.t3Expiries).toBe(1);
    p.close();
  });
});

describe('RFC 4960 §7.3 / RFC 8899 §3: the packet size from the route', () => {
  it('loopback: 64 KiB-class packets (the interface MTU less IP and UDP headers); an Ethernet MTU gives 1472', async () => {
    expect(sctpPacketSize(1500, '10.0.0.1', 'udp')).toBe(1472);
    expect(sctpPacketSize(1500, '10.0.0.1', 'raw')).toBe(1480);
    expect(sctpPacketSize(65_536, '127.0.0.1', 'udp')).toBe(65_507);
    expect(sctpPacketSize(1500, 'fd00::1', 'udp')).toBe(1452);
    const lo = linkMtuTowards('127.0.0.1');
    const t = sctp();
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const accepted = firstValueFrom(listener.connections$);
    const a = (await t.connect({ host: '127.0.0.1', port: listener.address.port as number })) as SctpConnection;
    const b = (await accepted) as SctpConnection;
    const expected = sctpPacketSize(lo, '127.0.0.1', 'udp');
    // RFC 8899: packets start at BASE_PLPMTU; one probe of the route's size confirms it
    await until(() => a.sctpAssociation.PMTU === expected && b.sctpAssociation.PMTU === expected, 'the probe');
    expect(a.sctpAssociation.plpmtud?.state).toBe('complete');
    // one DATA chunk per DDP Segment: MULPDU = the packet less the common and I-DATA headers
    if (expected >= 16 * 1024) expect((a.streams[0] as LlpStream).mulpdu).toBe(expected - 32);
    const got: number[] = [];
    (b.streams[0] as LlpStream).setReceiver((u) => got.push(u.length));
    (a.streams[0] as LlpStream).send([pattern((a.streams[0] as LlpStream).mulpdu, 3)]);
    await until(() => got.length === 1, 'a MULPDU-sized segment');
    a.abort();
    b.abort();
    await listener.close();
  });
});

describe('RFC 8899 PLPMTUD (§6.2: HEARTBEAT probes padded with PAD chunks)', () => {
  it('a path that drops packets over 1400 octets although the route says 64 KiB: probes find its PMTU, 60 KB messages get through', async () => {
    // A UDP relay between the two ends that loses every datagram over 1400 octets (a tunnel's MTU).
    const limit = 1400;
    const t = sctp();
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const toListener = dgram.createSocket('udp4');
    const fromClient = dgram.createSocket('udp4');
    await Promise.all([
      new Promise<void>((r) => toListener.bind(0, '127.0.0.1', () => r())),
      new Promise<void>((r) => fromClient.bind(0, '127.0.0.1', () => r())),
    ]);
    let client: { address: string; port: number } | undefined;
    let dropped = 0;
    // SCTP over UDP takes its ports from the UDP ones: the relay rewrites them and signs again.
    const listenPort = listener.address.port as number;
    const relayPort = fromClient.address().port;
    const ports = (m: Buffer, src: number | undefined, dst: number | undefined) => {
      if (src !== undefined) m.writeUInt16BE(src, 0);
      if (dst !== undefined) m.writeUInt16BE(dst, 2);
      return signSctpPacket(m);
    };
    fromClient.on('message', (m, rinfo) => {
      client = { address: rinfo.address, port: rinfo.port };
      if (m.length > limit) dropped++;
      else toListener.send(ports(m, toListener.address().port, listenPort), listenPort, '127.0.0.1');
    });
    toListener.on('message', (m) => {
      if (m.length > limit) dropped++;
      else if (client) fromClient.send(ports(m, relayPort, client.port), client.port, client.address);
    });
    const accepted = firstValueFrom(listener.connections$);
    const a = (await t.connect({ host: '127.0.0.1', port: fromClient.address().port })) as SctpConnection;
    const b = (await accepted) as SctpConnection;
    try {
      const got: number[] = [];
      (b.streams[0] as LlpStream).setReceiver((u) => got.push(u.length));
      for (let i = 0; i < 4; i++) (a.streams[0] as LlpStream).send([pattern(60_000, i)]);
      await until(() => got.length === 4, 'four 60 KB messages', 30_000);
      // sizes over the limit fail after MAX_PROBES unanswered rounds of PROBE_TIMER (1 s, RFC 8899 §5.1.1)
      await until(() => a.sctpAssociation.plpmtud?.state === 'complete', 'the end of the search', 30_000);
      expect(a.sctpAssociation.PMTU).toBeLessThanOrEqual(limit);
      expect(a.sctpAssociation.PMTU).toBeGreaterThan(limit - 64 - 4);
      expect(dropped).toBeGreaterThan(0); // the probes that were too large
      expect(
        a.sctpAssociation.stats.retransmissions,
        JSON.stringify({ s: a.sctpAssociation.stats, d: a.sctpAssociation.plpmtud, p: a.sctpAssociation.PMTU }),
      ).toBe(0); // no DATA was sent larger than confirmed
    } finally {
      a.abort();
      b.abort();
      await listener.close();
      toListener.close();
      fromClient.close();
    }
  }, 60_000);
});
