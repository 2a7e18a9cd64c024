/**
 * The Responder side of MPA startup (RFC 5044 §7.1.2 rules 2–5, RFC 6581): read the MPA Request, let the
 * ULP accept or reject it, send the Reply, and (peer-to-peer) wait for the RTR. Garbage from one peer
 * ends that attempt only: it surfaces on `errors$`, never thrown, never stalling other connections.
 */
import type { Server, Socket } from 'node:net';
import {
  BaseLlpListener,
  ConnectionAbortedError,
  isLlpError,
  type LlpAddress,
  type LlpConnectDecision,
  type LlpConnection,
  type LlpError,
  type LlpListenOptions,
  LlpTimeoutError,
  ResourceLimitError,
  SourceShares,
  sourceKey,
} from '@rddp/llp';
import { applyCongestionControl } from './congestion.js';
import { MpaTcpConnection } from './connection.js';
import { MpaErrorCode, MpaProtocolError } from './errors.js';
import { encodeFrame } from './frames.js';
import { FrameCollector } from './handshake.js';
import {
  buildReply,
  evaluateRequest,
  type MpaNegotiated,
  type ResolvedMpaParams,
  type ResponderOffer,
  resolveParams,
} from './negotiation.js';
import type { ResolvedTransportOptions } from './options.js';
import { ARENA_INITIAL, adoptAccepted, arenaFootprint, dropChunk, SocketReceiver } from './socket-rx.js';

const EMPTY = new Uint8Array(0);
const noop = () => {};

function asLlpError(e: unknown): LlpError {
  return isLlpError(e) ? e : new ConnectionAbortedError(`MPA startup failed: ${String(e)}`, { cause: e });
}

/** A pending startup; `cancel` ends it when the listener closes. */
interface Attempt {
  readonly source: string;
  cancel(): void;
  /** Ends it to make room for a source holding fewer startups (a reset; `ResourceLimitError`). */
  shed(): void;
}

export class MpaTcpListener extends BaseLlpListener {
  readonly address: LlpAddress;
  private readonly attempts = new Set<Attempt>();
  /** Startups in progress per source (`maxPendingStartupsPerAddress`). */
  private readonly pendingBySource = new Map<string, number>();
  /** Established connections per source (`maxConnectionsPerSource`). */
  private readonly establishedBySource: SourceShares;
  private established = 0;

  constructor(
    private readonly server: Server,
    private readonly params: ResolvedMpaParams,
    private readonly listenOptions: LlpListenOptions,
    private readonly options: ResolvedTransportOptions,
  ) {
    super();
    this.establishedBySource = new SourceShares(options.maxConnectionsPerSource);
    const a = server.address();
    this.address = a && typeof a === 'object' ? { host: a.address, port: a.port } : { host: String(a) };
    server.on('connection', (socket: Socket) => this.onSocket(socket));
    // A failing accept() must not take the process down.
    server.on('error', (e) =>
      this.reportError(new ConnectionAbortedError(`listener error: ${e.message}`, { cause: e })),
    );
    this.closeOnAbort(listenOptions);
  }

  /** Stops accepting and ends startups in progress; established connections stay up. */
  protected stopListening(): void {
    this.server.close();
    for (const a of [...this.attempts]) a.cancel();
  }

  /** Hands an established connection to the ULP and counts it (and its source's place) until it closes. */
  private emit(c: LlpConnection, source: string): void {
    this.established++;
    this.establishedBySource.take(source);
    c.closed$.subscribe(() => {
      this.established--;
      this.establishedBySource.give(source);
    });
    this.accept(c);
  }

  /** Sheds the oldest startup of the source holding the most, when it holds more than `newcomer` + 1. */
  private shedFor(newcomer: number): void {
    let top = '';
    let most = 0;
    for (const [source, n] of this.pendingBySource)
      if (n > most) {
        most = n;
        top = source;
      }
    if (most <= newcomer + 1) return;
    for (const a of this.attempts)
      if (a.source === top) {
        a.shed();
        return;
      }
  }

  private report(error: LlpError, remote: LlpAddress): void {
    this.options.logger.debug('mpa.accept.failed', { remote, code: error.code, message: error.message });
    this.reportError(error);
  }

