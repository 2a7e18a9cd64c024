/**
 * A recorded TCP connection: every octet the kit sends and receives, in order, so a case's capture can
 * be written afterwards (--pcap) and every wait on the target is bounded.
 */
import net from 'node:net';
import {
  ConformanceListenerClosedError,
  ConformanceOverflowError,
  ConformancePeerClosedError,
  ConformanceTimeoutError,
} from './errors.js';

/** One chunk of the flow: `tx` from the kit, `rx` from the target. */
export interface TrafficRecord {
  readonly dir: 'tx' | 'rx';
  readonly bytes: Uint8Array;
  /** Milliseconds since the epoch. */
  readonly t: number;
}

/** How the target ended the connection, as far as the kit saw it. */
export interface CloseInfo {
  /** `fin`: an orderly close; `reset`: an RST (or another socket error). */
  readonly how: 'fin' | 'reset';
  readonly error?: string;
}

/** Octets kept from one target connection (its receive buffer and its capture records). */
export const MAX_RECEIVED_PER_CONNECTION = 64 << 20;

/**
 * Server role: clients connected and not yet taken by a case (`--listen`). They are not read while they
 * wait (TCP flow control holds the rest in the client), so each costs a socket, not its octets; one more
 * is refused (closed at once) with a note.
 */
export const MAX_QUEUED_CLIENTS = 16;

/** A received chunk of the flow: where it sits in the connection's receive log. */
class RxRecord implements TrafficRecord {
  readonly dir = 'rx' as const;
  constructor(
    private readonly conn: WireConn,
    private readonly start: number,
    private readonly end: number,
    readonly t: number,
  ) {}
  /** A view of the receive log (never a copy of its own). */
  get bytes(): Uint8Array {
    return this.conn.received(this.start, this.end);
  }
}

export class WireConn {
  readonly records: TrafficRecord[] = [];
  /**
   * Every octet received, once: the capture records are ranges of it and the receive buffer is
   * log[consumed, length). It grows by doubling (amortized: each octet copied at most about twice)
   * up to MAX_RECEIVED_PER_CONNECTION.
   */
  private log: Buffer = Buffer.alloc(0);
  private length = 0;
  private consumed = 0;
  /** Octets copied when the log grew (at most about twice what was received). */
  copiedOctets = 0;
  private closeInfo: CloseInfo | undefined;
  private wakers = new Set<() => void>();
  readonly closed: Promise<CloseInfo>;
  readonly kitAddress: { host: string; port: number };
  readonly peerAddress: { host: string; port: number };

  constructor(
    readonly socket: net.Socket,
    /** The kit's role on this connection: `client` opened it, `server` accepted it. */
    readonly role: 'client' | 'server',
  ) {
    socket.setNoDelay(true);
    this.kitAddress = { host: socket.localAddress ?? '127.0.0.1', port: socket.localPort ?? 0 };
    this.peerAddress = { host: socket.remoteAddress ?? '127.0.0.1', port: socket.remotePort ?? 0 };
    let resolveClosed: (c: CloseInfo) => void = () => {};
    this.closed = new Promise((r) => (resolveClosed = r));
    let sawError: string | undefined;
    socket.on('data', (d: Buffer) => {
      if (this.length + d.length > MAX_RECEIVED_PER_CONNECTION) {
        sawError = `over ${MAX_RECEIVED_PER_CONNECTION} octets received`;
        socket.destroy(new ConformanceOverflowError(sawError));
        return;
      }
      const start = this.length;
      this.append(d);
      this.records.push(new RxRecord(this, start, this.length, Date.now()));
      this.notify();
    });
    socket.on('end', () => {
      // The target's FIN: this end closes its half too.
      if (!this.closeInfo) this.closeInfo = { how: 'fin' };
      socket.end();
      this.notify();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      sawError = sawError ?? e.code ?? e.message;
    });
    socket.on('close', () => {
      if (!this.closeInfo) this.closeInfo = { how: 'reset', ...(sawError ? { error: sawError } : {}) };
      resolveClosed(this.closeInfo);
      this.notify();
    });
  }

  private append(d: Buffer): void {
    const need = this.length + d.length;
    if (need > this.log.length) {
      const grown = Buffer.allocUnsafe(
        Math.min(MAX_RECEIVED_PER_CONNECTION, Math.max(need, this.log.length * 2, 64 << 10)),
      );
      this.log.copy(grown, 0, 0, this.length);
      this.copiedOctets += this.length;
      this.log = grown;
    }
    d.copy(this.log, this.length);
    this.length = need;
  }

  /** Received octets [start, end) of the connection (a view). */
  received(start: number, end: number): Buffer {
    return this.log.subarray(start, end);
  }

  /** Octets received so far. */
  get receivedOctets(): number {
    return this.length;
  }

  /** Octets of memory the connection's receive log takes (its capacity). */
  get heldOctets(): number {
    return this.log.length;
  }

