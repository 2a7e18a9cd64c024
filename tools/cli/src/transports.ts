/**
 * The transports the tools can run on, by `--transport` name: a table of LLP plugins, each turning the
 * common flags into its container module and the stack defaults its negotiation needs. Everything above
 * the transport is composed by `@rddp/stack` (`createStack`).
 */
import { codedError, type LlpConnection, type LlpParams, type LlpTransport, RddpError } from '@rddp/llp';
import { type LoopbackFaults, loopbackModule } from '@rddp/llp-loopback';
import {
  crc32cBackend,
  isCongestionControlName,
  type MarkerFraming,
  type MpaParams,
  type MpaRevision,
  mpaTcpModule,
  type RtrType,
} from '@rddp/llp-mpa-tcp';
import { sctpModule } from '@rddp/llp-sctp';
import { type ContainerModule, createStack, type RdmapStreamBuilder, type Stack, type StackOptions } from '@rddp/stack';
import { parseFaults } from './faults.js';
import { TRANSPORT_NAMES } from './perf/limits.js';
import { toolIdleTimeoutMs, toolIpv6SourcePrefix } from './resources.js';

export interface TransportFlags {
  transport: string;
  mpaRev?: string;
  crc?: boolean;
  markers?: boolean;
  /** `--marker-framing gather|copy`: how this end sends FPDUs when its peer asked for Markers. */
  markerFraming?: string;
  /** `--send-path direct|socket`: FPDUs straight to the socket's descriptor (`@rddp/writev`) or through Node's socket. */
  sendPath?: string;
  p2p?: string;
  ird?: number;
  ord?: number;
  /** `--max-ulpdu <n>`: largest ULPDU_Length accepted, 64768..65535 (interop deviation, docs/MPA.md). */
  maxUlpdu?: number | string;
  /** `--tolerate-early-fpdu`: the initiator accepts a responder FPDU before its own first (interop deviation). */
  tolerateEarlyFpdu?: boolean;
  /** `--faults <list>`: the loopback LLP's fault injection (`./faults.ts`); `--transport loopback` only. */
  faults?: string;
  /** `--congestion <name>`: this end's TCP congestion control (Linux TCP_CONGESTION; default the system's). */
  congestion?: string;
  /** `--sctp-interleaving`: offer I-DATA (RFC 8260); `--transport sctp` only. */
  sctpInterleaving?: boolean;
  /** `--sctp-scheduler rr|fcfs|priority`: the stream scheduler (RFC 8260 §3); `--transport sctp` only. */
  sctpScheduler?: string;
  /** `--sctp-rto-min <ms>`: RTO.Min (RFC 9260 §16); `--transport sctp` only. */
  sctpRtoMin?: string;
}

export interface ToolTransport {
  /** The stack composed on the plugin: its transport, and the DDP/RDMAP/verbs factories above it. */
  readonly stack: Stack;
  readonly transport: LlpTransport;
  /** Parameters for connect (initiator). */
  readonly connectParams: LlpParams;
  /** Parameters for listen (responder): what it accepts. */
  readonly listenParams: LlpParams;
  /** DDP/RDMAP profile of a connection: MPA Rev 0 is the RDMA Consortium profile (DV=0, RV=0). */
  profileOf(c: LlpConnection): 'ietf' | 'rdmac';
  /** Builds a session's RDMAP Stream through the stack's factories (`stack.rdmapStream`). */
  readonly rdmapFactory: RdmapStreamBuilder;
}

/** A command line the tools cannot run (bad flag, bad value): one line on stderr, exit code 2. */
export class UsageError extends codedError(RddpError, 'ERR_RDDP_USAGE') {
  readonly exitCode = 2;
}

/** What a plugin entry gives the stack: its container module and the defaults its negotiation needs. */
export interface ToolPlugin {
  readonly module: ContainerModule;
  readonly options: StackOptions;
}

