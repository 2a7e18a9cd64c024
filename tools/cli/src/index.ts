export { type DemoOptions, runDemo } from './commands/demo.js';
export { perfLoopback, perfParams } from './commands/perf.js';
export { rpingClient, rpingServe, runRping } from './commands/rping.js';
export { PERF_TESTS, type PerfParams, type PerfResult, perfClient, perfServe } from './perf/engine.js';
export { buildProgram } from './program.js';
export { type ToolTransport, toolTransport } from './transports.js';
