/**
 * rping's defaults, in a module that imports nothing, so `rddp rping --help` registers the command
 * without loading the stack (issue 37). ../commands/rping.ts and ./limits.ts re-export them.
 */

/** -P defaults: clients served at once, and the octets of ping buffers they may make the server hold. */
export const RPING_DEFAULT_MAX_CLIENTS = 64;
export const RPING_DEFAULT_MAX_MEMORY = 256 << 20;
/** Default time a client has for each step (its advertisement, the Read Response, a completion): 10 s. */
export const RPING_DEFAULT_STEP_TIMEOUT_MS = 10_000;
