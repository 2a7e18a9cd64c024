/**
 * `rddp soak`'s command line: flags and help only (issue 37: `rddp soak --help` loads no protocol code);
 * the run is ./soak.ts, loaded when the action runs.
 */
import type { Command } from 'commander';
import { positiveUpTo } from '../flags.js';
import type { SoakRawOptions } from './soak.js';

export function registerSoak(program: Command): void {
  program
    .command('soak')
    .description(
      'long run over MPA/TCP (Writes, Reads, Sends, new connections each round) checking that memory stays flat',
    )
    .option('--minutes <n>', 'how long', positiveUpTo(10_080), '5')
    .option('--budget <MiB>', 'allowed RSS growth after warm-up', positiveUpTo(1 << 20), '32')
    .option('--transport <name>', 'tcp, sctp or loopback', 'tcp')
    .option('--json', 'one JSON sample per second, then a summary')
    .option('--out <dir>', 'also write the samples and the RSS chart there (soak.jsonl, soak-rss.svg)')
    .addHelpText('after', '\nExample:\n  pnpm soak --minutes 30 --out soak-results')
    .action(async (raw: SoakRawOptions) => (await import('./soak.js')).soakAction(raw));
}
