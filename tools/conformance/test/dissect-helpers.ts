/**
 * Helpers for the dissector's tests: capture on lo with tshark, run `tools/rddp` as separate processes,
 * read what tshark's iWARP dissectors make of a capture, and build MPA streams with the kit's own codec.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
/** The one tshark capture starter of the wire tests. */
import { TSHARK, tsharkOn } from '../../../packages/llp-mpa-tcp/test/wire.js';
import { type EncodeFpduOptions, encodeFpdu } from '../src/index.js';

export { TSHARK };
/** Separate `tools/rddp` processes and free ports: the CLI tests' helpers. */
export { freePort, RDDP, run as rddp } from '../../cli/test/procs.js';

/** Whether tshark is here; in CI (which installs it) its absence is an error. */
export function haveTshark(): boolean {
  if (existsSync(TSHARK)) return true;
  if (process.env.CI) throw new Error(`tshark not found at ${TSHARK}; CI installs it`);
  return false;
}

export function tempDir(): { dir: string; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'rddp-dissect-'));
  return { dir, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `tshark -i lo -w file -f filter`, resolved once it captures; stop() ends it after the traffic. */
export async function startCapture(file: string, filter: string): Promise<{ stop(): Promise<void> }> {
  const child = await tsharkOn(file, filter, { bufferMiB: 64, settleMs: 1000 });
  return {
    async stop() {
      await new Promise((r) => setTimeout(r, 500));
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGINT');
      await exited;
    },
  };
}

/** Waits until something accepts TCP connections on the port. */
export async function waitForTcp(port: number, ms = 60_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const ok = await new Promise<boolean>((res) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        res(true);
      });
      s.once('error', () => res(false));
    });
    if (ok) return;
    if (Date.now() - t0 > ms) throw new Error(`nothing listens on ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tshark(args: string[]): Promise<string> {
  return new Promise((res, rej) =>
    execFile(TSHARK, args, { maxBuffer: 256 << 20 }, (err, stdout, stderr) =>
      err ? rej(new Error(`${err.message}\n${stderr}`)) : res(stdout),
    ),
  );
}

const IWARP = [
  '-o',
  'tcp.try_heuristic_first:TRUE',
  '--disable-heuristic',
  'rpcrdma_iwarp',
  '--disable-heuristic',
  'smb_direct_iwarp',
];

export interface TsharkFpdu {
  readonly frame: number;
  readonly ulpduLength: number;
  readonly crc: number | undefined;
  readonly opcode: number | undefined;
}

/** Every FPDU tshark's MPA dissector found: frame, ULPDU_Length, CRC field, RDMAP opcode. */
export async function tsharkFpdus(file: string): Promise<TsharkFpdu[]> {
  const out = await tshark([
    '-r',
    file,
    ...IWARP,
    '-Y',
    'iwarp_mpa.fpdu',
    '-T',
    'fields',
    '-E',
    'separator=;',
    '-e',
    'frame.number',
    '-e',
    'iwarp_mpa.ulpdulength',
    '-e',
    'iwarp_mpa.crc_check',
    '-e',
    'iwarp_rdma.opcode',
  ]);
  const fpdus: TsharkFpdu[] = [];
  for (const line of out.trim().split('\n')) {
    if (!line) continue;
    const [frame, lens, crcs, ops] = line.split(';');
    const l = (lens ?? '').split(',').filter(Boolean);
    const c = (crcs ?? '').split(',').filter(Boolean);
    const o = (ops ?? '').split(',').filter(Boolean);
    for (const [i, len] of l.entries())
      fpdus.push({
        frame: Number(frame),
        ulpduLength: Number(len),
        crc: c[i] !== undefined ? Number(c[i]) : undefined,
        opcode: o[i] !== undefined ? Number(o[i]) : undefined,
      });
  }
  return fpdus;
}

/** `tshark -V` text of the MPA packets (for "(Good CRC32)" / "(Bad CRC32 …)" verdicts). */
export function tsharkVerbose(file: string, extra: string[] = []): Promise<string> {
  return tshark(['-r', file, ...IWARP, ...extra, '-V']);
}

/** tshark's expert items (`-z expert`), one line each. */
export async function tsharkExpert(file: string): Promise<string> {
  return tshark(['-r', file, ...IWARP, '-q', '-z', 'expert']);
}

/** FPDUs of one direction, Markers placed from stream offset 0, each FPDU's octets kept apart. */
export function fpduStream(
  ulpdus: readonly Uint8Array[],
  options: Omit<EncodeFpduOptions, 'streamOffset'>,
  per: (i: number) => Partial<EncodeFpduOptions> = () => ({}),
): Uint8Array[] {
  let off = 0;
  return ulpdus.map((u, i) => {
    const f = encodeFpdu(u, { ...options, ...per(i), streamOffset: off });
    off += f.byteLength;
    return f;
  });
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}
