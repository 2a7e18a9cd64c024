/**
 * Stream independence, from outside: the two endpoints of one SCTP association run in two child
 * processes (tools/cli/src/bench/sctp-hol-peer.ts, run compiled from tools/cli/dist, public API only) and talk over UDP through a relay in this process
 * (tools/cli/src/bench/sctp-hol-relay.ts) that loses chosen datagrams carrying stream-1 DATA. RFC 4960 §6.6: ordering is per
 * stream, so a gap on one stream does not hold the others; RFC 5043 §4: each DDP Stream is its own SCTP
 * stream, so that DDP Streams are independent.
 *
 * No check here reads a clock: what came before what is read from one process's ordered output (the
 * receiver's delivery order, the sender's completion order, a `report` answered in order on the same
 * pipe) or from the relay, which decides when a repair goes through.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PeerEvent, PeerProcess, waitFor } from '../../../tools/cli/src/bench/sctp-hol-peer.js';
import {
  CHUNK_DATA,
  CHUNK_I_DATA,
  type DataChunk,
  type Delivery,
  type DropPolicy,
  dataChunksOf,
  type ForwardRecord,
  forwardAll,
  heldBehind,
  LoseOnce,
  makeProbe,
  onlyOnStream,
  packetOf,
  randomLossOnStream,
  sctpChecksum,
  UdpRelay,
} from '../../../tools/cli/src/bench/sctp-hol-relay.js';

type Rx = Extract<PeerEvent, { ev: 'rx' }>;
type Done = Extract<PeerEvent, { ev: 'done' }>;

const peers: PeerProcess[] = [];
const relays: UdpRelay[] = [];

function stopAll(): void {
  for (const p of peers.splice(0)) p.kill();
  for (const r of relays.splice(0)) r.close();
}
afterEach(stopAll);
afterAll(stopAll);

/**
 * Both ends send SCTP packets of an Ethernet path's size (UDP over IPv4, 1472 octets) rather than the
 * loopback's 64 KiB: a lost chunk then stands for a lost packet of a real path. The relay loses stream-1
 * chunks alone (the other chunks of their datagrams go on), so bundling (RFC 4960 §6.10) cannot carry
 * the loss over to stream 2.
 */
const PATH = { pmtu: 1472 };

/** Receiver (listener) and sender (initiator) processes, the sender connecting through a relay with `policy`. */
async function topology(policy: DropPolicy, senderTransport: Readonly<Record<string, number | boolean>> = {}) {
  const receiver = PeerProcess.start('receiver', { role: 'listen', transport: PATH, lifetimeMs: 60_000 });
  peers.push(receiver);
  const { port } = await receiver.first('listening');
  const relay = await UdpRelay.open({ port }, policy);
  relays.push(relay);
  const sender = PeerProcess.start('sender', {
    role: 'connect',
    port: relay.port,
    streams: 3,
    size: 800,
    transport: { ...PATH, ...senderTransport },
    lifetimeMs: 60_000,
  });
  peers.push(sender);
  await sender.first('connected');
  return { receiver, sender, relay };
}

/** The sender closes gracefully; both processes report their end. */
async function closeBoth(sender: PeerProcess, receiver: PeerProcess) {
  sender.send({ cmd: 'close' });
  await waitFor(
    () => sender.all('closed').length > 0 && receiver.all('closed').length > 0,
    'both ends closed (RFC 5043 Session Terminate, SHUTDOWN)',
  );
  return { sender: sender.all('closed')[0], receiver: receiver.all('closed')[0] };
}

