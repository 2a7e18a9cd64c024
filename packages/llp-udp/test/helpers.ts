import dgram from 'node:dgram';
import { isIPv6 } from 'node:net';
import type { LlpConnection, LlpError, LlpListener, LlpListenOptions, LlpStream, LlpTransport, Ulpdu } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach } from 'vitest';
import {
  type DatagramHeader,
  DatagramType,
  datagramParts,
  encodeCookieEchoBody,
  encodeSetupBody,
  type ParsedDatagram,
  parseDatagram,
  type UdpConnection,
  type UdpListener,
  type UdpOptions,
  udp,
} from '../src/index.js';

export function pattern(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

export const hex = (u: Uint8Array): string => Buffer.from(u).toString('hex');

/** Copies every ULPDU a stream receives (chunks are valid only during the call). */
export function collect(stream: LlpStream): Uint8Array[] {
  const got: Uint8Array[] = [];
  stream.setReceiver((u: Ulpdu) => {
    got.push(Buffer.concat(u.chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength))));
  });
  return got;
}

export async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Sends each ULPDU, waiting for drain when asked, and yields to the event loop every `pace` ULPDUs. */
export async function sendAll(stream: LlpStream, ulpdus: readonly Uint8Array[], pace = 16): Promise<void> {
  for (let i = 0; i < ulpdus.length; i++) {
    if (!stream.send([ulpdus[i] as Uint8Array])) await stream.waitForDrain();
    if (i % pace === pace - 1) await new Promise((r) => setImmediate(r));
  }
}

/** A connected pair through a fresh listener of `responder` (default: the same transport). */
export async function connectPair(
  initiator: LlpTransport,
  responder: LlpTransport = initiator,
  options: Parameters<LlpTransport['connect']>[1] = {},
): Promise<[LlpConnection, LlpConnection, LlpListener]> {
  const listener = await responder.listen({ host: '127.0.0.1', port: 0 });
  const accepted = firstValueFrom(listener.connections$);
  const a = await initiator.connect(listener.address, options);
  const b = await accepted;
  return [a, b, listener];
}

/** A bare UDP socket that speaks the wire format by hand: the other end of wire-level tests. */
export class RawPeer {
  readonly socket: dgram.Socket;
  private readonly queue: { d: ParsedDatagram; raw: Buffer; from: dgram.RemoteInfo }[] = [];
  private waiter: (() => void) | undefined;

  /**
   * A socket bound to `host` (any 127/8 address on Linux: another source), sending to `to` — by default
   * 127.0.0.1 from an IPv4 address, the same address from an IPv6 one.
   */
  static async open(host = '127.0.0.1', to = isIPv6(host) ? host : '127.0.0.1'): Promise<RawPeer> {
    const p = new RawPeer(host, to);
    await new Promise<void>((resolve, reject) => {
      p.socket.once('error', reject);
      p.socket.bind(0, host, () => {
        p.socket.off('error', reject);
        resolve();
      });
    });
    return p;
  }