/** MPA/TCP (RFC 5044, RFC 6581): `--mpa-rev`, `--crc`, `--markers`, `--p2p`, IRD/ORD and the interop deviations. */
function tcpPlugin(f: TransportFlags): ToolPlugin {
  sctpOnly(f);
  const rev = f.mpaRev === undefined ? 1 : Number(f.mpaRev);
  if (![0, 1, 2].includes(rev)) throw new UsageError(`--mpa-rev must be 0, 1 or 2 (got ${f.mpaRev})`);
  let rtr: RtrType | false = false;
  if (f.p2p !== undefined) {
    if (!['write', 'read', 'send'].includes(f.p2p))
      throw new UsageError(`--p2p must be write, read or send (got ${f.p2p})`);
    if (rev !== 2) throw new UsageError('--p2p needs --mpa-rev 2 (RFC 6581 peer-to-peer mode)');
    rtr = f.p2p as RtrType;
  }
  const params: MpaParams = {
    revision: rev as MpaRevision,
    crc: f.crc ?? true,
    markers: f.markers ?? false,
    ...(rtr ? { rtr } : {}),
    ...(f.ird !== undefined ? { ird: f.ird } : {}),
    ...(f.ord !== undefined ? { ord: f.ord } : {}),
    ...(rev === 0 ? { ietfMode: 'permissive' as const } : {}),
  };
  // The responder accepts up to the revision asked for (all of them by default), and is a permissive
  // IETF implementation (RFC 5044 Appendix C), so an RDMAC-era Rev 0 initiator is served too.
  const listenParams: MpaParams = {
    ...params,
    revision: f.mpaRev === undefined ? 2 : (rev as MpaRevision),
    rtr: rtr ? [rtr] : ['write', 'read', 'send'],
    ietfMode: 'permissive',
  };
  if (f.markerFraming !== undefined && f.markerFraming !== 'gather' && f.markerFraming !== 'copy')
    throw new UsageError(`--marker-framing must be gather or copy (got ${f.markerFraming})`);
  if (f.sendPath !== undefined && f.sendPath !== 'direct' && f.sendPath !== 'socket')
    throw new UsageError(`--send-path must be direct or socket (got ${f.sendPath})`);
  if (f.congestion !== undefined && !isCongestionControlName(f.congestion))
    throw new UsageError(
      `--congestion must name a kernel TCP congestion control such as cubic or bbr (got ${f.congestion})`,
    );
  const maxUlpdu = f.maxUlpdu === undefined ? undefined : Number(f.maxUlpdu);
  if (maxUlpdu !== undefined && (!Number.isInteger(maxUlpdu) || maxUlpdu < 64768 || maxUlpdu > 65535))
    throw new UsageError(`--max-ulpdu must be an integer 64768..65535 (got ${f.maxUlpdu})`);
  return {
    // Interop deviations (off by default, docs/MPA.md): longer received ULPDUs, an early responder FPDU.
    module: mpaTcpModule({
      params,
      ...(maxUlpdu !== undefined ? { maxUlpduLength: maxUlpdu } : {}),
      ...(f.tolerateEarlyFpdu ? { tolerateEarlyResponderFpdu: true } : {}),
      ...(f.markerFraming !== undefined ? { markerFraming: f.markerFraming as MarkerFraming } : {}),
      ...(f.sendPath !== undefined ? { directSend: f.sendPath === 'direct' } : {}),
      ...(f.congestion !== undefined ? { congestionControl: f.congestion } : {}),
      ...idleTimeout(),
    }),
    options: {
      connectParams: params,
      listenParams,
      profile: (c) => ((c.setup.negotiated as { rdmac?: boolean }).rdmac ? 'rdmac' : 'ietf'),
    },
  };
}

/** `transport`, with the TCP congestion control `c` runs where it is MPA/TCP and can be read (`tcp, cubic`). */
export function transportLabelOf(transport: string, c: LlpConnection): string {
  const cc = (c as { congestionControl?: unknown }).congestionControl;
  return typeof cc === 'string' ? `${transport}, ${cc}` : transport;
}

/** How connection `c` hands FPDUs to TCP: sendmsg straight to its descriptor (`@rddp/writev`) or Node's socket. */
export function sendPathOf(c: LlpConnection): string | undefined {
  const direct = (c.streams[0] as { sendsDirect?: unknown } | undefined)?.sendsDirect;
  return direct === true ? 'direct (sendmsg via @rddp/writev)' : direct === false ? "Node's socket" : undefined;
}

/**
 * What an MPA/TCP connection negotiated (RFC 5044 §7.1) and runs, in the words `rping -d` and perf's header
 * print (issue 37); undefined on the other transports.
 */
export interface MpaRun {
  /** `1`, or `1 (RDMA Consortium profile)`. */
  readonly revision: string;
  /** `not sent, received`: Markers towards the peer, then from it. */
  readonly markers: string;
  /** `on (<CRC32c backend>)` or `off`. */
  readonly crc: string;
  readonly sendPath: string;
  readonly congestion: string;
}

export function mpaRunOf(c: LlpConnection): MpaRun | undefined {
  const n = (c.setup as { negotiated?: Record<string, unknown> } | undefined)?.negotiated;
  const sendPath = sendPathOf(c);
  if (n === undefined || typeof n.revision !== 'number' || sendPath === undefined) return undefined;
  const cc = (c as { congestionControl?: unknown }).congestionControl;
  return {
    revision: `${n.revision}${n.rdmac ? ' (RDMA Consortium profile)' : ''}`,
    markers: `${n.markersTx ? 'sent' : 'not sent'}, ${n.markersRx ? 'received' : 'not received'}`,
    crc: n.crc ? `on (${crc32cBackend})` : 'off',
    sendPath,
    congestion: typeof cc === 'string' ? cc : "the system's",
  };
}

/** `rping -d`'s line of `mpaRunOf`: the CRC32c backend, the send path, the congestion control. */
export function mpaRunNote(c: LlpConnection): string | undefined {
  const r = mpaRunOf(c);
  return r && `CRC ${r.crc}, send path ${r.sendPath}, congestion ${r.congestion}`;
}

