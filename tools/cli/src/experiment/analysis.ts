/**
 * From the two ends' reports to per-message samples and per-flow measures.
 *
 * Latency of message m: delivered(m) − scheduled(m), one way, on the host's monotonic clock (the open
 * loop's due time, so a wait for credit counts).
 *
 * Head-of-line stall imposed by other flows (docs/EXPERIMENTS.md "Stall"): with B the run's smallest
 * latency, m's own ready time is r(m) = max(scheduled(m) + B, delivered(previous message of m's flow)) —
 * the earliest m could be delivered given its own flow's order. If m came more than ε after r(m), and a
 * message m′ of ANOTHER flow, due no later than m, late by more than ε, and in flight when the link
 * dropped a packet (a loss event in [scheduled(m′), delivered(m′)]), was delivered in (r(m),
 * delivered(m)], then m waited on m′'s loss: stall(m) = max such delivered(m′) − r(m). Otherwise
 * stall(m) = 0 (m was on time, late on its own or its flow's loss, or late with no loss to blame).
 */

/** `nft monitor trace` reports a drop this long after it, at most (the drop times are when we read them). */
export const DROP_REPORT_SLACK_US = 2000;

export interface Sample {
  readonly flow: number;
  readonly seq: number;
  readonly scheduledUs: number;
  readonly postedUs: number;
  readonly deliveredUs: number;
  readonly answeredUs: number;
  readonly latencyUs: number;
  readonly rttUs: number;
  readonly stallUs: number;
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
  /** Sum of the stall other flows imposed on this one, and the messages that saw any. */
  readonly stallTotalUs: number;
  readonly stallMaxUs: number;
  readonly stalledMessages: number;
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

/** Joins the two ends' times into samples (stall filled in by `stalls`). */
export function joinSamples(
  client: readonly ClientFlow[],
  server: Record<string, { delivered: number[]; verified: boolean }>,
): Sample[] {
  const out: Sample[] = [];
  for (const c of client) {
    const d = server[String(c.flow)]?.delivered ?? [];
    const n = Math.min(c.scheduled.length, c.posted.length, d.length, c.answered.length);
    for (let i = 0; i < n; i++) {
      const s = c.scheduled[i] as number;
      out.push({
        flow: c.flow,
        seq: i,
        scheduledUs: s,
        postedUs: c.posted[i] as number,
        deliveredUs: d[i] as number,
        answeredUs: c.answered[i] as number,
        latencyUs: (d[i] as number) - s,
        rttUs: (c.answered[i] as number) - s,
        stallUs: 0,
      });
    }
  }
  return out;
}

/** Fills in each sample's stall (see the module comment); `epsUs` is ε. */
export function stalls(samples: readonly Sample[], epsUs: number, lossesUs: readonly number[]): Sample[] {
  if (samples.length === 0) return [];
  const base = samples.reduce((a, s) => Math.min(a, s.latencyUs), Number.POSITIVE_INFINITY);
  const drops = [...lossesUs].sort((a, b) => a - b);
  // A drop in [from, to]: the first drop at or after `from` is no later than `to`.
  const droppedIn = (from: number, to: number) => {
    let lo = 0;
    let hi = drops.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((drops[mid] as number) < from) lo = mid + 1;
      else hi = mid;
    }
    return lo < drops.length && (drops[lo] as number) <= to;
  };
  const byFlow = new Map<number, Sample[]>();
  for (const s of samples) {
    let l = byFlow.get(s.flow);
    if (!l) byFlow.set(s.flow, (l = []));
    l.push(s);
  }
  // Late messages (by more than ε over B) that were in flight when a packet was dropped.
  const late = samples
    .filter((s) => s.latencyUs - base > epsUs && droppedIn(s.scheduledUs, s.deliveredUs + DROP_REPORT_SLACK_US))
    .sort((a, b) => a.deliveredUs - b.deliveredUs);
  const lateD = late.map((s) => s.deliveredUs);
  const firstAfter = (t: number) => {
    let lo = 0;
    let hi = lateD.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((lateD[mid] as number) <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const out: Sample[] = [];
  for (const list of byFlow.values()) {
    list.sort((a, b) => a.seq - b.seq);
    let prevD = Number.NEGATIVE_INFINITY;
    for (const m of list) {
      const ready = Math.max(m.scheduledUs + base, prevD);
      prevD = m.deliveredUs;
      let stall = 0;
      if (m.deliveredUs - ready > epsUs) {
        let best = Number.NaN;
        for (let i = firstAfter(ready); i < late.length && (lateD[i] as number) <= m.deliveredUs; i++) {
          const o = late[i] as Sample;
          if (o.flow !== m.flow && o.scheduledUs <= m.scheduledUs) best = o.deliveredUs;
        }
        if (!Number.isNaN(best)) stall = best - ready;
      }
      out.push({ ...m, stallUs: stall });
    }
  }
  return out.sort((a, b) => a.flow - b.flow || a.seq - b.seq);
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
    };
  });
}

/** Latency quantiles of all flows together. */
export function overall(samples: readonly Sample[]): { p50Us: number; p99Us: number; p999Us: number; maxUs: number } {
  const lat = samples.map((s) => s.latencyUs).sort((a, b) => a - b);
  return {
    p50Us: quantile(lat, 0.5),
    p99Us: quantile(lat, 0.99),
    p999Us: quantile(lat, 0.999),
    maxUs: lat.at(-1) ?? Number.NaN,
  };
}
