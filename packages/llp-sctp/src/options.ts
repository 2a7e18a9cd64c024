/**
 * Options of the SCTP transport, and the sizing rules that tie MULPDU, the receive window (a_rwnd)
 * and the socket receive buffer together (docs/SCTP.md "Windows and MULPDU"):
 * - a message must be smaller than the peer's window, or the package never completes it;
 * - a window's worth of packets must fit the socket's receive buffer, or bursts are dropped and the
 *   package recovers one retransmission timeout (1 s or more) at a time.
 */

import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type LlpLogger, silentLogger } from '@rddp/llp';
import { MIN_MULPDU } from './connection.js';
import { SESSION_CONTROL_MAX_PRIVATE_DATA } from './rfc5043.js';

export interface SctpTransportOptions {
  /**
   * How SCTP packets travel: `udp` (default; RFC 6951-style UDP encapsulation, no privileges) or `raw`
   * (IPv4 protocol 132 through the optional `raw-socket` package; root only, fails with
   * `RawSocketUnavailableError` otherwise).
   */
  readonly encapsulation?: 'udp' | 'raw';
  /** The MULPDU to aim for, in octets (default 65536); a connection's may be smaller, see `mulpdu$`. */
  readonly mulpdu?: number;
  /** The receive window (a_rwnd) to advertise (default 2 × (mulpdu + 4 × pmtu)), capped by the socket buffer. */
  readonly receiveWindow?: number;
  /** Most LLP streams (SCTP streams) per connection (default 256, at most 65535). */
  readonly maxStreams?: number;
  /** Most octets of private data at setup (default 512, at most 65535). */
  readonly maxPrivateData?: number;
  /** SCTP packet size in octets (default 1472 for UDP over IPv4, 1500 for raw IPv4). */
  readonly pmtu?: number;
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
   * RTO.Min (RFC 4960 §15), in ms (default 50). The RFC recommends 1000 for the Internet; on a LAN every
   * lost retransmission waits one RTO (§7.2.4 fast retransmits a chunk once), so 1 s per such loss would
   * dominate a transfer. Set 1000 for the RFC's value.
   */
  readonly rtoMinMs?: number;
  /** RTO.Initial (RFC 4960 §15), in ms (default 3000): the INIT and COOKIE ECHO timer before any RTT is measured. */
  readonly rtoInitialMs?: number;
  /** RTO.Max (RFC 4960 §15), in ms (default 60000). */
  readonly rtoMaxMs?: number;
  /**
   * Most peers (UDP sources; raw: IP addresses) a listener keeps state for (default 1024). State is made
   * only by a valid COOKIE ECHO (RFC 4960 §5.1.3) and goes with the peer's last connection; beyond the
   * limit a COOKIE ECHO is discarded and the peer retries it on its T1-cookie timer.
   */
  readonly maxPendingPeers?: number;
  readonly logger?: LlpLogger;
  /** Sees every SCTP packet (as on the wire, after the adaptation shim), for debugging and tests. */
  readonly trace?: PacketTrace;
}

/** A packet tracer: `direction` is relative to this process. */
export type PacketTrace = (packet: Uint8Array, direction: 'in' | 'out') => void;

export interface ResolvedOptions {
  readonly encapsulation: 'udp' | 'raw';
  readonly mulpdu: number;
  readonly receiveWindow: number;
  readonly maxStreams: number;
  readonly maxPrivateData: number;
  readonly pmtu: number;
  readonly localHost: string | undefined;
  readonly handshakeTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
  readonly deadPeerTimeoutMs: number;
  readonly rto: RtoParameters;
  readonly maxPendingPeers: number;
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
  const pmtu = int('pmtu', o.pmtu, encapsulation === 'udp' ? 1472 : 1500, 576, 65_507);
  const mulpdu = int('mulpdu', o.mulpdu, 65_536, MIN_MULPDU, 16 * 1024 * 1024);
  const receiveWindow = int('receiveWindow', o.receiveWindow, 2 * (mulpdu + 4 * pmtu), 1500, 64 * 1024 * 1024);
  const rto: RtoParameters = {
    initialMs: int('rtoInitialMs', o.rtoInitialMs, 3000, 1, 3_600_000),
    minMs: int('rtoMinMs', o.rtoMinMs, 50, 1, 3_600_000),
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
    localHost: o.localHost,
    handshakeTimeoutMs: int('handshakeTimeoutMs', o.handshakeTimeoutMs, 10_000, 1, 3_600_000),
    closeTimeoutMs: int('closeTimeoutMs', o.closeTimeoutMs, 10_000, 1, 3_600_000),
    shutdownTimeoutMs: int('shutdownTimeoutMs', o.shutdownTimeoutMs, 3000, 1, 3_600_000),
    deadPeerTimeoutMs: int('deadPeerTimeoutMs', o.deadPeerTimeoutMs, 30_000, 0, 3_600_000),
    rto,
    maxPendingPeers: int('maxPendingPeers', o.maxPendingPeers, 1024, 1, 1_000_000),
    logger: o.logger ?? silentLogger,
    trace: o.trace,
  };
}

/** The socket receive buffer to ask for: room for two windows of packets (the kernel then doubles it). */
export function recvBufferRequest(o: ResolvedOptions): number {
  return 2 * o.receiveWindow + 16 * o.pmtu;
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
