/**
 * From the two ends' reports and the link's capture to per-message samples and per-flow measures.
 * docs/EXPERIMENTS.md "Measures" says the same in prose.
 *
 * Latency of message m: delivered(m) − scheduled(m), one way, on the host's monotonic clock (the open
 * loop's due time, so a wait for credit counts). It is cut into consecutive parts, each from evidence:
 *
 *   post wait    scheduled → posted: a credit (the flow's own earlier responses) or the initiator's timer
 *   sender wait  posted → its first octet on the wire (capture, less the relay's delay before it): the
 *                sending stack, its queue and window
 *   transit      first octet → every octet past the capture point once (dropped copies count)
 *   own loss     → every octet past in copies not dropped: the repair of m's own lost packets
 *   order wait   → its own flow's previous message delivered (the flow's order)
 *   receive wait → delivered; within it:
 *     stall      head-of-line stall: m was whole at the host and next in its flow, and waited while
 *                ANOTHER flow's lost data was repaired — the wait up to the last such repair that ended
 *                inside it (a loss dropped before m arrived), less the receiver's pauses. Only a wait
 *                longer than the floor, and delivered within the floor after that repair (the repair
 *                released it), is a stall. The floor is the larger of ε (+ the relay's jitter) and the
 *                run's p99 receive wait of messages no repair could have held: what a message waits
 *                at that receiver anyway, so a slow receiver's waits are not read as stall. Waits are
 *                taken net of the responder's pauses throughout.
 *     pause      the responder's event loop not running (its own report of late timers)
 *     process    the rest: the receiving stack and the responder handling m
 *
 * A message with no wire evidence (not found in the capture) keeps its post wait and puts the rest in
 * `unattributedUs`; it never counts as stalled.
 */

/** What the capture says of one message (./capture.ts WireMessage has these fields). */
export interface MessageOnWire {
  readonly dir: 'request' | 'response';
  readonly flow: number;
  readonly seq: number;
  readonly firstOctetUs: number;
  readonly firstCompleteUs: number;
  readonly arrivedUs: number;
  readonly lost: readonly unknown[];
}

/** What the capture says of one dropped packet (./capture.ts WireLoss has these fields). */
export interface LossOnWire {
  readonly atUs: number;
  readonly dir: 'request' | 'response';
  readonly kind: 'data' | 'control';
  readonly messages: readonly { readonly dir: 'request' | 'response'; readonly flow: number; readonly seq: number }[];
  readonly repairedUs: number;
}

export interface WireEvidence {
  readonly messages: readonly MessageOnWire[];
  readonly losses: readonly LossOnWire[];
}

/** The parts of a message's latency (µs); they add up to latencyUs. */
export interface LatencyParts {
  readonly postWaitUs: number;
  readonly senderWaitUs: number;
  readonly transitUs: number;
  readonly ownLossUs: number;
  readonly orderWaitUs: number;
  readonly stallUs: number;
  readonly pauseUs: number;
  readonly processUs: number;
  readonly unattributedUs: number;
}

export const PART_NAMES = [
  'postWaitUs',
  'senderWaitUs',
  'transitUs',
  'ownLossUs',
  'orderWaitUs',
  'stallUs',
  'pauseUs',
  'processUs',
  'unattributedUs',
] as const satisfies readonly (keyof LatencyParts)[];

export interface Sample extends LatencyParts {
  readonly flow: number;
  readonly seq: number;
  readonly scheduledUs: number;
  readonly postedUs: number;
  /** First octet on the wire, and every octet at the receiving host (+ link delay); NaN without evidence. */
  readonly wireUs: number;
  readonly arrivedUs: number;
  readonly deliveredUs: number;
  readonly answeredUs: number;
  readonly latencyUs: number;
  readonly rttUs: number;
  /** Packets of this message that were dropped. */
  readonly lostPackets: number;
}

export interface FlowResult {
  readonly flow: number;
  readonly messages: number;
  readonly verified: boolean;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
  readonly maxUs: number;
  readonly goodputMBps: number;
  /** Sum of the stall other flows imposed on this one, the largest, and the messages that saw any. */
  readonly stallTotalUs: number;
  readonly stallMaxUs: number;
  readonly stalledMessages: number;
  /** Sums of every part over the flow's messages. */
  readonly parts: LatencyParts;
}

export interface ClientFlow {
  flow: number;
  scheduled: number[];
  posted: number[];
  answered: number[];
  verified: boolean;
}

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] as number;
}

/** One message as the two ends saw it, before the parts are known. */
export interface Timed {
  readonly flow: number;
  readonly seq: number;
  readonly scheduledUs: number;
  readonly postedUs: number;
  readonly deliveredUs: number;
  readonly answeredUs: number;
}

