/**
 * `rddp perf`'s command line: flags and help only, so `rddp perf --help` and a usage error load no
 * protocol code (issue 37); the run itself is ./perf.ts, loaded when the action runs.
 */
import { type Command, Option } from 'commander';
import { faultsOption } from '../faults.js';
import {
  integerIn,
  maxUlpduOption,
  sctpInterleavingOption,
  sctpRtoMinOption,
  sctpSchedulerOption,
  tolerateEarlyFpduOption,
} from '../flags.js';
import {
  CQ_MOD_SIZE_LIMIT,
  DEFAULT_CQ_MOD,
  DEFAULT_OUTS,
  DEFAULT_TX_DEPTH,
  PERF_DEFAULT_BIND,
  PERF_DEFAULT_MAX_MEMORY,
  PERF_DEFAULT_MAX_SIZE,
  PERF_MAX_DURATION_S,
  PERF_MAX_ITERS,
  PERF_MAX_MESSAGE,
  PERF_MAX_OUTS,
  PERF_MAX_QPS,
  PERF_MAX_TX_DEPTH,
  PERF_MAX_WARM_UP,
  PERF_MAX_WORKERS,
  TRANSPORT_NAMES,
} from '../perf/limits.js';
import { PERF_TESTS } from '../perf/tests.js';
import type { perfAction } from './perf.js';

/** The options commander hands the action (a type only: ./perf.ts is not loaded until perf runs). */
type PerfRawOptions = Parameters<typeof perfAction>[2];

