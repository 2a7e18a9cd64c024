/**
 * Throughput of this LLP against the bare `sctp` package, same run, same machine, same message size,
 * both over UDP on the loopback: for the benchmark command, not a test (no timed assertions).
 */
import dgram from 'node:dgram';
import { firstValueFrom } from 'rxjs';
import { recvBufferRequest, resolveOptions, type SctpTransportOptions } from './options.js';
import { sctpPackage } from './pkg.js';
import { sctp } from './transport.js';

export interface SctpBenchmarkOptions {
  /** Octets per message (default 65536). */
  readonly messageSize?: number;
  /** Octets to move in each run (default 32 MiB). */
  readonly totalBytes?: number;
  /** Options of the transport under test (the baseline gets the same receive window). */
  readonly transport?: SctpTransportOptions;
  /** Give up after this long per run (default 120000 ms). */
  readonly timeoutMs?: number;
}

export interface SctpBenchmarkResult {
  /** This LLP: MB/s (10^6 octets per second) of ULPDU payload, first send to last delivery. */
  readonly subjectMBps: number;
  /** The bare package (its Socket API, one writer): MB/s of message payload. */
  readonly baselineMBps: number;
  readonly messageSize: number;
  readonly totalBytes: number;
}

export async function runSctpBenchmark(options: SctpBenchmarkOptions = {}): Promise<SctpBenchmarkResult> {
  const messageSize = options.messageSize ?? 65_536;
  const totalBytes = options.totalBytes ?? 32 * 1024 * 1024;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const count = Math.max(1, Math.floor(totalBytes / messageSize));
  const transportOptions: SctpTransportOptions = {
    ...options.transport,
    mulpdu: Math.max(options.transport?.mulpdu ?? 65_536, messageSize),
  };
  const baselineMBps = await bareThroughput(messageSize, count, transportOptions, timeoutMs);
  const subjectMBps = await llpThroughput(messageSize, count, transportOptions, timeoutMs);
  return { subjectMBps, baselineMBps, messageSize, totalBytes: count * messageSize };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

async function llpThroughput(size: number, count: number, o: SctpTransportOptions, timeoutMs: number): Promise<number> {
  const t = sctp(o);
  const listener = await t.listen({ host: '127.0.0.1', port: 0 });
  const accepted = firstValueFrom(listener.connections$);
  const a = await t.connect({ host: '127.0.0.1', port: listener.address.port as number });
  const b = await accepted;
  const tx = a.streams[0];
  const rx = b.streams[0];
  if (!tx || !rx) throw new Error('no stream');
  const payload = new Uint8Array(size).fill(0x5a);
  let received = 0;
  const done = new Promise<void>((resolve) => {
    rx.setReceiver((u) => {
      received += u.length;
      if (received >= size * count) resolve();
    });
  });
  const start = performance.now();
  const sending = (async () => {
    for (let i = 0; i < count; i++) if (!tx.send([payload])) await tx.waitForDrain();
  })();
  try {
    await withTimeout(Promise.all([sending, done]), timeoutMs, 'the LLP run');
    const seconds = (performance.now() - start) / 1000;
    await a.close();
    return (size * count) / seconds / 1e6;
  } finally {
    a.abort();
    b.abort();
    await listener.close();
  }
}

async function bareThroughput(
  size: number,
  count: number,
  o: SctpTransportOptions,
  timeoutMs: number,
): Promise<number> {
  const resolved = resolveOptions(o);
  const rcv = recvBufferRequest(resolved);
  const open = () =>
    new Promise<dgram.Socket>((resolve) => {
      const s = dgram.createSocket({ type: 'udp4', recvBufferSize: rcv, sendBufferSize: rcv });
      s.bind(0, '127.0.0.1', () => resolve(s));
    });
  const ua = await open();
  const ub = await open();
  const pa = ua.address().port;
  const pb = ub.address().port;
  await new Promise<void>((r) => ua.connect(pb, '127.0.0.1', () => r()));
  await new Promise<void>((r) => ub.connect(pa, '127.0.0.1', () => r()));
  // The package advertises its readable high-water mark as a_rwnd: give it the window ours gets.
  const hwm = resolved.receiveWindow;
  const server = sctpPackage.connect({
    passive: true,
    localPort: pb,
    port: pa,
    udpTransport: ub,
    readableHighWaterMark: hwm,
  });
  const client = sctpPackage.connect({ localPort: pa, port: pb, udpTransport: ua, readableHighWaterMark: hwm });
  let received = 0;
  const done = new Promise<void>((resolve) => {
    server.on('data', (d: Buffer) => {
      received += d.length;
      if (received >= size * count) resolve();
    });
  });
  server.on('error', () => {});
  client.on('error', () => {});
  const payload = Buffer.alloc(size, 0x5a);
  try {
    await withTimeout(new Promise<void>((r) => client.once('connect', () => r())), timeoutMs, 'the bare association');
    const start = performance.now();
    const sending = (async () => {
      for (let i = 0; i < count; i++) {
        if (!client.write(payload)) await new Promise<void>((r) => client.once('drain', () => r()));
      }
    })();
    await withTimeout(Promise.all([sending, done]), timeoutMs, 'the bare run');
    return (size * count) / ((performance.now() - start) / 1000) / 1e6;
  } finally {
    client.destroy();
    server.destroy();
    ua.close();
    ub.close();
  }
}
