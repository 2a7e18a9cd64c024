/**
 * `rddp attack`'s command line (and its hidden server end, `attack-target`): flags and help only, so
 * `rddp attack --help` loads no protocol code (issue 37); the run itself is ./attack.ts, loaded when the
 * action runs.
 */
import type { Command } from 'commander';
import type { Attack } from '../attack/attacks.js';
import { integerIn } from '../flags.js';
import type { AttackResult } from './attack.js';

/**
 * The attacks' names, in ATTACKS' order (../attack/attacks.ts), for the help text without loading them;
 * tools/cli/test/help-loads.test.ts checks they are ATTACKS' names.
 */
export const ATTACK_NAMES: readonly string[] = [
  'msn-hole',
  'no-read',
  'bad-crc',
  'short-advert',
  'slowloris',
  'sctp-garbage',
  'udp-request-flood',
  'slowloris-spread',
  'idle-fpdu',
  'rping-hold',
  'udp-hold',
  'sctp-peers',
];

export function registerAttack(program: Command): void {
  program
    .command('attack')
    .description(
      'put a long-running server (its own process) under a hostile peer, with an honest client throughout; checks RSS, handles and the honest client',
    )
    .argument('[names...]', `attacks to run (default all): ${ATTACK_NAMES.join(', ')}`)
    .option('--seconds <n>', 'how long each attack runs', integerIn(1, 86_400), '60')
    .option('--budget <MiB>', 'allowed RSS and heap growth of the server under attack', integerIn(1, 65_536), '32')
    .option(
      '--target-memory <MiB>',
      "the server's --memory-budget: its RSS may rise at most this much under any attack",
      integerIn(16, 65_536),
      '256',
    )
    .option(
      '--settle <n>',
      'seconds allowed for handles to return to the baseline after the attacker left',
      integerIn(0, 3600),
      '15',
    )
    .option('--json', 'one JSON object per attack instead of the table')
    .action(
      async (
        names: string[],
        opts: { seconds: string; budget: string; settle: string; targetMemory: string; json?: boolean },
      ) => {
        const [{ runAttack }, { ATTACKS, attackNamed }, { UsageError }] = await Promise.all([
          import('./attack.js'),
          import('../attack/attacks.js'),
          import('../transports.js'),
        ]);
        const seconds = Number(opts.seconds);
        const targetMemoryMiB = Number(opts.targetMemory);
        const budgetMiB = Number(opts.budget);
        const settleSeconds = Number(opts.settle);
        const chosen = names.length === 0 ? ATTACKS : names.map((n) => attackNamed(n));
        const unknown = names.filter((_, i) => chosen[i] === undefined);
        if (unknown.length > 0)
          throw new UsageError(
            `unknown attack ${unknown.join(', ')} (one of: ${ATTACKS.map((a) => a.name).join(', ')})`,
          );
        const results: AttackResult[] = [];
        for (const a of chosen as Attack[]) {
          const r = await runAttack(a, { seconds, budgetMiB, settleSeconds, targetMemoryMiB }, (s) =>
            opts.json ? undefined : process.stderr.write(`${s}\n`),
          );
          results.push(r);
          if (opts.json) console.log(JSON.stringify(r));
        }
        if (!opts.json) {
          console.log(
            'attack               s   hostile  RSS before    step  growth  heap growth  handles  honest ops  longest stall  verdict\n' +
              results
                .map(
                  (r) =>
                    `${r.attack.padEnd(18)} ${String(r.seconds).padStart(3)} ${String(r.hostileUnits).padStart(9)} ${r.rssBeforeMiB.toFixed(1).padStart(6)} MiB ${r.rssStepMiB.toFixed(1).padStart(7)} ${r.rssGrowthMiB.toFixed(1).padStart(7)} ${r.heapGrowthMiB.toFixed(1).padStart(12)} ${`${r.handlesBefore}→${r.handlesAfter}`.padStart(8)} ${String(r.honestOps).padStart(11)} ${`${r.honestLongestStallMs} ms`.padStart(14)}  ${r.ok ? 'ok' : `FAIL: ${r.reasons.join('; ')}`}`,
                )
                .join('\n'),
          );
        }
        if (results.some((r) => !r.ok)) process.exitCode = 1;
      },
    );
  program
    .command('attack-target', { hidden: true })
    .action(async () => (await import('../attack/target.js')).runAttackTarget());
}
