import { StagTable } from '@rddp/ddp';
import type { LlpStream } from '@rddp/llp';
import { createLoopbackPair } from '@rddp/llp-loopback';
import { RdmapStream, RdmapUnsuitableLlpError } from '@rddp/rdmap';
import { describe, expect, it } from 'vitest';

describe('RFC 5040 §3.1: RDMAP needs a reliable, ordered LLP', () => {
  for (const [name, faults] of [
    ['unordered (reordering)', { reorder: { seed: 1, window: 3 } }],
    ['unreliable (lossy)', { drop: { seed: 1, probability: 0.1 } }],
  ] as const) {
    it(`an ${name} LLP is refused with a typed error unless reduced semantics are asked for`, async () => {
      const [a] = await createLoopbackPair({ faults });
      const make = (reducedSemantics?: boolean) =>
        new RdmapStream(a.streams[0] as LlpStream, {
          pdId: 1,
          stags: new StagTable(),
          llpCapabilities: a.capabilities,
          ...(reducedSemantics ? { reducedSemantics } : {}),
        });
      expect(() => make()).toThrow(RdmapUnsuitableLlpError);
      expect(() => make()).toThrow(/reducedSemantics: true/);
      expect(make(true).state).toBeDefined();
      a.abort();
    });
  }

  it('a reliable, ordered LLP needs no opt-in', async () => {
    const [a] = await createLoopbackPair();
    expect(
      () =>
        new RdmapStream(a.streams[0] as LlpStream, {
          pdId: 1,
          stags: new StagTable(),
          llpCapabilities: a.capabilities,
        }),
    ).not.toThrow();
    a.abort();
  });
});
