import { tests, transportContext } from '@rddp/llp-compliance';
import { describe } from 'vitest';
import { createLoopbackPair, LoopbackNetwork, type LoopbackOptions, loopback } from '../src/index.js';

function suite(label: string, options: LoopbackOptions) {
  describe(label, () => {
    const network = new LoopbackNetwork();
    tests({
      setup: async () =>
        transportContext(loopback({ ...options, network, highWaterMark: 256 * 1024 }), { host: 'srv', port: 0 }),
      async teardown() {},
    });
  });
}

suite('loopback', {});
suite('loopback, small MULPDU', { mulpdu: 1024 });
suite('loopback, random chunking', { faults: { chunking: { seed: 3, maxChunk: 7 } } });
suite('loopback, delayed delivery', { faults: { delayMs: 1 } });
suite('loopback, reordering (unordered LLP)', { faults: { reorder: { seed: 9, window: 3 } } });
suite('loopback, duplicates and drops (unreliable LLP)', {
  faults: { duplicate: { seed: 4, probability: 0.1 }, drop: { seed: 4, probability: 0.1 } },
});

describe('createLoopbackPair', () => {
  tests({
    async setup() {
      return {
        connect: (o) => createLoopbackPair({ ...o, highWaterMark: 256 * 1024 }),
      };
    },
    async teardown() {},
  });
});
