/**
 * The bench's two-process raw Node TCP baselines, run as their own program (node: modules only, so the
 * baseline process carries nothing of rddp):
 *   node raw-tcp.js bulk <total octets> <write size> [warm-up octets] [congestion control]  — the parent
 *     receives and only counts, a forked child writes warm-up + `total` octets in `write size` writes
 *     honouring backpressure; prints {"MBps"} (10^6/s), timed at the receiver from the first octet (or
 *     from the read that completes the warm-up) to the last. With a congestion control ('cubic', ...),
 *     both sockets run it (Linux TCP_CONGESTION through `@rddp/writev`, the one thing loaded beyond
 *     node: modules, and only then).
 *   node raw-tcp.js pingpong <round trips> <size> <warm-up round trips>  — TCP_NODELAY ping-pong with a
 *     forked child echoing; prints {"meanUs","medianUs","p99Us","maxUs"} of the half round trip.
 */
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { ReceiveMeter } from './receive-meter.js';

const self = fileURLToPath(import.meta.url);

/**
 * Sets `name` as the TCP congestion control of `socket` (a listening socket's accepted sockets inherit it),
 * or exits with one line saying why it could not.
 */
function setCongestion(socket: net.Socket | net.Server, name: string | undefined): void {
  if (!name) return;
  let r: string | number = -1;
  try {
    const { congestionControl } = createRequire(import.meta.url)('@rddp/writev') as {
      congestionControl: (fd: number, name?: string) => string | number;
    };
    r = congestionControl((socket as unknown as { _handle: { fd: number } })._handle.fd, name);
  } catch (e) {
    console.error(`raw-tcp: congestion control ${name} needs @rddp/writev's native build: ${String(e)}`);
    process.exit(1);
  }
  if (r !== name) {
    console.error(`raw-tcp: the kernel refused congestion control ${name} (${r})`);
    process.exit(1);
  }
}

function bulkServer(total: number, size: number, warm: number, congestion?: string): void {
  const srv = net.createServer((sock) => {
    const meter = new ReceiveMeter(total, warm);
    sock.on('data', (d: Buffer) => {
      const r = meter.add(d.length);
      if (r) {
        console.log(
          JSON.stringify({ MBps: r.MBps, octets: r.octets, writeSize: size, warm, congestion: congestion ?? null }),
        );
        sock.destroy();
        srv.close();
        child.kill();
      }
    });
  });
  let child: ReturnType<typeof fork>;
  srv.listen(0, '127.0.0.1', () => {
    setCongestion(srv, congestion); // before the child connects: the accepted socket inherits it
    const port = (srv.address() as net.AddressInfo).port;
    child = fork(self, [
      'bulk-client',
      String(port),
      String(total + warm),
      String(size),
      ...(congestion ? [congestion] : []),
    ]);
  });
}

function bulkClient(port: number, total: number, size: number, congestion?: string): void {
  const buf = Buffer.alloc(size, 0xab);
  const s = net.connect(port, '127.0.0.1', () => {
    setCongestion(s, congestion);
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        sent += size;
        if (!s.write(buf)) {
          s.once('drain', pump);
          return;
        }
      }
      s.end();
    };
    pump();
  });
  s.on('data', () => {});
  s.on('error', () => process.exit(0)); // the receiver closes once it has counted everything
  s.on('close', () => process.exit(0));
}

function pingPongServer(iters: number, size: number, warm: number): void {
  const srv = net.createServer((sock) => {
    sock.setNoDelay(true);
    const msg = Buffer.alloc(size, 2);
    const rtts = new Float64Array(iters);
    let done = 0;
    let have = 0;
    let last = 0n;
    sock.on('data', (d: Buffer) => {
      have += d.length;
      while (have >= size) {
        have -= size;
        done++;
        const now = process.hrtime.bigint();
        if (done > warm) rtts[done - warm - 1] = Number(now - last) / 1000;
        last = now;
        if (done === warm + iters) {
          const sorted = Array.from(rtts).sort((a, b) => a - b);
          const q = (f: number) => (sorted[Math.min(iters - 1, Math.ceil(f * iters) - 1)] as number) / 2;
          const sum = sorted.reduce((a, b) => a + b, 0);
          console.log(
            JSON.stringify({
              size,
              iters,
              meanUs: sum / iters / 2,
              medianUs: q(0.5),
              p99Us: q(0.99),
              maxUs: (sorted[iters - 1] as number) / 2,
            }),
          );
          sock.destroy();
          srv.close();
          return;
        }
        sock.write(msg);
      }
    });
    last = process.hrtime.bigint();
    sock.write(msg);
  });
  srv.listen(0, '127.0.0.1', () => {
    fork(self, ['pingpong-client', String((srv.address() as net.AddressInfo).port), String(size)]);
  });
}

function pingPongClient(port: number, size: number): void {
  const s = net.connect(port, '127.0.0.1', () => s.setNoDelay(true));
  const msg = Buffer.alloc(size, 1);
  let have = 0;
  s.on('data', (d: Buffer) => {
    have += d.length;
    while (have >= size) {
      have -= size;
      s.write(msg);
    }
  });
  s.on('error', () => process.exit(0));
  s.on('close', () => process.exit(0));
}

function arg(i: number): number {
  const n = Number(process.argv[i]);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`raw-tcp: argument ${i - 2} must be a positive integer (got ${process.argv[i]})`);
    process.exit(2);
  }
  return n;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const mode = process.argv[2];
  if (mode === 'bulk') bulkServer(arg(3), arg(4), Number(process.argv[5] ?? 0) || 0, process.argv[6]);
  else if (mode === 'bulk-client') bulkClient(arg(3), arg(4), arg(5), process.argv[6]);
  else if (mode === 'pingpong') pingPongServer(arg(3), arg(4), Number(process.argv[5] ?? 2000) || 0);
  else if (mode === 'pingpong-client') pingPongClient(arg(3), arg(4));
  else {
    console.error(
      'usage: raw-tcp.js bulk <total> <write size> [warm-up octets] | pingpong <round trips> <size> [warm-up]',
    );
    process.exit(2);
  }
}
