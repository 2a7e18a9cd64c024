/**
 * `rddp rping`'s command line: flags and help only, so `rddp rping --help` and a usage error load no
 * protocol code (issue 37); the run itself is ./rping.ts, loaded when the action runs.
 */
import { type Command, Option } from 'commander';
import {
  integerIn,
  maxUlpduOption,
  sctpInterleavingOption,
  sctpRtoMinOption,
  sctpSchedulerOption,
  tolerateEarlyFpduOption,
} from '../flags.js';
import {
  RPING_DEFAULT_MAX_CLIENTS,
  RPING_DEFAULT_MAX_MEMORY,
  RPING_DEFAULT_STEP_TIMEOUT_MS,
} from '../rping/defaults.js';
import { RPING_DEFAULT_PORT, RPING_DEFAULT_SIZE, RPING_MAX_SIZE, RPING_MIN_SIZE } from '../rping/protocol.js';

export function registerRping(program: Command): void {
  program
    .command('rping')
    .description(
      "RDMA ping, librdmacm rping's protocol: the client advertises a buffer, the server RDMA Reads it, then RDMA Writes it back",
    )
    .option('-s', 'server')
    .option('-c', 'client')
    .option('-a <addr>', 'address (server: bind; client: connect to)', '127.0.0.1')
    .option('-I <addr>', "client: source address to connect from (rping's -I; one of this host's)")
    .option('-P', 'persistent server: serve clients concurrently until SIGINT or SIGTERM')
    .option('-p <port>', 'port', integerIn(0, 65535), String(RPING_DEFAULT_PORT))
    .option('-C <count>', 'ping count (default: forever)', integerIn(0, 2 ** 31 - 1))
    .option(
      '-S <size>',
      `ping data size (${RPING_MIN_SIZE}..${RPING_MAX_SIZE})`,
      integerIn(RPING_MIN_SIZE, RPING_MAX_SIZE),
      String(RPING_DEFAULT_SIZE),
    )
    .option('-v', 'print ping data')
    .option('-V', 'validate ping data')
    .option('-d', 'debug: protocol events, and the CRC32c backend and send path the connection runs (as rping -d)')
    .addOption(new Option('--transport <name>', 'LLP to run on').default('tcp'))
    .option('--mpa-rev <rev>', 'MPA revision: 1, 2 (RFC 6581), 0 (RDMA Consortium profile, DDP/RDMAP version 0)')
    .option('--crc', 'ask for MPA CRCs (default)')
    .option('--no-crc', 'do not ask for MPA CRCs (used anyway if the peer asks)')
    .option('--markers', 'ask the peer to put MPA Markers in the FPDUs this end receives')
    .addOption(maxUlpduOption())
    .addOption(tolerateEarlyFpduOption())
    .addOption(sctpInterleavingOption())
    .addOption(sctpSchedulerOption())
    .addOption(sctpRtoMinOption())
    .option(
      '--p2p <rtr>',
      'initiator: RFC 6581 peer-to-peer mode with this RTR (write, read or send); needs --mpa-rev 2',
    )
    .option(
      '--max-clients <n>',
      `-P: clients served at once, more are refused (default ${RPING_DEFAULT_MAX_CLIENTS})`,
      integerIn(1, 65535),
    )
    .option(
      '--max-memory <octets>',
      `-P: octets of ping buffers all clients may make the server hold (default ${RPING_DEFAULT_MAX_MEMORY})`,
      integerIn(RPING_MIN_SIZE, 2 ** 40),
    )
    .option(
      '--max-clients-per-source <n>',
      '-P: clients one source (an IPv4 address, an IPv6 prefix) may have served at once, more from it are refused (default a quarter of --max-clients, at least 1)',
      integerIn(1, 65535),
    )
    .option(
      '--max-memory-per-source <octets>',
      "-P: octets of ping buffers one source's clients may make the server hold; a client past it is Terminated as busy (default a quarter of --max-memory)",
      integerIn(RPING_MIN_SIZE, 2 ** 40),
    )
    .option(
      '--ipv6-source-prefix <bits>',
      'IPv6 clients count as one source per prefix of this length (default 64)',
      integerIn(0, 128),
    )
    .option(
      '--step-timeout <ms>',
      `server: time a client has for each step (its buffer advertisements, the RDMA Read Response, the completion of what is sent to it); past it the client is Terminated — -P drops it, the one-shot server exits 1 (default ${RPING_DEFAULT_STEP_TIMEOUT_MS}; raise it for large -S over slow links)`,
      integerIn(1, 2 ** 31 - 1),
    )
    // PLANTED BUG control for `rddp conformance` (see PLANTED_BUGS); hidden from --help.
    .addOption(new Option('--plant-bug <bug>', 'a deliberate protocol bug (conformance control)').hideHelp())
    .addHelpText(
      'after',
      '\nExamples:\n  rddp rping -s -a 127.0.0.1\n  rddp rping -s -P -a 127.0.0.1\n  rddp rping -c -a 127.0.0.1 -C 100 -S 4096 -V\n  rddp rping -c -a 127.0.0.1 -C 10 -v --mpa-rev 2 --p2p read',
    )
    .action(async (raw: Record<string, string | boolean | undefined>) => (await import('./rping.js')).rpingAction(raw));
}
