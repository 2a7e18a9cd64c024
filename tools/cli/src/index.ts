export { type DemoOptions, runDemo } from './commands/demo.js';
export { perfLoopback } from './commands/perf.js';
export { rpingClient, rpingServe } from './commands/rping.js';
export type { PerfResult } from './perf/engine.js';
export { buildProgram } from './program.js';
export { type ToolTransport, toolTransport } from './transports.js';
