/**
 * One UDP socket and what shares it: a listener's socket carries every connection it accepted, an
 * initiator's (connected) socket carries one. Parses and checks incoming datagrams, hands them to the
 * connection their Destination connection id names, sends datagrams as parts (sendmsg with an iovec:
 * payload is never joined), applies the fault injection and tells blocked streams when the send queue drains.
 */
import { randomInt } from 'node:crypto';
import type dgram from 'node:dgram';
import { type LlpLogger, seededRandom } from '@rddp/llp';
import type { UdpFaults } from './options.js';
import {
  AbortCode,
  type DatagramHeader,
  DatagramType,
  datagramParts,
  datagramTypeInfo,
  encodeAbortBody,
  type ParsedDatagram,
  parseDatagram,
} from './wire.js';

/** Where a datagram goes or came from. */
export interface Peer {
  readonly address: string;
  readonly port: number;
}

/** Receives the datagrams addressed to one local connection id. */
export type DatagramHandler = (d: ParsedDatagram, from: Peer) => void;

/** Counters of one socket (shared by the connections on it). */
export interface SocketStats {
  datagramsSent: number;
  datagramsReceived: number;
  /** Datagrams whose CRC32c did not match: dropped, as if lost. */
  crcErrors: number;
  /** Datagrams too short, of another version or of an unknown type: dropped. */
  malformed: number;
  /** Datagrams for no connection known here (answered with ABORT where the type calls for it). */
  unknownConnection: number;
  /** Fault injection: datagrams dropped, sent twice, held back behind the next one. */
  faultDrops: number;
  faultDuplicates: number;
  faultReorders: number;
}

interface Outgoing {
  readonly parts: readonly Uint8Array[];
  readonly to: Peer | undefined;
  readonly done: ((error?: Error) => void) | undefined;
}

export class Endpoint {
  readonly stats: SocketStats = {
    datagramsSent: 0,
    datagramsReceived: 0,
    crcErrors: 0,
    malformed: 0,
    unknownConnection: 0,
    faultDrops: 0,
    faultDuplicates: 0,
    faultReorders: 0,
  };
  private readonly handlers = new Map<number, DatagramHandler>();
  private readonly drainWaiters = new Set<() => void>();
  private readonly rnd: (() => number) | undefined;
  private heldBack: Outgoing | undefined;
  private refs = 0;
  private active = 0;
  private closed = false;
  /** A REQUEST (Destination connection id 0) for a listener; unset on initiator sockets. */
  onRequest: ((d: ParsedDatagram, from: Peer) => void) | undefined;
  /** A COOKIE_ECHO (Destination connection id 0) for a listener; unset on initiator sockets. */
  onCookieEcho: ((d: ParsedDatagram, from: Peer) => void) | undefined;
  /** Socket errors (ECONNREFUSED on a connected socket: the peer's port is unreachable). */
  onError: ((e: NodeJS.ErrnoException) => void) | undefined;

