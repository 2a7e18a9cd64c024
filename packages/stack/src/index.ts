/**
 * @rddp/stack — the composition root of rddp, with inversify 8.
 *
 * An LLP plugin contributes a container module that binds `LLP_TRANSPORT`; `createStack(module, options)`
 * loads it, binds the DDP, RDMAP and verbs factories, the defaults and the event subject on top (unless a
 * module bound its own), and returns a Stack that builds every layer through them:
 *
 *   const stack = createStack(mpaTcpModule(), { profile: 'ietf' });
 *   const [client, server] = await stack.pair();
 *   const rdmap = stack.rdmapStream(client, { stags });       // RFC 5040 on the negotiated IRD/ORD
 *
 * Swapping the transport is binding another plugin's module (`loopbackModule()`, `sctpModule()`, ...).
 */
import 'reflect-metadata';
import type { DdpProfile, DdpStreamApi } from '@rddp/ddp';
import {
  CapabilityError,
  isLlpTransport,
  LLP_LOGGER,
  LLP_TRANSPORT,
  type LlpAddress,
  type LlpConnection,
  type LlpConnectOptions,
  type LlpListener,
  type LlpListenOptions,
  type LlpLogger,
  type LlpStream,
  type LlpTransport,
  rfc5041Shortfalls,
  silentLogger,
} from '@rddp/llp';
import type { RdmapStream, RdmapStreamOptions } from '@rddp/rdmap';
import type { Device, DeviceOptions, ProtectionDomain, QpConnectOptions, QpInit, QueuePair } from '@rddp/verbs';
import { Container, ContainerModule } from 'inversify';

export { Container, ContainerModule } from 'inversify';

import { firstValueFrom, type Observable, Subject } from 'rxjs';
import {
  buildDdpStream,
  buildRdmapStream,
  type DdpStreamRequest,
  defaultDdpStreamFactory,
  defaultDeviceFactory,
  defaultRdmapStreamFactory,
  type RdmapStreamRequest,
} from './compose.js';
import { isConnection, profileOf } from './target.js';
import {
  DDP_STREAM_FACTORY,
  type DdpStreamFactory,
  DEVICE_FACTORY,
  type DeviceFactory,
  RDMAP_STREAM_FACTORY,
  type RdmapStreamFactory,
  STACK_EVENTS,
  STACK_OPTIONS,
  type StackDefaults,
  type StackEvent,
} from './tokens.js';

export { LLP_LOGGER, LLP_TRANSPORT } from '@rddp/llp';
export * from './compose.js';
export * from './errors.js';
export * from './tokens.js';

/** A queue pair's attributes; the completion queues default to new ones on the protection domain's device. */
export type QueuePairRequest = Omit<QpInit, 'sendCq' | 'recvCq'> & Partial<Pick<QpInit, 'sendCq' | 'recvCq'>>;

/** A composed stack: the container, the transport it resolved, and the factories of the layers above. */
export interface Stack {
  readonly container: Container;
  readonly transport: LlpTransport;
  readonly logger: LlpLogger;
  /** The defaults bound under `STACK_OPTIONS`. */
  readonly options: StackDefaults;
  /** What the stack built: connections, DDP and RDMAP streams, devices. */
  readonly events$: Observable<StackEvent>;
  /** Resolve anything else bound in the container. */
  get<T>(token: symbol): T;
  /** The DDP/RDMAP profile a connection runs (`options.profile`). */
  profileOf(connection: LlpConnection): DdpProfile;
  /** `transport.connect` with the stack's `connectParams` (the call's `params` win). */
  connect(address: LlpAddress, options?: LlpConnectOptions): Promise<LlpConnection>;
  /** `transport.listen` with the stack's `listenParams`; every accepted connection is an event. */
  listen(address: LlpAddress, options?: LlpListenOptions): Promise<LlpListener>;
  /** Listens on `address` (default 127.0.0.1, any port), connects to it, and returns both ends. */
  pair(
    address?: LlpAddress,
    options?: LlpConnectOptions,
  ): Promise<[initiator: LlpConnection, responder: LlpConnection]>;
  /** A DDP Stream (RFC 5041) from the `DDP_STREAM_FACTORY` bound now. */
  ddpStream(llp: LlpConnection | LlpStream, request: DdpStreamRequest): DdpStreamApi;
  /**
   * An RDMAP Stream (RFC 5040) from the `RDMAP_STREAM_FACTORY` bound now, its DDP Stream from the
   * `DDP_STREAM_FACTORY`. On a connection: its role and capabilities, and IRD/ORD and the RTR MSNs as
   * the LLP negotiated them (RFC 6581, `rdmapOptionsFromSetup`), which win over the request's.
   */
  rdmapStream(llp: LlpConnection | LlpStream, request: RdmapStreamRequest): RdmapStream;
  /** A verbs Device (one per host) from the `DEVICE_FACTORY` bound now. */
  device(options?: DeviceOptions): Device;
  /** A queue pair on `pd` (profile and IRD/ORD from the stack's defaults) connected over `llp` (RFC 5040 §6.1). */
  queuePair(
    pd: ProtectionDomain,
    llp: LlpConnection | LlpStream,
    init?: QueuePairRequest,
    connect?: QpConnectOptions,
  ): QueuePair;
}

