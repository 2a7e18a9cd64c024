/** @rddp/llp-loopback — an in-process LLP pair with fault injection, for tests and experiments. */
export { LoopbackConnection } from './connection.js';
export type { LoopbackFaults } from './faults.js';
export { loopbackModule } from './module.js';
export { defaultNetwork, LoopbackNetwork } from './network.js';
export { LoopbackStream } from './stream.js';
export {
  createLoopbackPair,
  LOOPBACK_DEFAULT_MULPDU,
  LOOPBACK_MAX_PRIVATE_DATA,
  type LoopbackOptions,
  loopback,
  loopbackCapabilities,
} from './transport.js';
