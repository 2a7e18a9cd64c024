/**
 * `rddp experiment` — multi-stream SCTP against MPA/TCP on an impaired link the command builds itself
 * (two network namespaces, a veth pair, nftables loss, tc tbf, a user-space relay for delay, jitter and
 * reordering): N flows mapped to N SCTP streams on one association, N associations, N MPA/TCP
 * connections, or one shared MPA/TCP connection; per-flow latency, goodput and head-of-line stall.
 * `--sweep` runs a grid and writes one report. docs/EXPERIMENTS.md.
 *
 * The roles (`--role server|client|relay --spec JSON`) are the processes the command starts in each
 * namespace; they are not for direct use.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_MAPPINGS, MAPPINGS } from '../experiment/mappings.js';
import { integerIn, numberIn, positiveUpTo } from '../flags.js';

/** A comma-separated list of numbers in min..max. */
function numberListIn(min: number, max: number): (v: string) => string {
  const one = numberIn(min, max);
  return (v) => {
    for (const x of v.split(',')) one(x);
    return v;
  };
}

const list = (v: string) => v.split(',').map(Number);

export const SWEEP_DEFAULTS = { loss: '0,1,2,5', flows: '1,8,64', delay: '0,10' } as const;

interface Raw {
  role?: string;
  spec?: string;
  mappings?: string;
  flows?: string;
  loss?: string;
  delay?: string;
  jitter: string;
  reorder: string;
  rateLimit: string;
  size: string;
  rate: string;
  duration: string;
  warmUp: string;
  credits: string;
  stallEpsilon: string;
  seed?: string;
  out?: string;
  sweep?: boolean;
  json?: boolean;
  keepCaptures?: boolean;
}

