/**
 * The datagram layer under the sctp package. The package runs in its UDP mode on a socket object of
 * ours (a `PeerSocket` per remote peer), so this layer sees every SCTP packet both ways and:
 * - carries them over UDP (RFC 6951-style encapsulation, the default) or raw IPv4 (protocol 132);
 * - verifies each inbound packet's CRC32c (RFC 4960 §6.8; the package computes it but keeps bad packets)
 *   and its Verification Tag (§8.5; the package answers some chunks before its own check);
 * - adds the Adaptation Layer Indication to outbound INIT/INIT ACK and refuses inbound ones without it
 *   (RFC 5043 §5.1);
 * - refuses unordered DATA (rfc5043.ts UNORDERED_DATA_ACCEPTED), which the package mishandles;
 * - catches what the package throws on a packet, so bad input from a peer never crashes the process.
 */
import dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import { isIPv6 } from 'node:net';
import { CapabilityError, type LlpError, LlpProtocolError } from '@rddp/llp';
import { sctpChecksumOfZeroed, verifySctpChecksum } from './crc32c.js';
import { createEndpoint, type PkgAssociation, type PkgEndpoint, type StreamSchedulerName, sctpPackage } from './pkg.js';
import { RawWire } from './raw.js';
import { ADAPTATION_LAYER_INDICATION_TYPE, adaptationRefusal, UNORDERED_DATA_ACCEPTED } from './rfc5043.js';
import {
  abortPacket,
  adaptationCodePoint,
  ChunkType,
  COMMON_HEADER_LENGTH,
  chunks,
  commonHeader,
  hasUnorderedData,
  initChunk,
  initiateTag,
  missingMandatoryParameterCause,
  protocolViolationCause,
  withAdaptationIndication,
} from './wire.js';

// Each packet's CRC32c once each way: the package signs with our backend and leaves checking to
// PeerSocket.receive (which drops a bad packet before the package sees it).
sctpPackage.configure({ crc32c: sctpChecksumOfZeroed, verifyChecksum: false });

function ignore(): void {}

/** Where a peer is: UDP address and port, or (raw) IP address and SCTP port. */
export interface PeerAddress {
  readonly host: string;
  readonly port: number;
}

export interface PathEvents {
  /** An INIT or INIT ACK without the DDP Adaptation Layer Indication was refused with an ABORT. */
  refused(error: LlpError, chunk: 'INIT' | 'INIT ACK'): void;
  /** The package threw while handling a packet from this peer. */
  packageError(error: unknown, packet: Buffer): void;
  /** The peer broke a rule of RFC 5043 this layer checks (the packet was dropped): abort its association. */
  violation(text: string, packet: Buffer): void;
}

/** Counters a test or a debug log can read. */
export interface PathStats {
  received: number;
  sent: number;
  badChecksum: number;
  /** Packets discarded for a Verification Tag that none of the endpoint's associations expects (RFC 4960 §8.5). */
  badTag: number;
}

/** What the sctp package takes for its UDP socket: one per remote peer. */
export class PeerSocket extends EventEmitter {
  readonly stats: PathStats = { received: 0, sent: 0, badChecksum: 0, badTag: 0 };
  /** Test hook: sees every packet after the shim, both ways. */
  tap: ((packet: Buffer, direction: 'in' | 'out') => void) | undefined;
  /** The endpoint this socket feeds, whose associations' tags `receive` checks. */
  endpoint: PkgEndpoint | undefined;

  constructor(
    private readonly transmit: (packet: Buffer, cb: (e?: Error | null) => void) => void,
    private readonly events: PathEvents,
  ) {
    super();
  }

  /** Called by the package (UDPTransport.sendPacket) for each packet it sends. */
  send(buffer: Buffer, _port: number, _address: string, cb?: (e?: Error | null) => void): void {
    // Only an INIT or INIT ACK (the first chunk, never bundled, RFC 4960 §6.10) is extended.
    const first = buffer[COMMON_HEADER_LENGTH];
    const packet = first === ChunkType.INIT || first === ChunkType.INIT_ACK ? withAdaptationIndication(buffer) : buffer;
    this.stats.sent++;
    this.tap?.(packet, 'out');
    this.transmit(packet, cb ? (e) => cb(e ?? null) : ignore);
  }