/** Joins the two ends' times, message by message. */
export function joinTimes(
  client: readonly ClientFlow[],
  server: Record<string, { delivered: number[]; verified: boolean }>,
): Timed[] {
  const out: Timed[] = [];
  for (const c of client) {
    const d = server[String(c.flow)]?.delivered ?? [];
    const n = Math.min(c.scheduled.length, c.posted.length, d.length, c.answered.length);
    for (let i = 0; i < n; i++)
      out.push({
        flow: c.flow,
        seq: i,
        scheduledUs: c.scheduled[i] as number,
        postedUs: c.posted[i] as number,
        deliveredUs: d[i] as number,
        answeredUs: c.answered[i] as number,
      });
  }
  return out;
}

export interface AttributionOptions {
  /** ε: a receive wait up to this long is processing, never stall (µs). */
  readonly epsUs: number;
  /**
   * How long after leaving the sender a request passes the capture point (the relay's fixed delay, µs):
   * the capture is on the responder's side, so a request's first octet left this much earlier.
   */
  readonly captureAfterUs: number;
  /** The relay's jitter bound (µs): added to ε, since a message may wait that long in the relay. */
  readonly linkJitterUs: number;
  /** The responder's pauses: [from, to] µs, its event loop not running. */
  readonly receiverPauses: readonly (readonly [number, number])[];
}

/** Length of [from, to] covered by `iv` (sorted by start, not overlapping). */
function covered(iv: readonly (readonly [number, number])[], from: number, to: number): number {
  if (to <= from) return 0;
  let lo = 0;
  let hi = iv.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((iv[mid] as readonly [number, number])[1] <= from) lo = mid + 1;
    else hi = mid;
  }
  let sum = 0;
  for (let i = lo; i < iv.length; i++) {
    const [a, b] = iv[i] as readonly [number, number];
    if (a >= to) break;
    sum += Math.min(b, to) - Math.max(a, from);
  }
  return Math.max(0, sum);
}

