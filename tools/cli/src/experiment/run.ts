/**
 * The experiment driver: builds the topology, and for each point (mapping, flows, loss, delay) starts the
 * responder (and the relay, when delay, jitter or reordering is asked for) in namespace B and the
 * initiator in namespace A, as separate `rddp experiment --role …` processes, then joins their reports.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  attribute,
  type ClientFlow,
  type FlowResult,
  flowResults,
  joinTimes,
  type LatencyParts,
  type LossOnWire,
  overall,
  type Sample,
} from './analysis.js';
import { ExperimentRunError } from './errors.js';
import type { RelaySpec, RelayStats } from './relay.js';
import { mix32 } from './rng.js';
import type { Topology } from './topology.js';
import { decodeWire } from './wire.js';
import { type ClientReport, type Mapping, planOf, type ServerReport, type WorkloadSpec } from './workload.js';

export interface Point {
  readonly mapping: Mapping;
  readonly flows: number;
  /** Packet loss per direction, in percent. */
  readonly loss: number;
  readonly delayMs: number;
}

export interface Common {
  readonly size: number;
  readonly rate: number;
  readonly durationS: number;
  /**
   * Seconds of traffic at the same rate before the measured `durationS` (perftest's warm-up): sent and
   * verified like the rest, left out of the latency, stall and goodput figures.
   */
  readonly warmUpS?: number;
  readonly credits: number;
  readonly jitterMs: number;
  /** Reordering, in percent of datagrams (UDP only). */
  readonly reorder: number;
  readonly rateMbit: number;
  /** ε of the stall measure, µs. */
  readonly epsUs: number;
  readonly seed: number;
  /** Keep each run's captures (pcapng: the link, and the drops of each side) in this folder. */
  readonly capturesDir?: string;
}

export interface RunResult extends Point {
  readonly seed: number;
  readonly transport: 'sctp' | 'tcp';
  readonly startUs: number;
  readonly endUs: number;
  readonly verified: boolean;
  readonly problems: string[];
  readonly impairments: string[];
  readonly drops: number;
  readonly relay?: RelayStats;
  readonly overall: { p50Us: number; p99Us: number; p999Us: number; maxUs: number; parts: LatencyParts };
  readonly goodputMBps: number;
  readonly stallTotalUs: number;
  readonly stalledMessages: number;
  /** What the capture saw: link packets, those dropped, drop records it could not place. */
  readonly wire: {
    packets: number;
    dropped: number;
    unmatchedDrops: number;
    messagesFound: number;
    /** Packets the captures themselves lost (buffer overflow): evidence missing. */
    lostByCapture: number;
    /** Packets the TUN devices' queues dropped (the relay fell behind): loss no rule made. */
    tunQueueDrops: number;
  };
  /** Each side's event-loop pauses, summed (µs), and those past the reports' bound (counted only). */
  readonly pauses: { initiatorUs: number; responderUs: number; notKept: number };
  readonly perFlow: FlowResult[];
  /** Every dropped packet the capture decoded: when, which direction, data or control, whose data. */
  readonly losses: readonly LossOnWire[];
  readonly samples: Sample[];
}

/** A point's own seed: the run's seed and the point, so one point repeats alone. */
export function pointSeed(seed: number, p: Point): number {
  let h = seed >>> 0;
  for (const ch of `${p.mapping}/${p.flows}/${p.loss}/${p.delayMs}`) h = mix32(h ^ ch.charCodeAt(0));
  return h;
}

/** Which impairment came from where. */
export function impairmentSources(p: Point, c: Common, netem: boolean): string[] {
  const relayed = p.delayMs > 0 || c.jitterMs > 0 || c.reorder > 0;
  const link = relayed ? 'the TUN link' : 'the veth';
  const out = [`loss ${p.loss} % per direction: kernel nftables (numgen random on each input from ${link})`];
  if (c.rateMbit > 0) out.push(`rate ${c.rateMbit} Mbit/s per direction: kernel tc tbf on each side of ${link}`);
  const netemNote = netem ? 'netem present but not used, for one method everywhere' : 'kernel has no netem';
  if (p.delayMs > 0 || c.jitterMs > 0)
    out.push(
      `delay ${p.delayMs} ms${c.jitterMs > 0 ? ` + jitter U(0, ${c.jitterMs}) ms` : ''} per direction: user-space packet relay between two TUN devices (${netemNote}; TCP and SCTP both see it in their round trip)`,
    );
  if (c.reorder > 0) out.push(`reordering ${c.reorder} % of packets: user-space packet relay`);
  return out;
}

