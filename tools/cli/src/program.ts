import type { Command } from 'commander';
import { registerAttack } from './commands/attack.js';
import { registerBench } from './commands/bench.js';
import { registerConformance } from './commands/conformance.js';
import { registerDemo } from './commands/demo-command.js';
import { registerDissect } from './commands/dissect.js';
import { registerDoctor } from './commands/doctor-command.js';
import { registerExperiment } from './commands/experiment.js';
import { registerFuzz } from './commands/fuzz.js';
import { registerPerf } from './commands/perf-command.js';
import { registerRping } from './commands/rping-command.js';
import { registerSctpExperiment } from './commands/sctp-experiment.js';
import { registerSoak } from './commands/soak-command.js';
import { rootProgram } from './launch.js';
import { addResourceFlags } from './resources.js';

export { toolsVersion } from './launch.js';

/**
 * The whole `rddp` command line, every command's module loaded (the API, tests). Each command lives in
 * ./commands/<name>.ts; `rddp` itself loads only the one it runs (`programFor` in ./launch.ts).
 */
export function buildProgram(): Command {
  const program = rootProgram();
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
  registerDoctor(program); // after the resource flags: it opens no connection
  return program;
}
