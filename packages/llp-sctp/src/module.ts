import 'reflect-metadata';
import { LLP_TRANSPORT, type LlpTransport } from '@rddp/llp';
import { ContainerModule } from 'inversify';
import type { SctpTransportOptions } from './options.js';
import { sctp } from './transport.js';

/** Inversify container module binding the SCTP transport under `LLP_TRANSPORT`. */
export function sctpModule(options: SctpTransportOptions = {}): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT).toConstantValue(sctp(options));
  });
}
