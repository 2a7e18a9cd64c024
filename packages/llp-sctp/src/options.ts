/**
 * Options of the SCTP transport, and the sizing rules that tie MULPDU, the receive window (a_rwnd)
 * and the socket receive buffer together (docs/SCTP.md "Windows and MULPDU"):
 * - a message must be smaller than the peer's window, or the package never completes it;
 * - a window's worth of packets must fit the socket's receive buffer, or bursts are dropped and the
 *   package recovers one retransmission timeout (1 s or more) at a time.
 */

import { readFileSync } from 'node:fs';
import {
  DEFAULT_IPV6_SOURCE_PREFIX,
  InvalidArgumentError,
  type LlpLogger,
  type MemoryBudget,
  processMemoryBudget,
  silentLogger,
} from '@rddp/llp';
import type { StreamSchedulerName } from './pkg.js';
import { linkMtuTowards, sctpPacketSize } from './pmtu.js';

/** Smallest MULPDU worth running DDP on (a tagged DDP header is 14 octets, RFC 5041 §4.3). */
export const MIN_MULPDU = 256;

/** The stream schedulers of RFC 8260 §3 the association offers. */
export const STREAM_SCHEDULERS: readonly StreamSchedulerName[] = ['rr', 'fcfs', 'priority'];

import { SESSION_CONTROL_MAX_PRIVATE_DATA } from './rfc5043.js';

export interface SctpTransportOptions {
  /**
   * How SCTP packets travel: `udp` (default; RFC 6951-style UDP encapsulation, no privileges) or `raw`
   * (IPv4 protocol 132 through the optional `raw-socket` package; root only, fails with
   * `RawSocketUnavailableError` otherwise).
   */
  readonly encapsulation?: 'udp' | 'raw';
  /**
   * The MULPDU to aim for, in octets. Default: one SCTP packet's user data where the path carries packets
   * of 16 KiB or more (loopback: a DDP Segment is one DATA chunk, delivered without a copy), else 65536.
   * A connection's may be smaller (it must fit the peer's window).
   */
  readonly mulpdu?: number;
  /** The receive window (a_rwnd) to advertise (default 1 MiB), capped by the socket buffer. */
  readonly receiveWindow?: number;
  /** Most LLP streams (SCTP streams) per connection (default 256, at most 65535). */
  readonly maxStreams?: number;
  /** Most octets of private data at setup (default 512, at most 65535). */
  readonly maxPrivateData?: number;
  /**
   * SCTP packet size in octets. Default: from the route to the peer (pmtu.ts): the outgoing interface's
   * MTU less the IP (and UDP) headers — 65 507 on loopback, 1 472 on an Ethernet-MTU link with UDP.
   */
  readonly pmtu?: number;
  /**
   * The stream scheduler (RFC 8260 §3) that picks which stream's message goes next: `rr` (default,
   * round-robin, one message per stream in turn), `fcfs` (first come, first served) or `priority`.
   */
  readonly scheduler?: StreamSchedulerName;
  /**
   * Offer user message interleaving (RFC 8260 I-DATA chunks; default false). Used when the peer offers it
   * too: fragments of a large message on one stream then no longer hold a small one on another.
   */
  readonly interleaving?: boolean;
  /** Local address outgoing connections bind to (default: any). */
  readonly localHost?: string;
  /** Setup timer when `connect` gets no `timeoutMs`, and the responder's wait for Session Initiate (default 10000). */
  readonly handshakeTimeoutMs?: number;
  /** How long a stream waits for the peer's Session Terminate (default 10000). */
  readonly closeTimeoutMs?: number;
  /** How long SHUTDOWN may take once every stream is closed, before ABORT (default 3000). */
  readonly shutdownTimeoutMs?: number;
  /** No acknowledgement progress for this long with data outstanding ends the connection (default 30000; 0 = never). */
  readonly deadPeerTimeoutMs?: number;
  /**
   * RTO.Min (RFC 9260 §16), in ms (default 1000, the RFC's value). A lower one recovers a lost
   * retransmission sooner on a LAN but fires T3-rtx spuriously when the event loop stalls longer
   * (association stats `spuriousT3`).
   */
  readonly rtoMinMs?: number;
  /** RTO.Initial (RFC 9260 §16), in ms (default 1000): the INIT and COOKIE ECHO timer before any RTT is measured. */
  readonly rtoInitialMs?: number;
  /** RTO.Max (RFC 4960 §15), in ms (default 60000). */
  readonly rtoMaxMs?: number;
  /**
   * Most peers (UDP sources; raw: IP addresses) a listener keeps state for (default 1024). State is made
   * only by a valid COOKIE ECHO (RFC 4960 §5.1.3) and goes with the peer's last connection; beyond the
   * limit a COOKIE ECHO is discarded and the peer retries it on its T1-cookie timer.
   */
  readonly maxPendingPeers?: number;
  /** Most peers with state from one source (default 256, a quarter of `maxPendingPeers`'s default). */
  readonly maxPendingPeersPerSource?: number;
  /** Most associations a listener serves at once (default 4096); more get an ABORT. */
  readonly maxAssociations?: number;
  /** Most associations from one source (default 1024, a quarter of `maxAssociations`'s default). */
  readonly maxAssociationsPerSource?: number;
  /** IPv6 prefix length one source is counted by (default 64; 128 counts every address apart). */
  readonly ipv6SourcePrefix?: number;
  /**
   * An association with no user message received or sent for this long is aborted (`LlpTimeoutError`).
   * Default 300000 (5 min); 0 turns it off. HEARTBEATs keep a path verified, not an association in use.
   */
  readonly idleTimeoutMs?: number;
  /**
   * The budget each association's receive window is reserved from (default: the process's,
   * `processMemoryBudget()`); an association whose window does not fit is aborted at once.
   */
  readonly memoryBudget?: MemoryBudget;
  readonly logger?: LlpLogger;
  /** Sees every SCTP packet (as on the wire, after the adaptation shim), for debugging and tests. */
  readonly trace?: PacketTrace;
}

