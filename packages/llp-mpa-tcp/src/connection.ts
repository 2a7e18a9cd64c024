/**
 * One MPA/TCP connection after startup: exactly one LLP stream (RFC 5044 carries one DDP Stream per TCP
 * connection), the negotiated parameters, and what the connection promises (strongDigest = CRC on).
 */
import type { Socket } from 'node:net';
import type {
  LlpAddress,
  LlpCapabilities,
  LlpCloseEvent,
  LlpConnection,
  LlpError,
  LlpSetupInfo,
  LlpStreamState,
} from '@rddp/llp';
import type { Observable } from 'rxjs';
import { congestionControlOf } from './congestion.js';
import { type MpaNegotiated, maxUlpPrivateData } from './negotiation.js';
import { emssFor, type ResolvedTransportOptions } from './options.js';
import type { SocketReceiver } from './socket-rx.js';
import { MpaTcpStream } from './stream.js';

let nextId = 1;

/** What a connection with these negotiated parameters promises (RFC 5041 §3). */
export function mpaCapabilities(n: Pick<MpaNegotiated, 'crc' | 'enhanced'>): LlpCapabilities {
  return {
    reliable: true,
    ordered: true,
    preservesMessageBoundaries: true,
    // RFC 5041 §3 asks for a digest at least as strong as CRC32c: MPA's CRC, when negotiated.
    strongDigest: n.crc,
    maxStreams: 1,
    // 512 octets (RFC 5044 §7.1.1), less the 4 of RFC 6581 IRD/ORD data when it was exchanged.
    maxPrivateData: n.enhanced ? maxUlpPrivateData(2) : maxUlpPrivateData(1),
  };
}

export interface MpaConnectionInit {
  readonly role: 'initiator' | 'responder';
  readonly socket: Socket;
  /** The socket's reads (socket-rx.ts). */
  readonly rx: SocketReceiver;
  readonly negotiated: MpaNegotiated;
  readonly localPrivateData: Uint8Array;
  readonly remotePrivateData: Uint8Array;
  /** The transport's options: the stream's EMSS policy, buffer, timers, limits and logger. */
  readonly options: ResolvedTransportOptions;
}

export class MpaTcpConnection implements LlpConnection {
  readonly id: string;
  readonly transport = 'mpa-tcp';
  readonly role: 'initiator' | 'responder';
  readonly capabilities: LlpCapabilities;
  readonly stream: MpaTcpStream;
  readonly streams: readonly MpaTcpStream[];
  readonly localAddress: LlpAddress;
  readonly remoteAddress: LlpAddress;
  readonly setup: LlpSetupInfo & { readonly negotiated: MpaNegotiated };
  /** The TCP congestion control the connection runs ('cubic', 'bbr', ...; undefined where it cannot be read). */
  readonly congestionControl: string | undefined;

  constructor(init: MpaConnectionInit) {
    this.id = `mpa-tcp-${nextId++}`;
    this.role = init.role;
    const s = init.socket;
    this.localAddress = { host: s.localAddress ?? '', port: s.localPort ?? 0 };
    this.remoteAddress = { host: s.remoteAddress ?? '', port: s.remotePort ?? 0 };
    this.capabilities = mpaCapabilities(init.negotiated);
    this.congestionControl = congestionControlOf(s);
    const n = init.negotiated;
    // RFC 6581: IRD/ORD as exchanged; a Send RTR is a Send on QN 0 and a Read RTR a Read Request on QN 1
    // (MSN 1) that this LLP sent or consumed for its ULP, so DDP's MSNs there start at 2 (docs/MPA.md).
    const rtrQn = n.rtr === 'send' ? 0 : n.rtr === 'read' ? 1 : undefined;
    this.setup = {
      localPrivateData: init.localPrivateData,
      remotePrivateData: init.remotePrivateData,
      negotiated: n,
      ...(n.enhanced && n.ird !== undefined && n.ord !== undefined ? { readLimits: { ird: n.ird, ord: n.ord } } : {}),
      ...(rtrQn !== undefined
        ? {
            startupMessages:
              init.role === 'initiator' ? { sent: [rtrQn], received: [] } : { sent: [], received: [rtrQn] },
          }
        : {}),
    };
    const o = init.options;
    this.stream = new MpaTcpStream({
      socket: s,
      rx: init.rx,
      role: init.role,
      negotiated: init.negotiated,
      emss: emssFor(o.emss, s.remoteAddress, s.remoteFamily),
      ...(o.mulpdu !== undefined ? { mulpdu: o.mulpdu } : {}),
      ...(o.highWaterMark !== undefined ? { highWaterMark: o.highWaterMark } : {}),
      closeTimeoutMs: o.closeTimeoutMs,
      inlineThreshold: o.inlineThreshold,
      markerFraming: o.markerFraming,
      directSend: o.directSend,
      keepAliveMs: o.keepAliveMs,
      idleTimeoutMs: o.idleTimeoutMs,
      fpduTimeoutMs: o.fpduTimeoutMs,
      maxUlpduLength: o.maxUlpduLength,
      tolerateEarlyResponderFpdu: o.tolerateEarlyResponderFpdu,
      logger: o.logger,
      connectionId: this.id,
    });
    this.streams = [this.stream];
  }

  get negotiated(): MpaNegotiated {
    return this.setup.negotiated;
  }
  get state(): LlpStreamState {
    return this.stream.state;
  }
  get closed$(): Observable<LlpCloseEvent> {
    return this.stream.closed$;
  }

  /** A new EMSS for this connection's MULPDU (RFC 5044 §4.5); the stream's `mulpdu$` emits the change. */
  setEmss(emss: number): void {
    this.stream.setEmss(emss);
  }

  close(signal?: AbortSignal): Promise<void> {
    return this.stream.close(signal);
  }

  abort(reason?: LlpError): void {
    this.stream.abort(reason);
  }
}
