/**
 * Loss recovery of `@rddp/sctp` (packages/sctp/NOTICE.md, docs/SCTP.md "Loss"), on the
 * bare package over the in-memory link, losing chosen packets: fast retransmit (RFC 4960 §7.2.4), T3-rtx
 * at RTO.Min (§6.3.3), T1-cookie (§5.1), T2-shutdown (§9.2), the receiver's drop at a closed window (§6.2).
 * tools/cli/test/lossy.test.ts moves 256 MiB over a randomly lossy veth link.
 */
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { signSctpPacket } from '../src/crc32c.js';
import { allAcked, type PkgAssociation } from '../src/pkg.js';
import { ChunkType, chunks, dataChunks } from '../src/wire.js';
import { type BarePair, barePairOnLink, pattern, until } from './harness.js';

/** TCB fields these tests read (the package keeps them on the association). */
type Tcb = PkgAssociation & { RTO: number; rto_min: number; fastRecovery: boolean };

const pairs: BarePair[] = [];
afterEach(() => {
  for (const p of pairs.splice(0)) p.close();
});

/** TSN → times (ms) it left the sender, and a loss rule by TSN and transmission count. */
function dataLog(lose: (tsn: number, transmission: number) => boolean) {
  const sent = new Map<number, number[]>();
  const drop = (p: Buffer): boolean => {
    let lost = false;
    for (const d of dataChunks(p)) {
      const times = sent.get(d.tsn) ?? [];
      times.push(performance.now());
      sent.set(d.tsn, times);
      if (lose(d.tsn, times.length)) lost = true;
    }
    return lost;
  };
  return { sent, drop };
}

/** Gap Ack Blocks in each SACK of a packet (RFC 4960 §3.3.4). */
function sackGapBlocks(p: Buffer): number[] {
  return chunks(p)
    .filter((c) => c.type === ChunkType.SACK)
    .map((c) => p.readUInt16BE(c.offset + 12));
}

async function receive(pair: BarePair, octets: number): Promise<Buffer> {
  const got: Buffer[] = [];
  let n = 0;
  pair.server.on('data', (d: Buffer) => {
    got.push(d);
    n += d.length;
  });
  await until(() => n >= octets, `${octets} octets delivered`);
  return Buffer.concat(got);
}

function send(a: PkgAssociation, data: Buffer): void {
  a.SEND(data, { stream_id: 0, ppid: 0 }, (e) => {
    if (e) throw e;
  });
}