  private onSocket(accepted: Socket): void {
    accepted.on('error', noop);
    if (this.closed) {
      accepted.destroy();
      return;
    }
    const remote: LlpAddress = { host: accepted.remoteAddress ?? '', port: accepted.remotePort ?? 0 };
    // Resource limits: a peer beyond them gets a reset, the ULP a typed error — never an unbounded queue.
    const o = this.options;
    const source = sourceKey(accepted.remoteAddress ?? '', o.ipv6SourcePrefix);
    const fromSource = this.pendingBySource.get(source) ?? 0;
    const budget = o.memoryBudget;
    const footprint = arenaFootprint(ARENA_INITIAL);
    // A source's startups and established connections together stay within its share of connections.
    // All startup places taken: one of the source holding the most gives its oldest place up, if that
    // source holds more than this one would (so many sources together cannot lock a new one out either).
    if (this.attempts.size >= o.maxPendingStartups) this.shedFor(fromSource);
    const which =
      this.attempts.size >= o.maxPendingStartups
        ? `${o.maxPendingStartups} MPA startups in progress`
        : fromSource >= o.maxPendingStartupsPerAddress
          ? `${o.maxPendingStartupsPerAddress} MPA startups in progress from ${source}`
          : this.established >= o.maxConnections
            ? `${o.maxConnections} connections`
            : this.establishedBySource.count(source) + fromSource >= o.maxConnectionsPerSource
              ? `${o.maxConnectionsPerSource} connections from ${source}`
              : !budget.fits(footprint, source)
                ? budget.used + footprint > budget.limit
                  ? `process memory budget ${budget.limit} octets, ${budget.used} held`
                  : `memory share of ${source}, ${budget.sourceLimit} octets`
                : undefined;
    if (which !== undefined) {
      accepted.resetAndDestroy();
      this.report(
        new ResourceLimitError(`listener: ${which}`, `connection from ${remote.host}:${remote.port}`),
        remote,
      );
      return;
    }
    // The server accepts paused: the socket moves to one that reads into its own arena (socket-rx.ts).
    const rx = new SocketReceiver();
    const socket = adoptAccepted(accepted, rx, true);
    rx.bind(socket, budget.reserve(footprint, source));
    socket.on('error', noop);
    socket.setNoDelay(this.options.noDelay);
    if (this.options.congestionControl !== undefined) {
      try {
        applyCongestionControl(socket, this.options.congestionControl);
      } catch (e) {
        socket.resetAndDestroy();
        this.report(e as LlpError, remote);
        return;
      }
    }
    const timeoutMs = this.options.handshakeTimeoutMs;
    const collector = new FrameCollector('request');
    let phase: 'request' | 'decision' | 'rtr' | 'done' = 'request';
    let conn: MpaTcpConnection | null = null;

    const detach = () => {
      if (rx.onChunk === onData) rx.onChunk = dropChunk; // the stream may have taken over
      socket.off('end', onGone);
      socket.off('close', onGone);
    };
    const finish = () => {
      phase = 'done';
      clearTimeout(timer);
      detach();
      if (!this.attempts.delete(attempt)) return;
      const n = (this.pendingBySource.get(source) ?? 1) - 1;
      if (n > 0) this.pendingBySource.set(source, n);
      else this.pendingBySource.delete(source);
    };
    /** RFC 5044 §7.1.1/§8 code 4: close and report locally. */
    const fail = (error: LlpError) => {
      if (phase === 'done') return;
      finish();
      if (conn) conn.abort(error);
      else socket.destroy();
      this.report(error, remote);
    };
    /** Reply R=1 (RFC 5044 §7.1.1 R), then FIN. */
    const sendReject = (bytes: Uint8Array) => {
      finish();
      socket.end(bytes, () => socket.destroy());
    };
    const attempt: Attempt = {
      source,
      cancel: () => fail(new ConnectionAbortedError('the listener closed during MPA startup')),
      shed: () => {
        if (phase === 'done') return;
        socket.resetAndDestroy();
        fail(
          new ResourceLimitError(
            `listener: ${o.maxPendingStartups} MPA startups in progress, ${this.pendingBySource.get(source)} from ${source}`,
            `the startup with ${remote.host}:${remote.port} (shed for another source)`,
          ),
        );
      },
    };
    this.attempts.add(attempt);
    this.pendingBySource.set(source, fromSource + 1);
    const timer = setTimeout(
      () =>
        fail(
          new LlpTimeoutError(
            `MPA startup with ${remote.host}:${remote.port} did not finish within ${timeoutMs} ms (${phase})`,
          ),
        ),
      timeoutMs,
    );

    const onGone = () =>
      fail(
        new ConnectionAbortedError(
          `the initiator closed the connection during MPA startup (${phase}) (RFC 5044 §8 code 1)`,
        ),
      );

    const onData = (chunk: Buffer) => {
      if (phase !== 'request') {
        fail(
          new MpaProtocolError(
            'early-data',
            MpaErrorCode.invalidRequestReply,
            'the initiator sent data after its MPA Request, before the MPA Reply (RFC 5044 §7.1.2)',
          ),
        );
        return;
      }
      const r = collector.feed(chunk);
      if (!r.done) return;
      if ('error' in r) {
        fail(r.error);
        return;
      }
      if (r.rest.byteLength > 0) {
        fail(
          new MpaProtocolError(
            'early-data',
            MpaErrorCode.invalidRequestReply,
            `the initiator sent ${r.rest.byteLength} octets right after its MPA Request, before the MPA Reply (RFC 5044 §7.1.2)`,
          ),
        );
        return;
      }
      const outcome = evaluateRequest(r.frame, this.params);
      this.options.logger.debug('mpa.request', {
        remote,
        revision: r.frame.revision,
        crc: r.frame.crc,
        markers: r.frame.markers,
        outcome: outcome.kind,
      });
      if (outcome.kind === 'close') {
        fail(outcome.error);
        return;
      }
      if (outcome.kind === 'reject') {
        sendReject(encodeFrame(outcome.reply));
        this.report(outcome.error, remote);
        return;
      }
      phase = 'decision';
      void this.decide(outcome.offer, remote).then(
        (d) => {
          if (phase !== 'decision') return; // timed out, or the peer went away meanwhile
          if (d.kind === 'reject') {
            sendReject(d.bytes);
            if (d.error) this.report(d.error, remote);
            return;
          }
          establish(d.offer, d.reply, d.privateData);
        },
        (e: unknown) => fail(asLlpError(e)),
      );
    };

    const establish = (offer: ResponderOffer, reply: Uint8Array, localPd: Uint8Array) => {
      detach();
      const negotiated: MpaNegotiated = offer.negotiated;
      const c = new MpaTcpConnection({
        role: 'responder',
        socket,
        rx,
        negotiated,
        localPrivateData: localPd,
        remotePrivateData: offer.ulpPrivateData,
        options: this.options,
      });
      conn = c;
      socket.write(reply);
      this.options.logger.debug('mpa.reply', { connection: c.id, remote, negotiated });
      if (negotiated.rtr === false) {
        finish();
        this.emit(c, source);
        return;
      }
      // RFC 6581: the Responder is established once the Initiator's RTR has arrived.
      phase = 'rtr';
      const sub = c.closed$.subscribe((e) => {
        if (phase === 'done') return;
        finish();
        this.report(e.error ?? new ConnectionAbortedError('the connection closed before the RTR arrived'), remote);
      });
      c.stream.expectRtr(negotiated.rtr, () => {
        if (phase === 'done') return;
        finish();
        sub.unsubscribe();
        this.emit(c, source);
      });
    };

    rx.onChunk = onData;
    socket.on('end', onGone);
    socket.on('close', onGone);
  }