export interface StackOptions extends StackDefaults {
  /** Require the LLP to meet RFC 5041 §3: `true` checks reliable, ordered, boundaries; `{ requireDigest: true }` adds the digest. Default: off. */
  readonly requireRfc5041?: boolean | { readonly requireDigest?: boolean };
  readonly logger?: LlpLogger;
  /**
   * User modules, loaded after the LLP module: a binding of `DDP_STREAM_FACTORY`, `RDMAP_STREAM_FACTORY`,
   * `DEVICE_FACTORY`, `STACK_OPTIONS` or `STACK_EVENTS` here replaces the stack's own.
   */
  readonly modules?: readonly ContainerModule[];
}

/** Wraps a ready-made transport object as a container module (for plugins that only export a factory). */
export function transportModule(transport: LlpTransport): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<LlpTransport>(LLP_TRANSPORT).toConstantValue(transport);
  });
}

function defaultsOf(o: StackOptions): StackDefaults {
  const { requireRfc5041: _r, logger: _l, modules: _m, ...defaults } = o;
  return defaults;
}

/**
 * Composes a stack on the LLP that `llp` binds (a container module or a transport object). One call per transport.
 *
 * @example Two endpoints on the loopback LLP: an RDMA Write through verbs queue pairs (RFC 5040 §5.1)
 * ```ts
 * import { loopbackModule } from '@rddp/llp-loopback';
 * import { createStack } from '@rddp/stack';
 * import { Access } from '@rddp/verbs';
 *
 * const stack = createStack(loopbackModule()); // or mpaTcpModule(), sctpModule(), udpModule(), a plugin's module
 * const [clientLink, serverLink] = await stack.pair();
 * const [client, server] = [stack.device().allocPd(), stack.device().allocPd()];
 * const qp = stack.queuePair(client, clientLink); // profile and IRD/ORD from the stack's defaults
 * stack.queuePair(server, serverLink);
 * const target = server.registerMr(new Uint8Array(16), Access.LocalWrite | Access.RemoteWrite);
 * await qp.write(client.registerMr(new TextEncoder().encode('hello'), 0).sge(), target.remote());
 * await qp.close();
 * ```
 */
