/**
 * Raw IP encapsulation: SCTP packets as IPv4 protocol 132 through the optional `raw-socket` package
 * (root only). One raw socket per process, demultiplexed by destination SCTP port.
 *
 * raw-socket receives every datagram into one reused buffer, and the sctp package keeps slices of the
 * buffers it is given while it reassembles: each packet is copied out before anything else sees it
 * (docs/SCTP.md, defect "raw buffer").
 */
import { createRequire } from 'node:module';
import { RawSocketUnavailableError } from './errors.js';

const SCTP_PROTOCOL = 132;
const RECEIVE_BUFFER = 65_536;

interface RawModule {
  createSocket(options: { addressFamily: number; protocol: number; bufferSize: number }): RawSocketLike;
  AddressFamily: { IPv4: number };
  SocketLevel: { SOL_SOCKET: number };
  SocketOption: { SO_RCVBUF: number; SO_SNDBUF: number };
}

interface RawSocketLike {
  on(event: 'message', cb: (buffer: Buffer, source: string) => void): void;
  on(event: 'error', cb: (error: Error) => void): void;
  send(
    buffer: Buffer,
    offset: number,
    length: number,
    address: string,
    before: (() => void) | null,
    after: (error: Error | null, bytes: number) => void,
  ): void;
  setOption(level: number, option: number, value: number): void;
  close(): void;
}

export type RawHandler = (packet: Buffer, source: string) => void;

let loaded: RawModule | undefined;

/** Loads `raw-socket`, or throws `RawSocketUnavailableError` saying why it cannot be used. */
export function loadRawSocket(): RawModule {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)('raw-socket') as RawModule;
    return loaded;
  } catch (e) {
    throw new RawSocketUnavailableError(
      "raw IP encapsulation needs the optional 'raw-socket' package (a native addon: npm install raw-socket, with npm_config_nodedir=/usr where Node's headers are not downloaded) and root; use the default UDP encapsulation otherwise",
      { cause: e },
    );
  }
}

/** The process-wide raw SCTP socket, shared by every raw-mode binding (reference counted). */
export class RawWire {
  private static shared: RawWire | undefined;
  private readonly socket: RawSocketLike;
  private readonly handlers = new Map<number, RawHandler>();
  private refs = 0;
  /** Packets received whose destination port no binding of ours owns (another process's, or stray). */
  strays = 0;

  private constructor(recvBufferSize: number) {
    const raw = loadRawSocket();
    try {
      this.socket = raw.createSocket({
        addressFamily: raw.AddressFamily.IPv4,
        protocol: SCTP_PROTOCOL,
        bufferSize: RECEIVE_BUFFER,
      });
      this.socket.setOption(raw.SocketLevel.SOL_SOCKET, raw.SocketOption.SO_RCVBUF, recvBufferSize);
      this.socket.setOption(raw.SocketLevel.SOL_SOCKET, raw.SocketOption.SO_SNDBUF, recvBufferSize);
    } catch (e) {
      throw new RawSocketUnavailableError(
        `cannot open a raw IPv4 socket for SCTP (protocol 132): ${(e as Error).message}; raw encapsulation needs root`,
        { cause: e },
      );
    }
    this.socket.on('message', (buffer, source) => this.onMessage(buffer, source));
    this.socket.on('error', () => {
      // Send errors reach the send callback; receive errors leave nothing to do but keep reading.
    });
  }

  static acquire(recvBufferSize: number): RawWire {
    RawWire.shared ??= new RawWire(recvBufferSize);
    RawWire.shared.refs++;
    return RawWire.shared;
  }

  release(): void {
    if (--this.refs > 0) return;
    this.socket.close();
    if (RawWire.shared === this) RawWire.shared = undefined;
  }

  /** Registers the handler of a local SCTP port; false when the port is taken. */
  bind(port: number, handler: RawHandler): boolean {
    if (this.handlers.has(port)) return false;
    this.handlers.set(port, handler);
    return true;
  }

  unbind(port: number): void {
    this.handlers.delete(port);
  }

  /** A free ephemeral SCTP port (49152..65535) among this process's bindings. */
  ephemeralPort(): number {
    for (let i = 0; i < 16_384; i++) {
      const p = 49_152 + Math.floor(Math.random() * 16_384);
      if (!this.handlers.has(p)) return p;
    }
    throw new RawSocketUnavailableError('no free SCTP port left for raw encapsulation');
  }

  send(packet: Buffer, address: string, cb: (error?: Error | null) => void): void {
    this.socket.send(packet, 0, packet.length, address, null, (error) => cb(error));
  }

  private onMessage(buffer: Buffer, source: string): void {
    const packet = sctpPacketOf(buffer);
    if (!packet) return;
    const handler = this.handlers.get(packet.readUInt16BE(2));
    if (!handler) {
      this.strays++;
      return;
    }
    handler(packet, source);
  }
}

/**
 * The SCTP packet of an IPv4 datagram as a raw socket delivers it (IP header first, RFC 791: skip IHL
 * words), **copied** out of raw-socket's reused receive buffer, since the sctp package keeps slices of
 * the buffers it is given (docs/SCTP.md, defect "raw buffer"). Undefined when too short for an SCTP
 * common header.
 */
export function sctpPacketOf(datagram: Buffer): Buffer | undefined {
  if (datagram.length < 20) return undefined;
  const ihl = ((datagram[0] as number) & 0x0f) * 4;
  if (datagram.length < ihl + 12) return undefined;
  return Buffer.from(datagram.subarray(ihl));
}