  private constructor(
    readonly host: string,
    readonly to: string,
  ) {
    this.socket = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
    this.socket.on('message', (raw, from) => {
      const r = parseDatagram(raw);
      if (!r.ok) throw new Error(`RawPeer got a bad datagram: ${r.reason}`);
      this.queue.push({ d: r.datagram, raw, from });
      this.waiter?.();
    });
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** The next datagram of `type` (others before it are discarded). */
  next(type: number, ms = 2000): Promise<{ d: ParsedDatagram; raw: Buffer; from: dgram.RemoteInfo }> {
    return this.nextOf([type], ms);
  }

  /** The next datagram of any of `types` (others before it are discarded). */
  async nextOf(
    types: readonly number[],
    ms = 2000,
  ): Promise<{ d: ParsedDatagram; raw: Buffer; from: dgram.RemoteInfo }> {
    const t0 = Date.now();
    for (;;) {
      const i = this.queue.findIndex((q) => types.includes(q.d.header.type));
      if (i >= 0)
        return this.queue.splice(0, i + 1).pop() as { d: ParsedDatagram; raw: Buffer; from: dgram.RemoteInfo };
      const left = ms - (Date.now() - t0);
      if (left <= 0) throw new Error(`RawPeer: no datagram of type ${types.join('/')} within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  /** Every datagram of `type` received so far (consumed). */
  drain(type: number): ParsedDatagram[] {
    const out = this.queue.filter((q) => q.d.header.type === type).map((q) => q.d);
    this.queue.splice(0, this.queue.length, ...this.queue.filter((q) => q.d.header.type !== type));
    return out;
  }

  send(h: DatagramHeader, body: readonly Uint8Array[], port: number): Promise<void> {
    return this.sendRaw(Buffer.concat(datagramParts(h, body)), port);
  }

  /**
   * The initiator's side of setup by hand: REQUEST, then COOKIE_ECHO with the cookie that came back
   * (docs/UDP-LLP.md "Connection setup"); resolves with the ACCEPT (or REJECT, ABORT).
   */
  async handshake(port: number, src: number, setup: Uint8Array, ms = 2000): Promise<ParsedDatagram> {
    await this.send({ type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src, seq: 0 }, [setup], port);
    const answers = [DatagramType.Cookie, DatagramType.Accept, DatagramType.Reject, DatagramType.Abort];
    const first = (await this.nextOf(answers, ms)).d;
    if (first.header.type !== DatagramType.Cookie) return first;
    await this.send(
      { type: DatagramType.CookieEcho, crc: true, streamId: 0, dst: 0, src, seq: 0 },
      [encodeCookieEchoBody(first.body, setup)],
      port,
    );
    return (await this.nextOf(answers.slice(1), ms)).d;
  }

  /** REQUEST, and the COOKIE's cookie that answers it (throws when an ABORT or nothing comes instead). */
  async cookie(port: number, src: number, setup: Uint8Array, ms = 2000): Promise<Uint8Array> {
    await this.send({ type: DatagramType.Request, crc: true, streamId: 0, dst: 0, src, seq: 0 }, [setup], port);
    const got = (await this.nextOf([DatagramType.Cookie, DatagramType.Abort], ms)).d;
    if (got.header.type !== DatagramType.Cookie)
      throw new Error(`RawPeer: REQUEST answered with type ${got.header.type}`);
    return Uint8Array.from(got.body);
  }

  /** The COOKIE_ECHO of `cookie` (and the REQUEST's `setup`), as bytes ready to send (and send again). */
  static cookieEcho(src: number, cookie: Uint8Array, setup: Uint8Array): Buffer {
    return Buffer.concat(
      datagramParts({ type: DatagramType.CookieEcho, crc: true, streamId: 0, dst: 0, src, seq: 0 }, [
        encodeCookieEchoBody(cookie, setup),
      ]),
    );
  }

  sendRaw(bytes: Uint8Array, port: number): Promise<void> {
    return new Promise<void>((resolve, reject) =>
      this.socket.send(bytes, port, this.to, (e) => (e ? reject(e) : resolve())),
    );
  }

  close(): void {
    this.socket.close();
  }
}

/** Timers short enough for tests of a peer that misbehaves: retransmission, linger and close. */
export const fast = { retransmitMs: 10, lingerMs: 20, closeTimeoutMs: 500 };

/** A REQUEST's setup body for `streams` streams of 1400-octet datagrams with CRC32c. */
export const setupBody = (streams: number): Uint8Array =>
  encodeSetupBody({ streams, datagramSize: 1400, window: 64, crc: true, privateData: new Uint8Array(0) });

export const sleep = (ms: number): Promise<unknown> => new Promise((r) => setTimeout(r, ms));

/**
 * For tests played from outside with raw peers: what a test opens — connections pushed on `open`, raw
 * peers from `raw`, listeners from `listen` or pushed on `listeners` — is closed after each test (an
 * `afterEach` of the file that calls this, at its top level).
 */
export function outsideTests() {
  const open: LlpConnection[] = [];
  const raws: RawPeer[] = [];
  const listeners: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const c of open.splice(0)) c.abort();
    for (const r of raws.splice(0)) r.close();
    for (const l of listeners.splice(0)) await l.close();
  });
  /** A raw peer (RawPeer.open's `host` and `to`), closed after the test. */
  async function raw(host?: string, to?: string): Promise<RawPeer> {
    const r = await RawPeer.open(host, to);
    raws.push(r);
    return r;
  }
  /** A listener on `host`, port 0, with the connections it accepted and the errors it reported. */
  async function listen(options: UdpOptions, listenOptions: LlpListenOptions = {}, host = '127.0.0.1') {
    const t = udp(options);
    const l = (await t.listen({ host, port: 0 }, listenOptions)) as UdpListener;
    listeners.push(l);
    const accepted: UdpConnection[] = [];
    l.connections$.subscribe((c) => {
      accepted.push(c as UdpConnection);
      open.push(c);
    });
    const errors: LlpError[] = [];
    l.errors$.subscribe((e) => errors.push(e));
    return { t, l, port: l.address.port as number, accepted, errors };
  }
  return { open, listeners, raw, listen };
}
