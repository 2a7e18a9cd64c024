/**
 * The example plugin ships with @rddp/llp: packages/llp/examples/duplex-llp.ts (walkthrough:
 * packages/llp/PLUGINS.md). Re-exported here for the repository's docs and tests.
 */
export { duplexModule, duplexTransport } from '../../packages/llp/examples/duplex-llp.js';