  /** Sends a packet this layer built (an ABORT refusing an association). */
  sendOwn(packet: Buffer): void {
    this.stats.sent++;
    this.tap?.(packet, 'out');
    this.transmit(packet, () => {});
  }

  /** One packet from the peer. */
  receive(packet: Buffer): void {
    if (!verifySctpChecksum(packet)) {
      this.stats.badChecksum++;
      return;
    }
    // RFC 4960 §8.5: discarded silently here, since the package answers some chunks before its own check.
    if (!tagAccepted(packet, this.endpoint?.associations)) {
      this.stats.badTag++;
      return;
    }
    this.stats.received++;
    this.tap?.(packet, 'in');
    const init = initChunk(packet);
    if (init && !this.acceptInit(packet, init)) return;
    if (!UNORDERED_DATA_ACCEPTED && hasUnorderedData(packet)) {
      this.events.violation('an unordered DATA chunk: DDP over SCTP sends ordered user messages (RFC 5043)', packet);
      return;
    }
    try {
      this.emit('message', packet, {});
    } catch (e) {
      this.events.packageError(e, packet);
    }
  }

  private acceptInit(packet: Buffer, init: NonNullable<ReturnType<typeof initChunk>>): boolean {
    const which = init.type === ChunkType.INIT ? 'INIT' : 'INIT ACK';
    const refusal = adaptationRefusal(adaptationCodePoint(packet, init), which);
    if (!refusal) return true;
    const h = commonHeader(packet) as NonNullable<ReturnType<typeof commonHeader>>;
    const cause =
      refusal.cause === 'missing-mandatory-parameter'
        ? missingMandatoryParameterCause([ADAPTATION_LAYER_INDICATION_TYPE])
        : protocolViolationCause(refusal.text);
    // RFC 4960 §5.1/§8.4: the ABORT answering an INIT (or INIT ACK) carries its Initiate Tag, T bit clear.
    this.sendOwn(
      abortPacket({ srcPort: h.dstPort, dstPort: h.srcPort, vTag: initiateTag(packet, init) }, false, [cause]),
    );
    this.events.refused(
      which === 'INIT'
        ? new LlpProtocolError(`refused an association: ${refusal.text}`)
        : new CapabilityError(`the peer is not a DDP endpoint: ${refusal.text}`),
      which,
    );
    return false;
  }
}

/**
 * RFC 4960 §8.5 and §8.5.1: whether a packet's Verification Tag is one the endpoint's associations may
 * get. An INIT (tag 0), a COOKIE ECHO (the cookie holds the tag, §5.1.5) and a SHUTDOWN ACK (§8.4 (5),
 * §8.5.1 E) are left to the package; an endpoint without associations gets everything (out of the blue, §8.4).
 */
export function tagAccepted(packet: Buffer, associations: readonly PkgAssociation[] | undefined): boolean {
  if (packet.byteLength < COMMON_HEADER_LENGTH) return false;
  if (!associations || associations.length === 0) return true;
  const vTag = packet.readUInt32BE(4);
  // Every packet of a live association takes this first test alone.
  if (associations.some((a) => a.my_tag >>> 0 === vTag)) return true;
  const list = chunks(packet);
  const first = list[0];
  if (!first) return false;
  if (first.type === ChunkType.INIT || first.type === ChunkType.COOKIE_ECHO || first.type === ChunkType.SHUTDOWN_ACK) {
    return true;
  }
  // §8.5.1 B, C: ABORT and SHUTDOWN COMPLETE with the T bit carry the peer's tag.
  const reflected = list.some(
    (c) => (c.type === ChunkType.ABORT || c.type === ChunkType.SHUTDOWN_COMPLETE) && (c.flags & 1) === 1,
  );
  return reflected && associations.some((a) => a.peer_tag !== undefined && a.peer_tag >>> 0 === vTag);
}

/** A peer and the package endpoint that talks to it. */
export class PeerPath {
  readonly socket: PeerSocket;
  readonly endpoint: PkgEndpoint;
  private destroyed = false;