export function registerExperiment(program: Command): void {
  program
    .command('experiment')
    .description(
      'N flows over N SCTP streams, N associations, N MPA/TCP connections or one shared MPA/TCP connection, on an impaired veth between two network namespaces: latency, goodput, head-of-line stall (root)',
    )
    .option(
      '--mappings <list>',
      'mappings to run: sctp-streams, sctp-assocs, tcp-conns, tcp-shared, sctp-idata (RFC 8260 I-DATA), or all (default: the first four)',
    )
    .option('--flows <list>', 'flow counts, 1..64 (default 4; sweep 1,8,64)', numberListIn(1, 64))
    .option(
      '--loss <list>',
      'packet loss per direction in percent, 0..50 (default 0,1; sweep 0,1,2,5)',
      numberListIn(0, 50),
    )
    .option(
      '--delay <list>',
      'added one-way delay in ms, 0..1000 (user-space relay; default 0; sweep 0,10)',
      numberListIn(0, 1000),
    )
    .option('--jitter <ms>', 'added jitter U(0, ms) per packet (user-space relay)', numberIn(0, 1000), '0')
    .option(
      '--reorder <percent>',
      'datagrams held back behind later ones (user-space relay, UDP only)',
      numberIn(0, 50),
      '0',
    )
    .option('--rate-limit <mbit>', 'tc tbf rate on each veth in Mbit/s (0: none)', numberIn(0, 100_000), '0')
    .option('-s, --size <octets>', 'message size W', integerIn(16, 65_536), '1024')
    .option('--rate <n>', 'messages per second per flow', positiveUpTo(100_000), '100')
    .option('-D, --duration <s>', 'seconds of traffic per run', positiveUpTo(3600), '3')
    .option(
      '--warm-up <s>',
      'seconds of traffic before the measured --duration (sent and verified, not measured), as perftest warms up',
      numberIn(0, 600),
      '0',
    )
    .option('--credits <n>', 'outstanding messages per flow (receives the responder posts)', integerIn(1, 1024), '64')
    .option(
      '--stall-epsilon <ms>',
      'a receive wait up to this long is processing, never head-of-line stall',
      numberIn(0, 1000),
      '1',
    )
    .option('--seed <n>', 'seed of the workload and the relay (default: random, printed)', integerIn(0, 2 ** 32 - 1))
    .option('--sweep', 'run the grid (loss × delay × flows × mappings) and write report.md to --out')
    .option('--out <dir>', 'write results.json, samples.csv, and the SVG plots there')
    .option('--json', 'one JSON summary per run on stdout instead of the table')
    .option('--keep-captures', "keep each run's pcapng files (the link, each side's drops) in --out/captures")
    .addOption(new Option('--role <role>').hideHelp().choices(['server', 'client', 'relay']))
    .addOption(new Option('--spec <json>').hideHelp())
    .addHelpText(
      'after',
      `
Needs root, ip netns, nft, tc and dumpcap: the command builds two namespaces of its own
(rddp-x<pid>-<nonce>-a/b, 10.78.x.1 <-> 10.78.x.2) joined by a veth pair, captures the link and
every drop to attribute each message's wait (stall, sender wait, own loss, ...), and removes them
at the end; elsewhere it stops with one line, exit 1. Several experiments can run at once.

Examples:
  rddp experiment --flows 4 --loss 0,2 --out /tmp/exp
  rddp experiment --mappings sctp-streams,tcp-shared --flows 16 --loss 1 --delay 10 --jitter 2
  rddp experiment --sweep --out docs/experiments/sweep`,
    )
    .action(async (raw: Raw) => {
      if (raw.role) return runRole(raw.role, raw.spec);
      const [{ runExperimentCommand }, { topologyUnavailable }, { UsageError }] = await Promise.all([
        import('../experiment/command.js'),
        import('../experiment/topology.js'),
        import('../transports.js'),
      ]);
      const known: readonly string[] = MAPPINGS;
      const mappings =
        raw.mappings === undefined ? DEFAULT_MAPPINGS : raw.mappings === 'all' ? MAPPINGS : raw.mappings.split(',');
      if (mappings.some((m) => !known.includes(m)))
        throw new UsageError(`--mappings takes ${known.join(', ')} or all (got ${raw.mappings})`);
      if (raw.sweep && !raw.out) throw new UsageError('--sweep writes a report: give --out DIR');
      if (raw.keepCaptures && !raw.out)
        throw new UsageError('--keep-captures writes to --out DIR/captures: give --out');
      const why = topologyUnavailable();
      if (why) {
        process.stderr.write(`rddp: experiment ${why}\n`);
        process.exit(1);
      }
      if (raw.out) await mkdir(raw.out, { recursive: true });
      await runExperimentCommand({
        mappings: mappings as never,
        flows: list(raw.flows ?? (raw.sweep ? SWEEP_DEFAULTS.flows : '4')),
        loss: list(raw.loss ?? (raw.sweep ? SWEEP_DEFAULTS.loss : '0,1')),
        delay: list(raw.delay ?? (raw.sweep ? SWEEP_DEFAULTS.delay : '0')),
        jitterMs: Number(raw.jitter),
        reorder: Number(raw.reorder),
        rateMbit: Number(raw.rateLimit),
        size: Number(raw.size),
        rate: Number(raw.rate),
        durationS: Number(raw.duration),
        warmUpS: Number(raw.warmUp),
        credits: Number(raw.credits),
        epsUs: Number(raw.stallEpsilon) * 1000,
        seed: raw.seed === undefined ? Math.floor(Math.random() * 2 ** 32) : Number(raw.seed),
        sweep: raw.sweep ?? false,
        json: raw.json ?? false,
        ...(raw.out ? { out: raw.out } : {}),
        ...(raw.keepCaptures && raw.out ? { capturesDir: path.join(raw.out, 'captures') } : {}),
        command: ['rddp', ...process.argv.slice(2)].join(' '),
      });
    });
}

/** The processes the command starts: a responder, an initiator or a relay, each reporting one JSON line. */
async function runRole(role: string, spec: string | undefined): Promise<void> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(spec ?? '');
  } catch {
    throw new InvalidArgumentError('--role needs --spec <json>');
  }
  if (role === 'relay') {
    const { startRelay } = await import('../experiment/relay.js');
    const relay = await startRelay(parsed as never);
    console.log(`LISTENING ${relay.port}`);
    await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
    await relay.close();
    console.log(JSON.stringify(relay.stats));
    process.exit(0);
  }
  const w = await import('../experiment/workload.js');
  if (role === 'server') {
    const report = await w.runServer(parsed as never, (port) => console.log(`LISTENING ${port}`));
    process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
    return;
  }
  const report = await w.runClient(parsed as never);
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
}
