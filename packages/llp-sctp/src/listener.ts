/**
 * The responder side: one socket; per remote peer, one package endpoint and one `SctpConnection` per
 * association, created only by a valid COOKIE ECHO. The responder keeps no state for an INIT
 * (RFC 4960 §5.1.3), and neither does this demultiplexer: a packet from a source without state is
 * checked here first (common header and a chunk, §3.1; CRC32c, §6.8) and then
 * - an INIT (Verification Tag 0, alone in its packet, §8.5.1 A, §6.10) is answered by one shared endpoint
 *   that keeps nothing;
 * - a SHUTDOWN ACK gets the SHUTDOWN COMPLETE of §8.4 (5);
 * - a COOKIE ECHO whose State Cookie checks out (§5.1.5) creates the peer's state and association;
 * - anything else is discarded silently (§8.4): nothing is allocated, no timer armed or re-armed.
 * State Cookies are keyed per source (an HMAC of the listener's secret and the source address), so a
 * cookie is good only from the address its INIT came from. A peer's state goes with its last connection.
 */
import { createHmac, randomBytes } from 'node:crypto';
import {
  BaseLlpListener,
  checkPrivateData,
  InvalidArgumentError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpConnectDecision,
  type LlpError,
  type LlpListenOptions,
  LlpProtocolError,
  LlpTimeoutError,
  type MemoryReservation,
  ResourceLimitError,
  SourceShares,
  sourceKey,
} from '@rddp/llp';
import { connectionTuning, SctpConnection } from './connection.js';
import { verifySctpChecksum } from './crc32c.js';
import { pathPacketSize, type ResolvedOptions } from './options.js';
import { type PeerAddress, PeerPath, type Wire } from './paths.js';
import { type PkgAssociation, setCookieSecret } from './pkg.js';
import {
  type ChunkInfo,
  ChunkType,
  type CommonHeader,
  chunks,
  chunkValue,
  commonHeader,
  shutdownCompletePacket,
} from './wire.js';

interface PeerState {
  readonly key: string;
  /** What its places count under (`sourceKey`: IPv4 address or IPv6 prefix). */
  readonly source: string;
  readonly path: PeerPath;
  readonly connections: Set<SctpConnection>;
}

/** Packets from sources without state that were discarded (RFC 4960 §8.4), by reason. */
export interface OutOfTheBlueDiscards {
  /** Shorter than a common header and one chunk, or for another SCTP port (RFC 4960 §3.1). */
  malformed: number;
  /** CRC32c mismatch (RFC 4960 §6.8). */
  badChecksum: number;
  /** Neither an INIT with Verification Tag 0 alone, a COOKIE ECHO nor a SHUTDOWN ACK. */
  notInit: number;
  /** A COOKIE ECHO whose State Cookie failed (RFC 4960 §5.1.5). */
  badCookie: number;
  /** A valid COOKIE ECHO while `maxPendingPeers` peers had state. */
  overLimit: number;
  /** A valid COOKIE ECHO while its source had `maxPendingPeersPerSource` peers with state. */
  overSourceLimit: number;
}

let nextId = 0;

/** The listener's State Cookie secret rotates this often: 5 cookie lifespans (60 s, RFC 4960 §15). */
export const COOKIE_ROTATION_MS = 5 * 60_000;

export class SctpListener extends BaseLlpListener {
  readonly address: LlpAddress;
  private readonly peers = new Map<string, PeerState>();
  private readonly acceptedConnections = new WeakSet<SctpConnection>();
  /** The listener's State Cookie secret and the one before it (rotated, `rotateSecret`). */
  private secret = randomBytes(32);
  private previousSecret: Buffer | null = null;
  private readonly rotation: NodeJS.Timeout;
  private readonly discards: OutOfTheBlueDiscards = {
    malformed: 0,
    badChecksum: 0,
    notInit: 0,
    badCookie: 0,
    overLimit: 0,
    overSourceLimit: 0,
  };
  /** Peers with state per source (`maxPendingPeersPerSource`). */
  private readonly peersBySource: SourceShares;
  /** Associations per source (`maxAssociationsPerSource`), and in all. */
  private readonly associationsBySource: SourceShares;
  /** The endpoint that answers INITs for every source; it never holds an association. */
  private readonly stateless: PeerPath;
  /** The source of the packet `stateless` is handling (it answers synchronously). */
  private target: PeerAddress | undefined;
  private wireClosed = false;

