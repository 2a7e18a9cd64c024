/**
 * The process-wide resource flags every command takes (docs/SECURITY.md "Resource limits"):
 * `--memory-budget <size>` sets the one memory budget of the process (`processMemoryBudget()`, shared by
 * every transport and tool), `--idle-timeout <s>` how long an established MPA/TCP connection or SCTP
 * association may stay idle before it is ended (0: never), `--ipv6-source-prefix <bits>` how IPv6 peers
 * are grouped into sources.
 */
import { DEFAULT_MEMORY_BUDGET, parseOctets, processMemoryBudget } from '@rddp/llp';
import { type Command, InvalidArgumentError, Option } from 'commander';

/** `--idle-timeout`'s default, in seconds: the transports' own (5 min). */
export const DEFAULT_IDLE_TIMEOUT_S = 300;

let idleTimeoutMs: number | undefined;
let ipv6SourcePrefix: number | undefined;

/** The idle timeout the tools' transports get, in ms (undefined: the transport's default). */
export function toolIdleTimeoutMs(): number | undefined {
  return idleTimeoutMs;
}

/** The IPv6 prefix the tools' transports count one source by (undefined: the transport's default, 64). */
export function toolIpv6SourcePrefix(): number | undefined {
  return ipv6SourcePrefix;
}

function octets(v: string): string {
  const n = parseOctets(v);
  if (n === undefined || n < 1024 * 1024)
    throw new InvalidArgumentError('must be a size of at least 1m (octets, or with a k/m/g suffix).');
  return v;
}

function prefixBits(v: string): string {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 0 || n > 128)
    throw new InvalidArgumentError('must be an integer in 0..128.');
  return v;
}

function seconds(v: string): string {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 86_400)
    throw new InvalidArgumentError('must be a number of seconds in 0..86400 (0: never).');
  return v;
}

/** Adds the resource flags to every command of `program` and applies them before the command runs. */
export function addResourceFlags(program: Command): void {
  for (const cmd of program.commands) {
    cmd.addOption(
      new Option(
        '--memory-budget <size>',
        `octets this process may hold for peers, all connections and tools together (default ${DEFAULT_MEMORY_BUDGET / 1024 ** 3}g, or RDDP_MEMORY_BUDGET); one source may hold a quarter`,
      ).argParser(octets),
    );
    // rping -P has its own, for its clients; the transports take the same value.
    if (!cmd.options.some((x) => x.long === '--ipv6-source-prefix'))
      cmd.addOption(
        new Option(
          '--ipv6-source-prefix <bits>',
          'IPv6 prefix length one source is counted by, for per-source shares (default 64; 128: each address)',
        ).argParser(prefixBits),
      );
    cmd.addOption(
      new Option(
        '--idle-timeout <s>',
        `end an MPA/TCP connection or SCTP association idle this long (default ${DEFAULT_IDLE_TIMEOUT_S}; 0: never)`,
      ).argParser(seconds),
    );
  }
  program.hook('preAction', (_root, action) => {
    const o = action.opts() as { memoryBudget?: string; idleTimeout?: string; ipv6SourcePrefix?: string };
    if (o.ipv6SourcePrefix !== undefined) ipv6SourcePrefix = Number(o.ipv6SourcePrefix);
    if (o.memoryBudget !== undefined) processMemoryBudget().configure({ limit: parseOctets(o.memoryBudget) as number });
    if (o.idleTimeout !== undefined) idleTimeoutMs = Math.round(Number(o.idleTimeout) * 1000);
  });
}
