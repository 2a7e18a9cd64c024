import {
  AddressInUseError,
  BaseLlpListener,
  ConnectionRefusedError,
  ConnectionRejectedError,
  checkPrivateData,
  checkStreamCount,
  type LlpAddress,
  type LlpCapabilities,
  type LlpConnection,
  type LlpConnectOptions,
  type LlpListener,
  type LlpListenOptions,
  LlpTimeoutError,
  type LlpTransport,
  throwIfAborted,
  withAbort,
} from '@rddp/llp';
import { LoopbackConnection } from './connection.js';
import type { LoopbackFaults } from './faults.js';
import {
  defaultNetwork,
  type LoopbackConnectAnswer,
  type LoopbackListenerEntry,
  type LoopbackNetwork,
} from './network.js';
import { LoopbackStream } from './stream.js';

export interface LoopbackOptions {
  /** MULPDU of every stream (default 65 512 = 64 KiB less MPA-like framing). */
  readonly mulpdu?: number;
  /** LLP streams per connection (default 1; a connect may ask for more with `streams`). */
  readonly streams?: number;
  /** Octets one side may have in flight before `send()` returns false (default 1 MiB). */
  readonly highWaterMark?: number;
  readonly faults?: LoopbackFaults;
  /** Listeners are looked up in this network (default: one per process). */
  readonly network?: LoopbackNetwork;
}

export const LOOPBACK_DEFAULT_MULPDU = 65_512;
export const LOOPBACK_MAX_PRIVATE_DATA = 512;

/** What a loopback connection with these faults honestly promises (DDPP core draft §3 classes). */
export function loopbackCapabilities(options: LoopbackOptions = {}): LlpCapabilities {
  const f = options.faults ?? {};
  return {
    reliable: !(f.drop || f.duplicate),
    ordered: !f.reorder,
    preservesMessageBoundaries: true,
    strongDigest: false,
    maxStreams: 1024,
    maxPrivateData: LOOPBACK_MAX_PRIVATE_DATA,
  };
}

/** A listener registered in its network under `key`; connect requests reach it through `request`. */
class LoopbackListener extends BaseLlpListener implements LoopbackListenerEntry {
  constructor(
    readonly address: LlpAddress,
    private readonly network: LoopbackNetwork,
    private readonly key: string,
    private readonly options: LlpListenOptions,
  ) {
    super();
    network.listeners.set(key, this);
    this.closeOnAbort(options);
  }

  protected stopListening(): void {
    this.network.listeners.delete(this.key);
  }

  /** The ULP's decision on a connect request from `from`; `deliver` hands it the responder's end. */
  async request(from: LlpAddress, opts: LlpConnectOptions): Promise<LoopbackConnectAnswer> {
    const decide = this.options.onConnectRequest ?? (() => ({ accept: true }) as const);
    const decision = await decide({
      remoteAddress: from,
      privateData: opts.privateData ?? new Uint8Array(0),
      params: opts.params ?? {},
    });
    return { decision, deliver: (c) => this.accept(c) };
  }
}

/** Builds the two ends of a connection: stream i of one end is the peer of stream i of the other. */
function makePair(
  options: LoopbackOptions,
  count: number,
  initiatorAddress: LlpAddress,
  responderAddress: LlpAddress,
  initiatorPd: Uint8Array,
  responderPd: Uint8Array,
  negotiated: Record<string, unknown>,
): [LoopbackConnection, LoopbackConnection] {
  const mk = (id: number) =>
    new LoopbackStream({
      id,
      mulpdu: options.mulpdu ?? LOOPBACK_DEFAULT_MULPDU,
      highWaterMark: options.highWaterMark ?? 1 << 20,
      faults: options.faults ?? {},
    });
  const a: LoopbackStream[] = [];
  const b: LoopbackStream[] = [];
  for (let i = 0; i < count; i++) {
    const x = mk(i);
    const y = mk(i);
    x.peer = y;
    y.peer = x;
    a.push(x);
    b.push(y);
  }
  const caps = { ...loopbackCapabilities(options), maxStreams: count };
  return [
    new LoopbackConnection('initiator', caps, a, initiatorAddress, responderAddress, {
      localPrivateData: initiatorPd,
      remotePrivateData: responderPd,
      negotiated,
    }),
    new LoopbackConnection('responder', caps, b, responderAddress, initiatorAddress, {
      localPrivateData: responderPd,
      remotePrivateData: initiatorPd,
      negotiated,
    }),
  ];
}

