/** A host name that does not resolve is its own error (`ERR_LLP_ADDRESS_RESOLUTION`), not a lost connection. */
import { LlpAddressResolutionError } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { mpaTcp } from '../src/index.js';

// RFC 6761 §6.4: ".invalid" never resolves.
const HOST = 'no-such-host.invalid';

describe('name resolution failures', () => {
  it('connect to an unresolvable host rejects with LlpAddressResolutionError', async () => {
    const e = await mpaTcp()
      .connect({ host: HOST, port: 4711 })
      .then(
        () => undefined,
        (x: unknown) => x,
      );
    expect(e).toBeInstanceOf(LlpAddressResolutionError);
    expect(e).toMatchObject({ code: 'ERR_LLP_ADDRESS_RESOLUTION' });
    expect((e as Error).message).toContain(HOST);
  });

  it('listen on an unresolvable host rejects with LlpAddressResolutionError', async () => {
    await expect(mpaTcp().listen({ host: HOST, port: 0 })).rejects.toMatchObject({
      code: 'ERR_LLP_ADDRESS_RESOLUTION',
    });
  });
});