/** Sorted, merged intervals. */
export function mergeIntervals(iv: readonly (readonly [number, number])[]): [number, number][] {
  const s = iv.filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [a, b] of s) {
    const last = out.at(-1);
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

const key = (flow: number, seq: number) => flow * 2 ** 32 + seq;

/** Cuts each message's latency into its parts (see the module comment). */
export function attribute(times: readonly Timed[], wire: WireEvidence, o: AttributionOptions): Sample[] {
  const onWire = new Map<number, MessageOnWire>();
  for (const m of wire.messages) if (m.dir === 'request') onWire.set(key(m.flow, m.seq), m);
  // Request-direction losses of measured data, by the time their repair ended.
  const repairs = wire.losses
    .filter((l) => l.dir === 'request' && l.kind === 'data' && Number.isFinite(l.repairedUs))
    .map((l) => ({
      atUs: l.atUs,
      endUs: l.repairedUs,
      flows: new Set(l.messages.filter((x) => x.dir === 'request').map((x) => x.flow)),
    }))
    .sort((a, b) => a.endUs - b.endUs);
  const ends = repairs.map((r) => r.endUs);
  const lastEndAtOrBefore = (t: number) => {
    let lo = 0;
    let hi = ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((ends[mid] as number) <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  };
  const pauses = mergeIntervals(o.receiverPauses);
  const byFlow = new Map<number, Timed[]>();
  for (const t of times) {
    let l = byFlow.get(t.flow);
    if (!l) byFlow.set(t.flow, (l = []));
    l.push(t);
  }
  // First pass: each message's consecutive times t0..t5 and its receive wait [t5, end].
  interface Cut {
    readonly m: Timed;
    readonly w: MessageOnWire | undefined;
    readonly t: readonly number[];
    readonly end: number;
    /** The last repair of another flow's data dropped before m was whole, ending in (t5, end]; or NaN. */
    readonly repairEnd: number;
  }
  const cuts: Cut[] = [];
  for (const list of byFlow.values()) {
    list.sort((a, b) => a.seq - b.seq);
    let prevDelivered = Number.NEGATIVE_INFINITY;
    for (const m of list) {
      const d = m.deliveredUs;
      const clamp = (t: number, lo: number) => Math.min(Math.max(t, lo), Math.max(d, lo));
      const t0 = m.scheduledUs;
      const t1 = clamp(m.postedUs, t0);
      const w = onWire.get(key(m.flow, m.seq));
      if (!w || !Number.isFinite(w.arrivedUs)) {
        cuts.push({ m, w, t: [t0, t1], end: d, repairEnd: Number.NaN });
        prevDelivered = Math.max(prevDelivered, d);
        continue;
      }
      const t2 = clamp(w.firstOctetUs - o.captureAfterUs, t1);
      const t3 = clamp(w.firstCompleteUs, t2);
      const t4 = clamp(w.arrivedUs, t3);
      const t5 = clamp(prevDelivered, t4);
      prevDelivered = Math.max(prevDelivered, d);
      const end = Math.max(d, t5);
      let repairEnd = Number.NaN;
      for (let i = lastEndAtOrBefore(end); i >= 0; i--) {
        const r = repairs[i] as (typeof repairs)[number];
        if (r.endUs <= t5) break;
        if (r.atUs > w.arrivedUs || ![...r.flows].some((f) => f !== m.flow)) continue;
        repairEnd = r.endUs;
        break;
      }
      cuts.push({ m, w, t: [t0, t1, t2, t3, t4, t5], end, repairEnd });
    }
  }
  // The receiving side's own floor: the p99 receive wait of messages no repair of another flow could
  // have held (no repair ended inside their wait). A wait within it is what a message waits anyway.
  const clean = cuts
    .filter((c) => c.t.length === 6 && Number.isNaN(c.repairEnd))
    .map((c) => c.end - (c.t[5] as number) - covered(pauses, c.t[5] as number, c.end))
    .sort((a, b) => a - b);
  const threshold = Math.max(o.epsUs + o.linkJitterUs, quantile(clean, 0.99) || 0);
  const out: Sample[] = [];
  for (const { m, w, t, end, repairEnd } of cuts) {
    const base = {
      flow: m.flow,
      seq: m.seq,
      scheduledUs: m.scheduledUs,
      postedUs: m.postedUs,
      deliveredUs: m.deliveredUs,
      answeredUs: m.answeredUs,
      latencyUs: m.deliveredUs - m.scheduledUs,
      rttUs: m.answeredUs - m.scheduledUs,
      lostPackets: w?.lost.length ?? 0,
    };
    const [t0, t1] = t as [number, number];
    if (t.length < 6 || !w) {
      out.push({
        ...base,
        wireUs: Number.NaN,
        arrivedUs: Number.NaN,
        postWaitUs: t1 - t0,
        senderWaitUs: 0,
        transitUs: 0,
        ownLossUs: 0,
        orderWaitUs: 0,
        stallUs: 0,
        pauseUs: 0,
        processUs: 0,
        unattributedUs: Math.max(0, end - t1),
      });
      continue;
    }
    const [, , t2, t3, t4, t5] = t as [number, number, number, number, number, number];
    const pauseUs = covered(pauses, t5, end);
    // Stalled: waited past the floor, and was released by the repair (delivered within the floor of it);
    // every wait net of the responder's pauses.
    const stallUs =
      end - t5 - pauseUs > threshold && end - repairEnd - covered(pauses, repairEnd, end) <= threshold
        ? Math.max(0, repairEnd - t5 - covered(pauses, t5, repairEnd))
        : 0;
    out.push({
      ...base,
      wireUs: w.firstOctetUs - o.captureAfterUs,
      arrivedUs: w.arrivedUs,
      postWaitUs: t1 - t0,
      senderWaitUs: t2 - t1,
      transitUs: t3 - t2,
      ownLossUs: t4 - t3,
      orderWaitUs: t5 - t4,
      stallUs,
      pauseUs,
      processUs: Math.max(0, end - t5 - stallUs - pauseUs),
      unattributedUs: 0,
    });
  }
  return out.sort((a, b) => a.flow - b.flow || a.seq - b.seq);
}

function sumParts(samples: readonly LatencyParts[]): LatencyParts {
  const acc = Object.fromEntries(PART_NAMES.map((p) => [p, 0])) as Record<keyof LatencyParts, number>;
  for (const s of samples) for (const p of PART_NAMES) acc[p] += s[p];
  return acc;
}

export function flowResults(
  samples: readonly Sample[],
  flows: readonly ClientFlow[],
  serverVerified: (flow: number) => boolean,
  size: number,
  durationS: number,
  expected: number,
): FlowResult[] {
  return flows.map((c) => {
    const mine = samples.filter((s) => s.flow === c.flow);
    const lat = mine.map((s) => s.latencyUs).sort((a, b) => a - b);
    const st = mine.map((s) => s.stallUs);
    return {
      flow: c.flow,
      messages: mine.length,
      verified: c.verified && serverVerified(c.flow) && mine.length === expected,
      p50Us: quantile(lat, 0.5),
      p99Us: quantile(lat, 0.99),
      p999Us: quantile(lat, 0.999),
      maxUs: lat.at(-1) ?? Number.NaN,
      goodputMBps: (mine.length * size) / durationS / 2 ** 20,
      stallTotalUs: st.reduce((a, b) => a + b, 0),
      stallMaxUs: st.reduce((a, b) => Math.max(a, b), 0),
      stalledMessages: st.filter((x) => x > 0).length,
      parts: sumParts(mine),
    };
  });
}

/** Latency quantiles of all flows together, and the sums of every part. */
export function overall(samples: readonly Sample[]): {
  p50Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
  parts: LatencyParts;
} {
  const lat = samples.map((s) => s.latencyUs).sort((a, b) => a - b);
  return {
    p50Us: quantile(lat, 0.5),
    p99Us: quantile(lat, 0.99),
    p999Us: quantile(lat, 0.999),
    maxUs: lat.at(-1) ?? Number.NaN,
    parts: sumParts(samples),
  };
}
