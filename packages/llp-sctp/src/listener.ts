/**
 * The responder side: one socket, one package endpoint per remote peer (created when the peer's first
 * packet arrives), one `SctpConnection` per association. INIT handling stays stateless (RFC 4960 §5.1.3):
 * every per-peer endpoint signs cookies with the listener's secret, so a COOKIE ECHO is honoured even when
 * the state kept for the INIT has already been dropped.
 */
import { randomBytes } from 'node:crypto';
import {
  HeldSubject,
  InvalidArgumentError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpConnectDecision,
  type LlpConnection,
  type LlpError,
  type LlpListener,
  type LlpListenOptions,
  LlpProtocolError,
  LlpTimeoutError,
} from '@rddp/llp';
import { type Observable, Subject } from 'rxjs';
import { SctpConnection } from './connection.js';
import type { ResolvedOptions } from './options.js';
import { type PeerAddress, PeerPath, type Wire } from './paths.js';
import type { PkgAssociation } from './pkg.js';
import { commonHeader } from './wire.js';

interface PeerState {
  readonly key: string;
  readonly path: PeerPath;
  readonly connections: Set<SctpConnection>;
  idle: NodeJS.Timeout | undefined;
}

/** How long a peer's endpoint is kept without any association (INIT answered, no COOKIE ECHO yet). */
const IDLE_PEER_MS = 10_000;

let nextId = 0;

export class SctpListener implements LlpListener {
  readonly address: LlpAddress;
  private readonly held = new HeldSubject<LlpConnection>();
  private readonly errors = new Subject<LlpError>();
  private readonly peers = new Map<string, PeerState>();
  private readonly secret = randomBytes(32);
  private closing = false;
  private wireClosed = false;

  constructor(
    private readonly wire: Wire,
    private readonly options: ResolvedOptions,
    private readonly capabilities: LlpCapabilities,
    private readonly aRwnd: number,
    private readonly listen: LlpListenOptions,
  ) {
    this.address = { host: wire.localHost, port: wire.localPort };
    listen.signal?.addEventListener('abort', () => void this.close(), { once: true });
  }

  get connections$(): Observable<LlpConnection> {
    return this.held.observable;
  }
  get errors$(): Observable<LlpError> {
    return this.errors.asObservable();
  }