  /** Asks the ULP and builds the Reply. A ULP that throws or answers badly gets the connection rejected. */
  private async decide(
    offer: ResponderOffer,
    remote: LlpAddress,
  ): Promise<
    | { kind: 'accept'; offer: ResponderOffer; reply: Uint8Array; privateData: Uint8Array }
    | { kind: 'reject'; bytes: Uint8Array; error?: LlpError }
  > {
    const ask = this.listenOptions.onConnectRequest;
    let decision: LlpConnectDecision;
    try {
      decision = ask
        ? await ask({ remoteAddress: remote, privateData: offer.ulpPrivateData, params: offer.requested })
        : { accept: true };
    } catch (e) {
      return {
        kind: 'reject',
        bytes: encodeFrame(buildReply(offer, false, EMPTY)),
        error: new ConnectionAbortedError('onConnectRequest threw; the connection was rejected', { cause: e }),
      };
    }
    if (!decision.accept) {
      const pd = decision.privateData ?? EMPTY;
      try {
        return { kind: 'reject', bytes: encodeFrame(buildReply(offer, false, pd)) };
      } catch (e) {
        return { kind: 'reject', bytes: encodeFrame(buildReply(offer, false, EMPTY)), error: asLlpError(e) };
      }
    }
    let final = offer;
    try {
      if (decision.params) {
        const again = evaluateRequest(offer.request, resolveParams(decision.params, this.params));
        if (again.kind !== 'offer')
          return {
            kind: 'reject',
            bytes: again.kind === 'reject' ? encodeFrame(again.reply) : encodeFrame(buildReply(offer, false, EMPTY)),
            error: again.error,
          };
        final = again.offer;
      }
      const pd = decision.privateData ?? EMPTY;
      return { kind: 'accept', offer: final, reply: encodeFrame(buildReply(final, true, pd)), privateData: pd };
    } catch (e) {
      // The ULP's answer broke a limit (private data too long, bad params): reject, and say why.
      return { kind: 'reject', bytes: encodeFrame(buildReply(offer, false, EMPTY)), error: asLlpError(e) };
    }
  }
}
