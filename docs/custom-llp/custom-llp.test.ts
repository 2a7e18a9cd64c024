import { CapabilityError, type LlpConnection } from '@rddp/llp';
import { tests } from '@rddp/llp-compliance';
import { createStack } from '@rddp/stack';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { duplexModule, duplexTransport } from './duplex-llp.js';

describe('docs/custom-llp: a user-written LLP over a Node Duplex', () => {
  it('plugs into a stack in one call', () => {
    expect(createStack(duplexModule).transport).toBe(duplexTransport);
  });

  it('RFC 5041 §3: a digest-less LLP is refused when the stack requires a digest, accepted otherwise', () => {
    expect(() => createStack(duplexModule, { requireRfc5041: { requireDigest: true } })).toThrow(CapabilityError);
    expect(createStack(duplexModule, { requireRfc5041: true }).transport).toBe(duplexTransport);
  });

  tests({
    async setup() {
      const { transport } = createStack(duplexModule);
      return {
        async connect(): Promise<[LlpConnection, LlpConnection]> {
          const listener = await transport.listen({ host: '127.0.0.1', port: 0 });
          const accepted = firstValueFrom(listener.connections$);
          const a = await transport.connect(listener.address);
          const b = await accepted;
          await listener.close();
          return [a, b];
        },
      };
    },
    async teardown() {},
  });
});
