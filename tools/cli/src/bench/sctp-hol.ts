/**
 * Head-of-line blocking between SCTP streams, measured: DDP over SCTP (RFC 5043 §4, RFC 4960 §6.6) with
 * the two endpoints in two processes (./sctp-hol-peer.ts, `@rddp/llp-sctp`'s public API) and a UDP relay
 * in this one (./sctp-hol-relay.ts). Streams 1 and 2 carry a steady flow of small messages; the relay
 * loses stream-1 DATA chunks only (first transmissions, with a seeded PRNG; the other chunks of their
 * datagrams go on). Stream 2's latency, posting to delivery, should not notice: its p99 with the loss
 * should stay within a few ms of its p99 without.
 *
 * packages/llp-sctp/test/independence.test.ts checks the same scenario without clocks (ordering only);
 * this gives the figures. Needs `tools/cli/dist` built (`pnpm build`): the peers run from it.
 */
import { PeerProcess, waitFor } from './sctp-hol-peer.js';
import { heldBehind, randomLossOnStream, UdpRelay } from './sctp-hol-relay.js';
import { quantile, sorted } from './stats.js';

export interface SctpHolOptions {
  /** Rounds of one message on each of streams 1 and 2 per run (default 1000). */
  readonly rounds?: number;
  /** Time between rounds in ms (default 2). */
  readonly intervalMs?: number;
  /** Octets of each message (default 800). */
  readonly size?: number;
  /**
   * SCTP packet size of both ends (default 1472, UDP over IPv4 on an Ethernet path, where a lost chunk
   * stands for a lost packet; the loopback would allow 64 KiB).
   */
  readonly pmtu?: number;
  /** Share of stream-1 DATA chunks lost in the lossy run (default 0.02; first transmissions only). */
  readonly lossRate?: number;
  /** The loss PRNG's seed (default 0x5ec7). */
  readonly seed?: number;
  /** The bound `holds` checks: stream-2 p99 with loss ≤ p99 without + boundMs (default 3). */
  readonly boundMs?: number;
  /** One run (both processes up, flow, close) may take this long before it fails (default 120 000). */
  readonly runTimeoutMs?: number;
}

