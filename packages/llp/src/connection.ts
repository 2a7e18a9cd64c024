import type { Observable } from 'rxjs';
import type { LlpCapabilities } from './capabilities.js';
import type { LlpError } from './errors.js';
import type { LlpCloseEvent, LlpStream, LlpStreamState } from './stream.js';

/** Where an LLP connects or listens. Transports read what applies to them (loopback: `host`/`port` as a name). */
export interface LlpAddress {
  readonly host?: string;
  readonly port?: number;
}

/**
 * Options negotiated at connection setup that the LLP passes through opaquely (RFC 5041 §6.1: stream
 * initialization is the LLP's and the ULP's business). Keys are transport-defined, e.g. MPA's
 * `{ crc, markersRx, markersTx, revision, ird, ord, rtr }`.
 */
export type LlpParams = Readonly<Record<string, unknown>>;

/** What connection setup produced: private data both ways and the negotiated parameters. */
export interface LlpSetupInfo {
  readonly localPrivateData: Uint8Array;
  readonly remotePrivateData: Uint8Array;
  readonly negotiated: LlpParams;
  /**
   * Where the LLP exchanged them (RFC 6581): this end's IRD as it announced it, and its ORD as the peer's
   * IRD allows. RDMAP enforces exactly these.
   */
  readonly readLimits?: { readonly ird: number; readonly ord: number };
  /**
   * Untagged DDP messages the LLP itself sent or received during setup, by QN, in order (RFC 6581: a Send
   * RTR is a Send on QN 0, a Read RTR a Read Request on QN 1, MSN 1): DDP's MSNs on those queues continue
   * after them in that direction.
   */
  readonly startupMessages?: { readonly sent: readonly number[]; readonly received: readonly number[] };
}

/** One LLP connection, carrying one or more LLP streams. */
export interface LlpConnection {
  /** Unique within the process; for logs. */
  readonly id: string;
  /** Name of the transport that made it (`loopback`, `mpa-tcp`, `sctp`, ...). */
  readonly transport: string;
  readonly role: 'initiator' | 'responder';
  readonly capabilities: LlpCapabilities;
  readonly streams: readonly LlpStream[];
  readonly localAddress: LlpAddress;
  readonly remoteAddress: LlpAddress;
  readonly setup: LlpSetupInfo;
  readonly state: LlpStreamState;
  /** Graceful teardown of every stream, then of the connection. */
  close(signal?: AbortSignal): Promise<void>;
  /** Abortive teardown (TCP RST, SCTP ABORT): the peer sees an error. Idempotent. */
  abort(reason?: LlpError): void;
  /** Emits one `LlpCloseEvent` when the whole connection has ended, then completes; replays to late subscribers. */
  readonly closed$: Observable<LlpCloseEvent>;
}

/** A connection request as the responder's ULP sees it, before it accepts or rejects. */
export interface LlpConnectRequest {
  readonly remoteAddress: LlpAddress;
  readonly privateData: Uint8Array;
  /** What the initiator asked for (transport-defined). */
  readonly params: LlpParams;
}

/** The responder ULP's answer to a connection request. */
export type LlpConnectDecision =
  | { readonly accept: true; readonly privateData?: Uint8Array; readonly params?: LlpParams }
  | { readonly accept: false; readonly privateData?: Uint8Array };

export interface LlpConnectOptions {
  /** Private data for the peer's ULP (MPA Request, SCTP session initiate). At most `capabilities.maxPrivateData`. */
  readonly privateData?: Uint8Array;
  /** Streams to open, where the transport carries several (default 1). */
  readonly streams?: number;
  /** Transport-defined setup parameters (MPA revision, CRC, markers, ...). */
  readonly params?: LlpParams;
  /** Aborts the attempt with `LlpAbortError`. */
  readonly signal?: AbortSignal;
  /** Handshake timer in milliseconds; expiry fails with `LlpTimeoutError`. */
  readonly timeoutMs?: number;
  /**
   * The local end to connect from (rping's `-I`, rdma_resolve_addr's source address), for a transport that
   * binds one (MPA/TCP: the socket's local address and port); others ignore it. Default: the route's.
   */
  readonly localAddress?: LlpAddress;
}

export interface LlpListenOptions {
  /**
   * Decides on each connection request (accept with private data, or reject with private data).
   * Default: accept with no private data.
   */
  readonly onConnectRequest?: (request: LlpConnectRequest) => LlpConnectDecision | Promise<LlpConnectDecision>;
  /** Transport-defined parameters the responder offers (e.g. MPA's CRC policy). */
  readonly params?: LlpParams;
  /** Stops listening when fired. */
  readonly signal?: AbortSignal;
}

export interface LlpListener {
  /** The bound address (with the port chosen when 0 was asked). */
  readonly address: LlpAddress;
  /**
   * Connections accepted by this listener. Connections accepted before anyone subscribes are held and
   * emitted to the first subscriber, so none is lost.
   */
  readonly connections$: Observable<LlpConnection>;
  /** Failed incoming attempts (bad handshake, timeout): surfaced, never thrown into the void. */
  readonly errors$: Observable<LlpError>;
  /** Stops accepting; established connections stay up. */
  close(): Promise<void>;
}

/** An LLP plugin: what `@rddp/stack` binds under `LLP_TRANSPORT`. */
export interface LlpTransport {
  /** Short name, e.g. `loopback`, `mpa-tcp`, `sctp`. */
  readonly name: string;
  /** What connections of this transport promise (a connection's own may be narrower, e.g. MPA without CRC). */
  readonly capabilities: LlpCapabilities;
  connect(address: LlpAddress, options?: LlpConnectOptions): Promise<LlpConnection>;
  listen(address: LlpAddress, options?: LlpListenOptions): Promise<LlpListener>;
}
