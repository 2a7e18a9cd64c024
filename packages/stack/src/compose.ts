/**
 * How the stack composes a layer on an LLP connection or stream: defaults, then the caller's options, then
 * what the LLP setup decided (RFC 6581: what was announced is what is enforced).
 */
import { DdpStream, type DdpStreamApi, type DdpStreamOptions } from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import { composeRdmapOptions, RdmapStream, type RdmapStreamOptions } from '@rddp/rdmap';
import { Device, type DeviceOptions } from '@rddp/verbs';
import { target } from './target.js';
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

/** Composes DDP Stream options and builds the stream with `factory`. */
export function buildDdpStream(
  llp: LlpConnection | LlpStream,
  request: DdpStreamRequest,
  defaults: StackDefaults,
  factory: DdpStreamFactory,
): DdpStreamApi {
  const { stream, connection, rest, base } = target(llp, request, defaults);
  return factory(stream, {
    ...base,
    ...(connection ? { llpCapabilities: connection.capabilities } : {}),
    ...rest,
    ...(connection?.setup.startupMessages ? { startupMessages: connection.setup.startupMessages } : {}),
  });
}

/**
 * Composes RDMAP Stream options with `composeRdmapOptions` (the one precedence verbs uses too: the stack's
 * defaults, the connection's role and LLP capabilities, the caller's options, then IRD/ORD and
 * startup-message MSNs as the LLP setup negotiated them, RFC 6581) and builds the stream with `factory`,
 * its DDP Stream with `ddpFactory`.
 */
export function buildRdmapStream(
  llp: LlpConnection | LlpStream,
  request: RdmapStreamRequest,
  defaults: StackDefaults = {},
  factory: RdmapStreamFactory = defaultRdmapStreamFactory,
  ddpFactory: DdpStreamFactory = defaultDdpStreamFactory,
): RdmapStream {
  const { stream, connection, rest, base } = target(llp, request, defaults);
  return factory(
    stream,
    composeRdmapOptions({ ...base, ird: defaults.ird, ord: defaults.ord, createDdp: ddpFactory }, connection, rest),
  );
}

/** Builds with the built-in factories and no stack defaults: what a stack with nothing rebound builds. */
export const rdmapStreamOn: RdmapStreamBuilder = (llp, request) => buildRdmapStream(llp, request);
