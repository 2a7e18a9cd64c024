/**
 * One UDP LLP connection: the streams, the peer's connection id and address, and the demultiplexing of
 * the peer's datagrams to them. Ends when all its streams have ended, or when it hears nothing from the
 * peer for `idleTimeoutMs` (KEEPALIVE keeps a quiet but live peer heard), then lingers a while to answer
 * the peer's late FINs before it lets go of the socket.
 */
import {
  BaseLlpConnection,
  ConnectionAbortedError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpCloseEvent,
  type LlpError,
  type LlpSetupInfo,
  LlpTimeoutError,
  type MemoryReservation,
  type SendCallback,
} from '@rddp/llp';
import type { Endpoint, Peer, SocketStats } from './endpoint.js';
import type { ResolvedUdpOptions } from './options.js';
import { type StreamHost, UdpStream } from './stream.js';
import {
  AbortCode,
  ALL_STREAMS,
  type DatagramHeader,
  DatagramType,
  decodeAbortBody,
  encodeAbortBody,
  type ParsedDatagram,
} from './wire.js';

let nextId = 1;

/**
 * What the process's memory budget is charged for a connection when it is made (docs/SECURITY.md "Resource
 * limits"): the JavaScript heap its objects take, rounded up from a measurement (Node 20, x64, responder
 * side: ≈ 6.4 kB per connection — the connection, its timers, closures and the listener's record of it —
 * and ≈ 810 octets per stream). Datagrams held for a paused reader (at most 2 × receiveWindow per stream)
 * are charged as they are held, not up front: a 256-stream connection with a window of 64 could hold
 * 256 × 128 × 1.4 kB = 46 MB, which it does only when the ULP stops reading and the peer ignores the window.
 * Not charged: the one ULPDU per stream BaseLlpStream copies while no receiver is set, and the listener
 * socket's kernel buffer (`receiveBufferSize`, one per socket, not per peer).
 */
export const CONNECTION_STATE_OCTETS = 8192;
export const STREAM_STATE_OCTETS = 1024;

/** What the memory budget is charged for a connection of `streams` streams when it is made. */
export function connectionStateOctets(streams: number): number {
  return CONNECTION_STATE_OCTETS + streams * STREAM_STATE_OCTETS;
}

export interface UdpConnectionInit {
  readonly role: 'initiator' | 'responder';
  readonly endpoint: Endpoint;
  readonly localId: number;
  readonly peerId: number;
  /** The peer's address; datagrams from anywhere else are dropped. */
  readonly peer: Peer;
  readonly streams: number;
  readonly mulpdu: number;
  readonly crc: boolean;
  /** The peer's receive window (from its REQUEST or ACCEPT). */
  readonly peerWindow: number;
  readonly options: ResolvedUdpOptions;
  readonly capabilities: LlpCapabilities;
  readonly localAddress: LlpAddress;
  readonly setup: LlpSetupInfo;
  /**
   * The connection's share of the process's memory budget, taken under the peer's source before it was made
   * (`connectionStateOctets`); it grows by what streams hold for a paused reader, and is released with the
   * connection.
   */
  readonly reservation: MemoryReservation;
  /** Called once the connection has ended and lingered: it no longer uses the socket. */
  readonly onReleased?: () => void;
}

/** Counters of one connection (its socket's are shared with the other connections on it). */
export interface UdpConnectionStats {
  datagramsSent: number;
  datagramsReceived: number;
  /** Datagrams from this peer's connection id but another address: dropped. */
  wrongSource: number;
  /** Datagrams without a CRC32c on a connection that uses one: dropped. */
  missingCrc: number;
  /** Datagrams naming a stream this connection does not have: dropped. */
  badStream: number;
  /** Octets of the process's memory budget the connection holds now (0 once released). */
  reservedOctets: number;
  readonly socket: SocketStats;
}

