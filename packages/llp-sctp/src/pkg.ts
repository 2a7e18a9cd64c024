/**
 * Typed facade over `@rddp/sctp` (npm `sctp` 1.0.0 with rddp's RFC 4960 fixes; untyped CommonJS), and the small instance-level shims
 * this plugin applies to it. Everything that touches the package's internals is named here, so an
 * upgrade has one file to check (docs/SCTP.md, "The sctp package").
 */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type { RtoParameters } from './options.js';

const require = createRequire(import.meta.url);

/** The package's serial number (RFC 1982) objects: `number` is the value. */
export interface PkgSerial {
  readonly number: number;
}

/** The association's counters (transmit.js). */
export interface PkgAssociationStats {
  packetsSent: number;
  packetsReceived: number;
  dataChunksSent: number;
  dataChunksReceived: number;
  sacksSent: number;
  sacksReceived: number;
  retransmissions: number;
  fastRetransmits: number;
  /** T3-rtx expiries (RFC 4960 §6.3.3). */
  t3Expiries: number;
  /** T3-rtx retransmissions the peer reported as duplicates (the original had arrived): spurious expiries. */
  spuriousT3: number;
  zeroWindowProbes: number;
  /** Packets the socket refused (counted as lost). */
  sendErrors: number;
  /** Packets sent with RFC 7053's I bit (the sender waited for window). */
  immediateSacksRequested: number;
}

/** RFC 8260 §3 stream schedulers the package implements. */
export type StreamSchedulerName = 'fcfs' | 'rr' | 'priority';

/** The parts of `sctp/lib/association.js` this plugin uses (RFC 4960 §10 primitives and TCB fields). */
export interface PkgAssociation extends EventEmitter {
  state: string;
  /** Outbound streams: min(local OS, peer MIS) once the INIT exchange is done (RFC 4960 §5.1.1). */
  OS: number;
  MIS: number;
  PMTU: number;
  cwnd: number;
  ssthresh?: number;
  flightsize: number;
  peer_rwnd: number;
  a_rwnd: number;
  remotePort: number;
  /** RTO now (RFC 4960 §6.3.1), ms. */
  RTO: number;
  /** I-DATA in use (RFC 8260 §2.2: both sides offered it). */
  interleaving: boolean;
  readonly stats: PkgAssociationStats;
  /** RFC 8899 PLPMTUD state (pmtud.js), once a path MTU was set with `_setPmtu`. */
  readonly plpmtud?: {
    readonly state: 'search' | 'complete';
    readonly max: number;
    readonly confirmed: number;
    readonly probesSent: number;
    readonly probesAcked: number;
    readonly blackHoles: number;
  };
  /** DATA chunks sent and not yet covered by the Cumulative TSN Ack. */
  readonly outstandingCount: number;
  /** Octets of user messages queued and not yet handed to the wire. */
  readonly bufferedAmount: number;
  /** Nothing queued, in flight or unacknowledged. */
  readonly idle: boolean;
  /** Verification Tags (RFC 4960 §8.5): ours, which the peer's packets carry, and the peer's. */
  my_tag: number;
  peer_tag?: number;
  readonly my_next_tsn: PkgSerial;
  readonly c_tsn_ack?: PkgSerial;
  endpoint?: PkgEndpoint;
  reassembly: { rwnd: number; duplicates: number[]; cumTsn: number };
  /**
   * RFC 4960 §10.1 E: queues a user message on its stream; `cb` runs once its last fragment is in a
   * packet handed to the wire (or with the error that ended the association first). Returns false once
   * more than the association's high-water mark is queued.
   */
  SEND(
    buffer: unknown,
    options: { stream_id: number; ppid: number; unordered?: boolean },
    cb: (e?: Error) => void,
  ): boolean;
  SETSCHEDULER(kind: StreamSchedulerName): void;
  SETPRIORITY(streamId: number, priority: number): void;
  /** Fails every SEND not yet handed over with `error`. */
  _failQueued(error: Error): void;
  /**
   * Sets the path MTU the user knows (the route's): the initial cwnd for it (RFC 9260 §7.2.1) and the
   * largest size RFC 8899 probing confirms (packets start at BASE_PLPMTU, 1200).
   */
  _setPmtu(pmtu: number): void;
  RECEIVE(): (Buffer & { ppid?: number }) | undefined;
  SHUTDOWN(cb?: () => void): void;
  ABORT(reason?: string): void;
  ERROR(causes: unknown[], destination?: string): void;
  _abort(options?: { error_causes?: unknown[] }): void;
  _sack(): void;
  /** Pending delayed-SACK timer (RFC 4960 §6.2), if any. */
  _sack_timer?: unknown;
  _destroy(): void;
  /** RFC 4960 §10.1 M, for the RTO parameters only (added by @rddp/sctp, packages/sctp/NOTICE.md). */
  SETPROTOCOLPARAMETERS(params: PkgRtoParameters): void;
  /** Takes the peer's INIT or INIT ACK fields (RFC 4960 §5.1): OS, peer tag, peer_rwnd. */
  _updatePeer(chunk: PkgInitChunk): void;
}

