/**
 * Options of the MPA/TCP transport and the policy choices behind their defaults (see README "Policies").
 */
import {
  codedError,
  DEFAULT_IPV6_SOURCE_PREFIX,
  InvalidArgumentError,
  LlpError,
  type LlpLogger,
  type MemoryBudget,
  processMemoryBudget,
  silentLogger,
} from '@rddp/llp';
import { congestionControlOption } from './congestion.js';
import { INLINE_DEFAULT, INLINE_MAX, type MarkerFraming } from './fpdu.js';
import { MULPDU_MAX, MULPDU_MIN } from './markers.js';
import { writeRanges } from './tx-direct.js';

/**
 * `directSend: true` asked for where `@rddp/writev` is not built (or on Windows): refused, not sent
 * through Node's socket in its place (issue 37; unset, the transport still takes the direct path where it can).
 */
export class DirectSendUnavailableError extends codedError(LlpError, 'ERR_MPA_DIRECT_SEND_UNAVAILABLE') {}

/** `directSend`: unset is the default (direct where the binding is built, `RDDP_MPA_DIRECT_SEND=0` off). */
function directSendOption(v: unknown): boolean {
  if (v === undefined) return process.env.RDDP_MPA_DIRECT_SEND !== '0';
  const on = flag('directSend', v);
  if (on && writeRanges === undefined)
    throw new DirectSendUnavailableError(
      "directSend needs the @rddp/writev native build (sendmsg straight to the socket), which does not load here: apt-get install build-essential python3, then pnpm install (builds @rddp/writev with node-gyp); or send through Node's socket (directSend: false, rddp --send-path socket)",
    );
  return on;
}

/** `highWaterMark`'s default: octets queued for the socket (views of the ULP's buffers, FPDU headers). */
export const DEFAULT_HIGH_WATER_MARK = 4 << 20;
/**
 * `highWaterMark`'s default on a stream that sends Markers gathered through Node's socket (RFC 5044 §4.3; no
 * `@rddp/writev`, or `directSend: false`): its FPDUs are many small chunks.
 */
export const MARKERS_HIGH_WATER_MARK = 1 << 20;

/**
 * `idleTimeoutMs`'s default: 5 minutes. Idle queue pairs are normal in RDMA, so it is long; but a
 * connection nobody uses is a place and a receive arena a peer can keep forever, so it is not off.
 */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;

/** Most a 16-bit ULPDU_Length can say (RFC 5044 §4.1): the ceiling of `maxUlpduLength`. */
export const ULPDU_LENGTH_FIELD_MAX = 0xffff;

function maxUlpduLength(v: unknown): number {
  if (v === undefined) return MULPDU_MAX;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < MULPDU_MAX || v > ULPDU_LENGTH_FIELD_MAX)
    throw new InvalidArgumentError(
      `maxUlpduLength must be an integer ${MULPDU_MAX}..${ULPDU_LENGTH_FIELD_MAX} (RFC 5044 §3 and the 16-bit ULPDU_Length), got ${String(v)}`,
    );
  return v;
}

import {
  INITIATOR_DEFAULTS,
  type MpaParams,
  RESPONDER_DEFAULTS,
  type ResolvedMpaParams,
  resolveParams,
} from './negotiation.js';

