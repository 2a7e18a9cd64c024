export { type EchoResult, runLoopbackEcho } from './commands/demo.js';
export { buildProgram } from './program.js';
