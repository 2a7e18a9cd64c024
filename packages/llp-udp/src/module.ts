import 'reflect-metadata';
import { LLP_LOGGER, LLP_TRANSPORT, LLP_TRANSPORT_OPTIONS, type LlpLogger, type LlpTransport } from '@rddp/llp';
import { ContainerModule } from 'inversify';
import type { UdpOptions } from './options.js';
import { udp } from './transport.js';

/**
 * Inversify container module binding the UDP transport under `LLP_TRANSPORT`. Options bound under
 * `LLP_TRANSPORT_OPTIONS` and a logger under `LLP_LOGGER` are used when present; `options` given here win.
 */
export function udpModule(options: UdpOptions = {}): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT)
      .toDynamicValue((ctx) => {
        const bound = ctx.get<UdpOptions>(LLP_TRANSPORT_OPTIONS, { optional: true }) ?? {};
        const logger = options.logger ?? bound.logger ?? ctx.get<LlpLogger>(LLP_LOGGER, { optional: true });
        return udp({ ...bound, ...options, ...(logger ? { logger } : {}) });
      })
      .inSingletonScope();
  });
}
