import 'reflect-metadata';
import { LLP_TRANSPORT, type LlpTransport } from '@rddp/llp';
import { ContainerModule } from 'inversify';
import { type LoopbackOptions, loopback } from './transport.js';

/** Inversify container module binding the loopback transport under `LLP_TRANSPORT`. */
export function loopbackModule(options: LoopbackOptions = {}): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT).toConstantValue(loopback(options));
  });
}