/** A packet tracer: `direction` is relative to this process. */
export type PacketTrace = (packet: Uint8Array, direction: 'in' | 'out') => void;

export interface ResolvedOptions {
  readonly encapsulation: 'udp' | 'raw';
  readonly receiveWindow: number;
  readonly maxStreams: number;
  readonly maxPrivateData: number;
  /** Fixed SCTP packet size, or undefined: from the route per path. */
  readonly pmtu: number | undefined;
  /** The MULPDU asked for, or undefined: from the packet size (`mulpduFor`). */
  readonly mulpdu: number | undefined;
  readonly scheduler: StreamSchedulerName;
  readonly interleaving: boolean;
  readonly localHost: string | undefined;
  readonly handshakeTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
  readonly deadPeerTimeoutMs: number;
  readonly rto: RtoParameters;
  readonly maxPendingPeers: number;
  readonly maxPendingPeersPerSource: number;
  readonly maxAssociations: number;
  readonly maxAssociationsPerSource: number;
  readonly ipv6SourcePrefix: number;
  readonly idleTimeoutMs: number;
  readonly memoryBudget: MemoryBudget;
  readonly logger: LlpLogger;
  readonly trace: PacketTrace | undefined;
}

function int(name: string, v: number | undefined, dflt: number, min: number, max: number): number {
  const x = v ?? dflt;
  if (!Number.isInteger(x) || x < min || x > max) {
    throw new InvalidArgumentError(`sctp option ${name} must be an integer in [${min}, ${max}], got ${v}`);
  }
  return x;
}

/** The retransmission timer's bounds (RFC 4960 §6.3.1, §15), in ms. */
export interface RtoParameters {
  readonly initialMs: number;
  readonly minMs: number;
  readonly maxMs: number;
}

