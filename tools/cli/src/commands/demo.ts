import type { LlpConnection, LlpStream, Ulpdu } from '@rddp/llp';
import { loopback } from '@rddp/llp-loopback';
import type { Command } from 'commander';

export interface EchoResult {
  readonly size: number;
  readonly count: number;
  readonly octets: number;
  readonly ms: number;
  readonly verified: boolean;
}

/** Copies a received ULPDU's chunks into one new buffer (the echo server keeps the bytes past the call). */
function gather(u: Ulpdu): Uint8Array {
  const out = new Uint8Array(u.length);
  let off = 0;
  for (const c of u.chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

function pattern(size: number, seed: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = (i * 131 + seed) & 0xff;
  return b;
}

function sendAll(stream: LlpStream, ulpdus: Uint8Array[]): Promise<void> {
  return (async () => {
    for (const u of ulpdus) if (!stream.send([u])) await stream.waitForDrain();
  })();
}

/**
 * Echo ULPDUs through the in-process loopback LLP: a server echoes each ULPDU back, the client checks
 * every octet and exact lengths (RFC 5041 §3: the LLP keeps ULPDU boundaries).
 */
export async function runLoopbackEcho(sizes: readonly number[], count: number): Promise<EchoResult[]> {
  const transport = loopback();
  const listener = await transport.listen({ host: 'demo', port: 0 });
  const sub = listener.connections$.subscribe((conn: LlpConnection) => {
    const s = conn.streams[0] as LlpStream;
    s.setReceiver((u) => {
      s.send([gather(u)]);
    });
  });
  const conn = await transport.connect(listener.address);
  const stream = conn.streams[0] as LlpStream;
  const results: EchoResult[] = [];
  try {
    for (const size of sizes) {
      const ulpdus = Array.from({ length: count }, (_, i) => pattern(size, i));
      let received = 0;
      let verified = true;
      const t0 = performance.now();
      await new Promise<void>((resolve, reject) => {
        stream.setReceiver((u) => {
          const want = ulpdus[received] as Uint8Array;
          const got = gather(u);
          if (got.length !== want.length || !got.every((v, i) => v === want[i])) verified = false;
          if (++received === count) resolve();
        });
        sendAll(stream, ulpdus).catch(reject);
      });
      results.push({ size, count, octets: size * count, ms: performance.now() - t0, verified });
    }
  } finally {
    sub.unsubscribe();
    await conn.close();
    await listener.close();
  }
  return results;
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('run the main demo: ULPDU echo over the loopback LLP, verified octet by octet')
    .option('-n, --iters <n>', 'ULPDUs per size', (v) => Number.parseInt(v, 10), 200)
    .addHelpText('after', '\nExample:\n  $ tools/rddp demo\n  $ tools/rddp demo -n 1000')
    .action(async (opts: { iters: number }) => {
      const sizes = [0, 1, 64, 1024, 4096, 16384, 65_000];
      process.stdout.write('rddp demo: ULPDU echo over the loopback LLP\n');
      process.stdout.write(`${'#bytes'.padStart(8)} ${'#ulpdus'.padStart(8)} ${'MB/sec'.padStart(10)}  verified\n`);
      const results = await runLoopbackEcho(sizes, opts.iters);
      for (const r of results) {
        const mbps = r.octets / 1e6 / (r.ms / 1e3);
        process.stdout.write(
          `${String(r.size).padStart(8)} ${String(r.count).padStart(8)} ${mbps.toFixed(2).padStart(10)}  ${r.verified ? 'yes' : 'NO'}\n`,
        );
      }
      if (!results.every((r) => r.verified)) {
        process.stderr.write('rddp demo: echoed data did not match\n');
        process.exitCode = 1;
      }
    });
}
