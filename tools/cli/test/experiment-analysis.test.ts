/**
 * The experiment's attribution on synthetic traces (hand-made ends' times and wire evidence) whose
 * answer is known: head-of-line stall only where another flow's lost data was repaired while a message,
 * whole at the host and next in its flow, waited; own loss, own order, sender wait and the receiver's
 * pauses each apart. docs/EXPERIMENTS.md "Measures".
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AttributionOptions,
  attribute,
  type LossOnWire,
  type MessageOnWire,
  PART_NAMES,
  type Timed,
} from '../src/experiment/analysis.js';

const opts: AttributionOptions = { epsUs: 1000, captureAfterUs: 0, linkJitterUs: 0, receiverPauses: [] };

function msg(flow: number, seq: number, first: number, arrived = first + 10, complete = first + 10): MessageOnWire {
  return { dir: 'request', flow, seq, firstOctetUs: first, firstCompleteUs: complete, arrivedUs: arrived, lost: [] };
}
function loss(atUs: number, repairedUs: number, flows: number[], seq = 0): LossOnWire {
  return {
    atUs,
    repairedUs,
    dir: 'request',
    kind: 'data',
    messages: flows.map((flow) => ({ dir: 'request' as const, flow, seq })),
  };
}
function timed(flow: number, seq: number, scheduled: number, delivered: number, posted = scheduled): Timed {
  return { flow, seq, scheduledUs: scheduled, postedUs: posted, deliveredUs: delivered, answeredUs: delivered + 500 };
}
const one = (samples: ReturnType<typeof attribute>, flow: number, seq: number) =>
  samples.find((s) => s.flow === flow && s.seq === seq) as ReturnType<typeof attribute>[number];

describe('experiment attribution (synthetic traces)', () => {
  // Shared-connection head-of-line: flow 0's message is lost at 1 000 and repaired at 6 000; flow 1's
  // message, whole at the host at 2 010, is delivered only after the repair (6 100).
  const sharedTrace = {
    times: [timed(0, 0, 900, 6050), timed(1, 0, 1900, 6100)],
    wire: {
      messages: [{ ...msg(0, 0, 1000, 6000, 1010), lost: [{}] }, msg(1, 0, 2000)],
      losses: [loss(1000, 6000, [0])],
    },
  };

  it('a message held behind another flow repaired loss is stalled by exactly the wait up to the repair', () => {
    const s = attribute(sharedTrace.times, sharedTrace.wire, opts);
    const f1 = one(s, 1, 0);
    expect(f1.stallUs).toBe(6000 - 2010);
    expect(f1.processUs).toBe(100);
    expect(f1.ownLossUs).toBe(0);
    expect(f1.senderWaitUs).toBe(100);
    // The lost message itself: its own loss, never stall.
    const f0 = one(s, 0, 0);
    expect(f0.stallUs).toBe(0);
    expect(f0.ownLossUs).toBe(6000 - 1010);
    expect(f0.lostPackets).toBe(1);
  });

  it('the same times with the loss on independent links: delivered on arrival, no stall', () => {
    const times = [timed(0, 0, 900, 6050), timed(1, 0, 1900, 2200)];
    const s = attribute(times, sharedTrace.wire, opts);
    expect(one(s, 1, 0)).toMatchObject({ stallUs: 0, processUs: 190 });
  });

  it('a pause of the receiver over the wait is pause, not stall, even when a repair ends inside it', () => {
    const s = attribute(sharedTrace.times, sharedTrace.wire, { ...opts, receiverPauses: [[2010, 6090]] });
    expect(one(s, 1, 0)).toMatchObject({ stallUs: 0, pauseUs: 6090 - 2010, processUs: 10 });
  });

  it('a loss dropped after the message was whole at the host cannot have held it', () => {
    const wire = { ...sharedTrace.wire, losses: [loss(2500, 6000, [0])] };
    expect(one(attribute(sharedTrace.times, wire, opts), 1, 0).stallUs).toBe(0);
  });

  it('waiting for its own flow earlier message is order wait; a wait within ε is processing', () => {
    const times = [timed(0, 0, 900, 6050), timed(0, 1, 1900, 6080), timed(1, 0, 1950, 2800)];
    const wire = {
      messages: [msg(0, 0, 1000, 6000, 1010), msg(0, 1, 2000), msg(1, 0, 2000)],
      losses: [loss(1000, 6000, [0])],
    };
    const s = attribute(times, wire, opts);
    expect(one(s, 0, 1)).toMatchObject({ orderWaitUs: 6050 - 2010, stallUs: 0, processUs: 30 });
    // 790 µs after arrival, under ε = 1 ms: processing (a repair ended? none inside anyway).
    expect(one(s, 1, 0)).toMatchObject({ stallUs: 0, processUs: 790 });
  });

  it('sender wait is posted to first octet on the wire, post wait is due to posted', () => {
    const s = attribute([timed(3, 0, 1000, 5000, 1200)], { messages: [msg(3, 0, 4000)], losses: [] }, opts);
    expect(one(s, 3, 0)).toMatchObject({ postWaitUs: 200, senderWaitUs: 2800, transitUs: 10, processUs: 990 });
  });

  it("the capture sees a request the relay's delay after it left: sender wait excludes it; jitter widens ε", () => {
    // Captured on the responder's side 1 ms after leaving: flow 1's first octet left at 1 000.
    const times = [timed(0, 0, 500, 6050), timed(1, 0, 900, 6100)];
    const s = attribute(times, sharedTrace.wire, { ...opts, captureAfterUs: 1000, linkJitterUs: 500 });
    expect(one(s, 1, 0)).toMatchObject({ senderWaitUs: 100, transitUs: 1010, stallUs: 6000 - 2010 });
    // 1.4 ms after arrival: over ε, under ε + jitter: no stall.
    const near = attribute([timed(0, 0, 500, 6050), timed(1, 0, 900, 3410)], sharedTrace.wire, {
      ...opts,
      captureAfterUs: 1000,
      linkJitterUs: 500,
    });
    expect(one(near, 1, 0).stallUs).toBe(0);
  });

  it('a message the capture did not find keeps its post wait and leaves the rest unattributed', () => {
    const s = attribute([timed(0, 0, 1000, 3000, 1100)], { messages: [], losses: [loss(900, 2900, [1])] }, opts);
    expect(one(s, 0, 0)).toMatchObject({ postWaitUs: 100, unattributedUs: 1900, stallUs: 0 });
  });

  it('a repair that ends inside a wait the receiver has anyway (its floor) is not a stall', () => {
    // 200 messages of flow 2 that no repair touches each wait 4 ms at the receiver: the floor is 4 ms.
    const slow = Array.from({ length: 200 }, (_, i) => timed(2, i, 100_000 + i * 5000, 100_000 + i * 5000 + 4010));
    const slowWire = Array.from({ length: 200 }, (_, i) => msg(2, i, 100_000 + i * 5000));
    const times = [timed(0, 0, 900, 6050), timed(1, 0, 1900, 5000)];
    const wire = { messages: [...sharedTrace.wire.messages, ...slowWire], losses: [loss(1000, 4000, [0])] };
    // Flow 1 waits 2.99 ms with a repair ending inside: within the floor, processing.
    expect(one(attribute([...times, ...slow], wire, opts), 1, 0)).toMatchObject({ stallUs: 0, processUs: 2990 });
    // The same wait on a fast receiver (no slow flow): over ε, released by the repair: stall.
    expect(one(attribute(times, wire, opts), 1, 0)).toMatchObject({ stallUs: 4000 - 2010, processUs: 1000 });
  });

  it("the floor is taken net of the responder's pauses: a paused receiver still shows a real stall", () => {
    const slow = Array.from({ length: 200 }, (_, i) => timed(2, i, 100_000 + i * 5000, 100_000 + i * 5000 + 4010));
    const slowWire = Array.from({ length: 200 }, (_, i) => msg(2, i, 100_000 + i * 5000));
    // Every one of the slow waits is the responder paused.
    const receiverPauses = slow.map((m) => [m.scheduledUs + 10, m.deliveredUs] as const);
    const times = [timed(0, 0, 900, 6050), timed(1, 0, 1900, 5000)];
    const wire = { messages: [...sharedTrace.wire.messages, ...slowWire], losses: [loss(1000, 4000, [0])] };
    const s = attribute([...times, ...slow], wire, { ...opts, receiverPauses });
    expect(one(s, 1, 0)).toMatchObject({ stallUs: 4000 - 2010, processUs: 1000 });
    expect(one(s, 2, 7)).toMatchObject({ stallUs: 0, pauseUs: 4000 });
  });

  it('a message delivered long after the repair was not released by it: no stall', () => {
    const times = [timed(0, 0, 900, 6050), timed(1, 0, 1900, 9000)];
    const s = attribute(times, sharedTrace.wire, opts);
    expect(one(s, 1, 0)).toMatchObject({ stallUs: 0, processUs: 9000 - 2010 });
  });

  it('parts are never negative and always add up to the latency (any times, any evidence)', () => {
    const t = fc.integer({ min: 0, max: 100_000 });
    fc.assert(
      fc.property(
        fc.array(fc.record({ flow: fc.integer({ min: 0, max: 3 }), s: t, p: t, d: t, w: t, c: t, a: t }), {
          maxLength: 30,
        }),
        fc.array(fc.record({ at: t, r: t, flow: fc.integer({ min: 0, max: 3 }) }), { maxLength: 10 }),
        fc.array(fc.tuple(t, t), { maxLength: 5 }),
        (ms, ls, ps) => {
          const seqs = new Map<number, number>();
          const times: Timed[] = [];
          const messages: MessageOnWire[] = [];
          for (const m of ms) {
            const seq = seqs.get(m.flow) ?? 0;
            seqs.set(m.flow, seq + 1);
            const s = Math.min(m.s, m.d);
            times.push(timed(m.flow, seq, s, Math.max(m.s, m.d), m.p));
            messages.push(msg(m.flow, seq, m.w, m.a, m.c));
          }
          const out = attribute(
            times,
            { messages, losses: ls.map((l) => loss(l.at, l.r, [l.flow])) },
            { ...opts, receiverPauses: ps.map(([a, b]) => [Math.min(a, b), Math.max(a, b)] as const) },
          );
          for (const s of out) {
            let sum = 0;
            for (const p of PART_NAMES) {
              expect(s[p]).toBeGreaterThanOrEqual(0);
              sum += s[p];
            }
            expect(sum).toBeCloseTo(s.latencyUs, 6);
          }
        },
      ),
    );
  });
});