describe('loss recovery of the patched sctp package', () => {
  it('RFC 4960 §7.2.4: one lost DATA chunk is fast retransmitted once, on three SACKs with gaps, long before T3-rtx', async () => {
    let target = -1;
    const log = dataLog((tsn, n) => tsn === target && n === 1);
    let gapSacks = 0;
    const pair = await barePairOnLink({
      serverDrop: (p) => {
        if (sackGapBlocks(p).some((n) => n > 0)) gapSacks++;
        return false;
      },
    });
    pairs.push(pair);
    pair.clientEnd.drop = log.drop;
    const a = pair.clientAssociation as Tcb;
    target = (a.my_next_tsn.number + 2) >>> 0;
    const message = pattern(64 * 1024, 1);
    const delivered = receive(pair, message.length);
    send(a, message);
    expect((await delivered).equals(message)).toBe(true);
    await until(() => allAcked(a), 'everything acknowledged');

    const lost = log.sent.get(target) as number[];
    expect(lost).toHaveLength(2);
    // T3-rtx would wait RTO >= RTO.Min = 1 s (the bare package's default).
    expect((lost[1] as number) - (lost[0] as number)).toBeLessThan(500);
    for (const [tsn, times] of log.sent)
      if (tsn !== target) expect({ tsn, sent: times.length }).toEqual({ tsn, sent: 1 });
    // §6.7: the receiver SACKs every packet while the gap is open (the package used to send one per burst).
    expect(gapSacks).toBeGreaterThanOrEqual(3);
    expect(a.flightsize).toBe(0);
  });

  it('RFC 4960 §6.3.3: a lost fast retransmission is recovered by T3-rtx after RTO.Min (SETPROTOCOLPARAMETERS, §10.1 M)', async () => {
    let target = -1;
    const log = dataLog((tsn, n) => tsn === target && n <= 2);
    const pair = await barePairOnLink();
    pairs.push(pair);
    pair.clientEnd.drop = log.drop;
    const a = pair.clientAssociation as Tcb;
    a.SETPROTOCOLPARAMETERS({ rto_initial: 100, rto_min: 100, rto_max: 60_000 });
    expect(a.RTO).toBe(100);
    target = (a.my_next_tsn.number + 5) >>> 0;
    const message = pattern(64 * 1024, 2);
    const delivered = receive(pair, message.length);
    const t0 = performance.now();
    send(a, message);
    expect((await delivered).equals(message)).toBe(true);
    const lost = log.sent.get(target) as number[];
    expect(lost).toHaveLength(3);
    // The third transmission is the T3-rtx one: at least RTO.Min after the fast retransmission.
    expect((lost[2] as number) - (lost[1] as number)).toBeGreaterThanOrEqual(90);
    expect(performance.now() - t0).toBeLessThan(1000);
    for (const [tsn, times] of log.sent) if (tsn !== target) expect(times.length).toBeLessThanOrEqual(2);
    await until(() => allAcked(a), 'everything acknowledged');
    expect(a.flightsize).toBe(0);
  });

  it('RFC 4960 §6.3.1: on a sub-millisecond link RTO settles at RTO.Min (RTTVAR <- G only when it is 0)', async () => {
    const pair = await barePairOnLink();
    pairs.push(pair);
    const a = pair.clientAssociation as Tcb;
    a.SETPROTOCOLPARAMETERS({ rto_initial: 3000, rto_min: 20, rto_max: 60_000 });
    const delivered = receive(pair, 40 * 4096);
    for (let i = 0; i < 40; i++) {
      await new Promise<void>((resolve, reject) =>
        a.SEND(pattern(4096, i), { stream_id: 0, ppid: 0 }, (e) => (e ? reject(e) : resolve())),
      );
      await until(() => allAcked(a), 'message acknowledged');
    }
    await delivered;
    // The package kept RTTVAR >= G = 50 ms, so RTO never fell below 200 ms.
    expect(a.RTO).toBeLessThan(100);
  });

  it('RFC 4960 §5.1: a lost COOKIE ECHO is sent again on T1-cookie expiry and the association comes up', async () => {
    let cookieEchoes = 0;
    const pair = await barePairOnLink({
      clientDrop: (p) => chunks(p).some((c) => c.type === ChunkType.COOKIE_ECHO) && ++cookieEchoes === 1,
    });
    pairs.push(pair);
    expect(cookieEchoes).toBe(2);
    expect(pair.clientAssociation.state).toBe('ESTABLISHED');
    expect(pair.serverAssociation.state).toBe('ESTABLISHED');
  });

  it('RFC 4960 §9.2: a lost SHUTDOWN is sent again on T2-shutdown expiry and the shutdown completes', async () => {
    const pair = await barePairOnLink();
    pairs.push(pair);
    const a = pair.clientAssociation as Tcb;
    a.SETPROTOCOLPARAMETERS({ rto_initial: 100, rto_min: 100, rto_max: 60_000 });
    let shutdowns = 0;
    pair.clientEnd.drop = (p) => chunks(p).some((c) => c.type === ChunkType.SHUTDOWN) && ++shutdowns === 1;
    const done = new Promise<void>((r) => a.once('SHUTDOWN COMPLETE', () => r()));
    a.SHUTDOWN();
    await done;
    expect(shutdowns).toBe(2);
  });

  it('RFC 4960 §9.2: the Cumulative TSN Ack of SHUTDOWN acknowledges DATA whose SACKs were lost, and the shutdown completes', async () => {
    const pair = await barePairOnLink();
    pairs.push(pair);
    const a = pair.clientAssociation as Tcb;
    const b = pair.serverAssociation as Tcb;
    for (const x of [a, b]) x.SETPROTOCOLPARAMETERS({ rto_initial: 100, rto_min: 100, rto_max: 60_000 });
    // Every SACK the client sends is lost from here on (stripped from the packets that carry one): only
    // its SHUTDOWN's Cumulative TSN Ack can tell the server that its DATA arrived.
    let sacksLost = 0;
    pair.clientEnd.mangle = (p) => {
      const kept = chunks(p).filter((c) => c.type !== ChunkType.SACK);
      if (kept.length === chunks(p).length) return p;
      sacksLost++;
      return signSctpPacket(
        Buffer.concat([p.subarray(0, 12), ...kept.map((c) => p.subarray(c.offset, c.offset + ((c.length + 3) & ~3)))]),
      );
    };
    pair.clientEnd.drop = (p) => {
      const cs = chunks(p);
      if (cs.length === 0 || cs.some((c) => c.type !== ChunkType.SACK)) return false;
      sacksLost++;
      return true;
    };
    const dataSent = dataLog(() => false);
    pair.serverEnd.tap = (p) => dataSent.drop(p);
    const message = pattern(1000, 3);
    const got = new Promise<Buffer>((r) => pair.client.once('data', (d: Buffer) => r(d)));
    b.SEND(message, { stream_id: 0, ppid: 0 }, () => {});
    expect((await got).equals(message)).toBe(true);
    expect(allAcked(b)).toBe(false);
    let lost = false;
    for (const x of [a, b]) x.once('COMMUNICATION LOST', () => (lost = true));
    const serverDone = new Promise<void>((r) => b.once('SHUTDOWN COMPLETE', () => r()));
    const clientDone = new Promise<void>((r) => a.once('SHUTDOWN COMPLETE', () => r()));
    a.SHUTDOWN();
    await Promise.all([clientDone, serverDone]);
    expect(lost).toBe(false);
    expect(sacksLost).toBeGreaterThan(0);
    // Acknowledged by the SHUTDOWN: not sent again T3-rtx after T3-rtx until T2-shutdown gave up.
    for (const [, times] of dataSent.sent) expect(times.length).toBeLessThanOrEqual(2);
  });

  it('RFC 4960 §6.2, §6.5: with its window closed the receiver drops the largest TSN held for reordering; SSNs start at 0', () => {
    const require = createRequire(import.meta.url);
    const Reassembly = require('@rddp/sctp/lib/reassembly') as new (o: {
      rwnd: number;
      onDeliver?: (data: Buffer) => void;
    }) => {
      rwnd: number;
      cumTsn: number;
      ranges: [number, number][];
      init(o: { initial_tsn: number }): void;
      process(chunk: object): boolean;
    };
    const chunk = (tsn: number, ssn: number, B: boolean, E: boolean, stream_id = 0) => ({
      chunkType: 'data',
      tsn,
      stream_id,
      ssn,
      ppid: 0,
      flags: { B, E, U: false },
      user_data: pattern(1000, tsn),
    });
    const delivered: Buffer[] = [];
    const r = new Reassembly({ rwnd: 3000, onDeliver: (d) => delivered.push(d) });
    r.init({ initial_tsn: 100 });
    // Messages SSN 0 (TSN 100), SSN 1 (TSN 101-102), SSN 2 (TSN 103); TSN 100 is lost at first.
    expect(r.process(chunk(101, 1, true, false))).toBe(true);
    expect(r.process(chunk(102, 1, false, true))).toBe(true);
    expect(r.process(chunk(103, 2, true, true))).toBe(true);
    // §6.5: SSN 1 waits for SSN 0 (the package started the stream at the first SSN it saw and delivered it).
    expect(delivered).toHaveLength(0);
    expect(r.rwnd).toBe(0);
    // Window closed: TSN 100 (below the largest TSN) is taken and 103, the largest held, is dropped.
    expect(r.process(chunk(100, 0, true, true))).toBe(true);
    expect(delivered.map((d) => d.length)).toEqual([1000, 2000]);
    expect(r.ranges).toEqual([]); // nothing held above the Cumulative TSN: 103 is no longer acknowledged
    expect(r.cumTsn).toBe(102);
    // The sender sends 103 again (its SACKs no longer report it).
    expect(r.process(chunk(103, 2, true, true))).toBe(true);
    expect(delivered).toHaveLength(3);
    expect(r.cumTsn).toBe(103);

    // Nothing held above the new TSN (window closed by a paused stream, connection.ts adjustWindow):
    // the new chunk is dropped (the package threw a TypeError).
    const s = new Reassembly({ rwnd: 2000 });
    s.init({ initial_tsn: 1 });
    expect(s.process(chunk(2, 0, true, true, 1))).toBe(true);
    s.rwnd = 0;
    expect(s.process(chunk(1, 0, true, true))).toBe(false);
  });

  it('RFC 4960 §6.2, §3.3.4: what a peer can make the receiver hold is bounded: the window, TSNs within 65 535 of the Cumulative TSN, 1024 Gap Ack Blocks', () => {
    const require = createRequire(import.meta.url);
    const Reassembly = require('@rddp/sctp/lib/reassembly') as new (o: {
      rwnd: number;
    }) => {
      rwnd: number;
      held: number;
      ranges: [number, number][];
      init(o: { initial_tsn: number }): void;
      process(chunk: object): boolean;
    };
    const chunk = (tsn: number, ssn: number, length = 100) => ({
      chunkType: 'data',
      tsn,
      stream_id: 0,
      ssn,
      ppid: 0,
      flags: { B: true, E: true, U: false },
      user_data: pattern(length, tsn),
    });
    const r = new Reassembly({ rwnd: 64 * 1024 });
    r.init({ initial_tsn: 1 });
    // TSN 1 never comes: everything above it is held for reordering.
    expect(r.process(chunk(70_000, 1))).toBe(false); // beyond a 16-bit Gap Ack Block offset
    // every other TSN: each one a Gap Ack Block of its own, up to 1024 of them
    let accepted = 0;
    for (let tsn = 3; tsn < 3 + 2 * 2000; tsn += 2) if (r.process(chunk(tsn, tsn, 16))) accepted++;
    expect(accepted).toBe(1024);
    expect(r.ranges.length).toBe(1024);
    // octets held stay within the window (a chunk that does not fit an open window is the one excess)
    const w = new Reassembly({ rwnd: 10_000 });
    w.init({ initial_tsn: 1 });
    for (let tsn = 2; tsn < 200; tsn++) w.process(chunk(tsn, tsn - 1, 1000));
    expect(w.held).toBeLessThanOrEqual(10_000 + 1000);
    expect(w.rwnd).toBeLessThanOrEqual(0);
  });
});