/** RTO.Initial, RTO.Min, RTO.Max (RFC 4960 §15) in ms, as the patched package names them. */
export interface PkgRtoParameters {
  readonly rto_initial: number;
  readonly rto_min: number;
  readonly rto_max: number;
}

export function rtoProtocolParameters(rto: RtoParameters): PkgRtoParameters {
  return { rto_initial: rto.initialMs, rto_min: rto.minMs, rto_max: rto.maxMs };
}

/** The fields of a parsed INIT or INIT ACK the package hands to `_updatePeer`. */
export interface PkgInitChunk {
  readonly outbound_streams: number;
  readonly inbound_streams: number;
  readonly a_rwnd: number;
}

/** The parts of `sctp/lib/endpoint.js` this plugin uses. */
export interface PkgEndpoint extends EventEmitter {
  localPort: number;
  MIS: number;
  OS: number;
  a_rwnd: number;
  /** Offer I-DATA in INIT / INIT ACK (RFC 8260 §2.2). */
  idata: boolean;
  scheduler?: StreamSchedulerName;
  /** The State Cookie key (HMAC-SHA-256, RFC 4960 §5.1.3), and the one before it, still accepted. */
  cookieSecretKey: Buffer;
  previousCookieSecretKey: Buffer | null;
  associations: PkgAssociation[];
  ASSOCIATE(options: { remotePort: number; OS: number; MIS: number } & Partial<PkgRtoParameters>): PkgAssociation;
  DESTROY(): void;
  /**
   * RFC 4960 §5.1.5 steps 1–4: the State Cookie's MAC (keyed with `cookieSecretKey`), its ports and tag
   * against the packet's common header, its lifespan. Truthy when the cookie would create an association.
   */
  validateCookie(cookie: Buffer, header: { src_port: number; dst_port: number; v_tag: number }): unknown;
  /** The package's timer that replaces `cookieSecretKey` with a random one every 5 cookie lifespans. */
  _cookieInterval?: NodeJS.Timeout;
}

interface EndpointStatic {
  INITIALIZE(
    options: {
      localPort: number;
      MIS: number;
      OS: number;
      a_rwnd: number;
      idata: boolean;
      scheduler: StreamSchedulerName;
    },
    transport: { udpTransport: EventEmitter; udpPeer: { address: string; port: number } },
    cb: (error: Error | null, endpoint?: PkgEndpoint) => void,
  ): void;
}

interface SctpModule {
  configure(options: { crc32c?: (packet: Buffer) => number; verifyChecksum?: boolean }): void;
  connect(options: Record<string, unknown>, listener?: () => void): SctpSocket;
  createServer(options?: Record<string, unknown>): EventEmitter;
  defaults(params?: Record<string, unknown>): Record<string, unknown>;
}

/** The package's net-like Socket (sockets.js), used only by the defect tests and the benchmark baseline. */
export interface SctpSocket extends EventEmitter {
  OS: number;
  MIS: number;
  association?: PkgAssociation;
  readableLength: number;
  resume(): this;
  write(chunk: Uint8Array, cb?: (e?: Error | null) => void): boolean;
  end(): void;
  destroy(): void;
  createStream(
    id: number,
    ppid?: number,
  ): NodeJS.WritableStream & { write(c: Uint8Array, cb?: (e?: Error | null) => void): boolean };
  sendToAssociation(chunk: Uint8Array, options: { stream_id: number; ppid?: number }, cb: (e?: Error) => void): void;
}