  /** Hands one received packet to the peer's endpoint (creating it for a new peer). */
  onPacket(packet: Buffer, peer: PeerAddress): void {
    const key = this.wire.kind === 'udp' ? `${peer.host}:${peer.port}` : peer.host;
    let state = this.peers.get(key);
    if (!state) {
      if (this.closing || this.peers.size >= this.options.maxPendingPeers) return;
      const h = commonHeader(packet);
      if (!h || h.dstPort !== this.wire.localPort) return;
      state = this.addPeer(key, peer);
    }
    state.path.socket.receive(packet);
    if (state.connections.size === 0) this.expireLater(state);
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const s of [...this.peers.values()]) if (s.connections.size === 0) this.dropPeer(s);
    this.held.complete();
    this.errors.complete();
    this.maybeCloseWire();
  }

  private addPeer(key: string, peer: PeerAddress): PeerState {
    const path = new PeerPath(
      (packet, cb) => this.wire.send(packet, peer, cb),
      peer,
      { localPort: this.wire.localPort, streams: this.options.maxStreams, aRwnd: this.aRwnd },
      {
        refused: (e) => this.errors.next(e),
        packageError: (e, packet) => this.packageError(state, e, packet),
        violation: (text, packet) => this.violation(state, text, packet),
      },
    );
    path.endpoint.cookieSecretKey = this.secret;
    path.socket.tap = this.options.trace;
    const state: PeerState = { key, path, connections: new Set(), idle: undefined };
    path.endpoint.on('association', (association: PkgAssociation) => this.onAssociation(state, association));
    this.peers.set(key, state);
    return state;
  }

  private packageError(state: PeerState, error: unknown, packet: Buffer): void {
    const text = `the sctp package failed on a packet from ${state.key}: ${(error as Error)?.message ?? String(error)}`;
    this.violation(state, text, packet, error);
  }

  /** Aborts the association the packet belongs to; reports it when no connection owns it yet. */
  private violation(state: PeerState, text: string, packet: Buffer, cause?: unknown): void {
    const h = commonHeader(packet);
    const hit = [...state.connections].find((c) => h && c.sctpAssociation.remotePort === h.srcPort);
    if (hit) hit.violation(text);
    else this.errors.next(new LlpProtocolError(text, cause === undefined ? undefined : { cause }));
  }

  private onAssociation(state: PeerState, association: PkgAssociation): void {
    if (state.idle) clearTimeout(state.idle);
    state.idle = undefined;
    const conn: SctpConnection = new SctpConnection({
      id: `sctp-r${++nextId}`,
      role: 'responder',
      association,
      capabilities: this.capabilities,
      localAddress: this.address,
      remoteAddress: { host: state.path.peer.host, port: state.path.peer.port },
      tuning: {
        mulpdu: this.options.mulpdu,
        pmtu: this.options.pmtu,
        maxPrivateData: this.options.maxPrivateData,
        shutdownTimeoutMs: this.options.shutdownTimeoutMs,
        closeTimeoutMs: this.options.closeTimeoutMs,
        deadPeerTimeoutMs: this.options.deadPeerTimeoutMs,
        maxBatch: Math.max(this.options.mulpdu, 64 * 1024),
        rto: this.options.rto,
      },
      logger: this.options.logger,
      onEnded: () => {
        state.connections.delete(conn);
        if (state.connections.size === 0) {
          if (this.closing) this.dropPeer(state);
          else this.expireLater(state);
        }
        this.maybeCloseWire();
      },
    });
    state.connections.add(conn);
    if (this.closing) {
      conn.fail(new InvalidArgumentError('the listener is closed'));
      return;
    }
    void this.handshake(conn);
  }

  private async handshake(conn: SctpConnection): Promise<void> {
    const timer = setTimeout(
      () =>
        conn.fail(new LlpTimeoutError(`no Session Initiate within ${this.options.handshakeTimeoutMs} ms (RFC 5043)`)),
      this.options.handshakeTimeoutMs,
    );
    timer.unref();
    try {
      await conn.associated();
      const remotePrivateData = await conn.sessionRequest();
      const decide = this.listen.onConnectRequest;
      const decision: LlpConnectDecision = decide
        ? await decide({
            remoteAddress: conn.remoteAddress,
            privateData: remotePrivateData,
            params: { streams: conn.streams.length },
          })
        : { accept: true };
      clearTimeout(timer);
      const pd = decision.privateData ?? new Uint8Array(0);
      if (pd.byteLength > this.options.maxPrivateData) {
        throw new InvalidArgumentError(
          `responder private data of ${pd.byteLength} octets exceeds maxPrivateData ${this.options.maxPrivateData}`,
        );
      }
      if (!decision.accept) {
        conn.reject(pd);
        return;
      }
      conn.accept(pd, remotePrivateData);
      this.held.next(conn);
    } catch (e) {
      clearTimeout(timer);
      const error = e as LlpError;
      conn.fail(error);
      if (!this.closing) this.errors.next(error);
    }
  }

  private expireLater(state: PeerState): void {
    if (state.idle) clearTimeout(state.idle);
    state.idle = setTimeout(() => {
      if (state.connections.size === 0) this.dropPeer(state);
    }, IDLE_PEER_MS);
    state.idle.unref();
  }

  private dropPeer(state: PeerState): void {
    if (state.idle) clearTimeout(state.idle);
    if (this.peers.get(state.key) === state) this.peers.delete(state.key);
    state.path.destroy();
  }

  private maybeCloseWire(): void {
    if (!this.closing || this.wireClosed) return;
    for (const s of this.peers.values()) if (s.connections.size > 0) return;
    this.wireClosed = true;
    this.wire.close();
  }
}
