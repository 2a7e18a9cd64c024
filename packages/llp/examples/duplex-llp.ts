/**
 * A complete custom LLP plugin: length-prefixed ULPDUs over any Node `Duplex` (here: TCP sockets).
 * `BaseLlpStream` from @rddp/llp does the contract's bookkeeping; the plugin supplies framing and I/O.
 * Walkthrough: PLUGINS.md, next to this folder in @rddp/llp. Needs `@rddp/llp`, `inversify` 8 and `rxjs` 7.
 */
import { once } from 'node:events';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import {
  BaseLlpStream,
  ConnectionAbortedError,
  HeldSubject,
  LLP_TRANSPORT,
  type LlpAddress,
  type LlpCloseEvent,
  type LlpConnection,
  type LlpListener,
  type LlpTransport,
  OnceSubject,
  type SendCallback,
} from '@rddp/llp';
import { ContainerModule } from 'inversify';
import { NEVER } from 'rxjs';

/** One LLP stream: a 4-octet big-endian length, then the ULPDU. */
class DuplexStream extends BaseLlpStream {
  private pending: Buffer = Buffer.alloc(0);
  constructor(private readonly io: Duplex) {
    super(0, 65_536);
    io.on('data', (chunk: Buffer) => this.onData(chunk));
    io.on('drain', () => this.drained());
    io.on('end', () => {
      this.finish({ graceful: true, initiator: this.state === 'closing' ? 'local' : 'remote' });
      io.end();
    });
    io.on('error', (e) =>
      this.finish({ graceful: false, initiator: 'remote', error: new ConnectionAbortedError(e.message) }),
    );
  }
  protected transmit(parts: readonly Uint8Array[], length: number, done?: SendCallback): boolean {
    const hdr = Buffer.alloc(4);
    hdr.writeUInt32BE(length);
    this.io.cork();
    let ok = this.io.write(hdr);
    for (const p of parts) ok = this.io.write(p);
    this.io.write(new Uint8Array(0), () => done?.()); // runs once everything before it is flushed
    this.io.uncork();
    return ok;
  }
  protected setReading(paused: boolean): void {
    paused ? this.io.pause() : this.io.resume();
  }
  protected startClose(): void {
    this.io.end();
  }
  protected startAbort(): void {
    (this.io as net.Socket).resetAndDestroy?.() ?? this.io.destroy();
  }
  private onData(chunk: Buffer): void {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= 4 && this.pending.length >= 4 + this.pending.readUInt32BE(0)) {
      const n = this.pending.readUInt32BE(0);
      this.deliver({ length: n, chunks: [this.pending.subarray(4, 4 + n)] });
      this.pending = this.pending.subarray(4 + n);
    }
  }
}

function connection(io: net.Socket, role: 'initiator' | 'responder'): LlpConnection {
  const stream = new DuplexStream(io);
  const closed = new OnceSubject<LlpCloseEvent>();
  stream.closed$.subscribe((e) => closed.fire(e));
  const addr = (host?: string, port?: number): LlpAddress => ({ host: host ?? '', port: port ?? 0 });
  return {
    id: `duplex-${io.localPort}-${io.remotePort}`,
    transport: 'duplex',
    role,
    streams: [stream],
    capabilities: {
      reliable: true,
      ordered: true,
      preservesMessageBoundaries: true,
      strongDigest: false,
      maxStreams: 1,
      maxPrivateData: 0,
    },
    localAddress: addr(io.localAddress, io.localPort),
    remoteAddress: addr(io.remoteAddress, io.remotePort),
    setup: { localPrivateData: new Uint8Array(0), remotePrivateData: new Uint8Array(0), negotiated: {} },
    get state() {
      return stream.state;
    },
    closed$: closed.observable,
    close: (signal) => stream.close(signal),
    abort: (reason) => stream.abort(reason),
  };
}

export const duplexTransport: LlpTransport = {
  name: 'duplex',
  capabilities: {
    reliable: true,
    ordered: true,
    preservesMessageBoundaries: true,
    strongDigest: false,
    maxStreams: 1,
    maxPrivateData: 0,
  },
  async connect(address) {
    const s = net.connect({ host: address.host ?? '127.0.0.1', port: address.port ?? 0 });
    await once(s, 'connect');
    return connection(s, 'initiator');
  },
  async listen(address): Promise<LlpListener> {
    const conns = new HeldSubject<LlpConnection>();
    const server = net
      .createServer((s) => conns.next(connection(s, 'responder')))
      .listen(address.port ?? 0, address.host ?? '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as net.AddressInfo;
    return {
      address: { host: address.host ?? '127.0.0.1', port },
      connections$: conns.observable,
      errors$: NEVER,
      close: async () => {
        server.close(); // stop accepting; accepted connections live on
      },
    };
  },
};

/** Plug it in: `createStack(duplexModule)`. */
export const duplexModule = new ContainerModule(({ bind }) => {
  bind<LlpTransport>(LLP_TRANSPORT).toConstantValue(duplexTransport);
});
