/** One place composes an RDMAP Stream's options, with one precedence (issue 36). */
import type { LlpCapabilities, LlpSetupInfo } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { composeRdmapOptions, type RdmapConnectionFacts, type RdmapStagTable } from '../src/index.js';

const stags = {} as RdmapStagTable;
function connection(setup: Partial<LlpSetupInfo> = {}): RdmapConnectionFacts {
  return {
    role: 'responder',
    capabilities: { reliable: true, ordered: true, multiStream: false } as unknown as LlpCapabilities,
    setup: { localPrivateData: new Uint8Array(0), remotePrivateData: new Uint8Array(0), negotiated: {}, ...setup },
  };
}

describe('composeRdmapOptions: defaults < the connection < the caller < what the setup negotiated', () => {
  it('the connection gives the role and what its LLP promises; the caller overrides both', () => {
    const base = composeRdmapOptions({ pdId: 1, stags }, connection());
    expect(base.role).toBe('responder');
    expect(base.llpCapabilities).toEqual({ reliable: true, ordered: true });
    const o = composeRdmapOptions({ pdId: 1, stags }, connection(), {
      role: 'initiator',
      llpCapabilities: { reliable: true, ordered: false },
    });
    expect(o.role).toBe('initiator');
    expect(o.llpCapabilities).toEqual({ reliable: true, ordered: false });
  });

  it('RFC 6581: IRD/ORD announced at setup win over the caller and the defaults; startup MSNs are taken', () => {
    const startupMessages = { sent: [0], received: [] };
    const o = composeRdmapOptions(
      { pdId: 1, stags, ird: 8, ord: 8 },
      connection({ readLimits: { ird: 3, ord: 2 }, startupMessages }),
      {
        ird: 16,
        ord: 16,
      },
    );
    expect([o.ird, o.ord]).toEqual([3, 2]);
    expect(o.startupMessages).toBe(startupMessages);
  });

  it('without a negotiation the caller wins over the defaults; an option given as undefined overrides nothing', () => {
    const o = composeRdmapOptions({ pdId: 1, stags, ird: 8, ord: 8, profile: 'ietf' }, connection(), {
      ird: 4,
      ord: undefined,
      profile: undefined,
      pdId: 7,
    });
    expect([o.ird, o.ord, o.profile, o.pdId]).toEqual([4, 8, 'ietf', 7]);
  });

  it('on a bare LLP stream (no connection) only defaults and the caller count', () => {
    const o = composeRdmapOptions({ pdId: 1, stags, role: 'initiator' }, undefined, { ird: 2 });
    expect(o.role).toBe('initiator');
    expect(o.llpCapabilities).toBeUndefined();
    expect(o.ird).toBe(2);
  });
});
