/**
 * @rddp/llp — the lower-layer-protocol contract of rddp's DDP (RFC 5041 §3, §6).
 * Types for plugin authors, plus DI tokens, guards, typed errors and a few helpers every plugin needs.
 */
export * from './base-connection.js';
export * from './base-listener.js';
export * from './base-stream.js';
export * from './base-transport.js';
export * from './budget.js';
export * from './capabilities.js';
export * from './connection.js';
export * from './crc32c-pin.js';
export * from './errors.js';
export * from './fifo.js';
export * from './guards.js';
export * from './sources.js';
export * from './stream.js';
export * from './tokens.js';
export * from './util.js';
