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
