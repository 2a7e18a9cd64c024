/**
 * Inversify tokens of the layers above the LLP (the LLP's own, `LLP_TRANSPORT` and `LLP_LOGGER`, live in
 * `@rddp/llp`). Each factory token is resolved by `createStack`'s Stack on every use, so a user module that
 * binds (or `rebind`s) one changes what the stack builds from then on.
 */
import type { DdpProfile, DdpStreamApi, DdpStreamOptions } from '@rddp/ddp';
import type { LlpConnection, LlpParams, LlpStream } from '@rddp/llp';
import type { RdmapStream, RdmapStreamOptions } from '@rddp/rdmap';
import type { Device, DeviceOptions } from '@rddp/verbs';

/** `DdpStreamFactory`: builds a DDP Stream (RFC 5041) on one LLP stream. */
export const DDP_STREAM_FACTORY: unique symbol = Symbol.for('@rddp/stack:ddp-stream-factory');
/** `RdmapStreamFactory`: builds an RDMAP Stream (RFC 5040) on one LLP stream, from complete options. */
export const RDMAP_STREAM_FACTORY: unique symbol = Symbol.for('@rddp/stack:rdmap-stream-factory');
/** `DeviceFactory`: makes a verbs `Device` (one per host). */
export const DEVICE_FACTORY: unique symbol = Symbol.for('@rddp/stack:device-factory');
/** `StackDefaults`: profile, IRD/ORD, PD and the LLP parameters of `connect`/`listen`. */
export const STACK_OPTIONS: unique symbol = Symbol.for('@rddp/stack:options');
/** `Subject<StackEvent>`: what the stack built (`Stack.events$`). */
export const STACK_EVENTS: unique symbol = Symbol.for('@rddp/stack:events');

export type DdpStreamFactory = (llp: LlpStream, options: DdpStreamOptions) => DdpStreamApi;
/** Gets the options `Stack.rdmapStream` composed (defaults, caller's, then the LLP setup's RFC 6581 values). */
export type RdmapStreamFactory = (llp: LlpStream, options: RdmapStreamOptions) => RdmapStream;
export type DeviceFactory = (options?: DeviceOptions) => Device;

/** Defaults of everything the stack builds; bound under `STACK_OPTIONS`. */
export interface StackDefaults {
  /**
   * DDP/RDMAP profile: `ietf` (DV=1, RV=1) or `rdmac` (DV=0, RV=0), or how a connection's negotiation
   * selects it (MPA Rev 0 is the RDMA Consortium profile). Default `ietf`.
   */
  readonly profile?: DdpProfile | ((connection: LlpConnection) => DdpProfile);
  /** IRD/ORD asked for (RFC 5040 §6.1) where the LLP setup did not announce them (RFC 6581). RDMAP's default 8. */
  readonly ird?: number;
  readonly ord?: number;
  /** Protection domain of streams built without one. Default 1. */
  readonly pdId?: number;
  /** LLP parameters of `Stack.connect` (initiator) and `Stack.listen` (responder: what it accepts). */
  readonly connectParams?: LlpParams;
  readonly listenParams?: LlpParams;
}

/** What the stack built, in order (bound under `STACK_EVENTS`). */
export type StackEvent =
  | { readonly type: 'connection'; readonly connection: LlpConnection }
  | { readonly type: 'ddp-stream'; readonly stream: DdpStreamApi }
  | { readonly type: 'rdmap-stream'; readonly stream: RdmapStream; readonly connection?: LlpConnection }
  | { readonly type: 'device'; readonly device: Device };
