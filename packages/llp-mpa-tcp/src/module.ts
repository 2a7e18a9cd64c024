import 'reflect-metadata';
import { LLP_LOGGER, LLP_TRANSPORT, LLP_TRANSPORT_OPTIONS, type LlpLogger, type LlpTransport } from '@rddp/llp';
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
      .toDynamicValue((ctx) => {
        const bound = ctx.get<MpaTcpOptions>(LLP_TRANSPORT_OPTIONS, { optional: true }) ?? {};
        const logger = options.logger ?? bound.logger ?? ctx.get<LlpLogger>(LLP_LOGGER, { optional: true });
        return mpaTcp({ ...bound, ...options, ...(logger ? { logger } : {}) });
      })
      .inSingletonScope();
  });
}
