/** Raw TCP peers for feeding the transport what an honest MPA peer would never send. */
import net from 'node:net';

export interface RawPeer {
  readonly socket: net.Socket;
  /** Everything received so far. */
  received(): Buffer;
  /** Resolves once `n` octets have arrived (or rejects at close). */
  waitFor(n: number, ms?: number): Promise<Buffer>;
  /** Resolves when the socket closed: `reset` when the peer sent RST. */
  readonly closed: Promise<{ reset: boolean; fin: boolean }>;
}

export function wrap(socket: net.Socket): RawPeer {
  const chunks: Buffer[] = [];
  let waiters: { n: number; resolve(b: Buffer): void; reject(e: Error): void }[] = [];
  let fin = false;
  let reset = false;
  const all = () => Buffer.concat(chunks);
  socket.on('data', (c: Buffer) => {
    chunks.push(c);
    const b = all();
    waiters = waiters.filter((w) => {
      if (b.byteLength < w.n) return true;
      w.resolve(b);
      return false;
    });
  });
  socket.on('end', () => {
    fin = true;
    // Half-open sockets stay writable after the peer's FIN: answer it so 'close' follows.
    socket.end();
  });
  socket.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'ECONNRESET' || e.code === 'EPIPE') reset = true;
  });
  const closed = new Promise<{ reset: boolean; fin: boolean }>((resolve) =>
    socket.on('close', () => {
      for (const w of waiters) w.reject(new Error(`closed with ${all().byteLength} octets received`));
      waiters = [];
      resolve({ reset, fin });
    }),
  );
  return {
    socket,
    received: all,
    waitFor(n, ms = 5000) {
      const b = all();
      if (b.byteLength >= n) return Promise.resolve(b);
      return new Promise<Buffer>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${n} octets`)), ms);
        waiters.push({
          n,
          resolve: (x) => {
            clearTimeout(t);
            resolve(x);
          },
          reject: (e) => {
            clearTimeout(t);
            reject(e);
          },
        });
      });
    },
    closed,
  };
}

export async function rawConnect(port: number): Promise<RawPeer> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
  const peer = wrap(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return peer;
}

/** A TCP server whose every accepted socket is handed to `onPeer`. */
export async function rawServer(onPeer: (p: RawPeer) => void): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    onPeer(wrap(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** An MPA Request frame, Rev 1, C=1 (RFC 5044 §7.1.1), without private data: a raw Initiator's first octets. */
export function mpaRequest(): Buffer {
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40;
  req[17] = 1;
  return req;
}
