/**
 * `rddp dissect FILE.pcap[ng]` — decodes the iWARP traffic of a capture (MPA/TCP, DDP over SCTP, the UDP
 * LLP) with @rddp/conformance's own codec and flags what a receiver must reject, with the clause.
 * The capture is streamed (read a chunk at a time, each packet decoded as it arrives) in bounded memory;
 * the report keeps at most --max-events events, findings and connection summaries and counts the rest;
 * what the decoders hold at once (out-of-order segments, reassembly, tables) is bounded by --max-state.
 * Exit status: 0 decoded, nothing to reject; 3 decoded, findings to reject; 1 unreadable input (also a
 * file over --max-capture-bytes, refused before reading, or a FIFO/device cut there); 2 usage.
 */
import type { Command } from 'commander';
import { integerIn, integerListIn } from '../flags.js';

// @rddp/conformance's defaults, re-declared so that `rddp dissect --help` loads no decoder (issue 37);
// tools/cli/test/help-loads.test.ts checks they equal the package's.
/** Events, findings and connection summaries kept in the report, each (the dissector's default). */
export const DEFAULT_MAX_REPORT_ENTRIES = 10_000;
/** Decoding state held at once, estimated (the dissector's default). */
export const DEFAULT_MAX_STATE_OCTETS = 64 << 20;
/** Most octets of a capture read (the dissector's default). */
export const MAX_CAPTURE_BYTES = 1 << 30;

export function registerDissect(program: Command): void {
  program
    .command('dissect')
    .description('decode an iWARP capture (pcap/pcapng): MPA, DDP, RDMAP per frame, per-connection summary, findings')
    .argument('<file>', 'capture file (pcap or pcapng; a FIFO or device is read up to --max-capture-bytes)')
    .option('--json', 'print the whole report as JSON')
    .option('--notes', 'also list notes (findings that are not errors)')
    .option('--max-ulpdu <n>', 'longest ULPDU accepted without a finding (RFC 5044 §3: 64768)', integerIn(1, 65535))
    .option(
      '--max-connections <n>',
      'connections, SCTP associations and UDP flows decoded at once; later ones are skipped with a note',
      integerIn(1, 1 << 20),
      '4096',
    )
    .option(
      '--max-events <n>',
      'events, findings and connection summaries kept in the report, each; the rest are counted ("N more")',
      integerIn(1, 1_000_000),
      String(DEFAULT_MAX_REPORT_ENTRIES),
    )
    .option(
      '--max-capture-bytes <n>',
      'most octets read: a longer file is refused before reading, a FIFO or device is cut here (exit 1)',
      integerIn(1, 2 ** 40),
      String(MAX_CAPTURE_BYTES),
    )
    .option(
      '--max-state <octets>',
      'decoding state held at once (out-of-order segments, reassembly, open messages, streams), estimated; a connection that takes it over is given up with a note',
      integerIn(1 << 20, 2 ** 40),
      String(DEFAULT_MAX_STATE_OCTETS),
    )
    .option('--sctp-udp-port <list>', 'UDP ports carrying SCTP (9899, RFC 6951, always)', integerListIn(1, 65535))
    .option(
      '--udp-llp-port <list>',
      'UDP ports carrying the UDP LLP (flows opened by a REQUEST are found anyway)',
      integerListIn(1, 65535),
    )
    .option(
      '--mpa-port <list>',
      'TCP ports decoded as MPA even without the MPA Request/Reply (decode-as): FPDUs found from the first one with a good CRC; the side on the port is the responder',
      integerListIn(1, 65535),
    )
    .addHelpText(
      'after',
      '\nExit status: 0 decoded and nothing to reject, 3 findings a receiver must reject, 1 unreadable input, 2 usage.\n' +
        '\nA capture that starts late is decoded too: from the MPA Reply (its sender is the responder), or mid-stream\n' +
        'from the first FPDU whose framing and CRC check out; an "mpa-inferred" line says what was inferred.\n' +
        'STags and Tagged Offsets are printed in hex as Wireshark prints them (0x0000abcd, 0x0000000000001000);\n' +
        '--json keeps them as numbers (the STag a number, the TO a decimal string).\n' +
        '\nExamples:\n  tshark -i lo -w cap.pcapng -f "tcp port 7174" & rddp rping -c -C 3; rddp dissect cap.pcapng\n' +
        '  rddp dissect --json cap.pcap | jq .findings',
    )
    .action(
      async (
        file: string,
        o: {
          json?: boolean;
          notes?: boolean;
          maxUlpdu?: string;
          maxConnections: string;
          maxEvents: string;
          maxCaptureBytes: string;
          maxState: string;
          sctpUdpPort?: string;
          udpLlpPort?: string;
          mpaPort?: string;
        },
      ) => {
        const { dissectExitStatus, dissectFile, formatDissectJson, formatDissectText } = await import(
          '@rddp/conformance'
        );
        const ports = (s?: string) => (s === undefined ? [] : s.split(',').map((x) => Number(x.trim())));
        const report = await dissectFile(file, {
          ...(o.maxUlpdu !== undefined ? { maxUlpdu: Number(o.maxUlpdu) } : {}),
          maxConnections: Number(o.maxConnections),
          maxEvents: Number(o.maxEvents),
          maxCaptureBytes: Number(o.maxCaptureBytes),
          maxStateOctets: Number(o.maxState),
          sctpUdpPorts: ports(o.sctpUdpPort),
          udpLlpPorts: ports(o.udpLlpPort),
          mpaPorts: ports(o.mpaPort),
        });
        const text = o.json ? formatDissectJson(report) : formatDissectText(report, { notes: !!o.notes });
        // Exit only once the report is out: a pipe takes stdout asynchronously.
        await new Promise<void>((resolve) => process.stdout.write(text, () => resolve()));
        process.exit(dissectExitStatus(report));
      },
    );
}
