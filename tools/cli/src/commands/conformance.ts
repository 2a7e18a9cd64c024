/**
 * `rddp conformance` — an iWARP conformance kit that tests any implementation from the wire, with
 * frames built and parsed by @rddp/conformance's own codec (RFC 5040/5041/5044/6581/7306), never by
 * this stack. Exit status: 0 no FAIL, 1 any FAIL, 2 usage error or a target the kit cannot test (nothing
 * answers, it stopped answering mid-run, or it does not speak MPA or the application protocol: one line).
 */
import type { KitOptions } from '@rddp/conformance';
import type { Command } from 'commander';
import { integerIn } from '../flags.js';

export function registerConformance(program: Command): void {
  program
    .command('conformance')
    .description(
      'iWARP conformance kit: plays the other end of an implementation under test (MPA, DDP, RDMAP cases by clause)',
    )
    .option('--target <host:port>', 'the kit is the client of a server under test (e.g. `rping -s -P`)')
    .option(
      '--listen <port>',
      'the kit is the server; clients under test connect here (one connection per case; at most 16 wait unread, more are refused)',
    )
    .option('--listen-host <addr>', 'address to listen on', '127.0.0.1')
    .option('--app <name>', 'application protocol the target runs: rping (default) or perf', 'rping')
    .option('--mpa-rev <rev>', 'MPA revision the kit asks for: 1, 2 (RFC 6581) or 0 (RDMAC profile)', '1')
    .option('--crc', 'ask for MPA CRCs (default)')
    .option('--no-crc', 'do not ask for MPA CRCs')
    .option('--markers', 'ask for MPA Markers in the FPDUs the kit receives')
    .option('--no-markers', 'do not ask for Markers (default)')
    .option('--only <list>', 'run only these cases: names, name prefixes (mpa, ddp.tagged) or clauses, comma-separated')
    .option('--skip <list>', 'skip these cases (same forms as --only)')
    .option('--case-timeout <ms>', 'longest a case may take', integerIn(100, 600_000), '15000')
    .option('--wait <ms>', 'longest the kit waits for the target at any one step', integerIn(50, 120_000), '3000')
    .option('--junit <file>', 'also write a JUnit XML report')
    .option('--json <file>', 'also write a JSON report (- for stdout instead of the table)')
    .option('--md <file>', 'also write a Markdown report (- for stdout instead of the table)')
    .option('--pcap <dir>', 'write one capture per case (<dir>/<case>.pcap) from the octets sent and received')
    .option(
      '--reconnect <seconds>',
      'try a refused connect again for up to this long before the target counts as unreachable (a one-shot server restarted between cases, e.g. rping -s without -P); default off',
      integerIn(1, 3600),
    )
    .option(
      '--all',
      'run every mode in one invocation (MPA rev 1 and 2 with CRCs, each also with Markers, and rev 0); a mode the target refuses at MPA startup is SKIPs',
    )
    .option('--list', 'list the cases and exit')
    .addHelpText(
      'after',
      '\nExamples:\n  rddp rping -s -P -p 7174 &  rddp conformance --target 127.0.0.1:7174\n' +
        '  rddp conformance --target 10.0.0.2:7174 --mpa-rev 2 --markers --junit report.xml --pcap caps\n' +
        '  rddp conformance --listen 7174   # then run `rping -c -a <kit> -C 1` once per case\n' +
        '  rddp conformance --target 127.0.0.1:18515 --app perf --only perf,rfc7306\n' +
        '  rddp conformance --target 127.0.0.1:7174 --all --junit all.xml\n' +
        '  rddp conformance --target 10.0.0.2:7174 --reconnect 30   # rping -s (one client), restarted per case',
    )
    .action(async (raw: Record<string, string | boolean | undefined>, cmd: Command) => {
      // The kit is loaded when it runs (issue 37: `rddp conformance --help` does not load it).
      const { exitStatus, listCases, runKit, stdoutReport } = await import('@rddp/conformance');
      if (raw.list) {
        process.stdout.write(listCases());
        return;
      }
      const given = (k: string) => raw[k] !== undefined && cmd.getOptionValueSource(k) === 'cli';
      const o: KitOptions = {
        ...(raw.target !== undefined ? { target: raw.target as string } : {}),
        ...(raw.listen !== undefined ? { listen: raw.listen as string } : {}),
        listenHost: raw.listenHost as string,
        app: raw.app as string,
        // Only what the command line gave (--all refuses a mode flag; the kit's defaults are the flags').
        ...(given('mpaRev') ? { mpaRev: raw.mpaRev as string } : {}),
        ...(given('crc') ? { crc: raw.crc as boolean } : {}),
        ...(given('markers') ? { markers: raw.markers as boolean } : {}),
        ...(raw.reconnect !== undefined ? { reconnect: raw.reconnect as string } : {}),
        ...(raw.all ? { all: true } : {}),
        ...(raw.only !== undefined ? { only: raw.only as string } : {}),
        ...(raw.skip !== undefined ? { skip: raw.skip as string } : {}),
        caseTimeout: raw.caseTimeout as string,
        wait: raw.wait as string,
        ...(raw.junit !== undefined ? { junit: raw.junit as string } : {}),
        ...(raw.json !== undefined ? { json: raw.json as string } : {}),
        ...(raw.md !== undefined ? { md: raw.md as string } : {}),
        ...(raw.pcap !== undefined ? { pcap: raw.pcap as string } : {}),
        onListening: (port) => process.stderr.write(`rddp conformance: listening on port ${port}\n`),
        onResult: (r) => process.stderr.write(`${r.verdict.padEnd(4)} ${r.name}\n`),
        onNote: (line) => process.stderr.write(`rddp conformance: ${line}\n`),
      };
      const summary = await runKit(o);
      // Exit only once the report is out: a pipe takes stdout asynchronously.
      await new Promise<void>((resolve) => process.stdout.write(stdoutReport(o, summary), () => resolve()));
      process.exit(exitStatus(summary));
    });
}
