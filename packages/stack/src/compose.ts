/**
 * How the stack composes a layer on an LLP connection or stream: defaults, then the caller's options, then
 * what the LLP setup decided (RFC 6581: what was announced is what is enforced).
 */
import { type DdpProfile, DdpStream, type DdpStreamApi, type DdpStreamOptions } from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import { RdmapStream, type RdmapStreamOptions, rdmapOptionsFromSetup } from '@rddp/rdmap';
import { Device, type DeviceOptions } from '@rddp/verbs';
import { NoSuchLlpStreamError } from './errors.js';
import type { DdpStreamFactory, DeviceFactory, RdmapStreamFactory, StackDefaults } from './tokens.js';

/** The built-in factories bound when no module binds its own. */
export const defaultDdpStreamFactory: DdpStreamFactory = (llp, options) => new DdpStream(llp, options);
export const defaultRdmapStreamFactory: RdmapStreamFactory = (llp, options) => new RdmapStream(llp, options);
export const defaultDeviceFactory: DeviceFactory = (options?: DeviceOptions) => new Device(options);

/** `pdId` defaults to the stack's; `stream` picks a connection's LLP stream (default 0). */
export type DdpStreamRequest = Omit<DdpStreamOptions, 'pdId'> & { readonly pdId?: number; readonly stream?: number };
export type RdmapStreamRequest = Omit<RdmapStreamOptions, 'pdId'> & {
  readonly pdId?: number;
  readonly stream?: number;
};
/** Builds an RDMAP Stream on a connection (its role, capabilities and setup) or a bare LLP stream. */
export type RdmapStreamBuilder = (llp: LlpConnection | LlpStream, request: RdmapStreamRequest) => RdmapStream;

export function isConnection(llp: LlpConnection | LlpStream): llp is LlpConnection {
  return 'streams' in llp;
}

export function profileOf(defaults: StackDefaults, connection: LlpConnection | undefined): DdpProfile {
  const p = defaults.profile;
  if (typeof p === 'function') return connection ? p(connection) : 'ietf';
  return p ?? 'ietf';
}

function pick(llp: LlpConnection | LlpStream, index: number | undefined): [LlpStream, LlpConnection | undefined] {
  if (!isConnection(llp)) return [llp, undefined];
  const stream = llp.streams[index ?? 0];
  if (!stream) throw new NoSuchLlpStreamError(index ?? 0);
  return [stream, llp];
}

/** Composes DDP Stream options and builds the stream with `factory`. */
export function buildDdpStream(
  llp: LlpConnection | LlpStream,
  request: DdpStreamRequest,
  defaults: StackDefaults,
  factory: DdpStreamFactory,
): DdpStreamApi {
  const [stream, connection] = pick(llp, request.stream);
  const { stream: _index, ...rest } = request;
  return factory(stream, {
    profile: profileOf(defaults, connection),
    pdId: defaults.pdId ?? 1,
    ...(connection ? { llpCapabilities: connection.capabilities } : {}),
    ...rest,
    ...(connection?.setup.startupMessages ? { startupMessages: connection.setup.startupMessages } : {}),
  });
}

/**
 * Composes RDMAP Stream options — the stack's defaults, the connection's role and LLP capabilities, the
 * caller's options, then IRD/ORD and startup-message MSNs as the LLP setup negotiated them (RFC 6581) —
 * and builds the stream with `factory`, its DDP Stream with `ddpFactory`.
 */
export function buildRdmapStream(
  llp: LlpConnection | LlpStream,
  request: RdmapStreamRequest,
  defaults: StackDefaults = {},
  factory: RdmapStreamFactory = defaultRdmapStreamFactory,
  ddpFactory: DdpStreamFactory = defaultDdpStreamFactory,
): RdmapStream {
  const [stream, connection] = pick(llp, request.stream);
  const { stream: _index, ...rest } = request;
  return factory(stream, {
    profile: profileOf(defaults, connection),
    pdId: defaults.pdId ?? 1,
    ...(connection ? { role: connection.role, llpCapabilities: connection.capabilities } : {}),
    ...(defaults.ird !== undefined ? { ird: defaults.ird } : {}),
    ...(defaults.ord !== undefined ? { ord: defaults.ord } : {}),
    createDdp: ddpFactory,
    ...rest,
    ...(connection ? rdmapOptionsFromSetup(connection.setup) : {}),
  });
}

/** Builds with the built-in factories and no stack defaults: what a stack with nothing rebound builds. */
export const rdmapStreamOn: RdmapStreamBuilder = (llp, request) => buildRdmapStream(llp, request);
