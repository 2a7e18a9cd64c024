/**
 * The experiment's workload: N independent flows, each a fixed-rate stream of W-octet Sends (RFC 5040
 * §5.3) answered by an 8-octet response, mapped onto LLP connections and streams four ways:
 *
 *   sctp-streams  one SCTP association, flow i on SCTP stream i (RFC 5043: one DDP Stream per SCTP stream)
 *   sctp-assocs   N SCTP associations, one flow each
 *   tcp-conns     N MPA/TCP connections (RFC 5044), one flow each
 *   tcp-shared    one MPA/TCP connection, one RDMAP Stream shared by all flows
 *
 * Each channel (one RDMAP Stream) starts with HELLO → READY (the responder's receives are posted before
 * READY), carries the measured Sends, and ends with FIN → FIN. The responder checks every octet of every
 * message against the pattern both ends derive from (seed, flow, sequence) and the per-flow order; the
 * response frees one of the flow's `credits` (receive buffers the responder reposted, RFC 5040 §5.3).
 * Both ends time with the host's monotonic clock (shared across network namespaces).
 */
import type { LlpConnection } from '@rddp/llp';
import { firstValueFrom, take, toArray } from 'rxjs';
import { RdmaSession } from '../rping/session.js';
import { toolTransport } from '../transports.js';
import { ExperimentProtocolError } from './errors.js';
import { mix32 } from './rng.js';

export const MAPPINGS = ['sctp-streams', 'sctp-assocs', 'tcp-conns', 'tcp-shared'] as const;
export type Mapping = (typeof MAPPINGS)[number];

export const MAPPING_TITLES: Record<Mapping, string> = {
  'sctp-streams': 'N SCTP streams, one association',
  'sctp-assocs': 'N SCTP associations',
  'tcp-conns': 'N MPA/TCP connections',
  'tcp-shared': 'one MPA/TCP connection shared',
};

export interface WorkloadSpec {
  readonly mapping: Mapping;
  readonly flows: number;
  /** Octets per message (W), 16..65536. */
  readonly size: number;
  /** Messages per second per flow. */
  readonly rate: number;
  readonly durationS: number;
  readonly seed: number;
  /** Outstanding (unanswered) messages a flow may have: the responder posts this many receives per flow. */
  readonly credits: number;
  readonly host: string;
  readonly port: number;
}

/** One channel: an RDMAP Stream on LLP stream `stream` of connection `conn`, carrying `flows`. */
export interface Channel {
  readonly conn: number;
  readonly stream: number;
  readonly flows: readonly number[];
}

export interface Plan {
  readonly transport: 'sctp' | 'tcp';
  readonly connections: number;
  readonly streamsPerConnection: number;
  readonly channels: readonly Channel[];
}

export function planOf(mapping: Mapping, flows: number): Plan {
  const ids = Array.from({ length: flows }, (_, i) => i);
  switch (mapping) {
    case 'sctp-streams':
      return {
        transport: 'sctp',
        connections: 1,
        streamsPerConnection: flows,
        channels: ids.map((i) => ({ conn: 0, stream: i, flows: [i] })),
      };
    case 'sctp-assocs':
    case 'tcp-conns':
      return {
        transport: mapping === 'tcp-conns' ? 'tcp' : 'sctp',
        connections: flows,
        streamsPerConnection: 1,
        channels: ids.map((i) => ({ conn: i, stream: 0, flows: [i] })),
      };
    case 'tcp-shared':
      return {
        transport: 'tcp',
        connections: 1,
        streamsPerConnection: 1,
        channels: [{ conn: 0, stream: 0, flows: ids }],
      };
  }
}

/** Message header: flow (16 bits), reserved, sequence (32 bits); FIN uses flow 0xffff. */
const HEADER = 8;
const FIN_FLOW = 0xffff;
export const MIN_SIZE = 16;
export const MAX_SIZE = 65_536;