function qs(events: readonly { s: number; q: number }[], s: number): number[] {
  return events.filter((e) => e.s === s).map((e) => e.q);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

/** Every message of each stream delivered exactly once, in order, every octet as sent. */
function expectDeliveredInOrder(rx: readonly Rx[], counts: Readonly<Record<number, number>>): void {
  for (const [s, n] of Object.entries(counts)) expect({ s, q: qs(rx, Number(s)) }).toEqual({ s, q: range(0, n) });
  expect(rx.filter((e) => !e.intact || !e.inOrder)).toEqual([]);
}

const deliveries = (rx: readonly Rx[]): Delivery[] => rx.map((e) => ({ s: e.s, q: e.q, d: e.d }));

describe('RFC 4960 §6.6, RFC 5043 §4: one DATA chunk lost on stream 1, its repair held at the relay', () => {
  /** Stream-1 messages 0..K-1 go through, message K is lost; then, posted after the loss: */
  const K = 3;
  /** stream-2 messages 0..M-1, and stream-1 messages K+1..K+EXTRA, interleaved. */
  const M = 8;
  const EXTRA = 4;
  /**
   * The relay holds the repair until both sides are done with stream 2, or until the sender has sent it
   * this many times (a count of the sender's own retries, not a duration: fast retransmit, then T3-rtx
   * backing off from RTO.Min 100 ms, RFC 4960 §6.3.3, about 0.7 s in all). The RTO bounds are pinned so
   * that this does not depend on the transport's defaults.
   */
  const HOLD_REPAIRS = 4;

  let run: {
    lost: DataChunk[];
    heldRepairs: number;
    /** What each side had printed when the repair was still held (the relay forwarded it only after). */
    rxBeforeRepair: Rx[];
    doneBeforeRepair: Done[];
    rx: Rx[];
    done: Done[];
    forwards: readonly ForwardRecord[];
    closed: Awaited<ReturnType<typeof closeBoth>>;
  };

  beforeAll(async () => {
    const drop = new LoseOnce(1, K, { holdRepairs: true });
    const { receiver, sender, relay } = await topology(drop.policy, { rtoMinMs: 100, rtoInitialMs: 300 });
    const both = [sender, receiver];
    sender.send({ cmd: 'post', streams: range(0, K + 1).map(() => 1) });
    await waitFor(
      () => drop.lost.some((c) => c.end) && qs(receiver.all('rx'), 1).length === K,
      `stream-1 messages 0..${K - 1} delivered and message ${K} lost`,
      both,
    );
    // Posted after the loss: 2, 2, 1, 2, 2, 1, ...
    const after: number[] = [];
    for (let i = 0, s1 = 0; i < M; i++) {
      after.push(2);
      if (i % 2 === 1 && s1++ < EXTRA) after.push(1);
    }
    sender.send({ cmd: 'post', streams: after });
    // Released once the sender has sent the repair (fast retransmit or T3-rtx) and stream 2 is done on
    // both sides, or once it has sent it HOLD_REPAIRS times.
    await waitFor(
      () =>
        (drop.heldRepairs >= 1 && qs(receiver.all('rx'), 2).length === M && qs(sender.all('done'), 2).length === M) ||
        drop.heldRepairs >= HOLD_REPAIRS,
      'stream 2 delivered and completed, or the repair held as many times',
      both,
    );
    // Everything each child printed before it read `report` happened while the repair was held.
    const doneBeforeRepair = sender.all('done', await sender.report());
    const rxBeforeRepair = receiver.all('rx', await receiver.report());
    const heldRepairs = drop.heldRepairs;
    drop.holding = false;
    relay.flushHeld();
    const total1 = K + 1 + EXTRA;
    await waitFor(
      () =>
        qs(receiver.all('rx'), 1).length === total1 &&
        qs(receiver.all('rx'), 2).length === M &&
        sender.all('done').length === total1 + M,
      'every message delivered and completed after the repair',
      both,
    );
    run = {
      lost: relay.lost,
      heldRepairs,
      rxBeforeRepair,
      doneBeforeRepair,
      rx: receiver.all('rx'),
      done: sender.all('done'),
      forwards: relay.forwards,
      closed: await closeBoth(sender, receiver),
    };
  }, 60_000);

  it('the relay lost stream-1 message K (each of its chunks once, no other) and held its repair', () => {
    expect(run.lost.length).toBeGreaterThan(0);
    expect(run.lost.map((c) => ({ s: c.probe?.s, q: c.probe?.q, again: c.retransmission }))).toEqual(
      run.lost.map(() => ({ s: 1, q: K, again: false })),
    );
    expect(run.heldRepairs).toBeGreaterThanOrEqual(1);
  });

  it('RFC 4960 §6.6 / RFC 5043 §4, receive side: stream-2 messages posted after the loss are delivered while stream 1 waits for its repair', () => {
    // While the repair was held: stream 1 stopped at its gap, stream 2 had everything.
    expect(qs(run.rxBeforeRepair, 1)).toEqual(range(0, K));
    expect(qs(run.rxBeforeRepair, 2)).toEqual(range(0, M));
    // In the receiver's delivery order, every stream-2 message comes before the repaired message K.
    const repaired = run.rx.find((e) => e.s === 1 && e.q === K) as Rx;
    expect(run.rx.filter((e) => e.s === 2 && e.d > repaired.d)).toEqual([]);
    expectDeliveredInOrder(run.rx, { 1: K + 1 + EXTRA, 2: M });
    const measure = heldBehind(run.forwards, deliveries(run.rx));
    expect({ matched: measure.matched, held: measure.held }).toEqual({ matched: M, held: 0 });
    expect(run.closed.sender?.graceful).toBe(true);
    expect(run.closed.receiver?.graceful).toBe(true);
  });

  it('RFC 4960 §6.6 / RFC 5043 §4, send side: stream-2 sends posted after the loss complete before stream 1 is repaired (fails while completion waits for the Cumulative TSN Ack; passes once it is reported at hand-over to the association)', () => {
    // Every send completes, without error, in the end.
    expect(run.done.filter((e) => e.error !== undefined)).toEqual([]);
    expect(qs(run.done, 2).sort((a, b) => a - b)).toEqual(range(0, M));
    // Those of stream 2 did not wait for stream 1's repair.
    expect(qs(run.doneBeforeRepair, 2).sort((a, b) => a - b)).toEqual(range(0, M));
  });
});

describe('RFC 4960 §6.6 / RFC 5043 §4: a steady flow on streams 1 and 2', () => {
  /** Rounds of one message on each stream, a round every 2 ms. */
  const ROUNDS = 300;

  async function flow(policy: DropPolicy) {
    // RTO.Min 100 ms: a lost last chunk (no later SACKs to fast retransmit it) is repaired by T3-rtx soon.
    const { receiver, sender, relay } = await topology(policy, { rtoMinMs: 100 });
    const both = [sender, receiver];
    sender.send({ cmd: 'flow', streams: [1, 2], count: ROUNDS, intervalMs: 2 });
    await waitFor(
      () => receiver.all('rx').length === 2 * ROUNDS && sender.all('done').length === 2 * ROUNDS,
      `${2 * ROUNDS} messages delivered and completed`,
      both,
    );
    const rx = receiver.all('rx');
    const done = sender.all('done');
    const closed = await closeBoth(sender, receiver);
    return { rx, done, forwards: relay.forwards, lost: relay.lost, closed };
  }

  it('2 % loss of stream-1 DATA chunks: all data arrives intact and in order per stream, and no stream-2 message is held by a stream-1 repair', async () => {
    const r = await flow(randomLossOnStream(1, 0.02, 0x5ec7));
    expect(r.lost.length).toBeGreaterThan(0);
    // Only first transmissions of stream-1 chunks were lost.
    expect(r.lost.filter((c) => c.stream !== 1 || c.retransmission)).toEqual([]);
    expectDeliveredInOrder(r.rx, { 1: ROUNDS, 2: ROUNDS });
    expect(r.done.filter((e) => e.error !== undefined)).toEqual([]);
    const measure = heldBehind(r.forwards, deliveries(r.rx));
    expect(measure.matched).toBe(ROUNDS);
    expect(measure.pairs).toEqual([]);
    expect(r.closed.sender?.graceful).toBe(true);
  }, 60_000);

  it('control: without loss the same measure finds no stream-2 message held by stream 1', async () => {
    const r = await flow(forwardAll);
    expect(r.lost).toEqual([]);
    expectDeliveredInOrder(r.rx, { 1: ROUNDS, 2: ROUNDS });
    const measure = heldBehind(r.forwards, deliveries(r.rx));
    expect(measure.matched).toBe(ROUNDS);
    expect(measure.pairs).toEqual([]);
  }, 60_000);
});

describe('the measure and the policies themselves (synthetic records, no processes)', () => {
  const chunk = (s: number, q: number, tsn: number, retransmission = false): DataChunk => ({
    type: CHUNK_DATA,
    tsn,
    stream: s,
    begin: true,
    end: true,
    mid: undefined,
    header: { type: CHUNK_DATA, offset: 12, length: 16 + 800 },
    message: `${s}:${tsn}`,
    probe: { s, q, g: tsn },
    retransmission,
  });
  // Forwarded towards the receiver: stream-1 message 0, stream-2 messages 0 and 1, then the repair of
  // stream-1 message 1 (its first transmission was lost).
  const forwards: ForwardRecord[] = [
    { dir: 'out', index: 0, data: [chunk(1, 0, 10)] },
    { dir: 'out', index: 1, data: [chunk(2, 0, 12)] },
    { dir: 'out', index: 2, data: [chunk(2, 1, 13)] },
    { dir: 'out', index: 3, data: [chunk(1, 1, 11, true)] },
  ];
  const order = (...ids: [number, number][]): Delivery[] => ids.map(([s, q], d) => ({ s, q, d }));

  it('the measure counts the stream-2 messages a receiver delivers behind the repair (head-of-line blocking between streams)', () => {
    // Delivery in TSN order across streams: stream 2 waited for stream 1's repair.
    const m = heldBehind(forwards, order([1, 0], [1, 1], [2, 0], [2, 1]));
    expect(m.held).toBe(2);
    expect(m.pairs[0]).toEqual({ held: { s: 2, q: 0 }, behind: { s: 1, q: 1 } });
  });

  it('the measure counts none when stream 2 is delivered as it arrives', () => {
    expect(heldBehind(forwards, order([1, 0], [2, 0], [2, 1], [1, 1]))).toMatchObject({ matched: 2, held: 0 });
  });

  const datagram = (data: DataChunk[]) => ({
    dir: 'out' as const,
    seen: 0,
    chunkTypes: data.map(() => CHUNK_DATA),
    data,
    retransmission: data.some((c) => c.retransmission),
  });

  it('onlyOnStream: a datagram with DATA on stream 1 alone, not one that also carries stream 2 or no DATA', () => {
    expect(onlyOnStream(datagram([chunk(1, 0, 1), chunk(1, 1, 2)]), 1)).toBe(true);
    expect(onlyOnStream(datagram([chunk(1, 0, 1), chunk(2, 0, 2)]), 1)).toBe(false);
    expect(onlyOnStream(datagram([]), 1)).toBe(false);
  });

  it('reads DATA (RFC 4960 §3.3.1) and I-DATA (RFC 8260 §2.1) chunks: TSN, stream at offset 8, flags, MID, the probe of a first fragment', () => {
    const probe = makeProbe({ s: 2, q: 5, g: 9 }, 40, 0);
    const chunkOf = (type: number, flags: number, fields: Buffer, user: Buffer) => {
      const header = Buffer.alloc(4);
      header.writeUInt8(type, 0);
      header.writeUInt8(flags, 1);
      header.writeUInt16BE(4 + fields.length + user.length, 2);
      const c = Buffer.concat([header, fields, user]);
      return Buffer.concat([c, Buffer.alloc(((c.length + 3) & ~3) - c.length)]);
    };
    const dataFields = Buffer.alloc(12); // TSN, stream, SSN, PPID
    dataFields.writeUInt32BE(1000, 0);
    dataFields.writeUInt16BE(1, 4);
    const iDataFields = Buffer.alloc(16); // TSN, stream, reserved, MID, PPID
    iDataFields.writeUInt32BE(1001, 0);
    iDataFields.writeUInt16BE(2, 4);
    iDataFields.writeUInt32BE(77, 8);
    const packet = Buffer.concat([
      Buffer.alloc(12),
      chunkOf(CHUNK_DATA, 0x01, dataFields, Buffer.from('tail')), // E: a last fragment
      chunkOf(CHUNK_I_DATA, 0x02, iDataFields, probe), // B: a first fragment
    ]);
    const [data, iData] = dataChunksOf(packet);
    expect(data).toMatchObject({ type: CHUNK_DATA, tsn: 1000, stream: 1, begin: false, end: true, probe: undefined });
    expect(iData).toMatchObject({ type: CHUNK_I_DATA, tsn: 1001, stream: 2, begin: true, end: false, mid: 77 });
    expect(iData?.probe).toEqual({ s: 2, q: 5, g: 9 });
    expect(iData?.message).toBe('2:m77');
    // A packet of the I-DATA chunk alone: same common header, signed.
    const alone = packetOf(packet, [iData?.header as DataChunk['header']]);
    expect(dataChunksOf(alone).map((c) => c.tsn)).toEqual([1001]);
    expect(alone.readUInt32LE(8)).toBe(sctpChecksum(alone));
  });

  it('random loss never touches a retransmission or another stream: per chunk, or per datagram of that stream alone', () => {
    const perChunk = randomLossOnStream(1, 1, 7);
    expect(perChunk(datagram([chunk(1, 0, 1), chunk(2, 0, 2), chunk(1, 1, 3, true)]))).toEqual({ lose: [1] });
    const perDatagram = randomLossOnStream(1, 1, 7, 'datagram');
    expect(perDatagram(datagram([chunk(1, 0, 1), chunk(2, 0, 2)]))).toBe('forward');
    expect(perDatagram(datagram([chunk(1, 0, 1), chunk(1, 1, 3, true)]))).toBe('forward');
    expect(perDatagram(datagram([chunk(1, 0, 1)]))).toBe('drop');
  });
});