  constructor(
    readonly socket: dgram.Socket,
    /** true for an initiator's connected socket: datagrams go without an address. */
    readonly connected: boolean,
    private readonly highWaterMark: number,
    private readonly faults: UdpFaults | undefined,
    seed: number,
    private readonly logger: LlpLogger,
  ) {
    if (faults && (faults.drop || faults.duplicate || faults.reorder)) this.rnd = seededRandom(seed);
    socket.on('message', (msg, rinfo) => this.onMessage(msg, { address: rinfo.address, port: rinfo.port }));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      this.logger.debug('udp.socket-error', { code: e.code, message: e.message });
      this.onError?.(e);
    });
  }

  /** A fresh local connection id: non-zero, unused on this socket. */
  allocateId(): number {
    for (;;) {
      const id = randomInt(1, 0x1_0000_0000);
      if (!this.handlers.has(id)) return id;
    }
  }

  register(id: number, handler: DatagramHandler): void {
    this.handlers.set(id, handler);
  }
  unregister(id: number): void {
    this.handlers.delete(id);
  }

  /** One more user of the socket (a listener, a connection, a connect attempt). */
  acquire(): void {
    this.refs++;
  }
  /** One user less; the last one closes the socket. */
  release(): void {
    if (--this.refs > 0 || this.closed) return;
    this.flushHeldBack();
    this.closed = true;
    const ws = [...this.drainWaiters];
    this.drainWaiters.clear();
    for (const w of ws) w();
    try {
      this.socket.close();
    } catch {
      // already closed by an error
    }
  }

  /** A user that should keep the process alive (an open listener or connection, a connect attempt). */
  activate(): void {
    if (this.active++ === 0 && !this.closed) this.socket.ref();
  }
  /** That user is done, but may still use the socket a while (a lingering connection). */
  deactivate(): void {
    if (--this.active === 0 && !this.closed) this.socket.unref();
  }

  /** Whether the socket's send queue is above the high-water mark. */
  get aboveHighWater(): boolean {
    return !this.closed && this.socket.getSendQueueSize() > this.highWaterMark;
  }
  /** Whether the send queue is at or below the low-water mark (half the high-water mark). */
  get belowLowWater(): boolean {
    return this.closed || this.socket.getSendQueueSize() <= this.highWaterMark / 2;
  }
  /** Runs `w` once the send queue is below the low-water mark (or the socket closed). */
  waitForDrain(w: () => void): void {
    this.drainWaiters.add(w);
  }
  cancelDrain(w: () => void): void {
    this.drainWaiters.delete(w);
  }

  /**
   * Sends one datagram: `header`, then `body` parts, then the CRC32c trailer when `header.crc`.
   * `done` runs once the socket no longer references the parts (or with the error that ended the send).
   */
  send(
    header: DatagramHeader,
    body: readonly Uint8Array[],
    to: Peer | undefined,
    done?: (error?: Error) => void,
  ): void {
    const out: Outgoing = { parts: datagramParts(header, body), to, done };
    if (this.closed) {
      if (done) queueMicrotask(() => done(new Error('socket closed')));
      return;
    }
    const rnd = this.rnd;
    const f = this.faults;
    if (!rnd || !f || (header.type !== DatagramType.Data && !f.control)) {
      this.flushHeldBack();
      this.raw(out);
      return;
    }
    if (f.drop && rnd() < f.drop) {
      this.stats.faultDrops++;
      if (done) queueMicrotask(() => done());
      return;
    }
    if (f.duplicate && rnd() < f.duplicate) {
      this.stats.faultDuplicates++;
      this.raw({ parts: out.parts, to, done: undefined });
    }
    if (!this.heldBack && f.reorder && rnd() < f.reorder) {
      // Held back: it leaves behind the next datagram, or at the end of this turn of the event loop.
      this.stats.faultReorders++;
      this.heldBack = out;
      setImmediate(() => this.flushHeldBack());
      return;
    }
    this.raw(out);
    this.flushHeldBack();
  }

  /** An ABORT answering a datagram that named no connection here (never sent in answer to an ABORT). */
  answerUnknown(d: ParsedDatagram, from: Peer, code: number = AbortCode.UnknownConnection): void {
    const h = d.header;
    this.send(
      { type: DatagramType.Abort, crc: true, streamId: h.streamId, dst: h.src, src: h.dst, seq: 0 },
      [encodeAbortBody(code)],
      this.connected ? undefined : from,
    );
  }

  private flushHeldBack(): void {
    const h = this.heldBack;
    if (!h) return;
    this.heldBack = undefined;
    this.raw(h);
  }

  private raw(o: Outgoing): void {
    if (this.closed) {
      o.done?.(new Error('socket closed'));
      return;
    }
    this.stats.datagramsSent++;
    const cb = (error: Error | null) => {
      o.done?.(error ?? undefined);
      if (this.drainWaiters.size > 0 && this.belowLowWater) {
        const ws = [...this.drainWaiters];
        this.drainWaiters.clear();
        for (const w of ws) w();
      }
    };
    try {
      if (o.to) this.socket.send(o.parts as Uint8Array[], o.to.port, o.to.address, cb);
      else this.socket.send(o.parts as Uint8Array[], cb);
    } catch (e) {
      // The socket was closed under us (ERR_SOCKET_DGRAM_NOT_RUNNING): as good as lost.
      queueMicrotask(() => cb(e as Error));
    }
  }

  private onMessage(msg: Buffer, from: Peer): void {
    this.stats.datagramsReceived++;
    const r = parseDatagram(msg);
    if (!r.ok) {
      if (r.reason === 'crc') this.stats.crcErrors++;
      else this.stats.malformed++;
      this.logger.debug('udp.drop', { reason: r.reason, from: `${from.address}:${from.port}` });
      return;
    }
    const d = r.datagram;
    const h = d.header;
    if (h.dst === 0 && (h.type === DatagramType.Request || h.type === DatagramType.CookieEcho)) {
      const listener = h.type === DatagramType.Request ? this.onRequest : this.onCookieEcho;
      if (listener) listener(d, from);
      else this.answerUnknown(d, from, AbortCode.NotListening);
      return;
    }
    const handler = this.handlers.get(h.dst);
    if (handler) {
      handler(d, from);
      return;
    }
    this.stats.unknownConnection++;
    // Like a TCP RST to a segment of no connection: tell the sender, unless the datagram is an answer (that
    // could loop) or belongs to a setup (pointless): DATA, PROBE, FIN and KEEPALIVE.
    const info = datagramTypeInfo(h.type);
    if (info?.from === 'either' && info.answers.length === 0) this.answerUnknown(d, from);
  }
}