export function createStack(llp: ContainerModule | LlpTransport, options: StackOptions = {}): Stack {
  const container = new Container();
  const module = llp instanceof ContainerModule ? llp : transportModule(llp);
  container.load(module);
  if (!container.isBound(LLP_LOGGER))
    container.bind<LlpLogger>(LLP_LOGGER).toConstantValue(options.logger ?? silentLogger);
  for (const m of options.modules ?? []) container.load(m);
  const bindDefault = <T>(token: symbol, value: T) => {
    if (!container.isBound(token)) container.bind<T>(token).toConstantValue(value);
  };
  bindDefault<StackDefaults>(STACK_OPTIONS, defaultsOf(options));
  bindDefault<Subject<StackEvent>>(STACK_EVENTS, new Subject<StackEvent>());
  bindDefault<DdpStreamFactory>(DDP_STREAM_FACTORY, defaultDdpStreamFactory);
  bindDefault<RdmapStreamFactory>(RDMAP_STREAM_FACTORY, defaultRdmapStreamFactory);
  bindDefault<DeviceFactory>(DEVICE_FACTORY, defaultDeviceFactory);

  if (!container.isBound(LLP_TRANSPORT)) throw new CapabilityError('the LLP module bound nothing under LLP_TRANSPORT');
  const transport = container.get<LlpTransport>(LLP_TRANSPORT);
  if (!isLlpTransport(transport)) throw new CapabilityError('LLP_TRANSPORT is not an LlpTransport');
  if (options.requireRfc5041) {
    const requireDigest = typeof options.requireRfc5041 === 'object' ? options.requireRfc5041.requireDigest : false;
    const shortfalls = rfc5041Shortfalls(transport.capabilities, { requireDigest: requireDigest ?? false });
    if (shortfalls.length > 0)
      throw new CapabilityError(`LLP '${transport.name}' cannot carry DDP: ${shortfalls.join('; ')}`);
  }
  const events = container.get<Subject<StackEvent>>(STACK_EVENTS);
  // Resolved on every use: a later `container.rebind` takes effect at once.
  const defaults = () => container.get<StackDefaults>(STACK_OPTIONS);
  const emit = <E extends StackEvent>(e: E): E => {
    events.next(e);
    return e;
  };

  const stack: Stack = {
    container,
    transport,
    logger: container.get<LlpLogger>(LLP_LOGGER),
    get options() {
      return defaults();
    },
    events$: events.asObservable(),
    get: <T>(token: symbol) => container.get<T>(token),
    profileOf: (connection) => profileOf(defaults(), connection),
    async connect(address, o = {}) {
      const params = defaults().connectParams;
      const connection = await transport.connect(address, { ...(params ? { params } : {}), ...o });
      return emit({ type: 'connection', connection }).connection;
    },
    async listen(address, o = {}) {
      const params = defaults().listenParams;
      const listener = await transport.listen(address, { ...(params ? { params } : {}), ...o });
      listener.connections$.subscribe((connection) => emit({ type: 'connection', connection }));
      return listener;
    },
    async pair(address = { host: '127.0.0.1', port: 0 }, o = {}) {
      const listener = await stack.listen(address);
      try {
        const accepted = firstValueFrom(listener.connections$);
        const initiator = await stack.connect(listener.address, o);
        return [initiator, await accepted];
      } finally {
        await listener.close();
      }
    },
    ddpStream(llp, request) {
      const factory = container.get<DdpStreamFactory>(DDP_STREAM_FACTORY);
      return emit({ type: 'ddp-stream', stream: buildDdpStream(llp, request, defaults(), factory) }).stream;
    },
    rdmapStream(llp, request) {
      const stream = buildRdmapStream(
        llp,
        request,
        defaults(),
        container.get<RdmapStreamFactory>(RDMAP_STREAM_FACTORY),
        container.get<DdpStreamFactory>(DDP_STREAM_FACTORY),
      );
      return emit({ type: 'rdmap-stream', stream, ...(isConnection(llp) ? { connection: llp } : {}) }).stream;
    },
    device(o) {
      return emit({ type: 'device', device: container.get<DeviceFactory>(DEVICE_FACTORY)(o) }).device;
    },
    queuePair(pd, llp, init = {}, connect = {}) {
      const d = defaults();
      const qp = pd.createQp({
        profile: profileOf(d, isConnection(llp) ? llp : undefined),
        ...(d.ird !== undefined ? { ird: d.ird } : {}),
        ...(d.ord !== undefined ? { ord: d.ord } : {}),
        ...init,
        sendCq: init.sendCq ?? pd.device.createCq(),
        recvCq: init.recvCq ?? pd.device.createCq(),
      });
      // The queue pair's RDMAP and DDP Streams come from the factories bound now, like rdmapStream's.
      const rdmapFactory = (stream: LlpStream, o: RdmapStreamOptions): RdmapStream => {
        const built = container.get<RdmapStreamFactory>(RDMAP_STREAM_FACTORY)(stream, {
          createDdp: container.get<DdpStreamFactory>(DDP_STREAM_FACTORY),
          ...o,
        });
        return emit({ type: 'rdmap-stream', stream: built, ...(isConnection(llp) ? { connection: llp } : {}) }).stream;
      };
      qp.connect(llp, { rdmapFactory, ...connect });
      return qp;
    },
  };
  return stack;
}
