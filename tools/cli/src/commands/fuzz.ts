/** `rddp fuzz` — the seedable mutational fuzzer over MPA, DDP and RDMAP parsers (`pnpm fuzz --minutes N`). */
import type { Command } from 'commander';
import { integerIn, positiveUpTo } from '../flags.js';

/**
 * The targets' names, for --help without loading them (issue 37); fuzz/targets.ts's TARGETS, in order
 * (tools/cli/test/perftest-habits.test.ts checks the two agree).
 */
export const FUZZ_TARGET_NAMES = ['mpa-fpdu', 'mpa-frames', 'rdmap'] as const;

export function registerFuzz(program: Command): void {
  program
    .command('fuzz')
    .description('mutational fuzzing of the MPA FPDU reader, MPA frames and the RDMAP/DDP receive path')
    .option('--minutes <n>', 'total running time, shared by the targets', positiveUpTo(10_080), '1')
    .option(
      '--seed <n>',
      'first seed (each input uses seed + index: a failure names its seed)',
      integerIn(0, 0xffff_ffff),
      '1',
    )
    .option('--target <name>', `only this target (${FUZZ_TARGET_NAMES.join(', ')})`)
    .option('--json', 'one JSON object per target')
    .addHelpText(
      'after',
      '\nExamples:\n  pnpm fuzz --minutes 10\n  tools/rddp fuzz --target rdmap --seed 4242 --minutes 1',
    )
    .action(async (o: { minutes: string; seed: string; target?: string; json?: boolean }) => {
      // The targets (and the stack they drive) load when the fuzzer runs.
      const [{ fuzz, TARGETS }, { UsageError }] = await Promise.all([
        import('../fuzz/targets.js'),
        import('../transports.js'),
      ]);
      const minutes = Number(o.minutes);
      if (!(minutes > 0)) throw new UsageError(`--minutes must be positive (got ${o.minutes})`);
      const targets = o.target ? TARGETS.filter((t) => t.name === o.target) : TARGETS;
      if (targets.length === 0) throw new UsageError(`unknown --target ${o.target}`);
      const each = (minutes * 60_000) / targets.length;
      for (const t of targets) {
        const rep = fuzz(t, Number(o.seed) >>> 0, each);
        console.log(
          o.json
            ? JSON.stringify(rep)
            : `${t.name.padEnd(12)} ${String(rep.inputs).padStart(9)} inputs ${String(rep.frames).padStart(10)} frames ${rep.framesPerSecond.toFixed(0).padStart(9)} frames/s  no invariant broken`,
        );
      }
    });
}
