/**
 * `rddp doctor` — what this install has and uses, one line each, and how to get what is missing (issue 37):
 * the CRC32c backend MPA runs (and which load here), the direct send path (`@rddp/writev`), ISA-L, tshark,
 * ip netns / nft / tc (`rddp experiment`), the kernel's TCP congestion controls (`--congestion`).
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { CRC32C_BACKENDS, type Crc32cBackendName } from '@rddp/llp';

/** One thing doctor looks at: what it found, and how to get it where it is missing. */
export interface DoctorLine {
  readonly name: string;
  readonly ok: boolean;
  readonly found: string;
  /** How to get it (apt package names, build steps); absent where nothing is missing. */
  readonly get?: string;
}

/** `require` from @rddp/llp-mpa-tcp's own place: its optional dependencies resolve as they do for it. */
function mpaRequire(): NodeJS.Require {
  try {
    return createRequire(import.meta.resolve('@rddp/llp-mpa-tcp'));
  } catch {
    return createRequire(import.meta.url);
  }
}

/** Whether `@rddp/writev`'s native build loads here (the direct send path, `--congestion`). */
export function writevAvailable(req = mpaRequire()): boolean {
  if (process.platform === 'win32') return false;
  try {
    return typeof (req('@rddp/writev') as { writeRanges?: unknown }).writeRanges === 'function';
  } catch {
    return false;
  }
}

/** The path of executable `name` on PATH (and /usr/sbin, /sbin, where ip, tc and nft live), or undefined. */
function which(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {}
  }
  return undefined;
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Everything doctor looks at, in its order. `backend` is @rddp/llp-mpa-tcp's `chooseCrc32cBackend()`, or its error. */
export function doctorLines(backend: string | Error, crc: Record<Crc32cBackendName, boolean>): DoctorLine[] {
  const req = mpaRequire();
  const has = Object.entries(crc)
    .map(([k, v]) => `${k} ${v ? 'yes' : 'no'}`)
    .join(', ');
  const lines: DoctorLine[] = [];
  lines.push(
    typeof backend === 'string'
      ? { name: 'crc32c', ok: true, found: `${backend} (available: ${has})` }
      : // The pin's error names how to get the backend.
        { name: 'crc32c', ok: false, found: `${backend.message} (available: ${has})` },
  );
  const isal = CRC32C_BACKENDS.isal;
  lines.push(
    crc.isal
      ? { name: 'isa-l', ok: true, found: `${isal.package} built (ISA-L crc32_iscsi)` }
      : { name: 'isa-l', ok: false, found: `${isal.package} not built`, get: isal.get },
  );
  const direct = writevAvailable(req);
  const off = process.env.RDDP_MPA_DIRECT_SEND === '0';
  lines.push(
    direct
      ? {
          name: 'send path',
          ok: true,
          found: `${off ? "socket (RDDP_MPA_DIRECT_SEND=0; Node's socket writes)" : 'direct (sendmsg via @rddp/writev)'}; --send-path direct|socket`,
        }
      : {
          name: 'send path',
          ok: false,
          found:
            "socket (Node's socket writes): @rddp/writev not built, --send-path direct and --congestion unavailable",
          get: 'apt-get install build-essential python3, then pnpm install (builds @rddp/writev with node-gyp)',
        },
  );
  const tshark = which('tshark');
  lines.push(
    tshark
      ? { name: 'tshark', ok: true, found: tshark }
      : {
          name: 'tshark',
          ok: false,
          found: 'not found (captures are decoded by rddp dissect only)',
          get: 'apt-get install tshark',
        },
  );
  for (const [tool, pkg, use] of [
    ['ip', 'iproute2', 'ip netns'],
    ['nft', 'nftables', 'nft'],
    ['tc', 'iproute2', 'tc netem'],
  ] as const) {
    const at = which(tool);
    lines.push(
      at
        ? { name: use, ok: true, found: `${at} (rddp experiment; needs root)` }
        : {
            name: use,
            ok: false,
            found: 'not found (rddp experiment cannot build its topology)',
            get: `apt-get install ${pkg}`,
          },
    );
  }
  const available = readProc('/proc/sys/net/ipv4/tcp_available_congestion_control');
  const current = readProc('/proc/sys/net/ipv4/tcp_congestion_control');
  lines.push(
    available === undefined
      ? {
          name: 'tcp congestion',
          ok: false,
          found: 'cannot read /proc/sys/net/ipv4/tcp_available_congestion_control (not Linux?)',
          get: 'Linux only (TCP_CONGESTION)',
        }
      : available.split(/\s+/).includes('bbr')
        ? { name: 'tcp congestion', ok: true, found: `${available} (default ${current ?? '?'})` }
        : {
            name: 'tcp congestion',
            ok: true,
            found: `${available} (default ${current ?? '?'}); bbr not loaded`,
            get: 'modprobe tcp_bbr (root)',
          },
  );
  return lines;
}

/** One line: `name  found` and, where something is missing, `— get: how`. */
export function doctorLine(l: DoctorLine): string {
  return `${`${l.name}:`.padEnd(16)}${l.ok ? '' : 'MISSING '}${l.found}${l.get ? ` — get: ${l.get}` : ''}`;
}

/** `rddp doctor`'s run: prints the lines; a pinned CRC32c backend that cannot be honoured sets exit 1. */
export async function runDoctor(o: { json?: boolean }): Promise<void> {
  // The backend MPA chooses; a pin it cannot honour (RDDP_CRC32C) is an error.
  let backend: string | Error;
  try {
    backend = (await import('@rddp/llp-mpa-tcp')).chooseCrc32cBackend();
  } catch (e) {
    backend = e instanceof Error ? e : new Error(String(e));
  }
  // Which backends load, from @rddp/crc32c's own place (its optional dependencies).
  const lines = doctorLines(backend, (await import('@rddp/crc32c')).crc32cBackendsAvailable());
  for (const l of lines) console.log(o.json ? JSON.stringify(l) : doctorLine(l));
  // Something missing is reported, not a failure; a pin that cannot be honoured is (as every command fails).
  if (typeof backend !== 'string') process.exitCode = 1;
}