export function registerPerf(program: Command): void {
  program
    .command('perf')
    .description('perftest-style measurements: server without an address, client with the server address')
    .argument('<test>', `one of ${PERF_TESTS.join(', ')}`)
    .argument('[server]', 'server address (client mode); omit to run the server')
    .option('-p, --port <port>', 'port', integerIn(0, 65535), '18515')
    .option('-s, --size <octets>', 'message size', integerIn(1, PERF_MAX_MESSAGE), '65536')
    .option('-n, --iters <n>', 'iterations per size', integerIn(1, PERF_MAX_ITERS), '1000')
    .option('-a, --all', 'all sizes from 2 octets to 8 MiB, doubling')
    .option(
      '-D, --duration <seconds>',
      'run each size for this many seconds instead of -n iterations',
      integerIn(1, PERF_MAX_DURATION_S),
    )
    .addOption(
      new Option('--transport <name>', 'LLP to run on: tcp (MPA), sctp (RFC 5043), loopback')
        .choices([...TRANSPORT_NAMES])
        .default('tcp'),
    )
    .option('--mpa-rev <rev>', 'MPA revision 0, 1 or 2')
    .option('--crc', 'ask for MPA CRCs (default)')
    .option('--no-crc', 'do not ask for MPA CRCs')
    .option('--markers', 'ask for MPA Markers towards this end')
    .option(
      '--marker-framing <how>',
      'when the peer asked for Markers: gather (payload never copied, the default) or copy (one chunk per FPDU)',
    )
    .option(
      '--send-path <how>',
      "direct (sendmsg straight to the socket's descriptor where @rddp/writev is built, the default) or socket (Node's socket writes)",
    )
    .option(
      '--congestion <name>',
      "this end's TCP congestion control, e.g. cubic or bbr (Linux TCP_CONGESTION; default the system's)",
    )
    .addOption(maxUlpduOption())
    .addOption(tolerateEarlyFpduOption())
    .addOption(sctpInterleavingOption())
    .addOption(sctpSchedulerOption())
    .addOption(sctpRtoMinOption())
    .option(
      '-t, --tx-depth <n>',
      'operations outstanding at once (bandwidth tests)',
      integerIn(1, PERF_MAX_TX_DEPTH),
      String(DEFAULT_TX_DEPTH),
    )
    .option('--outstanding <n>', 'alias of --tx-depth', integerIn(1, PERF_MAX_TX_DEPTH))
    .option(
      '-o, --outs <n>',
      `client: RDMA Reads and atomics outstanding at once (the ORD; default ${DEFAULT_OUTS}, at most ${PERF_MAX_OUTS}, what the server serves); with -b, the server's own too: give both ends the same`,
      integerIn(1, PERF_MAX_OUTS),
    )
    .option(
      '-Q, --cq-mod <n>',
      `client, bandwidth tests: signal one send work request in n (CQ moderation; default ${DEFAULT_CQ_MOD}, or 1 for messages over ${CQ_MOD_SIZE_LIMIT} octets; at most the tx-depth)`,
      integerIn(1, PERF_MAX_TX_DEPTH),
    )
    .option('--json', 'one JSON object per size instead of the table')
    .option('--no-verify', 'skip the end-of-size data check')
    .option('--loopback', 'run server and client in this process')
    .option('--out <dir>', 'client: also write the table and its chart there (<test>.txt, <test>.svg)')
    .option('--streams <n>', 'queue pairs on one connection, one per LLP stream (SCTP)', integerIn(1, 65535), '1')
    .option(
      '-q, --qps <n>',
      `queue pairs over as many connections, started together (client opens them; server waits for them); 1..${PERF_MAX_QPS}`,
      integerIn(1, PERF_MAX_QPS),
      '1',
    )
    .option(
      '--warm-up <n>',
      `client: round trips (latency tests) or operations (bandwidth tests) made before each size's measured ones, 0..${PERF_MAX_WARM_UP} (default 0; with -b, the server's direction makes as many)`,
      integerIn(0, PERF_MAX_WARM_UP),
    )
    .option(
      '--workers <n>',
      `server: processes serving behind one port (tcp), 1..${PERF_MAX_WORKERS} or auto (the machine's cores); default 1`,
    )
    .addOption(faultsOption())
    .option(
      '--max-size <octets>',
      `server: largest message size a client may ask for (default ${PERF_DEFAULT_MAX_SIZE})`,
      integerIn(1, PERF_MAX_MESSAGE),
    )
    .option(
      '--max-memory <octets>',
      `server: octets of buffers its clients may make it hold at once (default ${PERF_DEFAULT_MAX_MEMORY})`,
      integerIn(1, 2 ** 40),
    )
    .option('--persistent', 'server: keep serving clients, each connection on its own, until SIGINT or SIGTERM')
    .option('--bind_source_ip <addr>', `server: the address to listen on (default ${PERF_DEFAULT_BIND}, every address)`)
    // perftest's flags (perftest_parameters.c): -d names the device there, so rddp's debug is --debug only.
    .option(
      '-d, --ib-dev <dev>',
      "perftest's device name: accepted and shown in the header (rddp runs its one software device)",
    )
    .option('-R, --rdma_cm', "perftest's connect-through-rdma_cm: how rddp connects anyway (noted in the header)")
    .option(
      '-b, --bidirectional',
      "perftest's bidirectional bandwidth: both ends run the test towards each other at once, each line sums both (write_bw, read_bw, atomic_bw; give it to both ends)",
    )
    .option(
      '-e, --events',
      "perftest's CQ completion events instead of busy polling: how rddp's completions always arrive (accepted, no effect; noted in the header)",
    )
    .option('-F, --CPU-freq', "perftest's do-not-fail-on-CPU-frequency-warnings: rddp makes none (accepted, no effect)")
    .option(
      '--report_gbits',
      "bandwidth in Gb/sec (10^9 bits a second) as perftest's --report_gbits, instead of MB/sec",
    )
    .option(
      '--debug',
      'protocol events on stderr: the negotiated LLP parameters (MPA revision, CRC, Markers, RTR), Terminates',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  rddp perf write_bw                 # server\n  rddp perf write_bw 127.0.0.1       # client, prints the table\n  rddp perf write_bw 127.0.0.1 -d siw0 -F -R --report_gbits   # perftest habits\n  rddp perf read_lat --loopback -a --transport loopback\n  rddp perf send_bw 127.0.0.1 -s 4096 -n 10000 --no-crc\n\nDifferences from perftest: docs/PERFTEST.md',
    )
    .action(async (test: string, server: string | undefined, raw: PerfRawOptions, cmd: Command) =>
      (await import('./perf.js')).perfAction(test, server, raw, cmd),
    );
}