class LoopbackTransport implements LlpTransport {
  readonly name = 'loopback';
  readonly capabilities: LlpCapabilities;
  private readonly network: LoopbackNetwork;
  private clientPorts = 0;

  constructor(private readonly options: LoopbackOptions) {
    this.capabilities = loopbackCapabilities(options);
    this.network = options.network ?? defaultNetwork;
  }

  async connect(address: LlpAddress, options: LlpConnectOptions = {}): Promise<LlpConnection> {
    throwIfAborted(options.signal);
    const privateData = checkPrivateData(options.privateData, LOOPBACK_MAX_PRIVATE_DATA);
    const count = checkStreamCount(options.streams ?? this.options.streams ?? 1);
    const entry = this.network.listeners.get(this.network.key(address.host, address.port));
    if (!entry) throw new ConnectionRefusedError(`no loopback listener at ${address.host}:${address.port}`);
    const local: LlpAddress = { host: 'loopback-client', port: ++this.clientPorts };
    let timer: NodeJS.Timeout | undefined;
    const attempt = entry.request(local, { ...options, privateData, streams: count });
    const timed =
      options.timeoutMs === undefined
        ? attempt
        : Promise.race([
            attempt,
            new Promise<never>((_, reject) => {
              timer = setTimeout(
                () => reject(new LlpTimeoutError(`loopback connect timed out after ${options.timeoutMs} ms`)),
                options.timeoutMs,
              );
            }),
          ]);
    try {
      const { decision, deliver } = await withAbort(timed, options.signal);
      if (!decision.accept)
        throw new ConnectionRejectedError('the responder rejected the connection', decision.privateData);
      const responderPd = checkPrivateData(decision.privateData, LOOPBACK_MAX_PRIVATE_DATA);
      const [mine, theirs] = makePair(this.options, count, local, entry.address, privateData, responderPd, {
        ...(options.params ?? {}),
        ...(decision.params ?? {}),
      });
      deliver(theirs);
      return mine;
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  async listen(address: LlpAddress, options: LlpListenOptions = {}): Promise<LlpListener> {
    throwIfAborted(options.signal);
    const host = address.host ?? 'loopback';
    const port = address.port ? address.port : this.network.freePort(host);
    const key = this.network.key(host, port);
    if (this.network.listeners.has(key)) throw new AddressInUseError(`loopback ${key}`);
    return new LoopbackListener({ host, port }, this.network, key, options);
  }
}

/** The in-process LLP transport. Transports sharing a `network` (default: the process's) reach each other. */
export function loopback(options: LoopbackOptions = {}): LlpTransport {
  return new LoopbackTransport(options);
}

/** A connected pair of loopback connections, without a listener. */
export async function createLoopbackPair(
  options: LoopbackOptions & { privateData?: Uint8Array; responderPrivateData?: Uint8Array } = {},
): Promise<[initiator: LoopbackConnection, responder: LoopbackConnection]> {
  const count = options.streams ?? 1;
  return makePair(
    options,
    count,
    { host: 'loopback-client', port: 1 },
    { host: 'loopback-server', port: 1 },
    checkPrivateData(options.privateData, LOOPBACK_MAX_PRIVATE_DATA),
    checkPrivateData(options.responderPrivateData, LOOPBACK_MAX_PRIVATE_DATA),
    {},
  );
}