/** The octets of message `seq` of `flow`: header, then a pattern derived from (seed, flow, seq). */
export function messageOctets(seed: number, flow: number, seq: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  writeHeader(b, flow, seq);
  let x = mix32(seed ^ mix32(flow * 0x9e37 + seq * 0x85eb));
  for (let i = HEADER; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

function writeHeader(b: Uint8Array, flow: number, seq: number): void {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  v.setUint16(0, flow);
  v.setUint16(2, 0);
  v.setUint32(4, seq);
}

function readHeader(b: Uint8Array, n: number): { flow: number; seq: number } | undefined {
  if (n < HEADER) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, n);
  return { flow: v.getUint16(0), seq: v.getUint32(4) };
}

function matches(seed: number, b: Uint8Array, n: number, flow: number, seq: number, size: number): boolean {
  if (n !== size) return false;
  const want = messageOctets(seed, flow, seq, size);
  for (let i = 0; i < size; i++) if (b[i] !== want[i]) return false;
  return true;
}

/** Microseconds on the host's monotonic clock (CLOCK_MONOTONIC: one clock for every namespace). */
export function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** What the responder reports: per flow, the delivery time of each message in sequence order. */
export interface ServerReport {
  readonly role: 'server';
  readonly flows: Record<string, { delivered: number[]; verified: boolean }>;
  readonly problems: string[];
}

/** What the initiator reports: per flow, the scheduled, posted and answered times of each message. */
export interface ClientReport {
  readonly role: 'client';
  readonly startUs: number;
  readonly endUs: number;
  readonly flows: { flow: number; scheduled: number[]; posted: number[]; answered: number[]; verified: boolean }[];
  readonly problems: string[];
}

const CLOSE_MS = 3000;

/**
 * The responder: accepts the plan's connections, serves every channel to its FIN and reports. A message
 * that is not the flow's next, or whose octets differ from the pattern, marks the flow unverified.
 */
export async function runServer(spec: WorkloadSpec, ready: (port: number) => void): Promise<ServerReport> {
  const plan = planOf(spec.mapping, spec.flows);
  const tt = toolTransport({ transport: plan.transport });
  const listener = await tt.transport.listen({ host: spec.host, port: spec.port }, { params: tt.listenParams });
  const conns = firstValueFrom(listener.connections$.pipe(take(plan.connections), toArray()));
  ready(listener.address.port ?? spec.port);
  const accepted = await conns;
  await listener.close();
  const delivered = new Map<number, number[]>();
  const bad = new Set<number>();
  const problems: string[] = [];
  const expected = new Map<number, number>();
  const serveChannel = async (conn: LlpConnection, stream: number): Promise<void> => {
    const s = new RdmaSession(conn, { profile: tt.profileOf(conn), stream, rdmapFactory: tt.rdmapFactory });
    s.postReceive(new Uint8Array(256));
    const hello = await s.recv();
    const flows = parseFlows(hello.buffer.subarray(0, hello.byteLength));
    for (let i = 0; i < flows.length * spec.credits + 1; i++) s.postReceive(new Uint8Array(spec.size));
    await s.post({ type: 'send', payload: [new TextEncoder().encode('READY')] });
    for (;;) {
      const c = await s.recv();
      const at = nowUs();
      const h = readHeader(c.buffer, c.byteLength);
      if (h?.flow === FIN_FLOW) {
        await s.post({ type: 'send', payload: [new TextEncoder().encode('FIN')] });
        break;
      }
      if (!h || !flows.includes(h.flow)) throw new ExperimentProtocolError(`a message of no flow of this channel`);
      const next = expected.get(h.flow) ?? 0;
      if (h.seq !== next || !matches(spec.seed, c.buffer, c.byteLength, h.flow, h.seq, spec.size)) {
        if (!bad.has(h.flow)) problems.push(`flow ${h.flow}: message ${h.seq} (expected ${next}) differs`);
        bad.add(h.flow);
      }
      expected.set(h.flow, h.seq + 1);
      let list = delivered.get(h.flow);
      if (!list) delivered.set(h.flow, (list = []));
      list.push(at);
      s.postReceive(c.buffer); // the credit is real before the response returns it
      const r = new Uint8Array(HEADER);
      writeHeader(r, h.flow, h.seq);
      s.post({ type: 'send', payload: [r] }).catch((e: Error) => {
        if (!bad.has(h.flow))
          problems.push(`flow ${h.flow}: the response to message ${h.seq} was not sent: ${e.message}`);
        bad.add(h.flow);
      });
    }
    // The initiator closes first (RFC 5040 §6.2); ours follows once it did, bounded.
    await s.closedGracefully(CLOSE_MS).catch(() => false);
  };
  await Promise.all(accepted.flatMap((conn) => conn.streams.map((_, i) => serveChannel(conn, i))));
  for (const c of accepted) c.abort();
  const flows: ServerReport['flows'] = {};
  for (let f = 0; f < spec.flows; f++) flows[f] = { delivered: delivered.get(f) ?? [], verified: !bad.has(f) };
  return { role: 'server', flows, problems };
}

function parseFlows(octets: Uint8Array): number[] {
  let m: unknown;
  try {
    m = JSON.parse(new TextDecoder().decode(octets));
  } catch {
    m = undefined;
  }
  const flows = (m as { flows?: unknown })?.flows;
  if (!Array.isArray(flows) || flows.length > 1024 || !flows.every((f) => Number.isInteger(f) && f >= 0 && f < 1024))
    throw new ExperimentProtocolError('HELLO without a valid flow list');
  return flows as number[];
}

interface FlowState {
  readonly flow: number;
  readonly session: RdmaSession;
  /** Phase: the flow's first message is due at start + phase (seeded), then every 1/rate s. */
  readonly phaseUs: number;
  scheduled: number[];
  posted: number[];
  answered: number[];
  outstanding: number;
  /** Messages due but not yet posted (no credit). */
  backlog: number;
  verified: boolean;
}

/** The initiator: connects the plan's connections, runs every flow for `durationS`, reports. */
export async function runClient(spec: WorkloadSpec): Promise<ClientReport> {
  const plan = planOf(spec.mapping, spec.flows);
  const tt = toolTransport({ transport: plan.transport });
  const conns: LlpConnection[] = [];
  try {
    for (let i = 0; i < plan.connections; i++)
      conns.push(
        await tt.transport.connect(
          { host: spec.host, port: spec.port },
          { params: tt.connectParams, streams: plan.streamsPerConnection, signal: AbortSignal.timeout(20_000) },
        ),
      );
    const problems: string[] = [];
    const states: FlowState[] = [];
    const sessions: RdmaSession[] = [];
    const intervalUs = 1e6 / spec.rate;
    await Promise.all(
      plan.channels.map(async (ch) => {
        const conn = conns[ch.conn] as LlpConnection;
        const s = new RdmaSession(conn, {
          profile: tt.profileOf(conn),
          stream: ch.stream,
          rdmapFactory: tt.rdmapFactory,
        });
        sessions.push(s);
        for (let i = 0; i < ch.flows.length * spec.credits + 2; i++) s.postReceive(new Uint8Array(64));
        await s.post({ type: 'send', payload: [new TextEncoder().encode(JSON.stringify({ flows: ch.flows }))] });
        const ready = await s.recv();
        if (new TextDecoder().decode(ready.buffer.subarray(0, ready.byteLength)) !== 'READY')
          throw new ExperimentProtocolError('the responder answered HELLO without READY');
        s.postReceive(ready.buffer);
        for (const flow of ch.flows)
          states.push({
            flow,
            session: s,
            phaseUs: (mix32(spec.seed ^ (flow * 0x2545f491)) / 2 ** 32) * intervalUs,
            scheduled: [],
            posted: [],
            answered: [],
            outstanding: 0,
            backlog: 0,
            verified: true,
          });
      }),
    );
    states.sort((a, b) => a.flow - b.flow);
    const byFlow = new Map(states.map((f) => [f.flow, f]));
    const startUs = nowUs() + 20_000;
    const endUs = startUs + spec.durationS * 1e6;
    const total = Math.floor(spec.durationS * spec.rate);
    const post = (f: FlowState) => {
      const seq = f.posted.length;
      f.posted.push(nowUs());
      f.outstanding++;
      f.session
        .post({ type: 'send', payload: [messageOctets(spec.seed, f.flow, seq, spec.size)] })
        .catch((e: Error) => fail(e));
    };
    let fail: (e: Error) => void = () => {};
    const failed = new Promise<never>((_, reject) => {
      fail = reject;
    });
    failed.catch(() => {});
    // Responses: one reader per channel; each frees a credit and may post a waiting message.
    const readers = sessions.map(async (s) => {
      for (;;) {
        const c = await s.recv();
        const at = nowUs();
        const h = readHeader(c.buffer, c.byteLength);
        s.postReceive(c.buffer);
        if (c.byteLength === 3 && new TextDecoder().decode(c.buffer.subarray(0, 3)) === 'FIN') return;
        const f = h ? byFlow.get(h.flow) : undefined;
        if (!f || h?.seq !== f.answered.length || c.byteLength !== HEADER) {
          if (f) f.verified = false;
          problems.push(`a response that answers no outstanding message (${h?.flow}/${h?.seq})`);
          continue;
        }
        f.answered.push(at);
        f.outstanding--;
        if (f.backlog > 0) {
          f.backlog--;
          post(f);
        }
      }
    });
    const allReaders = Promise.all(readers);
    allReaders.catch(() => {});
    // The clock: every flow's messages fall due at start + phase + k/rate (open loop).
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = nowUs();
        let pending = false;
        for (const f of states) {
          while (f.scheduled.length < total && startUs + f.phaseUs + f.scheduled.length * intervalUs <= now) {
            f.scheduled.push(startUs + f.phaseUs + f.scheduled.length * intervalUs);
            if (f.outstanding < spec.credits) post(f);
            else f.backlog++;
          }
          if (f.scheduled.length < total) pending = true;
        }
        if (pending) setTimeout(tick, 1);
        else resolve();
      };
      setTimeout(tick, Math.max(0, (startUs - nowUs()) / 1000));
    });
    // Drain: every message answered (bounded), then FIN on each channel.
    const drainBy = Date.now() + 60_000;
    while (states.some((f) => f.answered.length < total) && Date.now() < drainBy)
      await Promise.race([new Promise((r) => setTimeout(r, 5)), failed]);
    for (const f of states)
      if (f.answered.length < total) {
        f.verified = false;
        problems.push(`flow ${f.flow}: ${f.answered.length} of ${total} messages answered`);
      }
    const fin = new Uint8Array(HEADER);
    writeHeader(fin, FIN_FLOW, 0);
    for (const s of sessions) s.post({ type: 'send', payload: [fin] }).catch(() => {});
    await Promise.race([allReaders, new Promise((r) => setTimeout(r, 10_000))]);
    await Promise.all(sessions.map((s) => s.closeWithin(CLOSE_MS)));
    return {
      role: 'client',
      startUs,
      endUs,
      flows: states.map((f) => ({
        flow: f.flow,
        scheduled: f.scheduled,
        posted: f.posted,
        answered: f.answered,
        verified: f.verified,
      })),
      problems,
    };
  } finally {
    for (const c of conns) c.abort();
  }
}
