/**
 * `mpaTcp()`: the MPA/TCP LLP transport (name 'mpa-tcp'). `connect` runs the Initiator side of MPA
 * startup (RFC 5044 §7.1.2 rules 1, 3–6; RFC 6581); `listen` the Responder side (listener.ts).
 */
import net from 'node:net';
import {
  AddressInUseError,
  abortError,
  BaseLlpTransport,
  ConnectionAbortedError,
  ConnectionRefusedError,
  ConnectionRejectedError,
  checkStreamCount,
  InvalidArgumentError,
  type LlpAddress,
  LlpAddressResolutionError,
  type LlpCapabilities,
  type LlpConnectOptions,
  type LlpError,
  type LlpListenOptions,
  LlpTimeoutError,
  ResourceLimitError,
  sourceKey,
  throwIfAborted,
} from '@rddp/llp';
import { applyCongestionControl } from './congestion.js';
import { MpaTcpConnection, mpaCapabilities } from './connection.js';
import { chooseCrc32cBackend } from './crc.js';
import { MpaErrorCode, MpaProtocolError } from './errors.js';
import { encodeFrame } from './frames.js';
import { FrameCollector } from './handshake.js';
import { MpaTcpListener } from './listener.js';
import { buildRequest, evaluateReply, resolveParams } from './negotiation.js';
import { type MpaTcpOptions, type ResolvedTransportOptions, resolveTransportOptions } from './options.js';
import { ARENA_INITIAL, arenaFootprint, dropChunk, SocketReceiver } from './socket-rx.js';

const EMPTY = new Uint8Array(0);
const noop = () => {};

/** getaddrinfo could not turn the host name into an address (no such name, or no answer). */
function isResolutionFailure(e: NodeJS.ErrnoException): boolean {
  return e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' || e.code === 'EAI_FAIL' || e.code === 'EAI_NONAME';
}

/**
 * What a connection made with the default parameters promises: CRC is on if this side asks for it
 * (RFC 5044 §7.1.1 C), and RFC 6581 data takes 4 of the 512 private data octets at Rev 2.
 */
function defaultCapabilities(o: ResolvedTransportOptions): LlpCapabilities {
  const p = o.initiator;
  return mpaCapabilities({ crc: p.revision === 0 || p.crc, enhanced: p.revision === 2 });
}

export class MpaTcpTransport extends BaseLlpTransport<ResolvedTransportOptions> {
  readonly name = 'mpa-tcp';

  constructor(options: MpaTcpOptions = {}) {
    super(resolveTransportOptions(options), defaultCapabilities);
    // RDDP_CRC32C is checked where the transport is made: a pin that cannot be honoured fails here.
    chooseCrc32cBackend();
  }

