/**
 * Dependency-injection tokens (inversify service identifiers). An LLP plugin binds its `LlpTransport`
 * under `LLP_TRANSPORT`; `@rddp/stack` resolves DDP and RDMAP on top of whatever is bound there.
 */
export const LLP_TRANSPORT: unique symbol = Symbol.for('@rddp/llp:transport');
/** Optional transport options object (`LlpTransportOptions` of the plugin) bound by the composer. */
export const LLP_TRANSPORT_OPTIONS: unique symbol = Symbol.for('@rddp/llp:transport-options');
/** Optional `LlpLogger` for protocol events (`--debug`). */
export const LLP_LOGGER: unique symbol = Symbol.for('@rddp/llp:logger');

/** A structured protocol-event log sink (handshakes, teardowns, Terminates). */
export interface LlpLogger {
  debug(event: string, fields?: Readonly<Record<string, unknown>>): void;
}

/** The logger used when none is bound: drops everything. */
export const silentLogger: LlpLogger = { debug() {} };

/** What a transport's DI binding reads from its container (inversify's `ResolutionContext` has it). */
export interface LlpResolutionContext {
  get<T>(id: symbol, options: { optional: true }): T | undefined;
}

/**
 * The options of a transport a container builds: `options` given to its module win over an object bound
 * under `LLP_TRANSPORT_OPTIONS`, and the logger falls back to one bound under `LLP_LOGGER`.
 */
export function containerTransportOptions<O extends { readonly logger?: LlpLogger }>(
  ctx: LlpResolutionContext,
  options: O,
): O {
  const bound = ctx.get<O>(LLP_TRANSPORT_OPTIONS, { optional: true });
  const logger = options.logger ?? bound?.logger ?? ctx.get<LlpLogger>(LLP_LOGGER, { optional: true });
  return { ...bound, ...options, ...(logger ? { logger } : {}) };
}