export interface LatencyFigures {
  /** Messages measured. */
  readonly n: number;
  /** Posting (sender's `send`) to delivery (receiver's handler), in ms; the two processes' clocks. */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface SctpHolRun {
  readonly lossRate: number;
  /** Stream-1 DATA chunks the relay lost (first transmissions; the rest of their datagrams went on). */
  readonly lost: number;
  readonly stream1: LatencyFigures;
  readonly stream2: LatencyFigures;
  /** Stream-2 messages delivered behind a stream-1 message that reached the receiver after them (0 when independent). */
  readonly stream2HeldByStream1: number;
  /** Every message of both streams arrived once, in order, intact, and every send completed without error. */
  readonly verified: boolean;
}

export interface SctpHolResult {
  readonly withLoss: SctpHolRun;
  readonly noLoss: SctpHolRun;
  readonly boundMs: number;
  /** withLoss.stream2.p99 ≤ noLoss.stream2.p99 + boundMs, both runs verified. */
  readonly holds: boolean;
  /** "stream-2 p99 under 2 % loss on stream 1 ≤ no-loss p99 + 3 ms" with the figures, for a report line. */
  readonly summary: string;
}

function figures(latencies: readonly number[]): LatencyFigures {
  const s = sorted(latencies);
  return { n: s.length, p50: quantile(s, 0.5), p99: quantile(s, 0.99), max: s[s.length - 1] ?? Number.NaN };
}

/** One run: receiver and sender processes, the relay losing `lossRate` of stream-1 datagrams. */
async function runOnce(lossRate: number, o: Required<SctpHolOptions>): Promise<SctpHolRun> {
  const peers: PeerProcess[] = [];
  let relay: UdpRelay | undefined;
  const lifetimeMs = o.runTimeoutMs + 10_000;
  try {
    const transport = { pmtu: o.pmtu };
    const receiver = PeerProcess.start('receiver', { role: 'listen', transport, lifetimeMs });
    peers.push(receiver);
    const { port } = await receiver.first('listening');
    relay = await UdpRelay.open({ port }, randomLossOnStream(1, lossRate, o.seed));
    const sender = PeerProcess.start('sender', {
      role: 'connect',
      port: relay.port,
      streams: 3,
      size: o.size,
      transport,
      lifetimeMs,
    });
    peers.push(sender);
    await sender.first('connected');
    const total = 2 * o.rounds;
    sender.send({ cmd: 'flow', streams: [1, 2], count: o.rounds, intervalMs: o.intervalMs });
    await waitFor(
      () => receiver.all('rx').length === total && sender.all('done').length === total,
      `${total} messages delivered and completed`,
      peers,
      o.runTimeoutMs,
    );
    const rx = receiver.all('rx');
    const done = sender.all('done');
    sender.send({ cmd: 'close' });
    await waitFor(() => receiver.all('closed').length > 0, 'the receiver closed', [], 10_000).catch(() => {});
    const inOrder = [1, 2].every((s) => rx.filter((e) => e.s === s).every((e, i) => e.q === i && e.inOrder));
    const verified = inOrder && rx.every((e) => e.intact) && done.every((e) => e.error === undefined);
    const measure = heldBehind(
      relay.forwards,
      rx.map((e) => ({ s: e.s, q: e.q, d: e.d })),
    );
    return {
      lossRate,
      lost: relay.lost.length,
      stream1: figures(rx.filter((e) => e.s === 1).map((e) => e.latencyMs)),
      stream2: figures(rx.filter((e) => e.s === 2).map((e) => e.latencyMs)),
      stream2HeldByStream1: measure.held,
      verified: verified && measure.matched === o.rounds,
    };
  } finally {
    for (const p of peers) p.kill();
    relay?.close();
  }
}

/**
 * Runs the flow without loss, then with `lossRate` of stream-1 datagrams lost, and returns stream 2's
 * latency in both. `holds` is the bench's check: stream-2 p99 under loss on stream 1 ≤ no-loss p99 + boundMs.
 */
export async function runSctpHolBench(options: SctpHolOptions = {}): Promise<SctpHolResult> {
  const o: Required<SctpHolOptions> = {
    rounds: options.rounds ?? 1000,
    intervalMs: options.intervalMs ?? 2,
    size: options.size ?? 800,
    pmtu: options.pmtu ?? 1472,
    lossRate: options.lossRate ?? 0.02,
    seed: options.seed ?? 0x5ec7,
    boundMs: options.boundMs ?? 3,
    runTimeoutMs: options.runTimeoutMs ?? 120_000,
  };
  const noLoss = await runOnce(0, o);
  const withLoss = await runOnce(o.lossRate, o);
  const holds = noLoss.verified && withLoss.verified && withLoss.stream2.p99 <= noLoss.stream2.p99 + o.boundMs;
  const pct = `${+(o.lossRate * 100).toFixed(2)} %`;
  const summary =
    `stream-2 p99 under ${pct} loss on stream 1 ≤ no-loss p99 + ${o.boundMs} ms: ` +
    `${withLoss.stream2.p99.toFixed(2)} ms vs ${noLoss.stream2.p99.toFixed(2)} ms ` +
    `(p50 ${withLoss.stream2.p50.toFixed(2)} vs ${noLoss.stream2.p50.toFixed(2)} ms; ` +
    `${withLoss.lost} stream-1 chunks lost; ${withLoss.stream2HeldByStream1} stream-2 messages held by stream 1) ` +
    `${holds ? 'holds' : 'FAILS'}`;
  return { withLoss, noLoss, boundMs: o.boundMs, holds, summary };
}
