/** Options of the UDP LLP, their defaults and checks (docs/UDP-LLP.md "Options"). */
import {
  DEFAULT_IPV6_SOURCE_PREFIX,
  InvalidArgumentError,
  type LlpLogger,
  type LlpParams,
  silentLogger,
} from '@rddp/llp';
import { CRC_LENGTH, HEADER_LENGTH, MAX_DATAGRAM, MAX_STREAMS, MIN_DATAGRAM, MIN_WINDOW } from './wire.js';

/**
 * Fault injection on the sending side, for experiments: what the network could do to a datagram anyway,
 * made reproducible by a seed. Applies to DATA datagrams; with `control: true` to every datagram.
 */
export interface UdpFaults {
  /** Seed of the PRNG (default 1). */
  readonly seed?: number;
  /** Probability that a datagram is dropped instead of sent (0..1). */
  readonly drop?: number;
  /** Probability that a datagram is sent twice (0..1). */
  readonly duplicate?: number;
  /** Probability that a datagram is held back and sent after the next one (0..1). */
  readonly reorder?: number;
  /** Apply the faults to control datagrams (REQUEST, ACCEPT, ACK, PROBE, FIN, ...) too. Default false. */
  readonly control?: boolean;
}

export interface UdpOptions {
  /**
   * UDP payload octets of a DATA datagram: our 16-octet header, the ULPDU and the 4-octet CRC32c (when in
   * use). The MULPDU is this less header and CRC. Default 1400 (fits a 1500-octet Ethernet MTU over IPv4 or
   * IPv6 without fragmentation). The connection uses the smaller of both ends' values. 64..65507.
   */
  readonly datagramSize?: number;
  /** Append a CRC32c to every datagram (the connection uses it when either end asks). Default true. */
  readonly crc?: boolean;
  /** LLP streams a `connect` asks for (its `streams` option wins). Default 1. */
  readonly streams?: number;
  /** Most streams a responder grants per connection (1..65535). Default 256. */
  readonly maxStreams?: number;
  /**
   * Flow control: DATA datagrams per stream the peer may have sent that this end has not consumed yet
   * (2..2^32−1). Default 64: at 1400 octets, about 150 KiB of kernel receive buffer per stream.
   */
  readonly receiveWindow?: number;
  /** SO_RCVBUF asked of the kernel for each socket (Linux grants at most net.core.rmem_max). Default 1 MiB. */
  readonly receiveBufferSize?: number;
  /** Octets in the socket's send queue above which `send` returns false. Default 1 MiB. */
  readonly highWaterMark?: number;
  /** Connection setup must finish within this (a connect's `timeoutMs` wins). Default 10 000 ms. */
  readonly handshakeTimeoutMs?: number;
  /** Interval of REQUEST, FIN and PROBE retransmissions. Default 100 ms. */
  readonly retransmitMs?: number;
  /** A graceful close not answered by the peer's FIN within this ends with LlpTimeoutError. Default 3000 ms. */
  readonly closeTimeoutMs?: number;
  /** How long an ended connection still answers its peer's late FINs (and ignores late DATA). Default 2000 ms. */
  readonly lingerMs?: number;
  /**
   * Listener: most connections it carries at once (accepted and not yet let go of, plus setups its ULP is
   * deciding). A COOKIE_ECHO beyond it is refused with ABORT code 5 and reported. 1..65535. Default 256.
   */
  readonly maxConnections?: number;
  /**
   * Listener: most setups holding state before they are connections — the ULP deciding (`onConnectRequest`)
   * or a REJECT kept `lingerMs` for retransmitted COOKIE_ECHOs. Beyond it: ABORT code 5. 1..65535. Default 64.
   */
  readonly maxPendingConnections?: number;
  /**
   * Listener: most of `maxConnections` one source holds (connections carried plus setups being decided),
   * so one host completing handshakes cannot take every place. A source is an IPv4 address or an IPv6
   * prefix (`ipv6SourcePrefix`); ports do not matter. Beyond it: ABORT code 5 and a ResourceLimitError
   * naming the source. 1..maxConnections. Default a quarter of maxConnections (64), at least 1.
   */
  readonly maxConnectionsPerSource?: number;
  /**
   * Listener: most of `maxPendingConnections` one source holds (setups the ULP is deciding, REJECTs kept).
   * Beyond it: ABORT code 5. 1..maxPendingConnections. Default 16 (or maxPendingConnections if lower).
   */
  readonly maxPendingConnectionsPerSource?: number;
  /**
   * Listener: IPv6 addresses count as one source per prefix of this length (one host commonly owns a /64).
   * IPv4-mapped IPv6 addresses count as their IPv4 address. 0..128. Default 64.
   */
  readonly ipv6SourcePrefix?: number;
  /** Listener: how long a state cookie is good for (RFC 4960 §5.1.3 Valid.Cookie.Life). 1..2^31−1. Default 10 000 ms. */
  readonly cookieLifetimeMs?: number;
  /** A connection that hears nothing from its peer for this long ends with LlpTimeoutError. Default 30 000 ms. */
  readonly idleTimeoutMs?: number;
  /** A connection that has sent nothing for this long sends KEEPALIVE; below idleTimeoutMs. Default a third of it. */
  readonly keepaliveMs?: number;
  readonly faults?: UdpFaults;
  readonly logger?: LlpLogger;
}