  constructor(
    private readonly wire: Wire,
    private readonly options: ResolvedOptions,
    private readonly capabilities: LlpCapabilities,
    private readonly aRwnd: number,
    private readonly listen: LlpListenOptions,
  ) {
    super();
    this.peersBySource = new SourceShares(options.maxPendingPeersPerSource);
    this.associationsBySource = new SourceShares(options.maxAssociationsPerSource);
    this.address = { host: wire.localHost, port: wire.localPort };
    this.stateless = new PeerPath(
      (packet, cb) => {
        const to = this.target;
        if (to) this.wire.send(packet, to, cb);
        else cb(new Error('no source to answer'));
      },
      { host: wire.localHost, port: 0 },
      {
        localPort: wire.localPort,
        streams: options.maxStreams,
        aRwnd,
        idata: options.interleaving,
        scheduler: options.scheduler,
      },
      {
        refused: (e) => this.reportError(e),
        packageError: (e) =>
          this.reportError(new LlpProtocolError(`the sctp package failed on an INIT: ${(e as Error)?.message ?? e}`)),
        violation: (text) => this.reportError(new LlpProtocolError(text)),
      },
    );
    this.stateless.socket.tap = options.trace;
    setCookieSecret(this.stateless.endpoint, this.secret);
    this.rotation = setInterval(() => this.rotateSecret(), COOKIE_ROTATION_MS);
    this.rotation.unref();
    // Only INITs reach it; should the package still make an association there, it is not ours.
    this.stateless.endpoint.on('association', (a: PkgAssociation) => a.ABORT());
    this.closeOnAbort(listen);
  }

  /** Peers (UDP sources; raw: IP addresses) with state: at most `maxPendingPeers`. */
  get peerCount(): number {
    return this.peers.size;
  }

  /** Peers with state none of whose connections has been handed up yet. */
  get pendingPeers(): number {
    let n = 0;
    for (const s of this.peers.values()) if (![...s.connections].some((c) => this.acceptedConnections.has(c))) n++;
    return n;
  }

  /** Counters of the packets from sources without state that were discarded. */
  get outOfTheBlueDiscards(): Readonly<OutOfTheBlueDiscards> {
    return { ...this.discards };
  }

  /** Hands one received packet to the peer's endpoint; a packet from a source without state goes to `outOfTheBlue`. */
  onPacket(packet: Buffer, peer: PeerAddress): void {
    const key = this.wire.kind === 'udp' ? `${peer.host}:${peer.port}` : peer.host;
    const state = this.peers.get(key);
    // The checksum and the Verification Tag (RFC 4960 §6.8, §8.5) are checked in paths.ts; nothing here
    // is armed by a packet, so a bad one extends nothing.
    if (state) state.path.socket.receive(packet);
    else if (!this.closed) this.outOfTheBlue(packet, peer, key);
  }

  protected stopListening(): void {
    this.stateless.destroy();
    for (const s of [...this.peers.values()]) if (s.connections.size === 0) this.dropPeer(s);
    this.maybeCloseWire();
  }