export class UdpConnection extends BaseLlpConnection<UdpStream> {
  readonly id: string;
  readonly transport = 'udp';
  readonly streams: readonly UdpStream[];
  /** Our connection id (the peer puts it in Destination connection id) and the peer's. */
  readonly localId: number;
  readonly peerId: number;
  readonly crc: boolean;
  private readonly endpoint: Endpoint;
  private readonly peer: Peer;
  private released = false;
  private readonly lingerMs: number;
  private readonly onReleased: (() => void) | undefined;
  private readonly reservation: MemoryReservation;
  private readonly counters = { datagramsSent: 0, datagramsReceived: 0, wrongSource: 0, missingCrc: 0, badStream: 0 };
  // Idle expiry: flags set per datagram, looked at every keepaliveMs (no clock read on the data path).
  private readonly idleTimer: NodeJS.Timeout;
  private readonly idleTimeoutMs: number;
  private heard = false;
  private sent = false;
  private quietSince = Date.now();

  constructor(init: UdpConnectionInit) {
    super({ ...init, remoteAddress: { host: init.peer.address, port: init.peer.port } });
    this.id = `udp-${nextId++}`;
    this.endpoint = init.endpoint;
    this.localId = init.localId;
    this.peerId = init.peerId;
    this.peer = init.peer;
    this.crc = init.crc;
    this.onReleased = init.onReleased;
    const reservation = init.reservation;
    this.reservation = reservation;
    const o = init.options;
    this.lingerMs = o.lingerMs;
    const endpoint = this.endpoint;
    const host: StreamHost = {
      retransmitMs: o.retransmitMs,
      closeTimeoutMs: o.closeTimeoutMs,
      peerWindow: init.peerWindow,
      holdLimit: 2 * o.receiveWindow,
      hold: (octets) => reservation.resize(reservation.octets + octets),
      unhold: (octets) => void reservation.resize(Math.max(0, reservation.octets - octets)),
      sendData: (s, seq, parts, done) => this.sendData(s, seq, parts, done),
      sendAck: (s, seq) => this.control(DatagramType.Ack, s, seq),
      sendProbe: (s, seq) => this.control(DatagramType.Probe, s, seq),
      sendFin: (s, seq) => this.control(DatagramType.Fin, s, seq),
      sendFinAck: (s) => this.control(DatagramType.FinAck, s, 0),
      sendAbort: (s) => this.control(DatagramType.Abort, s, 0, [encodeAbortBody(AbortCode.User)]),
      get socketBlocked() {
        return endpoint.aboveHighWater;
      },
      get socketDrained() {
        return endpoint.belowLowWater;
      },
      waitForSocketDrain: (w) => endpoint.waitForDrain(w),
      cancelSocketDrain: (w) => endpoint.cancelDrain(w),
      streamClosed: (_s, e) => this.onStreamClosed(e),
    };
    this.streams = Array.from({ length: init.streams }, (_, i) => new UdpStream(i, init.mulpdu, host));
    endpoint.acquire();
    endpoint.activate();
    endpoint.register(this.localId, (d, from) => this.onDatagram(d, from));
    this.idleTimeoutMs = o.idleTimeoutMs;
    this.idleTimer = setInterval(() => this.idleTick(), o.keepaliveMs);
    this.idleTimer.unref();
  }

  get stats(): UdpConnectionStats {
    return { ...this.counters, reservedOctets: this.reservation.octets, socket: { ...this.endpoint.stats } };
  }

  /** Abortive teardown of every stream: one ABORT datagram (Stream id 0xffff), best effort. */
  abort(reason?: LlpError): void {
    if (this.ended) return;
    this.control(DatagramType.Abort, ALL_STREAMS, 0, [encodeAbortBody(AbortCode.User)]);
    for (const s of this.streams) {
      s.quietAbort = true;
      s.abort(reason);
    }
  }

  /** The socket failed under the connection (e.g. ICMP port unreachable on a connected socket). */
  socketFailed(e: Error): void {
    if (this.ended) return;
    const err = new ConnectionAbortedError(`UDP socket error: ${e.message}`, { cause: e });
    for (const s of this.streams) s.fail(err);
  }

