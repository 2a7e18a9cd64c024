import { programFor } from './launch.js';

/** Every fatal error: one line on stderr, then the process ends (sockets and timers do not keep it alive). */
function fatal(error: unknown): never {
  // Expected failures (bad flags, refused connections, timeouts) arrive here as typed errors: no stack trace.
  const e = (error ?? {}) as { message?: string; code?: string; exitCode?: number };
  const message = (e.message ?? String(error)).split('\n')[0];
  process.stderr.write(`rddp: ${message}${e.code ? ` (${e.code})` : ''}\n`);
  if (process.env.RDDP_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exit(typeof e.exitCode === 'number' ? e.exitCode : 1);
}

// A reader that went away (`rddp perf … | head -3`) ends the command quietly, as Unix tools do.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  fatal(e);
});
process.on('uncaughtException', fatal);
process.on('unhandledRejection', fatal);

// Only the command that runs is loaded (./launch.ts): `rddp --help` does not load the protocol stack.
programFor(process.argv)
  .then((program) => program.parseAsync(process.argv))
  .catch(fatal);