export interface MpaTcpOptions {
  /** Default MPA parameters of `connect` and `listen` (each call's `params` override them). */
  readonly params?: MpaParams;
  /**
   * EMSS the MULPDU is derived from (RFC 5044 §4.5). 'auto' (default): 65483 towards a loopback address
   * (lo's MTU 65536 less IP, TCP and timestamp headers: Linux's advmss there), else 1448 over IPv4 and
   * 1428 over IPv6 (a 1500-octet MTU with TCP timestamps). Node exposes no TCP_MAXSEG, hence the guess.
   */
  readonly emss?: number | 'auto';
  /** Fix the MULPDU instead (128..64768, RFC 5044 §3). */
  readonly mulpdu?: number;
  /**
   * Octets queued for the socket above which `send` returns false. Default 4 MiB (with 1 MiB the socket
   * ran dry between 'drain' and the next batch), 1 MiB on a stream that sends Markers through Node's socket
   * (two socket chunks per 512 octets: a deeper queue only lengthens each writev; docs/PERFORMANCE.md,
   * "Markers").
   */
  readonly highWaterMark?: number;
  /** Startup timer: TCP connect + MPA Request/Reply (+ RTR) must finish within it (default 10 000 ms). */
  readonly handshakeTimeoutMs?: number;
  /** How long a graceful close waits for the peer's FIN before resetting (default 10 000 ms). */
  readonly closeTimeoutMs?: number;
  /**
   * ULPDUs up to this many octets are copied into their FPDU and leave as one socket chunk, as RDMA
   * devices take small sends inline (default 128; 0: never). Larger ULPDUs are never copied.
   */
  readonly inlineThreshold?: number;
  /**
   * How this side sends FPDUs when the peer asked for Markers (RFC 5044 §4.3; no effect without them).
   * `'gather'` (default): no payload octet is copied; with `directSend` the Markers go in as the payload
   * is sent (`@rddp/writev`), through Node's socket a Marker every 512 octets splits the payload into two
   * chunks per 512 octets. `'copy'`: each ULPDU is copied once into its FPDU next to its Markers and
   * leaves as one chunk (docs/PERFORMANCE.md, "Markers").
   */
  readonly markerFraming?: MarkerFraming;
  /**
   * Send FPDUs straight to the socket's descriptor, gathered (one sendmsg per batch through the optional
   * `@rddp/writev` binding), instead of one Node stream write per chunk. Default true where the binding is
   * installed and the socket has a descriptor (POSIX); false, or `RDDP_MPA_DIRECT_SEND=0`: through Node's
   * socket. Wire bytes are the same either way (docs/MPA.md, "Policies (our choices)").
   */
  readonly directSend?: boolean;
  /**
   * Established connections: TCP keepalive probes after this many ms without traffic, so a peer that
   * vanished is detected (the connection then ends with `ConnectionAbortedError`). Default 60 000; 0: off.
   */
  readonly keepAliveMs?: number;
  /**
   * Established connections: reset one that has neither received nor sent an octet for this many ms
   * (`LlpTimeoutError` on `closed$`). Default `DEFAULT_IDLE_TIMEOUT_MS` (5 min); 0 turns it off.
   */
  readonly idleTimeoutMs?: number;
  /**
   * Established connections: an FPDU the peer has begun must be complete within this many ms of its
   * first octet, else the connection is reset (`LlpTimeoutError` on `closed$`): a peer that stops or
   * drips in the middle of an FPDU cannot hold it open. Default 30 000; 0: off.
   */
  readonly fpduTimeoutMs?: number;
  /**
   * Largest ULPDU_Length accepted in a received FPDU. Default 64768, RFC 5044 §3's bound; up to 65535
   * to interoperate with stacks that send longer ULPDUs (a deviation, docs/MPA.md). Receive only: what
   * this side sends stays within its MULPDU (at most 64768).
   */
  readonly maxUlpduLength?: number;
  /**
   * Initiator: accept an FPDU from the Responder that arrives before this side sent its first FPDU —
   * even in the TCP segment of the MPA Reply. RFC 5044 §7.1.2 forbids it, so by default the connection
   * fails (`early-data`); some user-space stacks do it. Default false (a deviation, docs/MPA.md).
   */
  readonly tolerateEarlyResponderFpdu?: boolean;
  /** TCP_NODELAY (default true, as siw sets it): FPDUs leave without Nagle delay; corking batches them. */
  readonly noDelay?: boolean;
  /**
   * TCP congestion control of every connection this transport makes or accepts ('cubic', 'reno', 'bbr', ...: Linux
   * TCP_CONGESTION through `@rddp/writev`). Default: the system's (`net.ipv4.tcp_congestion_control`). A
   * name the kernel refuses fails the connection with a `CapabilityError`; without the native build the
   * transport cannot be created with it (docs/PERFORMANCE.md, "Congestion control").
   */
  readonly congestionControl?: string;
  /** Listener: most established connections at once; more are reset and reported (default 4096). */
  readonly maxConnections?: number;
  /** Listener: most MPA startups in progress at once (slow or idle peers); more are reset (default 256). */
  readonly maxPendingStartups?: number;
  /**
   * Listener: most MPA startups in progress at once from one source (default 16), so that one slow or
   * idle peer cannot hold all of `maxPendingStartups`; more from that source are reset. A source is an
   * IPv4 address or an IPv6 prefix (`ipv6SourcePrefix`).
   */
  readonly maxPendingStartupsPerAddress?: number;
  /** Listener: most established connections from one source (default 1024, a quarter of `maxConnections`'s default). */
  readonly maxConnectionsPerSource?: number;
  /** IPv6 prefix length one source is counted by (default 64; 128 counts every address apart). */
  readonly ipv6SourcePrefix?: number;
  /**
   * The memory budget receive arenas are reserved from (default: the process's, `processMemoryBudget()`).
   * A connection whose first arena does not fit is refused (reset); a grown arena that does not fit is
   * not grown.
   */
  readonly memoryBudget?: MemoryBudget;
  readonly logger?: LlpLogger;
}

export interface ResolvedTransportOptions {
  readonly initiator: ResolvedMpaParams;
  readonly responder: ResolvedMpaParams;
  readonly emss: number | 'auto';
  readonly mulpdu: number | undefined;
  /** Unset: the stream's default (`DEFAULT_HIGH_WATER_MARK`, or `MARKERS_HIGH_WATER_MARK` with gathered Markers). */
  readonly highWaterMark: number | undefined;
  readonly handshakeTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly inlineThreshold: number;
  readonly markerFraming: MarkerFraming;
  readonly directSend: boolean;
  readonly keepAliveMs: number;
  readonly idleTimeoutMs: number;
  readonly fpduTimeoutMs: number;
  readonly maxUlpduLength: number;
  readonly tolerateEarlyResponderFpdu: boolean;
  readonly noDelay: boolean;
  readonly congestionControl: string | undefined;
  readonly maxConnections: number;
  readonly maxPendingStartups: number;
  readonly maxPendingStartupsPerAddress: number;
  readonly maxConnectionsPerSource: number;
  readonly ipv6SourcePrefix: number;
  readonly memoryBudget: MemoryBudget;
  readonly logger: LlpLogger;
}

