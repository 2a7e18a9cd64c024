/**
 * The UDP LLP transport: `connect` (REQUEST until COOKIE, then COOKIE_ECHO until ACCEPT, REJECT, ABORT, the
 * timer or the signal) and `listen` (stateless until a cookie comes back; one socket for every connection
 * it accepts). See docs/UDP-LLP.md.
 */
import dgram from 'node:dgram';
import { isIPv6 } from 'node:net';
import {
  abortError,
  BaseLlpListener,
  bindError,
  ConnectionAbortedError,
  ConnectionRefusedError,
  ConnectionRejectedError,
  checkConnectPort,
  checkPrivateData,
  checkStreamCount,
  InvalidArgumentError,
  isLlpError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpConnectDecision,
  type LlpConnectOptions,
  type LlpError,
  type LlpListenOptions,
  LlpProtocolError,
  LlpTimeoutError,
  type LlpTransport,
  type MemoryReservation,
  processMemoryBudget,
  ResourceLimitError,
  SourceShares,
  sourceKey,
  throwIfAborted,
} from '@rddp/llp';
import { connectionStateOctets, UdpConnection } from './connection.js';
import { CookieJar } from './cookie.js';
import { Endpoint, type Peer, type SocketStats } from './endpoint.js';
import {
  mulpduFor,
  type ResolvedUdpOptions,
  resolveOptions,
  UDP_MAX_PRIVATE_DATA,
  type UdpOptions,
  withParams,
} from './options.js';
import {
  AbortCode,
  ALL_STREAMS,
  COOKIE_LENGTH,
  DatagramType,
  decodeAbortBody,
  decodeCookieEchoBody,
  decodeSetupBody,
  describeAbortCode,
  encodeAbortBody,
  encodeCookieEchoBody,
  encodeSetupBody,
  MAX_STREAMS,
  MIN_DATAGRAM,
  MIN_WINDOW,
  type ParsedDatagram,
  type SetupBody,
} from './wire.js';

/** What UDP connections promise (DDPP core draft §3.4: unreliable, unordered; one ULPDU per datagram). */
export function udpCapabilities(options: UdpOptions = {}): LlpCapabilities {
  const o = resolveOptions(options);
  return {
    reliable: false,
    ordered: false,
    preservesMessageBoundaries: true,
    // A CRC32c over every datagram (UDP's own 16-bit checksum is weaker than RFC 5041 §3 asks).
    strongDigest: o.crc,
    maxStreams: o.maxStreams,
    maxPrivateData: UDP_MAX_PRIVATE_DATA,
  };
}

function connectionCapabilities(crc: boolean, streams: number): LlpCapabilities {
  return {
    reliable: false,
    ordered: false,
    preservesMessageBoundaries: true,
    strongDigest: crc,
    maxStreams: streams,
    maxPrivateData: UDP_MAX_PRIVATE_DATA,
  };
}

/** A setup body the peer may send, or why not. */
function setupProblem(b: SetupBody | undefined): string | undefined {
  if (!b) return 'malformed setup body';
  if (b.streams < 1 || b.streams > MAX_STREAMS) return `stream count ${b.streams}`;
  if (b.datagramSize < MIN_DATAGRAM) return `datagram size ${b.datagramSize} below ${MIN_DATAGRAM}`;
  if (b.window < MIN_WINDOW) return `receive window ${b.window} below ${MIN_WINDOW}`;
  if (b.privateData.byteLength > UDP_MAX_PRIVATE_DATA) return `private data of ${b.privateData.byteLength} octets`;
  return undefined;
}

function socketType(host: string): 'udp4' | 'udp6' {
  return isIPv6(host) ? 'udp6' : 'udp4';
}

/** Asks the kernel for a larger receive buffer (best effort: Linux caps SO_RCVBUF at net.core.rmem_max). */
function tuneSocket(socket: dgram.Socket, o: ResolvedUdpOptions): void {
  try {
    if (socket.getRecvBufferSize() < o.receiveBufferSize) socket.setRecvBufferSize(o.receiveBufferSize);
  } catch (e) {
    o.logger.debug('udp.rcvbuf', { message: (e as Error).message });
  }
}

class UdpTransport implements LlpTransport {
  readonly name = 'udp';
  readonly capabilities: LlpCapabilities;
  private readonly options: ResolvedUdpOptions;
  private sockets = 0;

