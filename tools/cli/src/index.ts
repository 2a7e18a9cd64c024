export { buildProgram } from './program.js';
export { runLoopbackEcho, type EchoResult } from './commands/demo.js';
