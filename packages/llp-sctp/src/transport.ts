/**
 * `sctp(options)`: the LLP transport of DDP over SCTP (RFC 5043), on the npm `sctp` package.
 */
import {
  BaseLlpTransport,
  bindError,
  ConnectionRefusedError,
  checkConnectPort,
  checkPrivateData,
  checkStreamCount,
  InvalidArgumentError,
  isLlpError,
  LlpAbortError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpConnectOptions,
  type LlpError,
  type LlpListener,
  type LlpListenOptions,
  LlpProtocolError,
  LlpTimeoutError,
  ResourceLimitError,
  sourceKey,
  throwIfAborted,
} from '@rddp/llp';
import { connectionTuning, SctpConnection } from './connection.js';
import { chooseSctpCrc32cBackend } from './crc32c.js';
import { SctpListener } from './listener.js';
import {
  grantedRecvBuffer,
  pathPacketSize,
  type ResolvedOptions,
  recvBufferRequest,
  resolveOptions,
  type SctpTransportOptions,
  windowFor,
} from './options.js';
import { openRawWire, openUdpWire, type PeerAddress, PeerPath, type Wire, type WireOptions } from './paths.js';
import { rtoProtocolParameters } from './pkg.js';

let nextId = 0;

/** What an SCTP association promises DDP (RFC 5043): reliable, ordered messages, CRC32c on every packet. */
function sctpCapabilities(o: ResolvedOptions): LlpCapabilities {
  return {
    reliable: true,
    ordered: true,
    preservesMessageBoundaries: true,
    strongDigest: true, // CRC32c on every packet, verified in paths.ts (RFC 4960 §6.8)
    maxStreams: o.maxStreams,
    maxPrivateData: o.maxPrivateData,
  };
}

export class SctpTransport extends BaseLlpTransport<ResolvedOptions> {
  readonly name = 'sctp';

  constructor(options: SctpTransportOptions = {}) {
    super(resolveOptions(options), sctpCapabilities);
    // RDDP_CRC32C is checked where the transport is made: a pin that cannot be honoured fails here.
    chooseSctpCrc32cBackend();
  }

  async connect(address: LlpAddress, options: LlpConnectOptions = {}): Promise<SctpConnection> {
    throwIfAborted(options.signal);
    const o = this.options;
    const streams = checkStreamCount(options.streams ?? 1, o.maxStreams);
    const privateData = checkPrivateData(options.privateData, o.maxPrivateData);
    const peer: PeerAddress = { host: address.host ?? '127.0.0.1', port: checkConnectPort(address.port) };
    // The receive window (what the peer may make this side hold) comes out of the memory budget.
    const reservation = o.memoryBudget.reserve(o.receiveWindow, sourceKey(peer.host, o.ipv6SourcePrefix));
    if (reservation === undefined)
      throw new ResourceLimitError(
        `memory budget ${o.memoryBudget.limit} octets, ${o.memoryBudget.used} held`,
        `an association with ${peer.host}:${peer.port} (receive window ${o.receiveWindow})`,
      );

    let conn: SctpConnection | undefined;
    let early: LlpError | undefined;
    const failWith = (e: LlpError) => (conn ? conn.fail(e) : (early ??= e));
    let path: PeerPath | undefined;
    const onAbort = () => failWith(new LlpAbortError('connect was aborted', { cause: options.signal?.reason }));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let wire: Wire;
    try {
      wire = await this.openWire({
        host: o.localHost ?? (peer.host.includes(':') ? '::' : '0.0.0.0'),
        port: 0,
        connectTo: peer,
        onPacket: (packet) => path?.socket.receive(packet),
        onError: (e) => {
          if (e.code === 'ECONNREFUSED')
            failWith(
              new ConnectionRefusedError(`nothing listens at ${peer.host}:${peer.port} (ICMP port unreachable)`),
            );
        },
      });
    } catch (e) {
      options.signal?.removeEventListener('abort', onAbort);
      reservation.release();
      throw e;
    }
    const aRwnd = windowFor(o, wire.recvBufferSize);
    const pmtu = pathPacketSize(o, peer.host, wire.localHost);
    try {
      path = new PeerPath(
        (packet, cb) => wire.send(packet, peer, cb),
        peer,
        { localPort: wire.localPort, streams, aRwnd, idata: o.interleaving, scheduler: o.scheduler },
        {
          refused: (e) => failWith(e),
          packageError: (e) =>
            conn?.violation(`the sctp package failed on a packet: ${(e as Error)?.message ?? String(e)}`),
          violation: (text) => (conn ? conn.violation(text) : failWith(new LlpProtocolError(text))),
        },
      );
    } catch (e) {
      wire.close();
      options.signal?.removeEventListener('abort', onAbort);
      reservation.release();
      throw e;
    }
    const livePath = path;
    livePath.socket.tap = o.trace;
    // The RTO parameters come with ASSOCIATE so that the INIT is timed with them too.
    const association = livePath.endpoint.ASSOCIATE({
      remotePort: peer.port,
      OS: streams,
      MIS: streams,
      ...rtoProtocolParameters(o.rto),
    });
    conn = new SctpConnection({
      id: `sctp-i${++nextId}`,
      role: 'initiator',
      association,
      capabilities: this.capabilities,
      localAddress: { host: wire.localHost, port: wire.localPort },
      remoteAddress: { host: peer.host, port: peer.port },
      tuning: connectionTuning(o, pmtu),
      logger: o.logger,
      streams,
      onEnded: () => {
        livePath.destroy();
        wire.close();
        reservation.release();
      },
    });
    const live = conn;
    if (early) live.fail(early);
    const timeoutMs = options.timeoutMs ?? o.handshakeTimeoutMs;
    const timer = setTimeout(
      () => live.fail(new LlpTimeoutError(`SCTP DDP setup did not finish within ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
    try {
      await live.associated();
      await live.initiate(privateData);
      return live;
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  async listen(address: LlpAddress, options: LlpListenOptions = {}): Promise<LlpListener> {
    throwIfAborted(options.signal);
    const port = address.port ?? 0;
    if (!Number.isInteger(port) || port < 0 || port > 65_535) {
      throw new InvalidArgumentError(`listen needs a port in [0, 65535], got ${port}`);
    }
    let listener: SctpListener | undefined;
    const wire = await this.openWire({
      host: address.host ?? '0.0.0.0',
      port,
      onPacket: (packet, peer) => listener?.onPacket(packet, peer),
      onError: () => {
        // An unconnected UDP socket reports nothing actionable; peers time out on their own.
      },
    });
    listener = new SctpListener(
      wire,
      this.options,
      this.capabilities,
      windowFor(this.options, wire.recvBufferSize),
      options,
    );
    return listener;
  }

  private async openWire(w: Omit<WireOptions, 'recvBufferSize'>): Promise<Wire> {
    const request = recvBufferRequest(this.options);
    try {
      if (this.options.encapsulation === 'raw')
        return openRawWire({ ...w, recvBufferSize: grantedRecvBuffer(request) });
      return await openUdpWire({ ...w, recvBufferSize: request });
    } catch (e) {
      if (isLlpError(e)) throw e;
      throw bindError(e as NodeJS.ErrnoException, `${w.host}:${w.port}`);
    }
  }
}

/** The SCTP LLP transport (name `sctp`): DDP over SCTP per RFC 5043, UDP-encapsulated by default. */
export function sctp(options: SctpTransportOptions = {}): SctpTransport {
  return new SctpTransport(options);
}