  /** RFC 4960 §8.4: a packet from a source this listener keeps no state for. */
  private outOfTheBlue(packet: Buffer, peer: PeerAddress, key: string): void {
    const h = commonHeader(packet);
    const list = h && h.dstPort === this.wire.localPort ? chunks(packet) : [];
    const first = list[0];
    if (!h || !first) {
      this.discards.malformed++;
      return;
    }
    if (!verifySctpChecksum(packet)) {
      this.discards.badChecksum++;
      return;
    }
    if (first.type === ChunkType.INIT && h.vTag === 0 && list.length === 1) {
      setCookieSecret(this.stateless.endpoint, this.cookieKey(key, this.secret));
      this.target = peer;
      try {
        this.stateless.socket.receive(packet);
      } finally {
        this.target = undefined;
      }
    } else if (first.type === ChunkType.SHUTDOWN_ACK && list.length === 1) {
      // §8.4 (5): SHUTDOWN COMPLETE, T bit set, the SHUTDOWN ACK's tag reflected.
      const reply = shutdownCompletePacket({ srcPort: h.dstPort, dstPort: h.srcPort, vTag: h.vTag });
      this.options.trace?.(reply, 'out');
      this.wire.send(reply, peer, () => {});
    } else if (first.type === ChunkType.COOKIE_ECHO) {
      this.cookieEcho(packet, peer, key, h, first);
    } else {
      this.discards.notInit++;
    }
  }

  /** RFC 4960 §5.1.5: a COOKIE ECHO from a source without state creates it only if its cookie is good. */
  private cookieEcho(packet: Buffer, peer: PeerAddress, key: string, h: CommonHeader, chunk: ChunkInfo): void {
    const cookieKey = this.cookieKey(key, this.secret);
    const previousKey = this.previousSecret && this.cookieKey(key, this.previousSecret);
    setCookieSecret(this.stateless.endpoint, cookieKey, previousKey);
    let good: unknown;
    try {
      good = this.stateless.endpoint.validateCookie(chunkValue(packet, chunk), {
        src_port: h.srcPort,
        dst_port: h.dstPort,
        v_tag: h.vTag,
      });
    } catch {
      good = undefined;
    }
    if (!good) {
      this.discards.badCookie++;
      return;
    }
    if (this.peers.size >= this.options.maxPendingPeers) {
      this.discards.overLimit++;
      return;
    }
    const source = sourceKey(peer.host, this.options.ipv6SourcePrefix);
    if (!this.peersBySource.allows(source)) {
      this.discards.overSourceLimit++;
      return;
    }
    const state = this.addPeer(key, source, peer, cookieKey, previousKey);
    state.path.socket.receive(packet);
    if (state.connections.size === 0) this.dropPeer(state);
  }

  /** The State Cookie key for one source: a listener secret bound to its address. */
  private cookieKey(key: string, secret: Buffer): Buffer {
    return createHmac('sha256', secret).update(key).digest();
  }

  /**
   * A new secret every 5 cookie lifespans (the package's own period); cookies made under the one before
   * still check until the next rotation (RFC 4960 §5.1.3 leaves the key schedule to the implementation).
   */
  private rotateSecret(): void {
    this.previousSecret = this.secret;
    this.secret = randomBytes(32);
    for (const s of this.peers.values()) {
      setCookieSecret(s.path.endpoint, this.cookieKey(s.key, this.secret), this.cookieKey(s.key, this.previousSecret));
    }
  }

  private addPeer(
    key: string,
    source: string,
    peer: PeerAddress,
    cookieKey: Buffer,
    previousKey: Buffer | null,
  ): PeerState {
    const path = new PeerPath(
      (packet, cb) => this.wire.send(packet, peer, cb),
      peer,
      {
        localPort: this.wire.localPort,
        streams: this.options.maxStreams,
        aRwnd: this.aRwnd,
        idata: this.options.interleaving,
        scheduler: this.options.scheduler,
      },
      {
        refused: (e) => this.reportError(e),
        packageError: (e, packet) => this.packageError(state, e, packet),
        violation: (text, packet) => this.violation(state, text, packet),
      },
    );
    setCookieSecret(path.endpoint, cookieKey, previousKey);
    path.socket.tap = this.options.trace;
    const state: PeerState = { key, source, path, connections: new Set() };
    path.endpoint.on('association', (association: PkgAssociation) => this.onAssociation(state, association));
    this.peers.set(key, state);
    this.peersBySource.take(source);
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
    else this.reportError(new LlpProtocolError(text, cause === undefined ? undefined : { cause }));
  }