export const LOOPBACK_EMSS = 65483;
export const ETHERNET_EMSS_V4 = 1448;
export const ETHERNET_EMSS_V6 = 1428;

function nonNegative(name: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 2 ** 31 - 1)
    throw new InvalidArgumentError(`${name} must be an integer number of milliseconds 0..2^31-1, got ${String(v)}`);
  return v;
}

function inlineThreshold(v: unknown): number {
  if (v === undefined) return INLINE_DEFAULT;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > INLINE_MAX)
    throw new InvalidArgumentError(`inlineThreshold must be an integer 0..${INLINE_MAX}, got ${String(v)}`);
  return v;
}

function markerFraming(v: unknown): MarkerFraming {
  if (v === undefined) return 'gather';
  if (v !== 'gather' && v !== 'copy')
    throw new InvalidArgumentError(`markerFraming must be 'gather' or 'copy', got ${String(v)}`);
  return v;
}

function count(name: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 2 ** 31 - 1)
    throw new InvalidArgumentError(`${name} must be an integer 1..2^31-1, got ${String(v)}`);
  return v;
}

function positive(name: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new InvalidArgumentError(`${name} must be a positive number`);
  return v;
}

function prefix(v: unknown): number {
  if (v === undefined) return DEFAULT_IPV6_SOURCE_PREFIX;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 128)
    throw new InvalidArgumentError(`ipv6SourcePrefix must be an integer 0..128, got ${String(v)}`);
  return v;
}

function flag(name: string, v: unknown): boolean {
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(`${name} must be a boolean, got ${String(v)}`);
  return v;
}

export function resolveTransportOptions(o: MpaTcpOptions = {}): ResolvedTransportOptions {
  if (o.emss !== undefined && o.emss !== 'auto') positive('emss', o.emss, 0);
  if (o.mulpdu !== undefined && (!Number.isInteger(o.mulpdu) || o.mulpdu < MULPDU_MIN || o.mulpdu > MULPDU_MAX))
    throw new InvalidArgumentError(`mulpdu must be an integer ${MULPDU_MIN}..${MULPDU_MAX} (RFC 5044 §3)`);
  const params = o.params as Readonly<Record<string, unknown>> | undefined;
  return {
    initiator: resolveParams(params, INITIATOR_DEFAULTS),
    responder: resolveParams(params, RESPONDER_DEFAULTS),
    emss: o.emss ?? 'auto',
    mulpdu: o.mulpdu,
    highWaterMark: o.highWaterMark === undefined ? undefined : positive('highWaterMark', o.highWaterMark, 0),
    handshakeTimeoutMs: positive('handshakeTimeoutMs', o.handshakeTimeoutMs, 10_000),
    closeTimeoutMs: positive('closeTimeoutMs', o.closeTimeoutMs, 10_000),
    inlineThreshold: inlineThreshold(o.inlineThreshold),
    markerFraming: markerFraming(o.markerFraming),
    directSend: directSendOption(o.directSend),
    keepAliveMs: nonNegative('keepAliveMs', o.keepAliveMs, 60_000),
    idleTimeoutMs: nonNegative('idleTimeoutMs', o.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS),
    fpduTimeoutMs: nonNegative('fpduTimeoutMs', o.fpduTimeoutMs, 30_000),
    maxUlpduLength: maxUlpduLength(o.maxUlpduLength),
    tolerateEarlyResponderFpdu: flag('tolerateEarlyResponderFpdu', o.tolerateEarlyResponderFpdu),
    noDelay: o.noDelay ?? true,
    congestionControl: congestionControlOption(o.congestionControl),
    maxConnections: positive('maxConnections', o.maxConnections, 4096),
    maxPendingStartups: positive('maxPendingStartups', o.maxPendingStartups, 256),
    maxPendingStartupsPerAddress: count('maxPendingStartupsPerAddress', o.maxPendingStartupsPerAddress, 16),
    maxConnectionsPerSource: count('maxConnectionsPerSource', o.maxConnectionsPerSource, 1024),
    ipv6SourcePrefix: prefix(o.ipv6SourcePrefix),
    memoryBudget: o.memoryBudget ?? processMemoryBudget(),
    logger: o.logger ?? silentLogger,
  };
}

export function isLoopbackAddress(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.startsWith('::ffff:') ? host.slice(7) : host;
  return h === '::1' || h.startsWith('127.') || h === 'localhost';
}

/** The EMSS policy above, for a connection to `remote`. */
export function emssFor(policy: number | 'auto', remote: string | undefined, family: string | undefined): number {
  if (policy !== 'auto') return policy;
  if (isLoopbackAddress(remote)) return LOOPBACK_EMSS;
  return family === 'IPv6' && !remote?.startsWith('::ffff:') ? ETHERNET_EMSS_V6 : ETHERNET_EMSS_V4;
}