  /** Opens a recorded connection to `host:port`, bounded by `ms`. */
  static connect(host: string, port: number, ms: number): Promise<WireConn> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host, port });
      const t = setTimeout(() => {
        s.destroy();
        reject(new ConformanceTimeoutError(`no TCP connection to ${host}:${port} within ${ms} ms`));
      }, ms);
      s.once('connect', () => {
        clearTimeout(t);
        resolve(new WireConn(s, 'client'));
      });
      s.once('error', (e) => {
        clearTimeout(t);
        reject(e);
      });
    });
  }

  private notify(): void {
    const ws = [...this.wakers];
    this.wakers.clear();
    for (const w of ws) w();
  }

  /** Whether the target ended the connection (FIN or reset) yet. */
  get ended(): CloseInfo | undefined {
    return this.closeInfo;
  }

  /** Received octets not yet consumed (a view; consume() takes them). */
  get pending(): Buffer {
    return this.log.subarray(this.consumed, this.length);
  }

  write(b: Uint8Array): void {
    if (this.socket.destroyed || this.socket.writableEnded) return;
    this.records.push({ dir: 'tx', bytes: new Uint8Array(b), t: Date.now() });
    this.socket.write(b);
  }

  /** Runs `writes` with the socket corked: what they write leaves in one TCP segment (one write call). */
  together(writes: () => void): void {
    this.socket.cork();
    try {
      writes();
    } finally {
      this.socket.uncork();
    }
  }

  /** Takes `n` received octets (a copy). */
  consume(n: number): Buffer {
    const end = Math.min(this.length, this.consumed + n);
    const out = Buffer.from(this.log.subarray(this.consumed, end));
    this.consumed = end;
    return out;
  }

  /**
   * Waits until `want(pending)` returns a value other than undefined (it may consume()), the target
   * ends the connection (ConformancePeerClosedError), or `ms` pass (ConformanceTimeoutError).
   */
  async until<T>(want: (pending: Buffer) => T | undefined, ms: number, what: string): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = want(this.pending);
      if (v !== undefined) return v;
      if (this.closeInfo) {
        const c = this.closeInfo;
        throw new ConformancePeerClosedError(
          `the target ${c.how === 'fin' ? 'closed' : 'reset'} the connection while the kit waited for ${what}`,
          c.how === 'reset',
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new ConformanceTimeoutError(`no ${what} within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(t);
          resolve();
        };
        const t = setTimeout(() => {
          this.wakers.delete(wake);
          resolve();
        }, left);
        this.wakers.add(wake);
      });
    }
  }

  /** Exactly `n` received octets. */
  read(n: number, ms: number, what: string): Promise<Buffer> {
    return this.until(() => (this.length - this.consumed >= n ? this.consume(n) : undefined), ms, what);
  }

  /** Resolves with how the target ended the connection, or undefined if it is still open after `ms`. */
  async waitClose(ms: number): Promise<CloseInfo | undefined> {
    if (this.closeInfo) return this.closeInfo;
    return new Promise((resolve) => {
      const check = () => {
        if (this.closeInfo) {
          clearTimeout(t);
          resolve(this.closeInfo);
        } else this.wakers.add(check);
      };
      const t = setTimeout(() => {
        this.wakers.delete(check);
        resolve(this.closeInfo);
      }, ms);
      this.wakers.add(check);
    });
  }

  /** An orderly close from the kit's side. */
  end(): void {
    if (!this.socket.destroyed) this.socket.end();
  }

  /** An abortive close (RST) from the kit's side. */
  destroy(): void {
    if (!this.socket.destroyed) this.socket.resetAndDestroy();
  }
}

/**
 * Server role: a listening socket handing out recorded connections one at a time. Clients that connect
 * before a case takes them wait unread (paused), at most MAX_QUEUED_CLIENTS of them; one more is closed
 * at once and reported through `onNote` (the first refusal, and the count when the listener closes).
 */
export class WireListener {
  private readonly queue: WireConn[] = [];
  private waiting: ((c: WireConn) => void) | undefined;
  /** The pending `accept`'s bound and rejection: `close` ends it, so no timer outlives the listener. */
  private pending: { timer: NodeJS.Timeout; reject: (e: Error) => void } | undefined;
  /** The port listened on, kept: a closed server has no address. */
  readonly port: number;
  /** Clients refused because MAX_QUEUED_CLIENTS already waited. */
  refused = 0;
  /** One-line notes (a refused client). */
  onNote: ((line: string) => void) | undefined;
  private constructor(readonly server: net.Server) {
    this.port = (server.address() as net.AddressInfo).port;
    server.on('connection', (s) => {
      const w = this.waiting;
      if (w) {
        this.waiting = undefined;
        w(new WireConn(s, 'server'));
      } else if (this.queue.length < MAX_QUEUED_CLIENTS) {
        const c = new WireConn(s, 'server');
        // Not read until a case takes it: its octets stay in the client (TCP flow control).
        s.pause();
        this.queue.push(c);
      } else {
        if (++this.refused === 1)
          this.onNote?.(
            `a client from ${s.remoteAddress}:${s.remotePort} refused: ${MAX_QUEUED_CLIENTS} clients already wait for a case (MAX_QUEUED_CLIENTS)`,
          );
        s.on('error', () => {});
        s.resetAndDestroy();
      }
    });
  }

  /** Clients waiting for a case. */
  get queued(): readonly WireConn[] {
    return this.queue;
  }

  static listen(port: number, host = '127.0.0.1'): Promise<WireListener> {
    return new Promise((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(port, host, () => resolve(new WireListener(server)));
    });
  }

  /** The next client's connection, within `ms`. */
  accept(ms: number): Promise<WireConn> {
    const q = this.queue.shift();
    if (q) {
      q.socket.resume();
      return Promise.resolve(q);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        this.pending = undefined;
        reject(new ConformanceTimeoutError(`no client connected to port ${this.port} within ${ms} ms`));
      }, ms);
      this.pending = { timer, reject };
      this.waiting = (c) => {
        clearTimeout(timer);
        this.pending = undefined;
        resolve(c);
      };
    });
  }

  close(): Promise<void> {
    for (const c of this.queue.splice(0)) c.destroy();
    const p = this.pending;
    if (p) {
      clearTimeout(p.timer);
      this.pending = undefined;
      this.waiting = undefined;
      p.reject(
        new ConformanceListenerClosedError(`the listener on port ${this.port} closed while a case waited for a client`),
      );
    }
    if (this.refused > 1)
      this.onNote?.(`${this.refused} clients refused in all (more than ${MAX_QUEUED_CLIENTS} waiting)`);
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