export function resolveOptions(o: SctpTransportOptions = {}): ResolvedOptions {
  const encapsulation = o.encapsulation ?? 'udp';
  if (encapsulation !== 'udp' && encapsulation !== 'raw') {
    throw new InvalidArgumentError(`sctp option encapsulation must be 'udp' or 'raw', got ${String(encapsulation)}`);
  }
  const pmtu = o.pmtu === undefined ? undefined : int('pmtu', o.pmtu, 0, 536, 65_507);
  const mulpdu = o.mulpdu === undefined ? undefined : int('mulpdu', o.mulpdu, 0, MIN_MULPDU, 16 * 1024 * 1024);
  const receiveWindow = int('receiveWindow', o.receiveWindow, 1024 * 1024, 1500, 64 * 1024 * 1024);
  const scheduler = o.scheduler ?? 'rr';
  if (!STREAM_SCHEDULERS.includes(scheduler)) {
    throw new InvalidArgumentError(
      `sctp option scheduler must be one of ${STREAM_SCHEDULERS.join(', ')} (RFC 8260 §3), got ${String(scheduler)}`,
    );
  }
  if (o.interleaving !== undefined && typeof o.interleaving !== 'boolean') {
    throw new InvalidArgumentError(`sctp option interleaving must be a boolean, got ${String(o.interleaving)}`);
  }
  const rto: RtoParameters = {
    initialMs: int('rtoInitialMs', o.rtoInitialMs, 1000, 1, 3_600_000),
    minMs: int('rtoMinMs', o.rtoMinMs, 1000, 1, 3_600_000),
    maxMs: int('rtoMaxMs', o.rtoMaxMs, 60_000, 1, 3_600_000),
  };
  if (rto.minMs > rto.maxMs) {
    throw new InvalidArgumentError(`sctp option rtoMinMs (${rto.minMs}) must not exceed rtoMaxMs (${rto.maxMs})`);
  }
  return {
    encapsulation,
    mulpdu,
    receiveWindow,
    maxStreams: int('maxStreams', o.maxStreams, 256, 1, 65_535),
    maxPrivateData: int('maxPrivateData', o.maxPrivateData, 512, 0, SESSION_CONTROL_MAX_PRIVATE_DATA),
    pmtu,
    scheduler,
    interleaving: o.interleaving ?? false,
    localHost: o.localHost,
    handshakeTimeoutMs: int('handshakeTimeoutMs', o.handshakeTimeoutMs, 10_000, 1, 3_600_000),
    closeTimeoutMs: int('closeTimeoutMs', o.closeTimeoutMs, 10_000, 1, 3_600_000),
    shutdownTimeoutMs: int('shutdownTimeoutMs', o.shutdownTimeoutMs, 3000, 1, 3_600_000),
    deadPeerTimeoutMs: int('deadPeerTimeoutMs', o.deadPeerTimeoutMs, 30_000, 0, 3_600_000),
    rto,
    maxPendingPeers: int('maxPendingPeers', o.maxPendingPeers, 1024, 1, 1_000_000),
    maxPendingPeersPerSource: int('maxPendingPeersPerSource', o.maxPendingPeersPerSource, 256, 1, 1_000_000),
    maxAssociations: int('maxAssociations', o.maxAssociations, 4096, 1, 1_000_000),
    maxAssociationsPerSource: int('maxAssociationsPerSource', o.maxAssociationsPerSource, 1024, 1, 1_000_000),
    ipv6SourcePrefix: int('ipv6SourcePrefix', o.ipv6SourcePrefix, DEFAULT_IPV6_SOURCE_PREFIX, 0, 128),
    idleTimeoutMs: int('idleTimeoutMs', o.idleTimeoutMs, 300_000, 0, 2 ** 31 - 1),
    memoryBudget: o.memoryBudget ?? processMemoryBudget(),
    logger: o.logger ?? silentLogger,
    trace: o.trace,
  };
}

/** The socket receive buffer to ask for: room for two windows of packets (the kernel then doubles it). */
export function recvBufferRequest(o: ResolvedOptions): number {
  return 2 * o.receiveWindow + 16 * (o.pmtu ?? 65_507);
}

/** The packet size of a path: the fixed option, or the route's (pmtu.ts). */
export function pathPacketSize(o: ResolvedOptions, peerHost: string, localHost?: string): number {
  if (o.pmtu !== undefined) return o.pmtu;
  return sctpPacketSize(linkMtuTowards(peerHost, localHost), peerHost, o.encapsulation);
}

/** DATA chunk header room left in a packet: common header 12 + I-DATA header 20 (the larger one). */
const PACKET_OVERHEAD = 32;

/** The MULPDU a connection over packets of `pmtu` octets aims for (see `SctpTransportOptions.mulpdu`). */
export function mulpduFor(o: ResolvedOptions, pmtu: number): number {
  if (o.mulpdu !== undefined) return o.mulpdu;
  return pmtu >= 16 * 1024 ? pmtu - PACKET_OVERHEAD : 65_536;
}

/**
 * The receive window a socket with `recvBufferSize` (as the kernel reports it, i.e. doubled) can back:
 * a quarter of it, since each packet costs about twice its payload in kernel accounting.
 */
export function windowFor(o: ResolvedOptions, recvBufferSize: number): number {
  return Math.max(1500, Math.min(o.receiveWindow, Math.floor(recvBufferSize / 4)));
}

/** The receive buffer Linux grants for a request (raw sockets: no getsockopt through raw-socket). */
export function grantedRecvBuffer(request: number): number {
  let max = 212_992;
  try {
    max = Number.parseInt(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'), 10) || max;
  } catch {
    // not Linux: assume the common default
  }
  return 2 * Math.min(request, max);
}
