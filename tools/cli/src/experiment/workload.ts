/**
 * The experiment's workload: N independent flows, each a fixed-rate stream of W-octet Sends (RFC 5040
 * §5.3) answered by an 8-octet response, mapped onto LLP connections and streams four ways:
 *
 *   sctp-streams  one SCTP association, flow i on SCTP stream i (RFC 5043: one DDP Stream per SCTP stream)
 *   sctp-idata    the same with user message interleaving (RFC 8260 I-DATA) negotiated
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
import { describeTerminateEvent, PeerWatch } from '../peer.js';
import { RdmaSession } from '../rping/session.js';
import { type TransportFlags, toolTransport } from '../transports.js';
import { ExperimentProtocolError } from './errors.js';
import type { Mapping } from './mappings.js';
import { mix32 } from './rng.js';

export { DEFAULT_MAPPINGS, MAPPING_TITLES, MAPPINGS, type Mapping } from './mappings.js';

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
  /** SCTP: offer I-DATA (RFC 8260), at both ends. */
  readonly interleaving: boolean;
  readonly connections: number;
  readonly streamsPerConnection: number;
  readonly channels: readonly Channel[];
}

/**
 * The transport flags of a plan. SCTP runs with an RTO.Min of 200 ms, Linux TCP's minimum RTO, so a lost
 * retransmission costs both transports alike (RFC 9260's default of 1 s would be SCTP's alone).
 */
export function transportFlags(plan: Plan): TransportFlags {
  if (plan.transport !== 'sctp') return { transport: plan.transport };
  return {
    transport: 'sctp',
    sctpRtoMin: String(SCTP_RTO_MIN_MS),
    ...(plan.interleaving ? { sctpInterleaving: true } : {}),
  };
}

/** RTO.Min of the experiment's SCTP associations, in ms (`transportFlags`). */
export const SCTP_RTO_MIN_MS = 200;