const Endpoint = require('@rddp/sctp/lib/endpoint') as EndpointStatic;
/** The package's public entry (net-like API). */
export const sctpPackage = require('@rddp/sctp') as SctpModule;
/** The package's PPID table, for tests that compare against IANA's. */
export const packagePpids = (require('@rddp/sctp/lib/defs') as { PPID: Record<string, number | string> }).PPID;

/**
 * Creates a package endpoint on a datagram "socket" of ours (the package's UDP mode, RFC 6951-style):
 * whatever it sends goes through `udpTransport.send`, whatever we emit as 'message' it receives.
 */
export function createEndpoint(
  options: { localPort: number; streams: number; aRwnd: number; idata: boolean; scheduler: StreamSchedulerName },
  udpTransport: EventEmitter,
): PkgEndpoint {
  let out: PkgEndpoint | undefined;
  let error: Error | null = null;
  Endpoint.INITIALIZE(
    {
      localPort: options.localPort,
      MIS: options.streams,
      OS: options.streams,
      a_rwnd: options.aRwnd,
      idata: options.idata,
      scheduler: options.scheduler,
    },
    // The package's UDPTransport only reads udpPeer to address its send() call; our socket knows its peer.
    { udpTransport, udpPeer: { address: 'peer', port: 0 } },
    (e, ep) => {
      error = e;
      out = ep;
    },
  );
  if (error || !out) throw error ?? new Error('sctp endpoint initialization failed');
  return out;
}

/**
 * Keys the endpoint's State Cookies (RFC 4960 §5.1.3) with `key`, `previous` still accepted: stops the
 * package's own rotation timer, so that the keys a listener derives (and rotates) are the ones every
 * endpoint signs and checks with.
 */
export function setCookieSecret(endpoint: PkgEndpoint, key: Buffer, previous: Buffer | null = null): void {
  if (endpoint._cookieInterval) clearInterval(endpoint._cookieInterval);
  endpoint._cookieInterval = undefined;
  endpoint.cookieSecretKey = key;
  endpoint.previousCookieSecretKey = previous;
}

/**
 * Instance shims applied to every association (docs/SCTP.md):
 * - the path MTU (SCTP packet size) and the initial cwnd for it (RFC 9260 §7.2.1);
 * - `_updatePeer`: the package keeps min(local OS, peer MIS) but drops the peer's own OS, i.e. how many
 *   streams the peer will send on (RFC 4960 §5.1.1); it is recorded here for `peerOutboundStreams`;
 * - RTO.Initial/Min/Max (RFC 4960 §15) from the options, through SETPROTOCOLPARAMETERS (§10.1 M);
 * - the stream scheduler (RFC 8260 §3).
 */
export function shimAssociation(
  association: PkgAssociation,
  pmtu: number,
  rto: RtoParameters,
  scheduler: StreamSchedulerName = 'rr',
): void {
  association._setPmtu(pmtu);
  association.SETPROTOCOLPARAMETERS(rtoProtocolParameters(rto));
  association.SETSCHEDULER(scheduler);
  const update = association._updatePeer.bind(association);
  association._updatePeer = (chunk) => {
    peerOS.set(association, chunk.outbound_streams);
    update(chunk);
  };
}

const peerOS = new WeakMap<PkgAssociation, number>();

/**
 * The Number of Outbound Streams the peer announced in its INIT or INIT ACK (RFC 4960 §3.3.2): the
 * streams it may send on, so the bound of our inbound streams. Undefined before the peer's INIT (ACK)
 * was processed, or on an association `shimAssociation` was not applied to.
 */
export function peerOutboundStreams(association: PkgAssociation): number | undefined {
  return peerOS.get(association);
}

/** Whether every DATA chunk this association sent has been acknowledged. */
export function allAcked(association: PkgAssociation): boolean {
  return association.outstandingCount === 0;
}