  private header(type: number, streamId: number, seq: number): DatagramHeader {
    return { type, crc: this.crc, streamId, dst: this.peerId, src: this.localId, seq };
  }

  /** Every keepaliveMs: KEEPALIVE if we sent nothing since the last tick; expiry after idleTimeoutMs of silence. */
  private idleTick(): void {
    const now = Date.now();
    if (this.heard) {
      this.heard = false;
      this.quietSince = now;
    } else if (now - this.quietSince >= this.idleTimeoutMs) {
      this.expire();
      return;
    }
    if (!this.sent) this.control(DatagramType.Keepalive, ALL_STREAMS, 0);
    this.sent = false;
  }

  /** Nothing heard from the peer for idleTimeoutMs: every stream ends with LlpTimeoutError; one ABORT (code 6). */
  private expire(): void {
    clearInterval(this.idleTimer);
    if (this.ended) return;
    this.control(DatagramType.Abort, ALL_STREAMS, 0, [encodeAbortBody(AbortCode.IdleTimeout)]);
    const err = new LlpTimeoutError(
      `UDP LLP connection ${this.id}: nothing heard from the peer in ${this.idleTimeoutMs} ms`,
    );
    for (const s of this.streams) {
      s.quietAbort = true;
      s.fail(err, 'local');
    }
  }

  private sendData(streamId: number, seq: number, parts: readonly Uint8Array[], done: SendCallback | undefined): void {
    this.counters.datagramsSent++;
    this.sent = true;
    this.endpoint.send(
      this.header(DatagramType.Data, streamId, seq),
      parts,
      this.endpoint.connected ? undefined : this.peer,
      done
        ? (e) => done(e ? new ConnectionAbortedError(`UDP send failed: ${e.message}`, { cause: e }) : undefined)
        : undefined,
    );
  }

  private control(type: number, streamId: number, seq: number, body: readonly Uint8Array[] = []): void {
    if (this.released) return;
    this.counters.datagramsSent++;
    this.sent = true;
    this.endpoint.send(this.header(type, streamId, seq), body, this.endpoint.connected ? undefined : this.peer);
  }

  private onDatagram(d: ParsedDatagram, from: Peer): void {
    const h = d.header;
    if (h.src !== this.peerId || from.port !== this.peer.port || from.address !== this.peer.address) {
      this.counters.wrongSource++;
      return;
    }
    if (this.crc && !h.crc) {
      this.counters.missingCrc++;
      return;
    }
    this.counters.datagramsReceived++;
    this.heard = true;
    if (h.type === DatagramType.Keepalive) return;
    if (h.type === DatagramType.Abort && h.streamId === ALL_STREAMS) {
      const code = decodeAbortBody(d.body);
      for (const s of this.streams) s.onAbort(code);
      return;
    }
    const s = this.streams[h.streamId];
    if (!s) {
      this.counters.badStream++;
      return;
    }
    switch (h.type) {
      case DatagramType.Data:
        s.onData(h.seq, d.body);
        return;
      case DatagramType.Ack:
        s.onAck(h.seq);
        return;
      case DatagramType.Probe:
        s.onProbe(h.seq);
        return;
      case DatagramType.Fin:
        s.onFin();
        return;
      case DatagramType.FinAck:
        s.onFinAck();
        return;
      case DatagramType.Abort:
        s.onAbort(decodeAbortBody(d.body));
        return;
      default:
        // A retransmitted ACCEPT or REJECT after setup: nothing to do.
        return;
    }
  }

  private onStreamClosed(e: LlpCloseEvent): void {
    if (!this.streamClosed(e)) return;
    clearInterval(this.idleTimer);
    // Linger: keep answering the peer's retransmitted FINs (its FIN_ACK may have been lost), then let go.
    // The socket no longer keeps the process alive for this connection's sake.
    this.endpoint.deactivate();
    setTimeout(() => this.release(), this.lingerMs).unref();
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.endpoint.unregister(this.localId);
    this.endpoint.release();
    this.reservation.release();
    this.onReleased?.();
  }
}
