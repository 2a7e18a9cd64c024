/**
 * DDP placement over the UDP LLP obeys the DDPP core draft's rules for its class (draft-bailey-roi-ddpp-core-00
 * §3 general rules, §3.4 unreliable unordered): only corresponding set()s, only on registered buffers, every
 * set() of a message before its reception indication. Properties over random messages, datagram sizes and
 * seeded loss, duplication and reordering of real UDP datagrams on 127.0.0.1.
 */
import {
  Access,
  DdpStream,
  type DeliveryEvent,
  type MemoryRegion,
  StagTable,
  type UntaggedDeliveryEvent,
} from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import fc from 'fast-check';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type UdpConnection, type UdpFaults, udp } from '../src/index.js';
import { pattern } from './helpers.js';

const SENTINEL = 0xa5;
const REGION = 48 * 1024;
const fast = { retransmitMs: 10, lingerMs: 10, closeTimeoutMs: 1000 };

interface Msg {
  kind: 'tagged' | 'untagged';
  length: number;
  seed: number;
}

const lengthArb = fc.integer({ min: 0, max: 3000 });
const seedArb = fc.integer({ min: 1, max: 1 << 30 });
const msgArb: fc.Arbitrary<Msg> = fc.record({
  kind: fc.constantFrom<'tagged' | 'untagged'>('tagged', 'untagged'),
  length: lengthArb,
  seed: seedArb,
});
const taggedArb: fc.Arbitrary<Msg> = fc.record({
  kind: fc.constant<'tagged'>('tagged'),
  length: lengthArb,
  seed: seedArb,
});
const msgsArb = fc.array(msgArb, { minLength: 1, maxLength: 12 });
/** UDP payload per datagram: 64 (MULPDU 44, so a DDP untagged segment carries 26 octets) to 1400. */
const datagramArb = fc.integer({ min: 64, max: 1400 });
const probArb = fc.integer({ min: 0, max: 40 }).map((p) => p / 100);

// One receiving transport and listener for every run; each run connects afresh.
const receiver = udp(fast);
let listener: Awaited<ReturnType<typeof receiver.listen>>;
const accepted: LlpConnection[] = [];
let waiting: ((c: LlpConnection) => void) | undefined;
beforeAll(async () => {
  listener = await receiver.listen({ host: '127.0.0.1', port: 0 });
  listener.connections$.subscribe((c) => {
    if (waiting) waiting(c);
    else accepted.push(c);
  });
});
afterAll(async () => {
  await listener.close();
});

function nextAccepted(): Promise<LlpConnection> {
  const c = accepted.shift();
  if (c) return Promise.resolve(c);
  return new Promise((resolve) => {
    waiting = (x) => {
      waiting = undefined;
      resolve(x);
    };
  });
}

function ddp(conn: LlpConnection, stags: StagTable): DdpStream {
  return new DdpStream(conn.streams[0] as LlpStream, {
    pdId: 1,
    stags,
    queues: 1,
    llpCapabilities: conn.capabilities,
  });
}

interface RunOptions {
  /** Invalidate the region once this many tagged set()s have been seen (draft §3.4: unregistering bounds set()s). */
  invalidateAfter?: number;
}

