/**
 * The process-wide resource flags every command takes (docs/SECURITY.md "Resource limits"):
 * `--memory-budget <size>` sets the one memory budget of the process (`processMemoryBudget()`, shared by
 * every transport and tool), `--idle-timeout <s>` how long an established MPA/TCP connection or SCTP
 * association may stay idle before it is ended (0: never), `--ipv6-source-prefix <bits>` how IPv6 peers
 * are grouped into sources.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';

/**
 * @rddp/llp's DEFAULT_MEMORY_BUDGET, for --help: @rddp/llp is loaded when a command runs, not to print
 * its help (issue 37; tools/cli/test/perftest-habits.test.ts checks the two agree).
 */
export const HELP_DEFAULT_MEMORY_BUDGET = 1024 ** 3;

/** `--memory-budget`'s check, once @rddp/llp's `parseOctets` is loaded (the preAction hook). */
const MEMORY_BUDGET_HINT = 'must be a size of at least 1m (octets, or with a k/m/g suffix).';

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
        `octets this process may hold for peers, all connections and tools together (default ${HELP_DEFAULT_MEMORY_BUDGET / 1024 ** 3}g, or RDDP_MEMORY_BUDGET); one source may hold a quarter`,
      ),
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
  program.hook('preAction', async (_root, action) => {
    const o = action.opts() as { memoryBudget?: string; idleTimeout?: string; ipv6SourcePrefix?: string };
    if (o.ipv6SourcePrefix !== undefined) ipv6SourcePrefix = Number(o.ipv6SourcePrefix);
    if (o.memoryBudget !== undefined) {
      const { parseOctets, processMemoryBudget } = await import('@rddp/llp');
      const n = parseOctets(o.memoryBudget);
      // As commander reports a rejected option value (usage error, exit 2).
      if (n === undefined || n < 1024 * 1024)
        action.error(`option '--memory-budget <size>' argument '${o.memoryBudget}' is invalid. ${MEMORY_BUDGET_HINT}`, {
          exitCode: 2,
          code: 'commander.invalidArgument',
        });
      processMemoryBudget().configure({ limit: n });
    }
    if (o.idleTimeout !== undefined) idleTimeoutMs = Math.round(Number(o.idleTimeout) * 1000);
  });
}
