/**
 * What `rddp` loads before a command runs: commander and this table, nothing else. Each command's module
 * (and the protocol stack it imports) is loaded by `import()` only when that command runs, so `rddp --help`
 * or `rddp perf --help` costs about a bare `node` start (issue 37; `program.ts` builds the whole program
 * eagerly, for the API and tests).
 */
import { createRequire } from 'node:module';
import { Command, Help } from 'commander';

/** The @rddp/tools version `rddp --version` prints (package.json sits next to src/ and dist/). */
export const toolsVersion: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** A command's module: registers its command(s) on a program. */
type Register = (program: Command) => void;

/** One command as `rddp --help` lists it, and how to load it. */
export interface LazyCommand {
  /** What `rddp --help` shows left of the description (commander's subcommand term). */
  readonly term: string;
  readonly description: string;
  readonly load: () => Promise<Register>;
}

/**
 * Every command, in `rddp --help`'s order. Terms and descriptions are the commands' own (a test compares
 * them with the eagerly built program, tools/cli/test/perftest-habits.test.ts).
 */
export const COMMANDS: Readonly<Record<string, LazyCommand>> = {
  demo: {
    term: 'demo [options]',
    description: 'the main demo: rping with validation and an RDMA Write bandwidth sweep over MPA/TCP on 127.0.0.1',
    load: () => import('./commands/demo-command.js').then((m) => m.registerDemo),
  },
  bench: {
    term: 'bench [options]',
    description:
      'benchmark suite: each figure against its baseline measured alternately in the same run (median of rounds)',
    load: () => import('./commands/bench-command.js').then((m) => m.registerBench),
  },
  rping: {
    term: 'rping [options]',
    description:
      "RDMA ping, librdmacm rping's protocol: the client advertises a buffer, the server RDMA Reads it, then RDMA Writes it back",
    load: () => import('./commands/rping-command.js').then((m) => m.registerRping),
  },
  perf: {
    term: 'perf [options] <test> [server]',
    description: 'perftest-style measurements: server without an address, client with the server address',
    load: () => import('./commands/perf-command.js').then((m) => m.registerPerf),
  },
  fuzz: {
    term: 'fuzz [options]',
    description: 'mutational fuzzing of the MPA FPDU reader, MPA frames and the RDMAP/DDP receive path',
    load: () => import('./commands/fuzz.js').then((m) => m.registerFuzz),
  },
  'sctp-experiment': {
    term: 'sctp-experiment [options]',
    description:
      'multi-stream SCTP: aggregate and per-stream RDMA Write bandwidth, and Send latency on a separate stream under that load',
    load: () => import('./commands/sctp-experiment-command.js').then((m) => m.registerSctpExperiment),
  },
  experiment: {
    term: 'experiment [options]',
    description:
      'N flows over N SCTP streams, N associations, N MPA/TCP connections or one shared MPA/TCP connection, on an impaired veth between two network namespaces: latency, goodput, head-of-line stall (root)',
    load: () => import('./commands/experiment.js').then((m) => m.registerExperiment),
  },
  soak: {
    term: 'soak [options]',
    description:
      'long run over MPA/TCP (Writes, Reads, Sends, new connections each round) checking that memory stays flat',
    load: () => import('./commands/soak-command.js').then((m) => m.registerSoak),
  },
  attack: {
    term: 'attack [options] [names...]',
    description:
      'put a long-running server (its own process) under a hostile peer, with an honest client throughout; checks RSS, handles and the honest client',
    load: () => import('./commands/attack-command.js').then((m) => m.registerAttack),
  },
  'attack-target': {
    term: 'attack-target [options]',
    description: '',
    load: () => import('./commands/attack-command.js').then((m) => m.registerAttack),
  },
  conformance: {
    term: 'conformance [options]',
    description:
      'iWARP conformance kit: plays the other end of an implementation under test (MPA, DDP, RDMAP cases by clause)',
    load: () => import('./commands/conformance.js').then((m) => m.registerConformance),
  },
  dissect: {
    term: 'dissect [options] <file>',
    description: 'decode an iWARP capture (pcap/pcapng): MPA, DDP, RDMAP per frame, per-connection summary, findings',
    load: () => import('./commands/dissect.js').then((m) => m.registerDissect),
  },
  doctor: {
    term: 'doctor [options]',
    description:
      "what this install has and uses: CRC32c backend, direct send path, ISA-L, tshark, ip netns/nft/tc, TCP congestion controls, and how to get what's missing",
    load: () => import('./commands/doctor-command.js').then((m) => m.registerDoctor),
  },
};

/** The `rddp` root: its description, --version, and how usage errors and help end the process. */
export function rootProgram(): Command {
  return (
    new Command('rddp')
      .description('rddp — the iWARP protocol suite (RDMAP, DDP, MPA) in TypeScript')
      .version(toolsVersion, '--version', 'print the @rddp/tools version')
      .exitOverride((err) => {
        // commander's own usage errors exit 2 (bad flags), help/version exit 0.
        if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0)
          process.exit(0);
        process.exit(2);
      })
      // Usage errors on one line, as every other fatal error: `rddp: <what> (run with --help for usage)`.
      .configureOutput({
        outputError: (s, write) => write(`rddp: ${s.trim().replace(/^error: /, '')} (run with --help for usage)\n`),
      })
  );
}

/**
 * The program for `argv` (process.argv): with the named command's module loaded when `argv` names one
 * (`rddp perf …`, `rddp help perf`), else the root with every command as a stub (`rddp --help`, an unknown
 * command), which lists them and loads none.
 */
export async function programFor(argv: readonly string[]): Promise<Command> {
  const first = argv[2] === 'help' ? argv[3] : argv[2];
  const program = rootProgram();
  const one = first !== undefined && Object.hasOwn(COMMANDS, first) ? COMMANDS[first] : undefined;
  if (one) {
    (await one.load())(program);
    if (first !== 'doctor') (await import('./resources.js')).addResourceFlags(program);
    return program;
  }
  for (const [name, c] of Object.entries(COMMANDS)) {
    // attack-target is attack's hidden server end (its module registers it hidden).
    if (name === 'attack-target') continue;
    program.command(name).description(c.description);
  }
  const terms = new Map(Object.entries(COMMANDS).map(([name, c]) => [name, c.term]));
  return program.configureHelp({
    // commander's own term for the rest (its `help [command]`).
    subcommandTerm: (cmd) => terms.get(cmd.name()) ?? Help.prototype.subcommandTerm.call(new Help(), cmd),
  });
}
