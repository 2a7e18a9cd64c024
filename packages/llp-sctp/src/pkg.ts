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

/** The parts of `sctp/lib/association.js` this plugin uses (RFC 4960 §10 primitives and TCB fields). */
export interface PkgAssociation extends EventEmitter {
  state: string;
  /** Outbound streams: min(local OS, peer MIS) once the INIT exchange is done (RFC 4960 §5.1.1). */
  OS: number;
  MIS: number;
  PMTU: number;
  cwnd: number;
  flightsize: number;
  peer_rwnd: number;
  a_rwnd: number;
  remotePort: number;
  /** Verification Tags (RFC 4960 §8.5): ours, which the peer's packets carry, and the peer's. */
  my_tag: number;
  peer_tag?: number;
  my_next_tsn: PkgSerial;
  c_tsn_ack?: PkgSerial;
  sent: Record<string, unknown>;
  endpoint?: PkgEndpoint;
  reassembly: { rwnd: number; duplicates: number[] };
  SEND(
    buffer: unknown,
    options: { stream_id: number; ppid: number; unordered?: boolean },
    cb: (e?: Error) => void,
  ): boolean;
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
  cookieSecretKey: Buffer;
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
    options: { localPort: number; MIS: number; OS: number; a_rwnd: number },
    transport: { udpTransport: EventEmitter; udpPeer: { address: string; port: number } },
    cb: (error: Error | null, endpoint?: PkgEndpoint) => void,
  ): void;
}

interface SctpModule {
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
  options: { localPort: number; streams: number; aRwnd: number },
  udpTransport: EventEmitter,
): PkgEndpoint {
  let out: PkgEndpoint | undefined;
  let error: Error | null = null;
  Endpoint.INITIALIZE(
    { localPort: options.localPort, MIS: options.streams, OS: options.streams, a_rwnd: options.aRwnd },
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
 * Keys the endpoint's State Cookies (RFC 4960 §5.1.3) with `key` for good: stops the package's own
 * rotation timer, so that every endpoint a listener derives the same key for signs and checks alike.
 */
export function setCookieSecret(endpoint: PkgEndpoint, key: Buffer): void {
  if (endpoint._cookieInterval) clearInterval(endpoint._cookieInterval);
  endpoint._cookieInterval = undefined;
  endpoint.cookieSecretKey = key;
}

/**
 * Instance shims applied to every association (docs/SCTP.md):
 * - `duplicates`: onData() reads `this.duplicates.length` in SHUTDOWN-SENT, a field that only exists on
 *   the reassembly object; without this a DATA chunk arriving then throws (and would crash the process).
 * - `PMTU`: the package assumes 1500 octets of SCTP packet; inside UDP/IPv4 the packet gets 1472.
 * - `_updatePeer`: the package keeps min(local OS, peer MIS) but drops the peer's own OS, i.e. how many
 *   streams the peer will send on (RFC 4960 §5.1.1); it is recorded here for `peerOutboundStreams`.
 * - RTO.Initial/Min/Max (RFC 4960 §15) from the options, through SETPROTOCOLPARAMETERS (§10.1 M).
 */
export function shimAssociation(association: PkgAssociation, pmtu: number, rto: RtoParameters): void {
  Object.defineProperty(association, 'duplicates', {
    configurable: true,
    get() {
      return association.reassembly.duplicates;
    },
  });
  association.PMTU = pmtu;
  association.SETPROTOCOLPARAMETERS(rtoProtocolParameters(rto));
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
  for (const _ in association.sent) return false;
  return true;
}

/** The TSN of the last DATA chunk handed to the wire (TSNs are assigned when chunks are bundled). */
export function lastAssignedTsn(association: PkgAssociation): number {
  return (association.my_next_tsn.number - 1) >>> 0;
}

/** RFC 1982 serial comparison on 32-bit TSNs: a ≥ b. */
export function tsnGe(a: number, b: number): boolean {
  return ((a - b) | 0) >= 0;
}
