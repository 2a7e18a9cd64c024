/**
 * Baselines measured in the same run as rddp's figures: raw Node TCP on 127.0.0.1 (both ends in this
 * process, like rddp's benchmarks) and a plain `Uint8Array.set` copy loop.
 */
import { once } from 'node:events';
import net from 'node:net';

async function tcpPair(): Promise<{ client: net.Socket; server: net.Socket; close(): Promise<void> }> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as net.AddressInfo).port;
  const accepted = once(srv, 'connection') as Promise<[net.Socket]>;
  const client = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await once(client, 'connect');
  const [server] = await accepted;
  server.setNoDelay(true);
  return {
    client,
    server,
    async close() {
      client.destroy();
      server.destroy();
      srv.close();
      await once(srv, 'close');
    },
  };
}

/**
 * Streams `total` octets as writes of `size` octets from one socket to another, honouring backpressure;
 * the receiver copies each chunk once into a sink buffer (as rddp's receive path copies into the
 * registered region). Returns MB/s (10^6 octets per second).
 */
export async function rawTcpBandwidth(size: number, total: number): Promise<number> {
  const { client, server, close } = await tcpPair();
  const payload = new Uint8Array(size).fill(0x5a);
  const sink = new Uint8Array(Math.max(size, 1 << 20));
  let received = 0;
  let sinkOff = 0;
  const done = new Promise<void>((resolve) => {
    server.on('data', (chunk: Buffer) => {
      let off = 0;
      while (off < chunk.length) {
        const n = Math.min(chunk.length - off, sink.length - sinkOff);
        sink.set(chunk.subarray(off, off + n), sinkOff);
        sinkOff = (sinkOff + n) % sink.length;
        off += n;
      }
      received += chunk.length;
      if (received >= total) resolve();
    });
  });
  const t0 = performance.now();
  let sent = 0;
  while (sent < total) {
    sent += size;
    if (!client.write(payload)) await once(client, 'drain');
  }
  await done;
  const ms = performance.now() - t0;
  await close();
  return total / 1e3 / ms;
}

/** Median-free raw samples of a `size`-octet ping-pong over TCP, in microseconds per round trip / 2. */
export async function rawTcpPingPong(size: number, iters: number): Promise<number[]> {
  const { client, server, close } = await tcpPair();
  const msg = new Uint8Array(size).fill(1);
  let serverGot = 0;
  server.on('data', (chunk: Buffer) => {
    serverGot += chunk.length;
    while (serverGot >= size) {
      serverGot -= size;
      server.write(msg);
    }
  });
  const samples: number[] = [];
  let clientGot = 0;
  let resolveOne: (() => void) | undefined;
  client.on('data', (chunk: Buffer) => {
    clientGot += chunk.length;
    if (clientGot >= size) {
      clientGot -= size;
      resolveOne?.();
    }
  });
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await new Promise<void>((r) => {
      resolveOne = r;
      client.write(msg);
    });
    samples.push(((performance.now() - t0) * 1e3) / 2);
  }
  await close();
  return samples;
}

/** A plain copy loop: `total` octets copied in `size`-octet `Uint8Array.set` calls. MB/s. */
export function copyLoopBandwidth(size: number, total: number): number {
  const src = new Uint8Array(size).fill(7);
  const dst = new Uint8Array(Math.max(size, 1 << 20));
  const t0 = performance.now();
  let off = 0;
  for (let done = 0; done < total; done += size) {
    if (off + size > dst.length) off = 0;
    dst.set(src, off);
    off += size;
  }
  const ms = performance.now() - t0;
  return total / 1e3 / ms;
}

/**
 * Milliseconds to open `n` raw TCP connections to one `net.Server` on 127.0.0.1 (in batches of `batch`,
 * as rddp's figure connects), until the server holds them all; then closes them. The baseline of the
 * MPA/TCP connection setup figure: the same sockets without the MPA Request/Reply exchange.
 */
export async function rawTcpConnections(n: number, batch = 50): Promise<number> {
  const srv = net.createServer();
  const held: net.Socket[] = [];
  let wake: (() => void) | undefined;
  srv.on('connection', (s) => {
    held.push(s);
    if (held.length >= n) wake?.();
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as net.AddressInfo).port;
  const clients: net.Socket[] = [];
  const t0 = performance.now();
  const all = new Promise<void>((r) => {
    wake = r;
  });
  for (let i = 0; i < n; i += batch)
    clients.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(batch, n - i) }, async () => {
          const c = net.connect({ port, host: '127.0.0.1', noDelay: true });
          await once(c, 'connect');
          return c;
        }),
      )),
    );
  if (held.length < n) await all;
  const ms = performance.now() - t0;
  for (const s of [...clients, ...held]) s.destroy();
  srv.close();
  await once(srv, 'close');
  return ms;
}
