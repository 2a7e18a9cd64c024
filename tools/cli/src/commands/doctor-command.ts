/** `rddp doctor`'s flags; its run (./doctor.ts, which reads @rddp/llp's backend table) loads in the action. */
import type { Command } from 'commander';

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description(
      "what this install has and uses: CRC32c backend, direct send path, ISA-L, tshark, ip netns/nft/tc, TCP congestion controls, and how to get what's missing",
    )
    .option('--json', 'one JSON object per line instead of text')
    .action(async (o: { json?: boolean }) => (await import('./doctor.js')).runDoctor(o));
}