  constructor(options: UdpOptions) {
    this.options = resolveOptions(options);
    this.capabilities = udpCapabilities(options);
  }

  private endpoint(socket: dgram.Socket, connected: boolean, o: ResolvedUdpOptions): Endpoint {
    const seed = (o.faults?.seed ?? 1) + this.sockets++;
    return new Endpoint(socket, connected, o.highWaterMark, o.faults, seed, o.logger);
  }

  async connect(address: LlpAddress, options: LlpConnectOptions = {}): Promise<UdpConnection> {
    throwIfAborted(options.signal);
    const o = withParams(this.options, options.params);
    const privateData = checkPrivateData(options.privateData, UDP_MAX_PRIVATE_DATA);
    const streams = checkStreamCount(options.streams ?? o.streams, MAX_STREAMS);
    const port = checkConnectPort(address.port);
    const host = address.host ?? '127.0.0.1';
    const timeoutMs = options.timeoutMs ?? o.handshakeTimeoutMs;
    const signal = options.signal;
    const socket = dgram.createSocket(socketType(host));
    const endpoint = this.endpoint(socket, true, o);
    endpoint.acquire();
    endpoint.activate();
    const localId = endpoint.allocateId();
    const request = encodeSetupBody({
      streams,
      datagramSize: o.datagramSize,
      window: o.receiveWindow,
      crc: o.crc,
      privateData,
    });
    // RFC 4960 §5.1: REQUEST until a COOKIE comes, then COOKIE_ECHO (the cookie and the same setup body).
    let echo: Buffer | undefined;
    const sendRequest = () =>
      endpoint.send(
        echo
          ? { type: DatagramType.CookieEcho, crc: true, streamId: 0, dst: 0, src: localId, seq: 0 }
          : { type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src: localId, seq: 0 },
        [echo ?? request],
        undefined,
      );
    o.logger.debug('udp.connect', { host, port, streams, localId });

    return new Promise<UdpConnection>((resolve, reject) => {
      let settled = false;
      let retransmit: NodeJS.Timeout | undefined;
      const timer = setTimeout(
        () => fail(new LlpTimeoutError(`UDP LLP connect to ${host}:${port} timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onAbort = () => fail(abortError(signal as AbortSignal));
      signal?.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => {
        settled = true;
        clearTimeout(timer);
        clearInterval(retransmit);
        signal?.removeEventListener('abort', onAbort);
        endpoint.unregister(localId);
        endpoint.onError = undefined;
      };
      const fail = (e: LlpError) => {
        if (settled) return;
        cleanup();
        endpoint.deactivate();
        endpoint.release();
        o.logger.debug('udp.connect-failed', { code: e.code, message: e.message });
        reject(e);
      };
      endpoint.onError = (e) =>
        fail(
          e.code === 'ECONNREFUSED'
            ? new ConnectionRefusedError(`nothing listens on UDP ${host}:${port} (ICMP port unreachable)`)
            : new ConnectionRefusedError(`UDP LLP connect to ${host}:${port} failed: ${e.message}`),
        );
      endpoint.register(localId, (d) => {
        if (settled || !d.header.crc) return; // setup datagrams always carry a CRC32c
        const h = d.header;
        if (h.type === DatagramType.Cookie) {
          if (d.body.byteLength !== COOKIE_LENGTH) return;
          const first = echo === undefined;
          // A later COOKIE (answering a retransmitted REQUEST) is fresher: echo that one from now on.
          echo = encodeCookieEchoBody(d.body, request);
          if (first) sendRequest();
          return;
        }
        if (h.type === DatagramType.Abort) {
          const code = decodeAbortBody(d.body);
          if (code === AbortCode.StaleCookie && echo) {
            // RFC 4960 §5.2.6: the cookie aged out before it arrived; start over with a REQUEST.
            echo = undefined;
            sendRequest();
            return;
          }
          fail(
            new ConnectionRefusedError(
              `the UDP peer at ${host}:${port} refused the connection (${describeAbortCode(code)})`,
            ),
          );
          return;
        }
        const body = decodeSetupBody(d.body);
        if (h.type === DatagramType.Reject) {
          fail(new ConnectionRejectedError('the responder rejected the connection', body?.privateData));
          return;
        }
        if (h.type !== DatagramType.Accept) return;
        const problem =
          setupProblem(body) ??
          (body && body.streams > streams ? `granted ${body.streams} streams, asked for ${streams}` : undefined) ??
          (body && body.datagramSize > o.datagramSize ? `datagram size ${body.datagramSize} above ours` : undefined) ??
          (body && o.crc && !body.crc ? 'CRC32c asked for but not in use' : undefined);
        if (problem || !body) {
          endpoint.answerUnknown(d, { address: host, port }, AbortCode.Protocol);
          fail(new LlpProtocolError(`bad ACCEPT from the UDP peer: ${problem}`));
          return;
        }
        const remote = socket.remoteAddress();
        // The connection's state, charged to the process's memory budget under the responder's source.
        const source = sourceKey(remote.address, o.ipv6SourcePrefix);
        const octets = connectionStateOctets(body.streams);
        const reservation = processMemoryBudget().reserve(octets, source);
        if (!reservation) {
          // Refused as a listener refuses at a limit: ABORT code 5, here to the connection just accepted.
          endpoint.send(
            { type: DatagramType.Abort, crc: true, streamId: ALL_STREAMS, dst: h.src, src: localId, seq: 0 },
            [encodeAbortBody(AbortCode.ResourceLimit)],
            undefined,
          );
          fail(new ResourceLimitError(`memory budget for source ${source}`, `connection of ${octets} octets`));
          return;
        }
        cleanup();
        const local = socket.address();
        const conn = new UdpConnection({
          role: 'initiator',
          endpoint,
          localId,
          peerId: h.src,
          peer: { address: remote.address, port: remote.port },
          streams: body.streams,
          mulpdu: mulpduFor(body.datagramSize, body.crc),
          crc: body.crc,
          peerWindow: body.window,
          options: o,
          capabilities: connectionCapabilities(body.crc, body.streams),
          reservation,
          localAddress: { host: local.address, port: local.port },
          setup: {
            localPrivateData: privateData,
            remotePrivateData: body.privateData,
            negotiated: { crc: body.crc, datagramSize: body.datagramSize, streams: body.streams },
          },
        });
        // The connection holds the socket now; the attempt lets go of it.
        endpoint.deactivate();
        endpoint.release();
        endpoint.onError = (e) => conn.socketFailed(e);
        o.logger.debug('udp.connected', { id: conn.id, localId, peerId: h.src, streams: body.streams });
        resolve(conn);
      });
      socket.connect(port, host, (err?: Error) => {
        if (settled) return;
        if (err) {
          fail(new ConnectionRefusedError(`cannot reach UDP ${host}:${port}: ${err.message}`, { cause: err }));
          return;
        }
        tuneSocket(socket, o);
        sendRequest();
        retransmit = setInterval(sendRequest, o.retransmitMs);
      });
    });
  }

  async listen(address: LlpAddress, options: LlpListenOptions = {}): Promise<UdpListener> {
    throwIfAborted(options.signal);
    const o = withParams(this.options, options.params);
    const host = address.host ?? '127.0.0.1';
    const socket = dgram.createSocket(socketType(host));
    await new Promise<void>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        socket.close();
        reject(bindError(e, `UDP ${host}:${address.port ?? 0}`));
      };
      socket.once('error', onError);
      socket.bind(address.port ?? 0, host, () => {
        socket.off('error', onError);
        resolve();
      });
    });
    tuneSocket(socket, o);
    const endpoint = this.endpoint(socket, false, o);
    endpoint.acquire();
    endpoint.activate();
    const bound = socket.address();
    return new UdpListener(endpoint, { host: bound.address, port: bound.port }, o, options);
  }
}

/** Most reports on a listener's `errors$` per second about what peers did; more are only counted. */
const REPORTS_PER_SECOND = 10;

/**
 * Setups a listener remembers per place it has (`maxConnections + maxPendingConnections`, and per source
 * `maxConnectionsPerSource + maxPendingConnectionsPerSource`): the bound of what makes cookies single-use.
 * A setup is remembered from its COOKIE_ECHO until `cookieLifetimeMs` after it ended (its connection let go
 * of, its REJECT's linger over, its ULP's decision timed out). At the bound new setups are refused with
 * ABORT code 5 — an ended setup is never forgotten early, or its cookie could open a second connection.
 * At the defaults: 8 × (256 + 64) = 2560 setups for the listener, 8 × (64 + 16) = 640 per source (a few
 * hundred octets each, < 1 MB); one source cycling connections as fast as its share and `lingerMs` (2 s)
 * let it ends about 5 × 64 within a cookie lifetime of 10 s.
 */
export const REMEMBERED_SETUPS_PER_PLACE = 8;

type Entry =
  | { readonly kind: 'deciding'; readonly source: string }
  | { readonly kind: 'rejected'; readonly source: string; readonly resend: () => void }
  | { readonly kind: 'accepted'; readonly source: string; readonly resend: () => void };

/** A setup that ended: its cookies (issued at or before `at`, on the cookie jar's clock) are used up. */
interface Ended {
  readonly at: number;
  readonly source: string;
}

/** Counters of a listener: what peers sent and what it did about it. Fixed size whatever the flood. */
export interface UdpListenerStats {
  /** REQUESTs answered with a COOKIE (the listener kept nothing). */
  cookiesSent: number;
  /** COOKIE_ECHOs whose cookie did not authenticate (forged, altered, another sender): dropped. */
  forgedCookies: number;
  /** COOKIE_ECHOs with an authentic cookie older than `cookieLifetimeMs`: ABORT code 4. */
  staleCookies: number;
  /** COOKIE_ECHOs with an authentic cookie of a setup that already ended (a replay): ABORT code 4. */
  usedCookies: number;
  /**
   * REQUESTs and COOKIE_ECHOs refused at `maxConnections`, `maxPendingConnections`, a source's share of
   * either, the remembered-setup bound or the process's memory budget: ABORT code 5.
   */
  refused: number;
  /** Setups whose ULP did not decide within `handshakeTimeoutMs`: dropped. */
  decisionTimeouts: number;
  /** Errors not put on `errors$` because more than REPORTS_PER_SECOND came in a second. */
  unreportedErrors: number;
  readonly socket: SocketStats;
}

/**
 * A listening socket: answers REQUESTs with state cookies and COOKIE_ECHOs with ACCEPT or REJECT, and
 * carries every connection it accepted. Until a COOKIE_ECHO authenticates it keeps nothing per peer.
 */
export class UdpListener extends BaseLlpListener {
  private readonly cookies: CookieJar;
  /**
   * Setups past the cookie, by initiator address, port and connection id: a retransmitted COOKIE_ECHO gets
   * the same answer. At most maxPendingConnections deciding or rejected, and one per connection carried.
   */
  private readonly entries = new Map<string, Entry>();
  /**
   * Setups that ended, by the same key, oldest first, each kept `cookieLifetimeMs`: a COOKIE_ECHO of one
   * with a cookie issued before it ended is a replay (cookies are single-use). Bounded with `entries` by
   * `remembered`.
   */
  private readonly ended = new Map<string, Ended>();
  private established = 0;
  private pending = 0;
  private deciding = 0;
  /** Places per source: connections carried plus setups deciding; setups pending; setups remembered. */
  private readonly connectionShares: SourceShares;
  private readonly pendingShares: SourceShares;
  private readonly remembered: SourceShares;
  private readonly maxRemembered: number;
  private tokens = REPORTS_PER_SECOND;
  private tokensAt = Date.now();
  private readonly counters = {
    cookiesSent: 0,
    forgedCookies: 0,
    staleCookies: 0,
    usedCookies: 0,
    refused: 0,
    decisionTimeouts: 0,
    unreportedErrors: 0,
  };

  constructor(
    private readonly endpoint: Endpoint,
    readonly address: LlpAddress,
    private readonly o: ResolvedUdpOptions,
    private readonly listenOptions: LlpListenOptions,
  ) {
    super();
    this.cookies = new CookieJar(o.cookieLifetimeMs);
    this.connectionShares = new SourceShares(o.maxConnectionsPerSource);
    this.pendingShares = new SourceShares(o.maxPendingConnectionsPerSource);
    this.remembered = new SourceShares(
      REMEMBERED_SETUPS_PER_PLACE * (o.maxConnectionsPerSource + o.maxPendingConnectionsPerSource),
    );
    this.maxRemembered = REMEMBERED_SETUPS_PER_PLACE * (o.maxConnections + o.maxPendingConnections);
    endpoint.onRequest = (d, from) => this.onRequest(d, from);
    endpoint.onCookieEcho = (d, from) => this.onCookieEcho(d, from);
    endpoint.onError = (e) =>
      this.report(new ConnectionAbortedError(`UDP listener socket error: ${e.message}`, { cause: e }));
    this.closeOnAbort(listenOptions);
  }

  /** Connections this listener's socket carries (accepted, not yet let go of after their linger). */
  get connectionCount(): number {
    return this.established;
  }
  /** Setups holding state before they are connections: the ULP deciding, or a REJECT kept for resending. */
  get pendingCount(): number {
    return this.pending;
  }
  /** Setups remembered so that their cookies are not used twice: under way, or ended within a cookie lifetime. */
  get rememberedCount(): number {
    return this.remembered.size;
  }
  /** Connections carried plus setups deciding for the source `address` counts under (see `ipv6SourcePrefix`). */
  connectionsFrom(address: string): number {
    return this.connectionShares.count(sourceKey(address, this.o.ipv6SourcePrefix));
  }
  get stats(): UdpListenerStats {
    return { ...this.counters, socket: { ...this.endpoint.stats } };
  }

  protected stopListening(): void {
    this.endpoint.deactivate();
    this.endpoint.release(); // accepted connections keep the socket until they end
  }

  /** Puts `e` on errors$, at most REPORTS_PER_SECOND a second (token bucket); the rest are counted. */
  private report(e: LlpError): void {
    if (this.closed) return;
    const now = Date.now();
    this.tokens = Math.min(REPORTS_PER_SECOND, this.tokens + ((now - this.tokensAt) * REPORTS_PER_SECOND) / 1000);
    this.tokensAt = now;
    if (this.tokens < 1) {
      this.counters.unreportedErrors++;
      return;
    }
    this.tokens--;
    this.reportError(e);
  }

  /** At a limit: ABORT code 5 to the sender, a ResourceLimitError (rate-limited) to the ULP. */
  private refuse(d: ParsedDatagram, from: Peer, which: string): void {
    this.counters.refused++;
    this.endpoint.answerUnknown(d, from, AbortCode.ResourceLimit);
    this.report(new ResourceLimitError(`listener: ${which}`, `setup from ${from.address}:${from.port}`));
  }

  private sourceOf(from: Peer): string {
    return sourceKey(from.address, this.o.ipv6SourcePrefix);
  }

  /** The limit a new setup from `source` would pass, or undefined. */
  private atLimit(source: string): string | undefined {
    const o = this.o;
    if (this.established + this.deciding >= o.maxConnections) return `${o.maxConnections} connections`;
    if (this.pending >= o.maxPendingConnections) return `${o.maxPendingConnections} pending setups`;
    if (!this.connectionShares.allows(source))
      return `${o.maxConnectionsPerSource} connections per source, from ${source}`;
    if (!this.pendingShares.allows(source))
      return `${o.maxPendingConnectionsPerSource} pending setups per source, from ${source}`;
    this.forgetExpired();
    if (this.remembered.size >= this.maxRemembered) return `${this.maxRemembered} remembered setups`;
    if (!this.remembered.allows(source))
      return `${this.remembered.perSource} remembered setups per source, from ${source}`;
    return undefined;
  }

  /** Forgets ended setups older than a cookie lifetime: every cookie issued before they ended is stale now. */
  private forgetExpired(): void {
    if (this.ended.size === 0) return;
    const now = this.cookies.now();
    for (const [key, e] of this.ended) {
      if (now - e.at <= this.o.cookieLifetimeMs) break; // oldest first
      this.ended.delete(key);
      this.remembered.give(e.source);
    }
  }

  /** The setup under `key` ended: its entry goes, and it is remembered a cookie lifetime (same place). */
  private endSetup(key: string, source: string): void {
    this.entries.delete(key);
    this.ended.delete(key);
    this.ended.set(key, { at: this.cookies.now(), source });
  }

  /** REQUEST: a COOKIE, and nothing kept (RFC 4960 §5.1.3). */
  private onRequest(d: ParsedDatagram, from: Peer): void {
    if (!d.header.crc) return; // setup datagrams always carry a CRC32c
    if (this.closed) {
      this.endpoint.answerUnknown(d, from, AbortCode.NotListening);
      return;
    }
    const problem = setupProblem(decodeSetupBody(d.body));
    if (problem) {
      this.report(new LlpProtocolError(`bad REQUEST from ${from.address}:${from.port}: ${problem}`));
      this.endpoint.answerUnknown(d, from, AbortCode.Protocol);
      return;
    }
    const full = this.atLimit(this.sourceOf(from));
    if (full) {
      this.refuse(d, from, full);
      return;
    }
    const h = d.header;
    this.counters.cookiesSent++;
    this.endpoint.send(
      { type: DatagramType.Cookie, crc: true, streamId: 0, dst: h.src, src: 0, seq: 0 },
      [this.cookies.issue(from, h.src, d.body)],
      from,
    );
  }

  /** COOKIE_ECHO: only an authentic, unexpired, unused cookie from the address it was issued to makes state. */
  private onCookieEcho(d: ParsedDatagram, from: Peer): void {
    if (!d.header.crc) return;
    const h = d.header;
    const echo = decodeCookieEchoBody(d.body);
    const verdict = echo ? this.cookies.check(echo.cookie, from, h.src, echo.setup) : undefined;
    if (!echo || !verdict || verdict.check === 'forged') {
      this.counters.forgedCookies++;
      return; // RFC 4960 §5.1.5: an unauthenticated cookie is silently discarded
    }
    const key = `${from.address}|${from.port}|${h.src}`;
    const seen = this.entries.get(key);
    if (seen) {
      // A retransmission while the setup is under way or its connection open: the same answer, no new state.
      if (seen.kind !== 'deciding') seen.resend(); // our ACCEPT or REJECT was lost
      return;
    }
    if (verdict.check === 'stale') {
      this.counters.staleCookies++;
      this.endpoint.answerUnknown(d, from, AbortCode.StaleCookie);
      return;
    }
    const gone = this.ended.get(key);
    if (gone && verdict.issued <= gone.at) {
      // A cookie of a setup that already ended (its connection closed, its REJECT or decision timer over):
      // cookies are single-use. Answered as docs/UDP-LLP.md answers an authentic cookie that is no longer
      // good — ABORT code 4, "send REQUEST again" — not dropped as a forged one: it did authenticate, and an
      // honest initiator whose echo came late starts over with a fresh cookie, as after a stale one.
      this.counters.usedCookies++;
      this.endpoint.answerUnknown(d, from, AbortCode.StaleCookie);
      return;
    }
    if (this.closed) {
      this.endpoint.answerUnknown(d, from, AbortCode.NotListening);
      return;
    }
    const body = decodeSetupBody(echo.setup);
    if (!body || setupProblem(body)) return; // the cookie vouches for a REQUEST that passed the check
    const source = this.sourceOf(from);
    const full = this.atLimit(source);
    if (full) {
      this.refuse(d, from, full);
      return;
    }
    // What the connection will hold, charged to the process's memory budget under its source now, before
    // the ULP is asked (the streams it would get are known: the ULP's params cannot change them).
    const octets = connectionStateOctets(Math.min(body.streams, this.o.maxStreams));
    const reservation = processMemoryBudget().reserve(octets, source);
    if (!reservation) {
      this.refuse(d, from, `memory budget, ${octets} octets for source ${source}`);
      return;
    }
    if (this.ended.delete(key)) this.remembered.give(source); // a fresh cookie for the same initiator id
    this.remembered.take(source);
    this.connectionShares.take(source);
    this.pendingShares.take(source);
    this.entries.set(key, { kind: 'deciding', source });
    this.pending++;
    this.deciding++;
    void this.decide(h.src, body, from, key, source, reservation);
  }

  private async decide(
    initiatorId: number,
    req: SetupBody,
    from: Peer,
    key: string,
    source: string,
    reservation: MemoryReservation,
  ): Promise<void> {
    const remoteAddress = { host: from.address, port: from.port };
    const ask = this.listenOptions.onConnectRequest;
    // A ULP that never decides must not hold the entry (and a slot under the limits) for ever.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.counters.decisionTimeouts++;
      this.endSetup(key, source);
      this.pending--;
      this.deciding--;
      this.pendingShares.give(source);
      this.connectionShares.give(source);
      reservation.release();
      this.report(
        new LlpTimeoutError(
          `onConnectRequest did not decide on ${from.address}:${from.port} within ${this.o.handshakeTimeoutMs} ms`,
        ),
      );
    }, this.o.handshakeTimeoutMs);
    timer.unref();
    let decision: LlpConnectDecision;
    let error: LlpError | undefined;
    try {
      decision = ask
        ? await ask({
            remoteAddress,
            privateData: req.privateData,
            params: { crc: req.crc, datagramSize: req.datagramSize, streams: req.streams, window: req.window },
          })
        : { accept: true };
    } catch (e) {
      decision = { accept: false };
      error = new ConnectionAbortedError('onConnectRequest threw; the connection was rejected', { cause: e });
    }
    if (timedOut) return;
    clearTimeout(timer);
    this.deciding--;
    let pd: Uint8Array;
    let o = this.o;
    try {
      pd = checkPrivateData(decision.privateData, UDP_MAX_PRIVATE_DATA);
      if (decision.accept) o = withParams(this.o, decision.params);
    } catch (e) {
      decision = { accept: false };
      pd = new Uint8Array(0);
      error = isLlpError(e) ? e : new InvalidArgumentError(String(e));
    }
    if (error) this.report(error);
    const answer = (type: number, src: number, body: SetupBody) => {
      const bytes = encodeSetupBody(body);
      return () => this.endpoint.send({ type, crc: true, streamId: 0, dst: initiatorId, src, seq: 0 }, [bytes], from);
    };
    if (this.closed && decision.accept) {
      this.endSetup(key, source);
      this.pending--;
      this.pendingShares.give(source);
      this.connectionShares.give(source);
      reservation.release();
      this.endpoint.send(
        { type: DatagramType.Abort, crc: true, streamId: 0, dst: initiatorId, src: 0, seq: 0 },
        [encodeAbortBody(AbortCode.NotListening)],
        from,
      );
      return;
    }
    if (!decision.accept) {
      this.connectionShares.give(source);
      reservation.release();
      const resend = answer(DatagramType.Reject, 0, {
        streams: req.streams,
        datagramSize: req.datagramSize,
        window: 0,
        crc: req.crc,
        privateData: pd,
      });
      this.entries.set(key, { kind: 'rejected', source, resend });
      setTimeout(() => {
        this.endSetup(key, source);
        this.pending--;
        this.pendingShares.give(source);
      }, o.lingerMs).unref();
      resend();
      return;
    }
    // Streams: at most maxStreams (RFC 5043-style clamp; the ACCEPT says how many were granted).
    const streams = Math.min(req.streams, o.maxStreams);
    const datagramSize = Math.min(req.datagramSize, o.datagramSize);
    const crc = req.crc || o.crc; // either end asking for the CRC32c gets it
    const localId = this.endpoint.allocateId();
    this.pending--;
    this.pendingShares.give(source);
    this.established++; // the source keeps its connection place
    const conn = new UdpConnection({
      role: 'responder',
      endpoint: this.endpoint,
      localId,
      peerId: initiatorId,
      peer: from,
      streams,
      mulpdu: mulpduFor(datagramSize, crc),
      crc,
      peerWindow: req.window,
      options: o,
      capabilities: connectionCapabilities(crc, streams),
      reservation,
      localAddress: this.address,
      setup: {
        localPrivateData: pd,
        remotePrivateData: req.privateData,
        negotiated: { crc, datagramSize, streams },
      },
      onReleased: () => {
        this.endSetup(key, source);
        this.established--;
        this.connectionShares.give(source);
      },
    });
    const resend = answer(DatagramType.Accept, localId, {
      streams,
      datagramSize,
      window: o.receiveWindow,
      crc,
      privateData: pd,
    });
    this.entries.set(key, { kind: 'accepted', source, resend });
    resend();
    o.logger.debug('udp.accepted', { id: conn.id, localId, peerId: initiatorId, streams, crc, datagramSize });
    this.accept(conn);
  }
}

/** The UDP LLP transport (unreliable, unordered; see docs/UDP-LLP.md). */
export function udp(options: UdpOptions = {}): LlpTransport {
  return new UdpTransport(options);
}