export function planOf(mapping: Mapping, flows: number): Plan {
  const ids = Array.from({ length: flows }, (_, i) => i);
  switch (mapping) {
    case 'sctp-streams':
    case 'sctp-idata':
      return {
        transport: 'sctp',
        interleaving: mapping === 'sctp-idata',
        connections: 1,
        streamsPerConnection: flows,
        channels: ids.map((i) => ({ conn: 0, stream: i, flows: [i] })),
      };
    case 'sctp-assocs':
    case 'tcp-conns':
      return {
        transport: mapping === 'tcp-conns' ? 'tcp' : 'sctp',
        interleaving: false,
        connections: flows,
        streamsPerConnection: 1,
        channels: ids.map((i) => ({ conn: i, stream: 0, flows: [i] })),
      };
    case 'tcp-shared':
      return {
        transport: 'tcp',
        interleaving: false,
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

/** Event-loop pauses of a role process: [expected fire time, actual fire time] (µs, `nowUs`), and those not kept. */
export interface Pauses {
  readonly pauses: [number, number][];
  readonly pausesDropped: number;
}

/** What the responder reports: per flow, the delivery time of each message in sequence order. */
export interface ServerReport extends Pauses {
  readonly role: 'server';
  readonly flows: Record<string, { delivered: number[]; verified: boolean }>;
  readonly problems: string[];
}

/** What the initiator reports: per flow, the scheduled, posted and answered times of each message. */
export interface ClientReport extends Pauses {
  readonly role: 'client';
  readonly startUs: number;
  readonly endUs: number;
  readonly flows: { flow: number; scheduled: number[]; posted: number[]; answered: number[]; verified: boolean }[];
  readonly problems: string[];
}

/** Pauses kept per report; further ones are only counted (`pausesDropped`). */
export const MAX_PAUSES = 100_000;
const PAUSE_TICK_MS = 1;
/** A tick this much later than due is a pause (µs): Node's millisecond timers are often ~1 ms late. */
const PAUSE_LATE_US = 2000;

/**
 * Watches the event loop: a 1 ms interval (unref'd) that records [expected, actual] fire times whenever it
 * fires more than 2 ms late. GC, CPU contention and long synchronous work all show as pauses.
 */
export class PauseMonitor {
  private readonly pauses: [number, number][] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private expected = 0;

  constructor(private readonly max = MAX_PAUSES) {}

  start(): this {
    if (this.timer) return this;
    this.expected = nowUs() + PAUSE_TICK_MS * 1000;
    this.timer = setInterval(() => {
      const at = nowUs();
      if (at - this.expected > PAUSE_LATE_US) {
        if (this.pauses.length < this.max) this.pauses.push([this.expected, at]);
        else this.dropped++;
      }
      // Node schedules the next run from this one's start.
      this.expected = at + PAUSE_TICK_MS * 1000;
    }, PAUSE_TICK_MS);
    this.timer.unref();
    return this;
  }

  /** Stops watching; what it saw. */
  stop(): Pauses {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    return { pauses: this.pauses, pausesDropped: this.dropped };
  }
}

/**
 * The initiator closes each channel's RDMAP Stream and then its LLP connection (RFC 5040 §6.2) and waits
 * this long for both before it aborts what is left. The responder, which waits for the initiator's
 * close, waits longer.
 */
const CLOSE_MS = 10_000;
const SERVER_CLOSE_MS = CLOSE_MS + 5000;
/** The initiator's wait for a channel's READY, and for the answers to its FINs. */
const SETUP_MS = 30_000;
const FIN_MS = 10_000;
/** The responder stops waiting for connections after this long without a new one. */
const ACCEPT_IDLE_MS = 45_000;
/** The responder's whole run, past the measured duration, before it aborts what is left and reports. */
const SERVER_SLACK_MS = 100_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** `p`, or an ExperimentProtocolError saying `what` did not happen within `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new ExperimentProtocolError(`${what} within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' ? `${e.message} (${code})` : e.message;
}

function flowNames(flows: readonly number[]): string {
  return flows.length === 1 ? `flow ${flows[0]}` : `flows ${flows.join(',')}`;
}

/**
 * Why a channel's RDMAP Stream ended, for a problem line: the peer's Terminate, reset or close (peer.ts),
 * and a Terminate this side sent.
 */
class ChannelWatch {
  private readonly peer: PeerWatch;
  private sent: string | undefined;

  constructor(connection: LlpConnection, session: RdmaSession) {
    this.peer = new PeerWatch(connection, session.rdmap.terminate$);
    session.rdmap.terminate$.subscribe((t) => {
      if (t.direction !== 'received') this.sent ??= describeTerminateEvent(t);
    });
  }

  async explain(e: unknown): Promise<string> {
    const why = describe(await this.peer.explain(e, 1000));
    return this.sent ? `${why}; ${this.sent}` : why;
  }
}

/**
 * The initiator's graceful teardown (RFC 5040 §6.2): every RDMAP Stream closed (what is posted completes
 * first), then every LLP connection (SCTP: SHUTDOWN, RFC 4960 §9.2; MPA/TCP: FIN), within `ms`. Only then
 * is anything aborted: an abort while the peer still waits for the acknowledgement of its last Sends fails
 * them (an SCTP Send completes on the peer's SACK). Returns the indexes of the connections it aborted.
 */
async function closeGracefully(
  sessions: readonly RdmaSession[],
  conns: readonly (LlpConnection | undefined)[],
  ms: number,
): Promise<number[]> {
  let t: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((r) => {
    t = setTimeout(r, ms);
  });
  try {
    await Promise.race([Promise.all(sessions.map((s) => s.close().catch(() => {}))), deadline]);
    const ended = conns.map((c) =>
      c ? new Promise<void>((r) => c.closed$.subscribe({ next: () => r(), complete: () => r() })) : undefined,
    );
    for (const c of conns) if (c?.state === 'open') c.close().catch(() => {});
    await Promise.race([Promise.all(ended), deadline]);
  } finally {
    clearTimeout(t);
  }
  const aborted: number[] = [];
  conns.forEach((c, i) => {
    if (!c || c.state === 'closed') return;
    aborted.push(i);
    c.abort();
  });
  return aborted;
}

/**
 * The responder: accepts the plan's connections, serves every channel to its FIN and reports. A message
 * that is not the flow's next, or whose octets differ from the pattern, marks the flow unverified; a
 * channel that fails marks its flows unverified and says why in `problems`. Whatever fails, it reports.
 */
export async function runServer(spec: WorkloadSpec, ready: (port: number) => void): Promise<ServerReport> {
  const monitor = new PauseMonitor().start();
  const plan = planOf(spec.mapping, spec.flows);
  const tt = toolTransport(transportFlags(plan));
  const listener = await tt.transport.listen({ host: spec.host, port: spec.port }, { params: tt.listenParams });
  const delivered = new Map<number, number[]>();
  const bad = new Set<number>();
  const announced = new Set<number>();
  const problems: string[] = [];
  /** Problems still being explained (a failure's cause may take a moment to be known). */
  const explaining: Promise<void>[] = [];
  const expected = new Map<number, number>();
  const markBad = (flows: readonly number[], problem: string) => {
    if (flows.every((f) => bad.has(f))) return;
    for (const f of flows) bad.add(f);
    problems.push(problem);
  };
  const serveChannel = async (conn: LlpConnection, k: number, stream: number): Promise<void> => {
    const where = `connection ${k}, stream ${stream}`;
    let flows: number[] | undefined;
    let s: RdmaSession | undefined;
    let watch: ChannelWatch | undefined;
    let fin = false;
    try {
      s = new RdmaSession(conn, { profile: tt.profileOf(conn), stream, rdmapFactory: tt.rdmapFactory });
      watch = new ChannelWatch(conn, s);
      s.postReceive(new Uint8Array(256));
      const hello = await s.recv();
      flows = parseFlows(hello.buffer.subarray(0, hello.byteLength));
      for (const f of flows) announced.add(f);
      for (let i = 0; i < flows.length * spec.credits + 1; i++) s.postReceive(new Uint8Array(spec.size));
      await s.post({ type: 'send', payload: [new TextEncoder().encode('READY')] });
      for (;;) {
        const c = await s.recv();
        const at = nowUs();
        const h = readHeader(c.buffer, c.byteLength);
        if (h?.flow === FIN_FLOW) {
          fin = true;
          // Over SCTP this completes on the initiator's SACK: the initiator must not abort before it.
          await s.post({ type: 'send', payload: [new TextEncoder().encode('FIN')] });
          break;
        }
        if (!h || !flows.includes(h.flow))
          throw new ExperimentProtocolError(`a message of no flow of this channel (${h?.flow}/${h?.seq})`);
        const next = expected.get(h.flow) ?? 0;
        if (h.seq !== next || !matches(spec.seed, c.buffer, c.byteLength, h.flow, h.seq, spec.size))
          markBad([h.flow], `flow ${h.flow}: message ${h.seq} (expected ${next}) differs`);
        expected.set(h.flow, h.seq + 1);
        let list = delivered.get(h.flow);
        if (!list) delivered.set(h.flow, (list = []));
        list.push(at);
        s.postReceive(c.buffer); // the credit is real before the response returns it
        const r = new Uint8Array(HEADER);
        writeHeader(r, h.flow, h.seq);
        const flow = h.flow;
        const seq = h.seq;
        const w = watch;
        s.post({ type: 'send', payload: [r] }).catch((e: unknown) => {
          if (bad.has(flow)) return;
          explaining.push(
            w
              .explain(e)
              .then((why) => markBad([flow], `flow ${flow}: the response to message ${seq} was not sent: ${why}`)),
          );
        });
      }
    } catch (e) {
      const why = watch ? await watch.explain(e) : describe(e);
      if (fin) problems.push(`${flowNames(flows ?? [])} (${where}): the answer to the FIN was not sent: ${why}`);
      else if (flows) markBad(flows, `${flowNames(flows)} (${where}): the channel failed: ${why}`);
      else problems.push(`${where}: the channel failed before its HELLO: ${why}`);
    }
    // The initiator closes first (RFC 5040 §6.2); ours follows once it did, bounded.
    if (s) await s.closedGracefully(SERVER_CLOSE_MS).catch(() => false);
  };
  const accepted: LlpConnection[] = [];
  const served: Promise<void>[] = [];
  let acceptIdle: NodeJS.Timeout | undefined;
  const allAccepted = new Promise<void>((resolve) => {
    const idle = () => {
      clearTimeout(acceptIdle);
      acceptIdle = setTimeout(resolve, ACCEPT_IDLE_MS);
    };
    listener.errors$.subscribe((e) => problems.push(`a connection attempt failed: ${describe(e)}`));
    listener.connections$.subscribe((conn) => {
      if (accepted.length >= plan.connections) {
        problems.push(`a connection beyond the plan's ${plan.connections} was refused`);
        conn.abort();
        return;
      }
      const k = accepted.push(conn) - 1;
      for (let i = 0; i < conn.streams.length; i++) served.push(serveChannel(conn, k, i));
      if (accepted.length === plan.connections) resolve();
      else idle();
    });
    idle();
  });
  ready(listener.address.port ?? spec.port);
  const deadline = Date.now() + spec.durationS * 1000 + SERVER_SLACK_MS;
  await allAccepted;
  clearTimeout(acceptIdle);
  await listener.close();
  if (accepted.length < plan.connections)
    problems.push(`${accepted.length} of ${plan.connections} connections arrived (none for ${ACCEPT_IDLE_MS} ms)`);
  const allServed = Promise.all(served);
  const late = await Promise.race([
    allServed.then(() => false),
    sleep(Math.max(0, deadline - Date.now())).then(() => true),
  ]);
  if (late) {
    problems.push(`the channels did not end within ${spec.durationS + SERVER_SLACK_MS / 1000} s: connections aborted`);
    for (const c of accepted) c.abort();
    await Promise.race([allServed, sleep(5000)]);
  }
  for (const c of accepted) if (c.state !== 'closed') c.abort();
  await Promise.all(explaining);
  for (let f = 0; f < spec.flows; f++)
    if (!announced.has(f)) markBad([f], `flow ${f}: no channel announced it (its HELLO never arrived)`);
  const flows: ServerReport['flows'] = {};
  for (let f = 0; f < spec.flows; f++) flows[f] = { delivered: delivered.get(f) ?? [], verified: !bad.has(f) };
  return { role: 'server', flows, problems, ...monitor.stop() };
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

/** One channel of the initiator: its RDMAP Stream (once set up) and whether it failed. */
interface ChannelState {
  readonly channel: Channel;
  readonly flows: FlowState[];
  session: RdmaSession | undefined;
  watch: ChannelWatch | undefined;
  failed: boolean;
  /** The responder answered the FIN. */
  finished: boolean;
}

interface FlowState {
  readonly flow: number;
  readonly channel: ChannelState;
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

/**
 * The initiator: connects the plan's connections, runs every flow for `durationS`, closes gracefully and
 * reports. A connection or channel that fails marks its flows unverified and says why in `problems`; the
 * other channels run on. Whatever fails, it reports.
 */
export async function runClient(spec: WorkloadSpec): Promise<ClientReport> {
  const monitor = new PauseMonitor().start();
  const plan = planOf(spec.mapping, spec.flows);
  const tt = toolTransport(transportFlags(plan));
  const intervalUs = 1e6 / spec.rate;
  const total = Math.floor(spec.durationS * spec.rate);
  const problems: string[] = [];
  /** Problems still being explained (a failure's cause may take a moment to be known). */
  const explaining: Promise<void>[] = [];
  const channels: ChannelState[] = plan.channels.map((channel) => {
    const c: ChannelState = {
      channel,
      flows: [],
      session: undefined,
      watch: undefined,
      failed: false,
      finished: false,
    };
    for (const flow of channel.flows)
      c.flows.push({
        flow,
        channel: c,
        phaseUs: (mix32(spec.seed ^ (flow * 0x2545f491)) / 2 ** 32) * intervalUs,
        scheduled: [],
        posted: [],
        answered: [],
        outstanding: 0,
        backlog: 0,
        verified: true,
      });
    return c;
  });
  const states = channels.flatMap((c) => c.flows).sort((a, b) => a.flow - b.flow);
  const byFlow = new Map(states.map((f) => [f.flow, f]));
  const where = (c: ChannelState) =>
    `${flowNames(c.channel.flows)} (connection ${c.channel.conn}, stream ${c.channel.stream})`;
  /** The channel is lost: its flows not answered in full cannot verify; the others run on. */
  const failChannel = (c: ChannelState, what: string, e: unknown) => {
    if (c.failed) return;
    c.failed = true;
    for (const f of c.flows) if (f.answered.length < total) f.verified = false;
    explaining.push(
      (c.watch ? c.watch.explain(e) : Promise.resolve(describe(e))).then((why) => {
        problems.push(`${where(c)}: ${what}: ${why}`);
      }),
    );
  };
  const conns: (LlpConnection | undefined)[] = [];
  try {
    for (let i = 0; i < plan.connections; i++) {
      try {
        conns.push(
          await tt.transport.connect(
            { host: spec.host, port: spec.port },
            { params: tt.connectParams, streams: plan.streamsPerConnection, signal: AbortSignal.timeout(20_000) },
          ),
        );
      } catch (e) {
        conns.push(undefined);
        for (const c of channels) if (c.channel.conn === i) failChannel(c, 'its connection was not set up', e);
      }
    }
    await Promise.all(
      channels.map(async (c) => {
        const conn = conns[c.channel.conn];
        if (!conn || c.failed) return;
        try {
          const s = new RdmaSession(conn, {
            profile: tt.profileOf(conn),
            stream: c.channel.stream,
            rdmapFactory: tt.rdmapFactory,
          });
          c.session = s;
          c.watch = new ChannelWatch(conn, s);
          for (let i = 0; i < c.flows.length * spec.credits + 2; i++) s.postReceive(new Uint8Array(64));
          const hello = JSON.stringify({ flows: c.channel.flows });
          await s.post({ type: 'send', payload: [new TextEncoder().encode(hello)] });
          const ready = await within(s.recv(), SETUP_MS, 'no READY');
          if (new TextDecoder().decode(ready.buffer.subarray(0, ready.byteLength)) !== 'READY')
            throw new ExperimentProtocolError('the responder answered HELLO without READY');
          s.postReceive(ready.buffer);
        } catch (e) {
          failChannel(c, 'the channel was not set up', e);
        }
      }),
    );
    const startUs = nowUs() + 20_000;
    const endUs = startUs + spec.durationS * 1e6;
    const post = (f: FlowState) => {
      const c = f.channel;
      const seq = f.posted.length;
      f.posted.push(nowUs());
      f.outstanding++;
      (c.session as RdmaSession)
        .post({ type: 'send', payload: [messageOctets(spec.seed, f.flow, seq, spec.size)] })
        .catch((e: unknown) => failChannel(c, `message ${seq} of flow ${f.flow} was not sent`, e));
    };
    // Responses: one reader per channel; each frees a credit and may post a waiting message.
    const read = async (c: ChannelState, s: RdmaSession) => {
      try {
        for (;;) {
          const r = await s.recv();
          const at = nowUs();
          if (r.byteLength === 3 && new TextDecoder().decode(r.buffer.subarray(0, 3)) === 'FIN') {
            c.finished = true;
            return;
          }
          const h = readHeader(r.buffer, r.byteLength);
          s.postReceive(r.buffer);
          const f = h ? byFlow.get(h.flow) : undefined;
          if (!f || f.channel !== c || h?.seq !== f.answered.length || r.byteLength !== HEADER) {
            if (f?.verified) {
              f.verified = false;
              problems.push(
                `flow ${f.flow}: a response that answers no outstanding message (${h?.flow}/${h?.seq}, expected ${f.flow}/${f.answered.length})`,
              );
            } else if (!f) problems.push(`${where(c)}: a response of no flow of this channel (${h?.flow}/${h?.seq})`);
            continue;
          }
          f.answered.push(at);
          f.outstanding--;
          if (f.backlog > 0 && !c.failed) {
            f.backlog--;
            post(f);
          }
        }
      } catch (e) {
        failChannel(c, 'the channel failed', e);
      }
    };
    const live = () => channels.filter((c) => !c.failed && c.session);
    const readers = live().map((c) => read(c, c.session as RdmaSession));
    // The clock: every flow's messages fall due at start + phase + k/rate (open loop).
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = nowUs();
        let pending = false;
        for (const f of states) {
          while (f.scheduled.length < total && startUs + f.phaseUs + f.scheduled.length * intervalUs <= now) {
            f.scheduled.push(startUs + f.phaseUs + f.scheduled.length * intervalUs);
            if (f.channel.failed) continue;
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
    // Drain: every message of the live channels answered (bounded), then FIN on each of them.
    const drainBy = Date.now() + 60_000;
    while (states.some((f) => !f.channel.failed && f.answered.length < total) && Date.now() < drainBy) await sleep(5);
    for (const f of states)
      if (!f.channel.failed && f.answered.length < total) {
        f.verified = false;
        problems.push(`flow ${f.flow}: ${f.answered.length} of ${total} messages answered`);
      }
    const fin = new Uint8Array(HEADER);
    writeHeader(fin, FIN_FLOW, 0);
    for (const c of live())
      (c.session as RdmaSession)
        .post({ type: 'send', payload: [fin] })
        .catch((e: unknown) => failChannel(c, 'the FIN was not sent', e));
    await Promise.race([Promise.all(readers), sleep(FIN_MS)]);
    for (const c of live())
      if (!c.finished) problems.push(`${where(c)}: the responder did not answer the FIN within ${FIN_MS} ms`);
    // Graceful termination (RFC 5040 §6.2) of every stream and connection, then (bounded) aborts.
    const sessions = channels.flatMap((c) => (c.session ? [c.session] : []));
    const aborted = await closeGracefully(sessions, conns, CLOSE_MS);
    for (const i of aborted)
      problems.push(`connection ${i}: the graceful close did not finish within ${CLOSE_MS} ms (aborted)`);
    await Promise.all(explaining);
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
      ...monitor.stop(),
    };
  } finally {
    for (const c of conns) if (c && c.state !== 'closed') c.abort();
    monitor.stop();
  }
}
