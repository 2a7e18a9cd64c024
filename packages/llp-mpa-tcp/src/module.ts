import 'reflect-metadata';
import { containerTransportOptions, LLP_TRANSPORT, type LlpTransport } from '@rddp/llp';
import { ContainerModule } from 'inversify';
import type { MpaTcpOptions } from './options.js';
import { mpaTcp } from './transport.js';

/**
 * Inversify container module binding the MPA/TCP transport under `LLP_TRANSPORT` (one per container).
 * Options bound under `LLP_TRANSPORT_OPTIONS` and a logger under `LLP_LOGGER` are used when present;
 * `options` given here win over them.
 */
export function mpaTcpModule(options: MpaTcpOptions = {}): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT)
      .toDynamicValue((ctx) => mpaTcp(containerTransportOptions(ctx, options)))
      .inSingletonScope();
  });
}
