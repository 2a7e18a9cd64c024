/**
 * Where an RDMAP Stream's options for an LLP connection are composed — one place, one precedence — so a
 * queue pair (verbs) and the stack's composition root build the same stream from the same inputs.
 */
import type { LlpConnection, LlpSetupInfo } from '@rddp/llp';
import type { RdmapStreamOptions } from './stream.js';

/**
 * RDMAP options an LLP connection's setup decides (RFC 6581): IRD/ORD as announced, and the MSNs its RTR
 * used. Spread them over the application's own: `{ ird: 8, ord: 8, ...rdmapOptionsFromSetup(c.setup) }`.
 */
export function rdmapOptionsFromSetup(
  setup: LlpSetupInfo,
): Pick<RdmapStreamOptions, 'ird' | 'ord' | 'startupMessages'> {
  return {
    ...(setup.readLimits ? { ird: setup.readLimits.ird, ord: setup.readLimits.ord } : {}),
    ...(setup.startupMessages ? { startupMessages: setup.startupMessages } : {}),
  };
}

/** What of an LLP connection RDMAP's options are composed from. */
export type RdmapConnectionFacts = Pick<LlpConnection, 'role' | 'capabilities' | 'setup'>;

/** `o` without the keys whose value is undefined (an option left out never overrides one set below it). */
function given<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The options of an RDMAP Stream on `connection`, later layers winning: the builder's `defaults`; what the
 * connection is (its role; what its LLP promises, RFC 5040 §3.1); the `caller`'s options; then what the
 * connection's setup negotiated (RFC 6581: the IRD and ORD announced are the ones enforced, and the
 * startup messages' MSNs are taken). Options set to `undefined` are as if not given; `pdId` and `stags`
 * must come from one of the layers.
 */
export function composeRdmapOptions(
  defaults: Partial<RdmapStreamOptions>,
  connection: RdmapConnectionFacts | undefined,
  caller: Partial<RdmapStreamOptions> = {},
): RdmapStreamOptions {
  return {
    ...given(defaults),
    ...(connection
      ? {
          role: connection.role,
          llpCapabilities: { reliable: connection.capabilities.reliable, ordered: connection.capabilities.ordered },
        }
      : {}),
    ...given(caller),
    ...(connection ? rdmapOptionsFromSetup(connection.setup) : {}),
  } as RdmapStreamOptions;
}