export interface ResolvedUdpOptions {
  readonly datagramSize: number;
  readonly crc: boolean;
  readonly streams: number;
  readonly maxStreams: number;
  readonly receiveWindow: number;
  readonly receiveBufferSize: number;
  readonly highWaterMark: number;
  readonly handshakeTimeoutMs: number;
  readonly retransmitMs: number;
  readonly closeTimeoutMs: number;
  readonly lingerMs: number;
  readonly maxConnections: number;
  readonly maxPendingConnections: number;
  readonly maxConnectionsPerSource: number;
  readonly maxPendingConnectionsPerSource: number;
  readonly ipv6SourcePrefix: number;
  readonly cookieLifetimeMs: number;
  readonly idleTimeoutMs: number;
  readonly keepaliveMs: number;
  readonly faults: UdpFaults | undefined;
  readonly logger: LlpLogger;
}

export const UDP_DEFAULT_DATAGRAM_SIZE = 1400;
/** Default `maxPendingConnectionsPerSource`. */
export const UDP_DEFAULT_PENDING_PER_SOURCE = 16;
/** Most octets of private data at setup, as MPA allows (RFC 5044 §7.1). */
export const UDP_MAX_PRIVATE_DATA = 512;

function int(name: string, v: unknown, fallback: number, min: number, max: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new InvalidArgumentError(`${name} must be an integer ${min}..${max}, got ${String(v)}`);
  return v;
}

function probability(name: string, v: unknown): void {
  if (v !== undefined && (typeof v !== 'number' || !(v >= 0 && v <= 1)))
    throw new InvalidArgumentError(`faults.${name} must be a probability 0..1, got ${String(v)}`);
}

export function resolveOptions(o: UdpOptions = {}): ResolvedUdpOptions {
  const f = o.faults;
  if (f) for (const k of ['drop', 'duplicate', 'reorder'] as const) probability(k, f[k]);
  if (o.crc !== undefined && typeof o.crc !== 'boolean') throw new InvalidArgumentError('crc must be a boolean');
  const maxStreams = int('maxStreams', o.maxStreams, 256, 1, MAX_STREAMS);
  const idleTimeoutMs = int('idleTimeoutMs', o.idleTimeoutMs, 30_000, 2, 2 ** 31 - 1);
  const keepaliveMs = int('keepaliveMs', o.keepaliveMs, Math.max(1, Math.floor(idleTimeoutMs / 3)), 1, 2 ** 31 - 1);
  if (keepaliveMs >= idleTimeoutMs)
    throw new InvalidArgumentError(`keepaliveMs (${keepaliveMs}) must be below idleTimeoutMs (${idleTimeoutMs})`);
  const maxConnections = int('maxConnections', o.maxConnections, 256, 1, 0xffff);
  const maxPendingConnections = int('maxPendingConnections', o.maxPendingConnections, 64, 1, 0xffff);
  // A share above the listener-wide bound could never be reached: refused, as keepaliveMs above idleTimeoutMs is.
  const maxConnectionsPerSource = int(
    'maxConnectionsPerSource',
    o.maxConnectionsPerSource,
    Math.max(1, Math.floor(maxConnections / 4)),
    1,
    maxConnections,
  );
  const maxPendingConnectionsPerSource = int(
    'maxPendingConnectionsPerSource',
    o.maxPendingConnectionsPerSource,
    Math.min(UDP_DEFAULT_PENDING_PER_SOURCE, maxPendingConnections),
    1,
    maxPendingConnections,
  );
  return {
    datagramSize: int('datagramSize', o.datagramSize, UDP_DEFAULT_DATAGRAM_SIZE, MIN_DATAGRAM, MAX_DATAGRAM),
    crc: o.crc ?? true,
    streams: int('streams', o.streams, 1, 1, MAX_STREAMS),
    maxStreams,
    receiveWindow: int('receiveWindow', o.receiveWindow, 64, MIN_WINDOW, 0xffff_ffff),
    receiveBufferSize: int('receiveBufferSize', o.receiveBufferSize, 1 << 20, 1, 2 ** 31 - 1),
    highWaterMark: int('highWaterMark', o.highWaterMark, 1 << 20, 1, Number.MAX_SAFE_INTEGER),
    handshakeTimeoutMs: int('handshakeTimeoutMs', o.handshakeTimeoutMs, 10_000, 1, 2 ** 31 - 1),
    retransmitMs: int('retransmitMs', o.retransmitMs, 100, 1, 2 ** 31 - 1),
    closeTimeoutMs: int('closeTimeoutMs', o.closeTimeoutMs, 3000, 1, 2 ** 31 - 1),
    lingerMs: int('lingerMs', o.lingerMs, 2000, 0, 2 ** 31 - 1),
    maxConnections,
    maxPendingConnections,
    maxConnectionsPerSource,
    maxPendingConnectionsPerSource,
    ipv6SourcePrefix: int('ipv6SourcePrefix', o.ipv6SourcePrefix, DEFAULT_IPV6_SOURCE_PREFIX, 0, 128),
    cookieLifetimeMs: int('cookieLifetimeMs', o.cookieLifetimeMs, 10_000, 1, 2 ** 31 - 1),
    idleTimeoutMs,
    keepaliveMs,
    faults: f,
    logger: o.logger ?? silentLogger,
  };
}

/** A connect's `params` (`{ crc?, datagramSize? }`) applied over the transport's options; other keys are ignored. */
export function withParams(o: ResolvedUdpOptions, params: LlpParams | undefined): ResolvedUdpOptions {
  if (!params) return o;
  const crc = params['crc'];
  if (crc !== undefined && typeof crc !== 'boolean') throw new InvalidArgumentError('params.crc must be a boolean');
  return {
    ...o,
    crc: crc ?? o.crc,
    datagramSize: int('params.datagramSize', params['datagramSize'], o.datagramSize, MIN_DATAGRAM, MAX_DATAGRAM),
  };
}

/** The MULPDU a connection with this datagram size and CRC choice offers. */
export function mulpduFor(datagramSize: number, crc: boolean): number {
  return datagramSize - HEADER_LENGTH - (crc ? CRC_LENGTH : 0);
}