async function run(msgs: Msg[], datagramSize: number, faults: UdpFaults, ro: RunOptions = {}) {
  const sender = udp({ ...fast, datagramSize, faults });
  const connA = await sender.connect(listener.address);
  const connB = await nextAccepted();
  const a = ddp(connA, new StagTable());
  const stagsB = new StagTable();
  const b = ddp(connB, stagsB);
  expect(connB.capabilities).toMatchObject({ reliable: false, ordered: false });

  const region = new Uint8Array(REGION).fill(SENTINEL);
  const r: MemoryRegion = stagsB.register({ pdId: 1, buffer: region, access: Access.RemoteWrite });
  const sent: { kind: Msg['kind']; data: Uint8Array; at: number; buffer?: Uint8Array }[] = [];
  let at = 0;
  for (const m of msgs) {
    const data = pattern(m.length, m.seed);
    if (m.kind === 'tagged') {
      sent.push({ kind: 'tagged', data, at });
      at += m.length;
    } else {
      const buffer = new Uint8Array(m.length + 16).fill(SENTINEL);
      b.postReceive(0, buffer, sent.length);
      sent.push({ kind: 'untagged', data, at: -1, buffer });
    }
  }

  const violations: string[] = [];
  const deliveries: number[] = [];
  const taggedDeliveries: number[] = [];
  let placements = 0;
  let snapshot: Uint8Array | undefined;
  b.delivery$.subscribe((d: DeliveryEvent) => {
    if (d.tagged) {
      // Every set() of the message before its reception indication (draft §3).
      const s = sent[d.rsvdUlp];
      if (!s || Buffer.compare(region.subarray(s.at, s.at + s.data.length), s.data) !== 0)
        violations.push(`tagged ${d.rsvdUlp} indicated before all its sets`);
      taggedDeliveries.push(d.rsvdUlp);
      return;
    }
    const idx = (d as UntaggedDeliveryEvent).receiveId as number;
    const s = sent[idx];
    if (!s || Buffer.compare(d.buffer.subarray(0, d.length), s.data) !== 0 || d.length !== s.data.length)
      violations.push(`untagged ${idx} delivered before all its sets`);
    deliveries.push(idx);
  });
  b.placement$.subscribe((p) => {
    // Only set()s on registered buffers, only corresponding set()s (draft §3). A zero-length segment sets
    // no octet (RFC 5041 §7.1 checks its STag only when it carries data), so only non-empty ones count.
    if (p.length > 0) {
      if (snapshot) violations.push(`set at ${p.to}+${p.length} after the region was invalidated`);
      if (p.stag !== r.stag) violations.push(`set on STag ${p.stag}, not the registered one`);
      const s = sent.find(
        (m) => m.kind === 'tagged' && BigInt(m.at) <= p.to && p.to + BigInt(p.length) <= BigInt(m.at + m.data.length),
      );
      if (!s) violations.push(`set at ${p.to}+${p.length} corresponds to no message`);
      else {
        const off = Number(p.to) - s.at;
        const placed = region.subarray(Number(p.to), Number(p.to) + p.length);
        if (Buffer.compare(placed, s.data.subarray(off, off + p.length)) !== 0)
          violations.push(`set at ${p.to} wrote other values than the message's`);
      }
    }
    placements++;
    if (ro.invalidateAfter !== undefined && placements === ro.invalidateAfter) {
      stagsB.invalidate(r.stag);
      snapshot = Uint8Array.from(region);
    }
  });

  for (const [i, s] of sent.entries()) {
    if (s.kind === 'tagged') await a.sendTagged(r.stag, BigInt(s.at), [s.data], i);
    else await a.sendUntagged(0, [s.data], i);
  }
  const bClosed = firstValueFrom(b.closed$);
  await a.close();
  await bClosed;

  // No octet outside every message's extent, nor past an untagged message, was ever written.
  for (let i = at; i < REGION; i++)
    if (region[i] !== SENTINEL) violations.push(`octet ${i} written outside every extent`);
  for (const [i, s] of sent.entries())
    if (s.buffer)
      for (let k = s.data.length; k < s.buffer.length; k++)
        if (s.buffer[k] !== SENTINEL) violations.push(`untagged ${i} wrote past its message`);
  if (snapshot && Buffer.compare(region, snapshot) !== 0) violations.push('the invalidated region changed');
  const stats = { sender: (connA as UdpConnection).stats.socket, ddp: b.stats };
  return { violations, deliveries, taggedDeliveries, sent, region, stats, invalidated: snapshot !== undefined };
}

describe('DDPP core draft §3.4 over the UDP LLP (unreliable, unordered)', () => {
  const seen = { drops: 0, duplicates: 0, reorders: 0, ddpDuplicates: 0, invalidated: 0 };

  it('§3 general rules under seeded loss, duplication and reordering: only corresponding sets, only on the registered buffer, every set of a message before its indication', async () => {
    await fc.assert(
      fc.asyncProperty(
        msgsArb,
        datagramArb,
        seedArb,
        probArb,
        probArb,
        probArb,
        async (msgs, size, seed, drop, duplicate, reorder) => {
          const r = await run(msgs, size, { seed, drop, duplicate, reorder });
          seen.drops += r.stats.sender.faultDrops;
          seen.duplicates += r.stats.sender.faultDuplicates;
          seen.reorders += r.stats.sender.faultReorders;
          seen.ddpDuplicates += r.stats.ddp.duplicates;
          expect(r.violations).toEqual([]);
          // §3.4 allows delivering twice; rddp's DDP drops duplicates of completed messages (its README).
          expect(new Set(r.deliveries).size).toBe(r.deliveries.length);
          // Tagged messages get no reception indication on an unreliable LLP (no MSN to tell a duplicate L=1).
          expect(r.taggedDeliveries).toEqual([]);
        },
      ),
      { numRuns: 30 },
    );
    // The faults did happen, and DDP saw duplicates (placed again or dropped), so the rules were exercised.
    expect(seen.drops).toBeGreaterThan(0);
    expect(seen.duplicates).toBeGreaterThan(0);
    expect(seen.reorders).toBeGreaterThan(0);
    expect(seen.ddpDuplicates).toBeGreaterThan(0);
  });

  it('without loss (duplicates and reordering only): every untagged message delivered once, every tagged one fully placed', async () => {
    await fc.assert(
      fc.asyncProperty(msgsArb, datagramArb, seedArb, probArb, async (msgs, size, seed, p) => {
        const r = await run(msgs, size, { seed, duplicate: p, reorder: p });
        expect(r.violations).toEqual([]);
        const untagged = msgs.flatMap((m, i) => (m.kind === 'untagged' ? [i] : []));
        expect([...r.deliveries].sort((x, y) => x - y)).toEqual(untagged);
        for (const s of r.sent)
          if (s.kind === 'tagged')
            expect(Buffer.compare(r.region.subarray(s.at, s.at + s.data.length), s.data)).toBe(0);
      }),
      { numRuns: 20 },
    );
  });

  it('§3.4: once the buffer is unregistered (STag invalidated), no further set() lands in it, duplicates and late datagrams included', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(taggedArb, { minLength: 2, maxLength: 10 }),
        datagramArb,
        seedArb,
        fc.integer({ min: 1, max: 8 }),
        async (msgs, size, seed, after) => {
          const r = await run(msgs, size, { seed, duplicate: 0.3, reorder: 0.3 }, { invalidateAfter: after });
          if (r.invalidated) seen.invalidated++;
          expect(r.violations).toEqual([]);
        },
      ),
      { numRuns: 20 },
    );
    expect(seen.invalidated).toBeGreaterThan(5);
  });
});