/** perf's header lines of `mpaRunOf` (empty on the other transports). */
export function mpaLines(c: LlpConnection): string[] {
  const r = mpaRunOf(c);
  if (r === undefined) return [];
  return [
    ` MPA revision   : ${r.revision}    Markers: ${r.markers}`,
    ` CRC            : ${r.crc}`,
    ` Send path      : ${r.sendPath}`,
    ` Congestion     : ${r.congestion}`,
  ];
}

/** The MPA flags, refused on the other transports. */
function tcpOnly(f: TransportFlags): void {
  if (
    f.mpaRev !== undefined ||
    f.p2p !== undefined ||
    f.markers ||
    f.markerFraming !== undefined ||
    f.sendPath !== undefined ||
    f.maxUlpdu !== undefined ||
    f.tolerateEarlyFpdu ||
    f.congestion !== undefined
  )
    throw new UsageError(
      '--mpa-rev, --p2p, --markers, --marker-framing, --send-path, --max-ulpdu, --tolerate-early-fpdu and --congestion apply to --transport tcp only',
    );
}

/** The SCTP flags, refused on the other transports. */
function sctpOnly(f: TransportFlags): void {
  if (f.sctpInterleaving || f.sctpScheduler !== undefined || f.sctpRtoMin !== undefined)
    throw new UsageError('--sctp-interleaving, --sctp-scheduler and --sctp-rto-min apply to --transport sctp only');
}

/** `--idle-timeout` and `--ipv6-source-prefix` for the transport's options (absent: its defaults). */
function idleTimeout(): { idleTimeoutMs?: number; ipv6SourcePrefix?: number } {
  const ms = toolIdleTimeoutMs();
  const bits = toolIpv6SourcePrefix();
  return {
    ...(ms === undefined ? {} : { idleTimeoutMs: ms }),
    ...(bits === undefined ? {} : { ipv6SourcePrefix: bits }),
  };
}

/** RFC 5043 over @rddp/sctp, UDP-encapsulated (no privileges); IETF DDP/RDMAP (DV=1, RV=1). */
function sctpPlugin(f: TransportFlags): ToolPlugin {
  tcpOnly(f);
  const scheduler = f.sctpScheduler as 'rr' | 'fcfs' | 'priority' | undefined;
  return {
    module: sctpModule({
      encapsulation: 'udp',
      interleaving: f.sctpInterleaving ?? false,
      ...(scheduler ? { scheduler } : {}),
      ...(f.sctpRtoMin !== undefined ? { rtoMinMs: Number(f.sctpRtoMin) } : {}),
      ...idleTimeout(),
    }),
    options: { profile: 'ietf' },
  };
}

/** The in-process LLP: both ends must run in one process (`perf --loopback`), with `--faults`. */
function loopbackPlugin(f: TransportFlags): ToolPlugin {
  sctpOnly(f);
  let faults: LoopbackFaults | undefined;
  try {
    faults = f.faults === undefined ? undefined : parseFaults(f.faults);
  } catch (e) {
    throw new UsageError(`--faults: ${(e as Error).message}`);
  }
  return { module: loopbackModule(faults ? { faults } : {}), options: { profile: 'ietf' } };
}

/** The `--transport` table: name → LLP plugin. */
export const TOOL_PLUGINS = {
  tcp: tcpPlugin,
  sctp: sctpPlugin,
  loopback: loopbackPlugin,
} as const satisfies Record<string, (f: TransportFlags) => ToolPlugin>;

/** `loopback` is the in-process LLP: both ends must run in one process (`perf --loopback`). */
export { TRANSPORT_NAMES };
/** The names, each checked to have its plugin (the list itself lives in ./perf/limits.ts, imported by --help). */
const NAMED: readonly (keyof typeof TOOL_PLUGINS)[] = TRANSPORT_NAMES;

function isTransportName(name: string): name is keyof typeof TOOL_PLUGINS {
  return Object.hasOwn(TOOL_PLUGINS, name);
}

/** Composes the stack for `--transport` and its flags; `modules` are user modules loaded on top. */
export function toolTransport(f: TransportFlags, modules: readonly ContainerModule[] = []): ToolTransport {
  if (!isTransportName(f.transport))
    throw new UsageError(`unknown --transport '${f.transport}' (one of: ${NAMED.join(', ')})`);
  if (f.faults !== undefined && f.transport !== 'loopback')
    throw new UsageError('--faults applies to --transport loopback only (the in-process LLP)');
  const plugin = TOOL_PLUGINS[f.transport](f);
  const stack = createStack(plugin.module, { ...plugin.options, modules });
  return {
    stack,
    transport: stack.transport,
    connectParams: stack.options.connectParams ?? {},
    listenParams: stack.options.listenParams ?? {},
    profileOf: (c) => stack.profileOf(c),
    rdmapFactory: (llp, request) => stack.rdmapStream(llp, request),
  };
}