  private onAssociation(state: PeerState, association: PkgAssociation): void {
    // Places and octets: the listener's associations, the source's share of them, and the receive
    // window out of the memory budget. Beyond any of them the association gets an ABORT at once.
    const o = this.options;
    const budget = o.memoryBudget;
    const limit =
      this.associationsBySource.size >= o.maxAssociations
        ? `${o.maxAssociations} associations`
        : !this.associationsBySource.allows(state.source)
          ? `${o.maxAssociationsPerSource} associations from ${state.source}`
          : undefined;
    const reservation: MemoryReservation | undefined =
      limit === undefined ? budget.reserve(this.aRwnd, state.source) : undefined;
    const refusal =
      limit ??
      (reservation === undefined
        ? budget.used + this.aRwnd > budget.limit
          ? `process memory budget ${budget.limit} octets, ${budget.used} held`
          : `memory share of ${state.source}, ${budget.sourceLimit} octets`
        : undefined);
    if (refusal === undefined) this.associationsBySource.take(state.source);
    const conn: SctpConnection = new SctpConnection({
      id: `sctp-r${++nextId}`,
      role: 'responder',
      association,
      capabilities: this.capabilities,
      localAddress: this.address,
      remoteAddress: { host: state.path.peer.host, port: state.path.peer.port },
      tuning: connectionTuning(
        this.options,
        pathPacketSize(
          this.options,
          state.path.peer.host,
          isUnspecified(this.address.host) ? undefined : this.address.host,
        ),
      ),
      logger: this.options.logger,
      onEnded: () => {
        state.connections.delete(conn);
        if (refusal === undefined) this.associationsBySource.give(state.source);
        reservation?.release();
        if (state.connections.size === 0) this.dropPeer(state);
        this.maybeCloseWire();
      },
    });
    state.connections.add(conn);
    const refused =
      refusal === undefined
        ? undefined
        : new ResourceLimitError(
            `listener: ${refusal}`,
            `an association from ${state.path.peer.host}:${state.path.peer.port}`,
          );
    if (this.closed) {
      conn.fail(new InvalidArgumentError('the listener is closed'));
      return;
    }
    void this.handshake(conn, refused);
  }

  /** Session setup (RFC 5043); `refused`: the association is aborted as soon as it is up (its COOKIE ACK out). */
  private async handshake(conn: SctpConnection, refused?: LlpError): Promise<void> {
    const timer = setTimeout(
      () =>
        conn.fail(new LlpTimeoutError(`no Session Initiate within ${this.options.handshakeTimeoutMs} ms (RFC 5043)`)),
      this.options.handshakeTimeoutMs,
    );
    timer.unref();
    try {
      await conn.associated();
      if (refused) throw refused;
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
      const pd = checkPrivateData(decision.privateData, this.options.maxPrivateData);
      if (!decision.accept) {
        conn.reject(pd);
        return;
      }
      conn.accept(pd, remotePrivateData);
      this.acceptedConnections.add(conn);
      this.accept(conn);
    } catch (e) {
      clearTimeout(timer);
      const error = e as LlpError;
      conn.fail(error);
      this.reportError(error);
    }
  }

  private dropPeer(state: PeerState): void {
    if (this.peers.get(state.key) === state) {
      this.peers.delete(state.key);
      this.peersBySource.give(state.source);
    }
    state.path.destroy();
  }

  private maybeCloseWire(): void {
    if (!this.closed || this.wireClosed) return;
    for (const s of this.peers.values()) if (s.connections.size > 0) return;
    this.wireClosed = true;
    clearInterval(this.rotation);
    this.wire.close();
  }
}

function isUnspecified(host: string | undefined): boolean {
  return host === undefined || host === '0.0.0.0' || host === '::';
}
