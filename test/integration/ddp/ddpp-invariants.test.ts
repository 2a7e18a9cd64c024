/**
 * The DDPP core draft's ordering rules (draft-bailey-roi-ddpp-core-00 §3), as properties over the loopback
 * LLP with random segment sizes, chunking, and — per LLP class — reordering, duplication and loss.
 */

import { Access, type DeliveryEvent, type UntaggedDeliveryEvent } from '@rddp/ddp';
import type { LoopbackFaults } from '@rddp/llp-loopback';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ddpPair, pattern } from './helpers.js';

const SENTINEL = 0xa5;
const REGION = 64 * 1024;

interface Msg {
  kind: 'tagged' | 'untagged';
  length: number;
  seed: number;
}

const msgArb = fc.record({
  kind: fc.constantFrom<'tagged' | 'untagged'>('tagged', 'untagged'),
  length: fc.integer({ min: 0, max: 3000 }),
  seed: fc.integer({ min: 1, max: 1 << 30 }),
});

async function run(msgs: Msg[], mulpdu: number, faults: LoopbackFaults) {
  const [a, b] = await ddpPair({ mulpdu, faults, queues: 1 });
  const reliable = b.conn.capabilities.reliable;
  const ordered = b.conn.capabilities.ordered;
  const region = new Uint8Array(REGION).fill(SENTINEL);
  const r = b.stags.register({ pdId: 1, buffer: region, access: Access.RemoteWrite });
  // Each tagged message gets its own extent; untagged ones their own posted buffer (filled with the sentinel).
  const extents: { at: number; data: Uint8Array }[] = [];
  const buffers: Uint8Array[] = [];
  let at = 0;
  const sent: { kind: Msg['kind']; data: Uint8Array; at: number; buffer?: Uint8Array }[] = [];
  for (const m of msgs) {
    const data = pattern(m.length, m.seed);
    if (m.kind === 'tagged') {
      extents.push({ at, data });
      sent.push({ kind: 'tagged', data, at });
      at += m.length;
    } else {
      const buf = new Uint8Array(m.length + 16).fill(SENTINEL);
      buffers.push(buf);
      b.ddp.postReceive(0, buf, sent.length);
      sent.push({ kind: 'untagged', data, at: -1, buffer: buf });
    }
  }
  const violations: string[] = [];
  const deliveries: number[] = [];
  // Every set of a message happens before its reception indication (draft §3, general rules).
  b.ddp.delivery$.subscribe((d: DeliveryEvent) => {
    if (d.tagged) {
      const idx = d.rsvdUlp; // the sender puts the message's index in RsvdULP
      const s = sent[idx];
      // On an ordered LLP the L=1 indication covers the whole message (draft §3.1: later indications imply the
      // earlier sets). Unordered, split segments are separate messages (draft §3): it covers its own segment only.
      if (!s || (ordered && Buffer.compare(region.subarray(s.at, s.at + s.data.length), s.data) !== 0))
        violations.push(`tagged ${idx} delivered before all its sets`);
      deliveries.push(idx);
    } else {
      const idx = (d as UntaggedDeliveryEvent).receiveId as number;
      const s = sent[idx];
      if (!s || Buffer.compare(d.buffer.subarray(0, d.length), s.data) !== 0)
        violations.push(`untagged ${idx} delivered before all its sets`);
      if (d.rsvdUlp !== idx) violations.push(`untagged ${idx} delivered with another message's RsvdULP`);
      deliveries.push(idx);
    }
  });
  b.ddp.placement$.subscribe((p) => {
    // Only corresponding sets, only on registered buffers (draft §3).
    if (p.stag !== r.stag && p.length > 0) violations.push(`set on unregistered STag ${p.stag}`);
    const ext = extents.find((e) => BigInt(e.at) <= p.to && p.to + BigInt(p.length) <= BigInt(e.at + e.data.length));
    if (p.length > 0 && !ext) violations.push(`set at ${p.to}+${p.length} corresponds to no message`);
    else if (ext && p.length > 0) {
      const off = Number(p.to) - ext.at;
      if (
        Buffer.compare(
          region.subarray(Number(p.to), Number(p.to) + p.length),
          ext.data.subarray(off, off + p.length),
        ) !== 0
      )
        violations.push(`set at ${p.to} wrote other values than sent`);
    }
  });
  for (const [i, s] of sent.entries()) {
    if (s.kind === 'tagged') await a.ddp.sendTagged(r.stag, BigInt(s.at), [s.data], i);
    else await a.ddp.sendUntagged(0, [s.data], i);
  }
  await a.ddp.close().catch(() => {});
  await new Promise<void>((res) => b.ddp.closed$.subscribe(() => res()));
  // No byte outside any message's extent was ever written.
  for (let i = at; i < REGION; i++)
    if (region[i] !== SENTINEL) violations.push(`byte ${i} written outside every extent`);
  for (const [i, s] of sent.entries())
    if (s.buffer)
      for (let k = s.data.length; k < s.buffer.length; k++)
        if (s.buffer[k] !== SENTINEL) violations.push(`untagged ${i} wrote past its message`);
  return { violations, deliveries, sent, reliable, ordered, region, errors: b.errors };
}