function lines(child: ChildProcess, onLine: (l: string) => void): void {
  let rest = '';
  child.stdout?.on('data', (d: Buffer) => {
    const parts = (rest + d.toString('utf8')).split('\n');
    rest = parts.pop() ?? '';
    for (const l of parts) onLine(l);
  });
  child.stdout?.on('end', () => {
    if (rest) onLine(rest);
  });
}

/** A role process: resolves with its listening port (if it prints one) and its final JSON line. */
function role(topo: Topology, side: 'a' | 'b', args: string[], timeoutMs: number) {
  const child = topo.exec(side, [process.execPath, process.argv[1] as string, 'experiment', ...args]);
  let err = '';
  child.stderr?.on('data', (d) => {
    if (err.length < 8192) err += d;
  });
  let last = '';
  let onPort: (p: number) => void = () => {};
  const port = new Promise<number>((r) => {
    onPort = r;
  });
  lines(child, (l) => {
    const m = /^LISTENING (\d+)$/.exec(l);
    if (m) onPort(Number(m[1]));
    else if (l.startsWith('{')) last = l;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const done = once(child, 'exit').then(([code]) => {
    clearTimeout(timer);
    if (!last)
      throw new ExperimentRunError(
        `the ${args[1]} process exited ${code} without a report: ${(err.split('\n').find((l) => /Error|rddp:/.test(l)) ?? err.trim().split('\n').at(-1) ?? '').trim()}`,
      );
    return JSON.parse(last) as unknown;
  });
  done.catch(() => {});
  const listening = Promise.race([
    port,
    done.then(() => {
      throw new ExperimentRunError(`the ${args[1]} process ended before listening`);
    }),
  ]);
  listening.catch(() => {});
  return { child, listening, done };
}

let nextPort = 31_000 + Math.floor(Math.random() * 2000);

export async function runPoint(topo: Topology, p: Point, c: Common): Promise<RunResult> {
  const seed = pointSeed(c.seed, p);
  const plan = planOf(p.mapping, p.flows);
  topo.setLoss(p.loss);
  const relayed = p.delayMs > 0 || c.jitterMs > 0 || c.reorder > 0;
  const port = nextPort;
  nextPort = nextPort >= 39_000 ? 31_000 : nextPort + 3;
  const spec: WorkloadSpec = {
    mapping: p.mapping,
    flows: p.flows,
    size: c.size,
    rate: c.rate,
    durationS: (c.warmUpS ?? 0) + c.durationS,
    seed,
    credits: c.credits,
    host: '0.0.0.0',
    port,
  };
  const limit = ((c.warmUpS ?? 0) + c.durationS + 120) * 1000;
  // Relayed: the initiator reaches the responder through the TUN pair and the packet relay; otherwise
  // over the veth. The capture is on B's side of the link used.
  const capture = await topo.capture(relayed ? 'tun' : 'veth');
  const tunDropsBefore = relayed ? topo.tunQueueDrops() : 0;
  const server = role(topo, 'b', ['--role', 'server', '--spec', JSON.stringify(spec)], limit);
  let relay: ReturnType<typeof role> | undefined;
  try {
    await server.listening;
    if (relayed) {
      const rs: RelaySpec = {
        proto: 'tun',
        tunA: { name: topo.names.tunA, netns: topo.names.nsA },
        tunB: { name: topo.names.tunB, netns: topo.names.nsB },
        delayMs: p.delayMs,
        jitterMs: c.jitterMs,
        reorder: c.reorder / 100,
        seed: mix32(seed ^ 0x5eed),
      };
      relay = role(topo, 'b', ['--role', 'relay', '--spec', JSON.stringify(rs)], limit);
      await relay.listening;
    }
    const host = relayed ? topo.names.tunAddrB : topo.names.addrB;
    const client = role(topo, 'a', ['--role', 'client', '--spec', JSON.stringify({ ...spec, host, port })], limit);
    const cr = (await client.done) as ClientReport;
    const sr = (await server.done) as ServerReport;
    let relayStats: RelayStats | undefined;
    if (relay) {
      relay.child.kill('SIGTERM');
      relayStats = (await relay.done) as RelayStats;
    }
    const drops = topo.dropped();
    const tunQueueDrops = relayed ? topo.tunQueueDrops() - tunDropsBefore : 0;
    const files = await capture.stop();
    if (c.capturesDir) {
      const base = path.join(c.capturesDir, `${p.mapping}-flows${p.flows}-loss${p.loss}-delay${p.delayMs}`);
      await mkdir(c.capturesDir, { recursive: true });
      await writeFile(`${base}-link.pcapng`, files.link);
      for (const [i, d] of files.drops.entries()) await writeFile(`${base}-drops-${'ab'[i]}.pcapng`, d);
    }
    const wire = decodeWire({
      link: files.link,
      drops: files.drops,
      clockOffsetUs: topo.clockOffsetUs,
      initiator: relayed ? topo.names.tunAddrA : topo.names.addrA,
      responder: relayed ? topo.names.tunAddrB : topo.names.addrB,
      transport: plan.transport,
    });
    // The first `warm` messages of each flow are the warm-up: verified, not measured.
    const warm = Math.floor((c.warmUpS ?? 0) * c.rate);
    const expected = Math.floor(((c.warmUpS ?? 0) + c.durationS) * c.rate) - warm;
    const serverPauses = sr.pauses ?? [];
    const attributed = attribute(joinTimes(cr.flows, sr.flows), wire, {
      epsUs: c.epsUs,
      captureAfterUs: relayed ? p.delayMs * 1000 : 0,
      linkJitterUs: relayed ? c.jitterMs * 1000 : 0,
      receiverPauses: serverPauses,
    });
    const samples = warm > 0 ? attributed.filter((s) => s.seq >= warm) : attributed;
    const pauseSum = (iv: readonly (readonly [number, number])[]) => iv.reduce((a, [x, y]) => a + (y - x), 0);
    const perFlow = flowResults(
      samples,
      cr.flows as ClientFlow[],
      (f) => sr.flows[String(f)]?.verified ?? false,
      c.size,
      c.durationS,
      expected,
    );
    return {
      ...p,
      seed,
      transport: plan.transport,
      startUs: cr.startUs,
      endUs: cr.endUs,
      verified: perFlow.length === p.flows && perFlow.every((f) => f.verified),
      // Each side's first problems, then the capture's: one side's cannot hide the other's.
      problems: [
        ...cr.problems.slice(0, 12).map((x) => `initiator: ${x}`),
        ...sr.problems.slice(0, 12).map((x) => `responder: ${x}`),
        ...wire.problems.slice(0, 6).map((x) => `capture: ${x}`),
      ],
      impairments: impairmentSources(p, c, topo.netemAvailable),
      drops,
      ...(relayStats ? { relay: relayStats } : {}),
      overall: overall(samples),
      goodputMBps: perFlow.reduce((a, f) => a + f.goodputMBps, 0),
      stallTotalUs: perFlow.reduce((a, f) => a + f.stallTotalUs, 0),
      stalledMessages: perFlow.reduce((a, f) => a + f.stalledMessages, 0),
      wire: {
        packets: wire.packets,
        dropped: wire.dropped,
        unmatchedDrops: wire.unmatchedDrops,
        messagesFound: wire.messages.filter((m) => m.dir === 'request').length,
        lostByCapture: files.lostByCapture,
        tunQueueDrops,
      },
      pauses: {
        initiatorUs: pauseSum(cr.pauses ?? []),
        responderUs: pauseSum(serverPauses),
        notKept: (cr.pausesDropped ?? 0) + (sr.pausesDropped ?? 0),
      },
      perFlow,
      losses: wire.losses,
      samples,
    };
  } finally {
    await capture.stop();
    server.child.kill('SIGKILL');
    relay?.child.kill('SIGKILL');
  }
}
