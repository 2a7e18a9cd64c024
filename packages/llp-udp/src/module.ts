import 'reflect-metadata';
import { containerTransportOptions, LLP_TRANSPORT, type LlpTransport } from '@rddp/llp';
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
      .toDynamicValue((ctx) => udp(containerTransportOptions(ctx, options)))
      .inSingletonScope();
  });
}