  /** Initiator: TCP connect, send the MPA Request, read the Reply, (peer-to-peer) send the RTR. */
  connect(address: LlpAddress, options: LlpConnectOptions = {}): Promise<MpaTcpConnection> {
    try {
      throwIfAborted(options.signal);
      if (options.streams !== undefined) checkStreamCount(options.streams);
      if (options.timeoutMs !== undefined && !(options.timeoutMs > 0))
        throw new InvalidArgumentError(`timeoutMs must be positive, got ${options.timeoutMs}`);
      const params = resolveParams(options.params, this.options.initiator);
      const localPd = options.privateData ?? EMPTY;
      const sent = buildRequest(params, localPd);
      return this.startup(address, options, sent, localPd);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private startup(
    address: LlpAddress,
    options: LlpConnectOptions,
    sent: ReturnType<typeof buildRequest>,
    localPd: Uint8Array,
  ): Promise<MpaTcpConnection> {
    const o = this.options;
    const timeoutMs = options.timeoutMs ?? o.handshakeTimeoutMs;
    const signal = options.signal;
    const host = address.host ?? 'localhost';
    const port = address.port ?? 0;
    // The first arena comes out of the memory budget, counted against the peer connected to.
    const reservation = o.memoryBudget.reserve(arenaFootprint(ARENA_INITIAL), sourceKey(host, o.ipv6SourcePrefix));
    if (reservation === undefined)
      return Promise.reject(
        new ResourceLimitError(
          `memory budget ${o.memoryBudget.limit} octets, ${o.memoryBudget.used} held`,
          `connection to ${host}:${port}`,
        ),
      );
    return new Promise<MpaTcpConnection>((resolve, reject) => {
      // Reads go into the connection's own arena (socket-rx.ts), not a fresh buffer per read.
      const rx = new SocketReceiver();
      const from = options.localAddress;
      const socket = net.connect({
        host,
        port,
        allowHalfOpen: true,
        noDelay: o.noDelay,
        onread: rx.onread,
        ...(from?.host !== undefined ? { localAddress: from.host } : {}),
        ...(from?.port !== undefined ? { localPort: from.port } : {}),
      });
      rx.bind(socket, reservation);
      socket.on('error', noop);
      const collector = new FrameCollector('reply');
      let settled = false;
      let phase = 'TCP connect';

      const cleanup = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        socket.off('connect', onConnect);
        if (rx.onChunk === onData) rx.onChunk = dropChunk; // the stream may have taken over
        socket.off('error', onError);
        socket.off('end', onGone);
        socket.off('close', onGone);
      };
      const fail = (error: LlpError) => {
        if (settled) return;
        cleanup();
        socket.destroy();
        o.logger.debug('mpa.connect.failed', { host, port, code: error.code, message: error.message });
        reject(error);
      };
      const timer = setTimeout(
        () =>
          fail(
            new LlpTimeoutError(`MPA startup with ${host}:${port} did not finish within ${timeoutMs} ms (${phase})`),
          ),
        timeoutMs,
      );
      const onAbort = () => fail(abortError(signal as AbortSignal));
      signal?.addEventListener('abort', onAbort, { once: true });

      const onConnect = () => {
        if (o.congestionControl !== undefined) {
          try {
            applyCongestionControl(socket, o.congestionControl);
          } catch (e) {
            fail(e as LlpError);
            return;
          }
        }
        phase = 'waiting for the MPA Reply';
        // RFC 5044 §7.1.2 rule 1: the Initiator sends a valid MPA Request.
        socket.write(encodeFrame(sent.frame));
        o.logger.debug('mpa.request.sent', { host, port, revision: sent.frame.revision });
      };
      const onError = (e: NodeJS.ErrnoException) => {
        if (e.code === 'ECONNREFUSED') fail(new ConnectionRefusedError(`nothing listens at ${host}:${port}`));
        else if (isResolutionFailure(e)) fail(new LlpAddressResolutionError(host, String(e.code), { cause: e }));
        else
          fail(
            new ConnectionAbortedError(`TCP connection to ${host}:${port} failed: ${e.code ?? e.message}`, {
              cause: e,
            }),
          );
      };
      const onGone = () =>
        fail(
          new ConnectionAbortedError(`the responder closed the connection before its MPA Reply (RFC 5044 §8 code 1)`),
        );
      const onData = (chunk: Buffer) => {
        const r = collector.feed(chunk);
        if (!r.done) return;
        if ('error' in r) return fail(r.error);
        const outcome = evaluateReply(sent, r.frame);
        if (outcome.kind === 'error') return fail(outcome.error);
        if (outcome.kind === 'rejected')
          return fail(
            new ConnectionRejectedError(
              'the responder rejected the connection (MPA Reply R=1)',
              outcome.ulpPrivateData,
            ),
          );
        if (r.rest.byteLength > 0 && !o.tolerateEarlyResponderFpdu)
          return fail(
            new MpaProtocolError(
              'early-data',
              MpaErrorCode.invalidRequestReply,
              `the responder sent ${r.rest.byteLength} octets after its MPA Reply, before the initiator's first FPDU (RFC 5044 §7.1.2)`,
            ),
          );
        cleanup();
        const n = outcome.negotiated;
        const conn = new MpaTcpConnection({
          role: 'initiator',
          socket,
          rx,
          negotiated: n,
          localPrivateData: localPd,
          remotePrivateData: outcome.ulpPrivateData,
          options: o,
        });
        o.logger.debug('mpa.established', { connection: conn.id, role: 'initiator', negotiated: n });
        // RFC 6581: in peer-to-peer mode the RTR is the Initiator's first FPDU.
        if (n.rtr !== false) conn.stream.sendRtr(n.rtr);
        // tolerateEarlyResponderFpdu: octets behind the Reply are the Responder's first FPDU(s).
        conn.stream.receiveEarly(r.rest);
        resolve(conn);
      };
      socket.on('connect', onConnect);
      rx.onChunk = onData;
      socket.on('error', onError);
      socket.on('end', onGone);
      socket.on('close', onGone);
    });
  }

  /** Responder: listen for TCP connections and run MPA startup on each. */
  listen(address: LlpAddress, options: LlpListenOptions = {}): Promise<MpaTcpListener> {
    try {
      throwIfAborted(options.signal);
      const params = resolveParams(options.params, this.options.responder);
      // Paused: the listener moves each accepted socket's handle to one that reads into an arena (socket-rx.ts).
      const server = net.createServer({ allowHalfOpen: true, noDelay: this.options.noDelay, pauseOnConnect: true });
      return new Promise<MpaTcpListener>((resolve, reject) => {
        const onError = (e: NodeJS.ErrnoException) => {
          server.off('listening', onListening);
          reject(
            e.code === 'EADDRINUSE'
              ? new AddressInUseError(`${address.host ?? '*'}:${address.port}`, { cause: e })
              : isResolutionFailure(e)
                ? new LlpAddressResolutionError(String(address.host), String(e.code), { cause: e })
                : new ConnectionAbortedError(
                    `listen on ${address.host ?? '*'}:${address.port} failed: ${e.code ?? e.message}`,
                    {
                      cause: e,
                    },
                  ),
          );
        };
        const onListening = () => {
          server.off('error', onError);
          resolve(new MpaTcpListener(server, params, options, this.options));
        };
        server.once('error', onError);
        server.once('listening', onListening);
        server.listen({ port: address.port ?? 0, ...(address.host !== undefined ? { host: address.host } : {}) });
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }
}

/** The MPA/TCP LLP transport. */
export function mpaTcp(options: MpaTcpOptions = {}): MpaTcpTransport {
  return new MpaTcpTransport(options);
}
