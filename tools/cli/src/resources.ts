/**
 * The process-wide resource flags every command takes (docs/SECURITY.md "Resource limits"):
 * `--memory-budget <size>` sets the one memory budget of the process (`processMemoryBudget()`, shared by
 * every transport and tool), `--idle-timeout <s>` how long an established MPA/TCP connection or SCTP
 * association may stay idle before it is ended (0: never).
 */
import { DEFAULT_MEMORY_BUDGET, parseOctets, processMemoryBudget } from '@rddp/llp';
import { type Command, InvalidArgumentError, Option } from 'commander';

/** `--idle-timeout`'s default, in seconds: the transports' own (5 min). */
export const DEFAULT_IDLE_TIMEOUT_S = 300;

let idleTimeoutMs: number | undefined;

/** The idle timeout the tools' transports get, in ms (undefined: the transport's default). */
export function toolIdleTimeoutMs(): number | undefined {
  return idleTimeoutMs;
}

function octets(v: string): string {
  const n = parseOctets(v);
  if (n === undefined || n < 1024 * 1024)
    throw new InvalidArgumentError('must be a size of at least 1m (octets, or with a k/m/g suffix).');
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
    cmd.addOption(
      new Option(
        '--idle-timeout <s>',
        `end an MPA/TCP connection or SCTP association idle this long (default ${DEFAULT_IDLE_TIMEOUT_S}; 0: never)`,
      ).argParser(seconds),
    );
  }
  program.hook('preAction', (_root, action) => {
    const o = action.opts() as { memoryBudget?: string; idleTimeout?: string };
    if (o.memoryBudget !== undefined) processMemoryBudget().configure({ limit: parseOctets(o.memoryBudget) as number });
    if (o.idleTimeout !== undefined) idleTimeoutMs = Math.round(Number(o.idleTimeout) * 1000);
  });
}