const mulpduArb = fc.integer({ min: 40, max: 1500 });
const seedArb = fc.integer({ min: 1, max: 1 << 30 });

describe('DDPP core draft §3 invariants over the loopback LLP', () => {
  it('§3.1 reliable, ordered: only corresponding sets; every message delivered once, in order, after all its sets', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(msgArb, { minLength: 1, maxLength: 12 }),
        mulpduArb,
        seedArb,
        async (msgs, mulpdu, seed) => {
          const r = await run(msgs, mulpdu, { chunking: { seed, maxChunk: 97 } });
          expect(r.violations).toEqual([]);
          expect(r.errors).toEqual([]);
          expect(r.deliveries).toEqual(msgs.map((_, i) => i)); // once each, in submission order
          for (const s of r.sent)
            if (s.kind === 'tagged')
              expect(Buffer.compare(r.region.subarray(s.at, s.at + s.data.length), s.data)).toBe(0);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('§3.2 reliable, unordered (reordering LLP): only corresponding sets, untagged messages delivered exactly once, all data placed', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(msgArb, { minLength: 1, maxLength: 10 }),
        mulpduArb,
        seedArb,
        async (msgs, mulpdu, seed) => {
          const r = await run(msgs, mulpdu, { reorder: { seed, window: 4 }, chunking: { seed, maxChunk: 300 } });
          expect(r.ordered).toBe(false);
          expect(r.violations).toEqual([]);
          expect(r.errors).toEqual([]);
          const untaggedIdx = msgs.flatMap((m, i) => (m.kind === 'untagged' ? [i] : []));
          const delivered = r.deliveries.filter((i) => msgs[i]?.kind === 'untagged');
          expect([...delivered].sort((x, y) => x - y)).toEqual(untaggedIdx); // no duplicates, none lost
          for (const s of r.sent)
            if (s.kind === 'tagged')
              expect(Buffer.compare(r.region.subarray(s.at, s.at + s.data.length), s.data)).toBe(0);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('§3.3 unreliable, ordered (lossy LLP): only corresponding sets; no delivery twice; deliveries keep submission order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(msgArb, { minLength: 1, maxLength: 10 }),
        mulpduArb,
        seedArb,
        async (msgs, mulpdu, seed) => {
          const r = await run(msgs, mulpdu, { drop: { seed, probability: 0.2 } });
          expect(r.reliable).toBe(false);
          expect(r.violations).toEqual([]);
          expect(new Set(r.deliveries).size).toBe(r.deliveries.length);
          expect(r.deliveries).toEqual([...r.deliveries].sort((x, y) => x - y));
          // Tagged messages get no reception indication on an unreliable LLP (no MSN to tell a duplicate).
          expect(r.deliveries.every((i) => msgs[i]?.kind === 'untagged')).toBe(true);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('§3.4 unreliable, unordered (duplicating and reordering LLP): the general rules — only corresponding sets, no delivery twice', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(msgArb, { minLength: 1, maxLength: 10 }),
        mulpduArb,
        seedArb,
        async (msgs, mulpdu, seed) => {
          const r = await run(msgs, mulpdu, {
            duplicate: { seed, probability: 0.3 },
            reorder: { seed: seed + 1, window: 3 },
          });
          expect(r.violations).toEqual([]);
          expect(new Set(r.deliveries).size).toBe(r.deliveries.length);
        },
      ),
      { numRuns: 30 },
    );
  });
});
