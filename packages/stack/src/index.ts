/**
 * @rddp/stack — composition of rddp stacks with inversify 8.
 *
 * An LLP plugin contributes a container module that binds `LLP_TRANSPORT`; `createStack(module)` loads it
 * and resolves the transport (and, bound on top by later layers, DDP/RDMAP/verbs factories) in one call:
 *
 *   const stack = createStack(loopbackModule());
 *   const listener = await stack.transport.listen({ port: 0 });
 */
import 'reflect-metadata';
import {
  CapabilityError,
  isLlpTransport,
  LLP_LOGGER,
  LLP_TRANSPORT,
  type LlpLogger,
  type LlpTransport,
  rfc5041Shortfalls,
  silentLogger,
} from '@rddp/llp';
import { Container, ContainerModule } from 'inversify';

export { LLP_LOGGER, LLP_TRANSPORT } from '@rddp/llp';

/** A composed stack: the container and what it resolved. */
export interface Stack {
  readonly container: Container;
  readonly transport: LlpTransport;
  readonly logger: LlpLogger;
  /** Resolve anything else bound in the container (later layers bind their own tokens). */
  get<T>(token: symbol): T;
}

export interface StackOptions {
  /** Require the LLP to meet RFC 5041 §3: `true` checks reliable, ordered, boundaries; `{ requireDigest: true }` adds the digest. Default: off. */
  readonly requireRfc5041?: boolean | { readonly requireDigest?: boolean };
  readonly logger?: LlpLogger;
  /** Extra modules (DDP/RDMAP options, user services) loaded after the LLP module. */
  readonly modules?: readonly ContainerModule[];
}

/** Wraps a ready-made transport object as a container module (for plugins that only export a factory). */
export function transportModule(transport: LlpTransport): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT).toConstantValue(transport);
  });
}

/** Composes a stack on the LLP that `llp` binds (a container module or a transport object). One call per transport. */
export function createStack(llp: ContainerModule | LlpTransport, options: StackOptions = {}): Stack {
  const container = new Container();
  const module = llp instanceof ContainerModule ? llp : transportModule(llp);
  container.load(module);
  if (!container.isBound(LLP_LOGGER))
    container.bind<LlpLogger>(LLP_LOGGER).toConstantValue(options.logger ?? silentLogger);
  for (const m of options.modules ?? []) container.load(m);
  if (!container.isBound(LLP_TRANSPORT)) throw new CapabilityError('the LLP module bound nothing under LLP_TRANSPORT');
  const transport = container.get<LlpTransport>(LLP_TRANSPORT);
  if (!isLlpTransport(transport)) throw new CapabilityError('LLP_TRANSPORT is not an LlpTransport');
  if (options.requireRfc5041) {
    const requireDigest = typeof options.requireRfc5041 === 'object' ? options.requireRfc5041.requireDigest : false;
    const shortfalls = rfc5041Shortfalls(transport.capabilities, { requireDigest: requireDigest ?? false });
    if (shortfalls.length > 0)
      throw new CapabilityError(`LLP '${transport.name}' cannot carry DDP: ${shortfalls.join('; ')}`);
  }
  return {
    container,
    transport,
    logger: container.get<LlpLogger>(LLP_LOGGER),
    get: <T>(token: symbol) => container.get<T>(token),
  };
}