  constructor(
    send: (packet: Buffer, cb: (e?: Error | null) => void) => void,
    readonly peer: PeerAddress,
    options: { localPort: number; streams: number; aRwnd: number; idata: boolean; scheduler: StreamSchedulerName },
    events: PathEvents,
  ) {
    this.socket = new PeerSocket(send, events);
    this.endpoint = createEndpoint(options, this.socket);
    this.socket.endpoint = this.endpoint;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.endpoint.DESTROY();
  }
}

/** A local binding: sends packets to peers, hands received ones to `onPacket`. */
export interface Wire {
  readonly kind: 'udp' | 'raw';
  /** The local UDP port (udp) or SCTP port (raw); it is also the SCTP port of the endpoint. */
  readonly localPort: number;
  readonly localHost: string;
  /** The receive buffer the socket got (bytes), the basis of the receive window. */
  readonly recvBufferSize: number;
  send(packet: Buffer, peer: PeerAddress, cb: (e?: Error | null) => void): void;
  close(): void;
}

export interface WireOptions {
  readonly host: string;
  readonly port: number;
  readonly recvBufferSize: number;
  readonly onPacket: (packet: Buffer, peer: PeerAddress) => void;
  /** Socket errors (e.g. ECONNREFUSED from an ICMP port unreachable on a connected socket). */
  readonly onError: (error: NodeJS.ErrnoException) => void;
  /** Connect the UDP socket to this peer (initiator side: lets ICMP errors surface). */
  readonly connectTo?: PeerAddress | undefined;
}

/** UDP encapsulation (RFC 6951: SCTP packets as UDP payload; SCTP ports travel inside). */
export function openUdpWire(options: WireOptions): Promise<Wire> {
  const family = isIPv6(options.host) || (options.connectTo && isIPv6(options.connectTo.host)) ? 'udp6' : 'udp4';
  const socket = dgram.createSocket({
    type: family,
    recvBufferSize: options.recvBufferSize,
    sendBufferSize: options.recvBufferSize,
  });
  return new Promise<Wire>((resolve, reject) => {
    const fail = (e: NodeJS.ErrnoException) => {
      socket.close();
      reject(e);
    };
    socket.once('error', fail);
    socket.bind(options.port, options.host, () => {
      const ready = () => {
        socket.off('error', fail);
        socket.on('error', options.onError);
        socket.on('message', (msg, rinfo) => options.onPacket(msg, { host: rinfo.address, port: rinfo.port }));
        const address = socket.address();
        let closed = false;
        resolve({
          kind: 'udp',
          localPort: address.port,
          localHost: address.address,
          recvBufferSize: socket.getRecvBufferSize(),
          send(packet, peer, cb) {
            if (closed) return cb(new Error('socket closed'));
            if (options.connectTo) socket.send(packet, cb);
            else socket.send(packet, peer.port, peer.host, cb);
          },
          close() {
            if (closed) return;
            closed = true;
            socket.close();
          },
        });
      };
      if (options.connectTo) socket.connect(options.connectTo.port, options.connectTo.host, ready);
      else ready();
    });
  });
}

/** Raw IPv4 encapsulation (SCTP as protocol 132) on the process-wide raw socket. */
export function openRawWire(options: WireOptions): Wire {
  const raw = RawWire.acquire(options.recvBufferSize);
  const port = options.port || raw.ephemeralPort();
  const ok = raw.bind(port, (packet, source) => {
    const h = commonHeader(packet);
    if (!h) return;
    if (options.connectTo && (source !== options.connectTo.host || h.srcPort !== options.connectTo.port)) return;
    options.onPacket(packet, { host: source, port: h.srcPort });
  });
  if (!ok) {
    raw.release();
    const e = new Error(`SCTP port ${port} is already bound`) as NodeJS.ErrnoException;
    e.code = 'EADDRINUSE';
    throw e;
  }
  let closed = false;
  return {
    kind: 'raw',
    localPort: port,
    localHost: options.host,
    recvBufferSize: options.recvBufferSize,
    send(packet, peer, cb) {
      if (closed) return cb(new Error('socket closed'));
      raw.send(packet, peer.host, cb);
    },
    close() {
      if (closed) return;
      closed = true;
      raw.unbind(port);
      raw.release();
    },
  };
}
