import { createRequire } from 'node:module';
import { Command } from 'commander';
import { registerAttack } from './commands/attack.js';
import { registerBench } from './commands/bench.js';
import { registerConformance } from './commands/conformance.js';
import { registerDemo } from './commands/demo.js';
import { registerDissect } from './commands/dissect.js';
import { registerExperiment } from './commands/experiment.js';
import { registerFuzz } from './commands/fuzz.js';
import { registerPerf } from './commands/perf.js';
import { registerRping } from './commands/rping.js';
import { registerSctpExperiment } from './commands/sctp-experiment.js';
import { registerSoak } from './commands/soak.js';
import { addResourceFlags } from './resources.js';

/** The @rddp/tools version `rddp --version` prints (package.json sits next to src/ and dist/). */
export const toolsVersion: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** The `rddp` command line. Each command lives in ./commands/<name>.ts. */
export function buildProgram(): Command {
  const program = new Command('rddp')
    .description('rddp — the iWARP protocol suite (RDMAP, DDP, MPA) in TypeScript')
    .version(toolsVersion, '--version', 'print the @rddp/tools version')
    .exitOverride((err) => {
      // commander's own usage errors exit 2 (bad flags), help/version exit 0.
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0)
        process.exit(0);
      process.exit(2);
    })
    // Usage errors on one line, as every other fatal error: `rddp: <what> (run with --help for usage)`.
    .configureOutput({
      outputError: (s, write) => write(`rddp: ${s.trim().replace(/^error: /, '')} (run with --help for usage)\n`),
    });
  registerDemo(program);
  registerBench(program);
  registerRping(program);
  registerPerf(program);
  registerFuzz(program);
  registerSctpExperiment(program);
  registerExperiment(program);
  registerSoak(program);
  registerAttack(program);
  registerConformance(program);
  registerDissect(program);
  addResourceFlags(program);
  return program;
}
