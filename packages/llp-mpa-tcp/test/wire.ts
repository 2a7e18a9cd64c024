/**
 * Wire checks: capture this test's own traffic on lo with tshark, then decode it with Wireshark's MPA
 * dissector and with `rddp dissect` (tools/conformance, its own codec), which must read every capture
 * and agree with tshark FPDU for FPDU. tshark absent: skip (locally) or fail (CI, where .ci/run installs it).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type DissectReport, dissectFile, type Finding } from '../../../tools/conformance/src/dissect/index.js';

export const TSHARK = process.env.TSHARK ?? '/usr/bin/tshark';

/** Whether wire checks can run; throws in CI when tshark is missing. */
export function tsharkAvailable(): boolean {
  if (existsSync(TSHARK)) return true;
  if (process.env.CI) throw new Error(`tshark not found at ${TSHARK}; CI installs it in .ci/run`);
  return false;
}

export interface Capture {
  /** Stops capturing (after the traffic has been written) and returns the pcap file. */
  stop(): Promise<string>;
  dispose(): void;
}

/**
 * dumpcap (tshark's capture engine; tshark itself when dumpcap is not beside it): capturing needs no
 * dissectors, and loading them is most of a tshark start.
 */
const DUMPCAP = (() => {
  const d = join(dirname(TSHARK), 'dumpcap');
  return existsSync(d) ? d : TSHARK;
})();

/**
 * `dumpcap -i lo -w file -f filter`, resolved once it captures and `settleMs` later (the kernel filter is
 * live a moment after "Capturing on"); rejects with tshark's stderr when it cannot capture. `bufferMiB`:
 * the capture buffer (bursts of 64 KiB segments on lo overflow the default 2 MiB).
 */
export async function tsharkOn(
  file: string,
  filter: string,
  o: { settleMs?: number; bufferMiB?: number } = {},
): Promise<ChildProcess> {
  const buffer = o.bufferMiB ? ['-B', String(o.bufferMiB)] : [];
  const child: ChildProcess = spawn(DUMPCAP, ['-i', 'lo', ...buffer, '-w', file, '-f', filter], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`tshark did not start capturing: ${stderr}`)), 15_000);
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (/Capture started|Capturing on/.test(stderr)) {
        clearTimeout(t);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`tshark exited (${code}) before capturing: ${stderr.trim()}`));
    });
  });
  await new Promise((r) => setTimeout(r, o.settleMs ?? 300));
  return child;
}

