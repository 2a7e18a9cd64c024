import { buildProgram } from './program.js';

const program = buildProgram();
program.parseAsync(process.argv).catch((error: unknown) => {
  // Expected failures (bad flags, refused connections, timeouts) arrive here as typed errors: no stack trace.
  const e = error as { message?: string; code?: string; exitCode?: number };
  process.stderr.write(`rddp: ${e.message ?? String(error)}${e.code ? ` (${e.code})` : ''}\n`);
  if (process.env.RDDP_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exitCode = typeof e.exitCode === 'number' ? e.exitCode : 1;
});
