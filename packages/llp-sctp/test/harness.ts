/**
 * Test harness: bare `sctp` package pairs (its own Socket API) over a controllable in-memory datagram
 * link or over real UDP, and small waiting helpers.
 */
import dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { type PkgAssociation, type SctpSocket, sctpPackage } from '../src/pkg.js';
import { sctpPacketOf } from '../src/raw.js';

/** Polls `cond` until true; rejects after `ms` with `what` (a safety net, not a timed assertion). */
export async function until(cond: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function pattern(length: number, seed: number): Buffer {
  const b = Buffer.alloc(length);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** One end of an in-memory datagram link, shaped like what the package takes as `udpTransport`. */
export class LinkEnd extends EventEmitter {
  peer!: LinkEnd;
  /** While true, packets sent from this end wait in `held` (the peer sees nothing, so sends no SACK). */
  hold = false;
  readonly held: Buffer[] = [];
  /** Deliver every packet to the peer in this one reused buffer (behind an IPv4 header), as raw-socket does. */
  reuseBuffer = false;
  /** With `reuseBuffer`: take each packet out of the reused buffer the way raw.ts does (`sctpPacketOf`). */
  rawCopy = false;
  private readonly scratch = Buffer.alloc(20 + 65_536);
  /** Rewrites packets in flight (tests of corrupted packets). */
  mangle: ((p: Buffer) => Buffer) | undefined;
  /** Sees every packet sent from this end. */
  tap: ((p: Buffer) => void) | undefined;
  /** Loses the packets sent from this end for which it returns true (after `tap` saw them). */
  drop: ((p: Buffer) => boolean) | undefined;

  send(buffer: Buffer, _port: number, _address: string, cb?: (e?: Error | null) => void): void {
    const copy = Buffer.from(buffer);
    this.tap?.(copy);
    if (this.drop?.(copy)) {
      if (cb) setImmediate(() => cb(null));
      return;
    }
    if (this.hold) this.held.push(copy);
    else setImmediate(() => this.peer.receive(copy));
    if (cb) setImmediate(() => cb(null));
  }

  release(): void {
    this.hold = false;
    for (const p of this.held.splice(0)) setImmediate(() => this.peer.receive(p));
  }

  /** Hands one packet to the package on this end (throws what the package throws). */
  receive(p: Buffer): void {
    let packet = this.peer.mangle ? this.peer.mangle(p) : p;
    if (this.peer.reuseBuffer) {
      this.scratch.fill(0, 0, 20);
      this.scratch[0] = 0x45; // IPv4, IHL 5 words
      packet.copy(this.scratch, 20);
      const datagram = this.scratch.subarray(0, 20 + packet.length);
      packet = this.peer.rawCopy ? (sctpPacketOf(datagram) as Buffer) : datagram.subarray(20);
    }
    this.emit('message', packet, {});
  }
}

export function link(): [LinkEnd, LinkEnd] {
  const a = new LinkEnd();
  const b = new LinkEnd();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

let nextPort = 20_000;

export interface BarePair {
  readonly client: SctpSocket;
  readonly server: SctpSocket;
  readonly clientAssociation: PkgAssociation;
  readonly serverAssociation: PkgAssociation;
  close(): void;
}

export interface BareOptions {
  clientOS?: number;
  clientMIS?: number;
  serverOS?: number;
  serverMIS?: number;
  /** Readable high-water marks: the package advertises them as a_rwnd. */
  clientWindow?: number;
  serverWindow?: number;
  /** On the in-memory link: loses packets from the client / server end, from the INIT on. */
  clientDrop?: (p: Buffer) => boolean;
  serverDrop?: (p: Buffer) => boolean;
}

/** A bare package association over an in-memory link: [client end, server end] of the link too. */
export async function barePairOnLink(
  o: BareOptions = {},
): Promise<BarePair & { clientEnd: LinkEnd; serverEnd: LinkEnd }> {
  const [ce, se] = link();
  ce.drop = o.clientDrop;
  se.drop = o.serverDrop;
  const cp = nextPort++;
  const sp = nextPort++;
  const server = sctpPackage.connect({
    passive: true,
    localPort: sp,
    port: cp,
    udpTransport: se,
    udpPeer: { address: 'link', port: 1 },
    MIS: o.serverMIS ?? 4,
    OS: o.serverOS ?? 4,
    readableHighWaterMark: o.serverWindow ?? 1024 * 1024,
  });
  const client = sctpPackage.connect({
    localPort: cp,
    port: sp,
    udpTransport: ce,
    udpPeer: { address: 'link', port: 1 },
    MIS: o.clientMIS ?? 4,
    OS: o.clientOS ?? 4,
    readableHighWaterMark: o.clientWindow ?? 1024 * 1024,
  });
  return finishPair(client, server, () => {}, { clientEnd: ce, serverEnd: se });
}

/** A bare package association over real UDP on the loopback. */
export async function barePairOnUdp(
  o: BareOptions & { serverRecvBuffer?: number } = {},
): Promise<BarePair & { serverUdpPort: number; serverSocket: dgram.Socket }> {
  const open = (rcv?: number) =>
    new Promise<dgram.Socket>((resolve) => {
      const s = rcv ? dgram.createSocket({ type: 'udp4', recvBufferSize: rcv }) : dgram.createSocket('udp4');
      s.bind(0, '127.0.0.1', () => resolve(s));
    });
  const uc = await open();
  const us = await open(o.serverRecvBuffer);
  const pc = uc.address().port;
  const ps = us.address().port;
  await new Promise<void>((r) => uc.connect(ps, '127.0.0.1', () => r()));
  await new Promise<void>((r) => us.connect(pc, '127.0.0.1', () => r()));
  const server = sctpPackage.connect({
    passive: true,
    localPort: ps,
    port: pc,
    udpTransport: us,
    MIS: o.serverMIS ?? 4,
    OS: o.serverOS ?? 4,
    readableHighWaterMark: o.serverWindow ?? 1024 * 1024,
  });
  const client = sctpPackage.connect({
    localPort: pc,
    port: ps,
    udpTransport: uc,
    MIS: o.clientMIS ?? 4,
    OS: o.clientOS ?? 4,
    readableHighWaterMark: o.clientWindow ?? 1024 * 1024,
  });
  return finishPair(
    client,
    server,
    () => {
      uc.close();
      us.close();
    },
    { serverUdpPort: ps, serverSocket: us },
  );
}

async function finishPair<X extends object>(
  client: SctpSocket,
  server: SctpSocket,
  closeLink: () => void,
  extra: X,
): Promise<BarePair & X> {
  client.on('error', () => {});
  server.on('error', () => {});
  await Promise.all([
    new Promise<void>((r) => client.once('connect', () => r())),
    new Promise<void>((r) => server.once('connect', () => r())),
  ]);
  return {
    ...extra,
    client,
    server,
    clientAssociation: client.association as PkgAssociation,
    serverAssociation: server.association as PkgAssociation,
    close() {
      for (const s of [client, server]) {
        try {
          s.destroy();
        } catch {
          // already torn down
        }
      }
      closeLink();
    },
  };
}

/** Kernel drop counter of the IPv4 UDP socket bound to `port` (/proc/net/udp), or undefined off Linux. */
export function udpDrops(port: number): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/net/udp', 'utf8');
  } catch {
    return undefined;
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  let drops = 0;
  let found = false;
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 13 || !f[1]?.endsWith(`:${hexPort}`)) continue;
    found = true;
    drops += Number.parseInt(f[f.length - 1] as string, 10) || 0;
  }
  return found ? drops : undefined;
}