export async function startCapture(port: number): Promise<Capture> {
  const dir = mkdtempSync(join(tmpdir(), 'rddp-mpa-wire-'));
  const file = join(dir, 'capture.pcapng');
  const child = await tsharkOn(file, `tcp port ${port}`);
  return {
    async stop() {
      await new Promise((r) => setTimeout(r, 300));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      await exited;
      return file;
    },
    dispose() {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const DECODE_ARGS = [
  '-o',
  'tcp.try_heuristic_first:TRUE',
  '--disable-heuristic',
  'rpcrdma_iwarp',
  '--disable-heuristic',
  'smb_direct_iwarp',
];

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(TSHARK, args, { maxBuffer: 256 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** `tshark -V` text of the MPA packets. */
export function decodeVerbose(file: string): Promise<string> {
  return run(['-r', file, ...DECODE_ARGS, '-Y', 'iwarp_mpa', '-V']);
}

export interface ExpertItem {
  readonly severity: 'Errors' | 'Warns' | 'Notes' | 'Chats' | string;
  readonly group: string;
  readonly protocol: string;
  readonly summary: string;
}

/** `tshark -z expert` items. Wireshark's MPA dissector attaches its warnings to no tree item, so -V omits them. */
export async function expertItems(file: string): Promise<ExpertItem[]> {
  return parseExpert(await run(['-r', file, ...DECODE_ARGS, '-q', '-z', 'expert']));
}

function parseExpert(text: string): ExpertItem[] {
  const items: ExpertItem[] = [];
  let severity = '';
  for (const line of text.split('\n')) {
    const head = /^(Errors|Warns|Notes|Chats|Comments) \(\d+\)/.exec(line);
    if (head) {
      severity = head[1] as string;
      continue;
    }
    const m = /^\s+(\d+)\s+(\S+)\s+(\S+)\s+(.*\S)\s*$/.exec(line);
    if (m && severity)
      items.push({ severity, group: m[2] as string, protocol: m[3] as string, summary: m[4] as string });
  }
  return items;
}

export interface WireSummary {
  readonly requests: number;
  readonly replies: number;
  /** ULPDU_Length of every FPDU Wireshark decoded, in capture order. */
  readonly fpduLengths: number[];
  readonly goodCrc: number;
  readonly badCrc: number;
  readonly expert: ExpertItem[];
  readonly malformed: number;
  readonly text: string;
  /** What `rddp dissect` made of the same capture (checked against tshark by summarize). */
  readonly dissect: Dissected;
}

/** One FPDU: the frame it completed in, its ULPDU_Length and CRC verdict. */
export interface WireFpdu {
  readonly frame: number;
  readonly ulpduLength: number;
  readonly crc: 'good' | 'bad' | 'off';
}

export interface Dissected {
  readonly report: DissectReport;
  /** Every FPDU the dissector found, in capture order. */
  readonly fpdus: WireFpdu[];
  /** Findings a receiver must reject (RFC clause and code each). */
  readonly rejects: Finding[];
  /** Codes of every finding, reject, warn and note. */
  readonly codes: string[];
}

/** tshark's FPDUs from its `-V` text: frame, ULPDU_Length and CRC verdict ("Good CRC32", "Bad CRC32", none). */
function tsharkFpdus(text: string): WireFpdu[] {
  const fpdus: { frame: number; ulpduLength: number; crc: WireFpdu['crc'] }[] = [];
  let frame = 0;
  for (const line of text.split('\n')) {
    const f = /^Frame (\d+):/.exec(line);
    if (f) frame = Number(f[1]);
    const u = /^\s+ULPDU length: (\d+) bytes?$/.exec(line);
    if (u) fpdus.push({ frame, ulpduLength: Number(u[1]), crc: 'off' });
    const c = /^\s+CRC check: .*\((Good|Bad) CRC32/.exec(line);
    const last = fpdus[fpdus.length - 1];
    if (c && last) last.crc = c[1] === 'Good' ? 'good' : 'bad';
  }
  return fpdus;
}

/** The dissector's FPDUs (events of kind `fpdu`), in capture order. */
function dissectorFpdus(r: DissectReport): WireFpdu[] {
  return r.events
    .filter((e) => e.kind === 'fpdu')
    .map((e) => {
      const m = /^FPDU ULPDU_Length (\d+) \(CRC (good|bad|off)/.exec(e.summary);
      if (!m) throw new Error(`rddp dissect: an FPDU event without length and CRC verdict: ${e.summary}`);
      return { frame: e.frame, ulpduLength: Number(m[1]), crc: m[2] as WireFpdu['crc'] };
    });
}

export interface SummarizeOptions {
  /**
   * Why tshark decodes only part of this capture (e.g. Wireshark 4.0 with Markers in one direction
   * only): the dissector must then agree on every frame tshark decoded and may find more FPDUs.
   */
  readonly tsharkPartial?: string;
}

/**
 * Summary of what Wireshark made of the capture, and what `rddp dissect` made of it. Throws when the
 * dissector cannot read the file or disagrees with tshark: other MPA frame counts, other FPDUs (frame,
 * ULPDU_Length, CRC verdict) in any frame tshark decoded, or (unless `tsharkPartial`) FPDUs tshark missed.
 */
export async function summarize(file: string, o: SummarizeOptions = {}): Promise<WireSummary> {
  // One tshark run: every frame's -V text, then the expert table (-z expert prints after the packets).
  const all = await run(['-r', file, ...DECODE_ARGS, '-V', '-z', 'expert']);
  const cut = all.search(/^(Errors|Warns|Notes|Chats|Comments) \(\d+\)\r?$/m);
  const text = cut < 0 ? all : all.slice(0, cut);
  const count = (re: RegExp) => (text.match(re) ?? []).length;
  const fpduLengths = [...text.matchAll(/^\s+ULPDU length: (\d+) bytes?$/gm)].map((m) => Number(m[1]));
  const expert = parseExpert(cut < 0 ? '' : all.slice(cut));
  const frames = Math.max(0, ...[...text.matchAll(/^Frame (\d+):/gm)].map((m) => Number(m[1])));
  const s = {
    requests: count(/^\s+Request frame header$/gm),
    replies: count(/^\s+Reply frame header$/gm),
    fpduLengths,
    goodCrc: count(/\(Good CRC32\)/g),
    badCrc: count(/\(Bad CRC32, should be /g),
    expert,
    malformed: count(/\[Malformed Packet/g),
    text,
  };
  return { ...s, dissect: await dissectAgainstTshark(file, s, tsharkFpdus(text), frames, o) };
}

async function dissectAgainstTshark(
  file: string,
  s: { requests: number; replies: number },
  theirs: WireFpdu[],
  frames: number,
  o: SummarizeOptions,
): Promise<Dissected> {
  let report: DissectReport;
  try {
    report = await dissectFile(file);
  } catch (e) {
    throw new Error(`rddp dissect cannot read ${file}: ${(e as Error).message}`);
  }
  const bad: string[] = [];
  if (report.packets !== frames) bad.push(`${report.packets} packets read, tshark read ${frames}`);
  const kinds = (k: string, head: string) =>
    report.events.filter((e) => e.kind === k && e.summary.startsWith(head)).length;
  if (kinds('mpa-request', 'MPA Request') !== s.requests)
    bad.push(`${kinds('mpa-request', 'MPA Request')} MPA Requests, tshark saw ${s.requests}`);
  if (kinds('mpa-reply', 'MPA Reply') !== s.replies)
    bad.push(`${kinds('mpa-reply', 'MPA Reply')} MPA Replies, tshark saw ${s.replies}`);
  const ours = dissectorFpdus(report);
  const show = (l: WireFpdu[]) => l.map((f) => `#${f.frame} ${f.ulpduLength} ${f.crc}`).join(', ');
  const tsharkFrames = new Set(theirs.map((f) => f.frame));
  const oursThere = ours.filter((f) => tsharkFrames.has(f.frame));
  if (show(oursThere) !== show(theirs))
    bad.push(`FPDUs differ: rddp dissect ${show(oursThere)}; tshark ${show(theirs)}`);
  const extra = ours.filter((f) => !tsharkFrames.has(f.frame));
  if (extra.length > 0 && o.tsharkPartial === undefined)
    bad.push(`rddp dissect found FPDUs tshark did not: ${show(extra)}`);
  if (bad.length > 0) throw new Error(`rddp dissect disagrees with tshark on ${file}:\n  ${bad.join('\n  ')}`);
  return {
    report,
    fpdus: ours,
    rejects: report.findings.filter((f) => f.severity === 'reject'),
    codes: report.findings.map((f) => f.code),
  };
}

/** Wireshark 4.0 warnings that are expected by design (see README "Wire checks"). */
export const REV_NOT_ONE = 'Rev field is NOT set to one as required by RFC 5044';
export const RES_NOT_ZERO = 'Res field is NOT set to zero as required by RFC 5044';

/** Expert items that point at a problem: any error, and any iWARP warning not in `allowed`. */
export function unexpected(items: readonly ExpertItem[], allowed: readonly string[] = []): ExpertItem[] {
  return items.filter(
    (i) =>
      i.severity === 'Errors' ||
      (i.severity === 'Warns' && i.protocol.startsWith('IWARP') && !allowed.includes(i.summary)),
  );
}
