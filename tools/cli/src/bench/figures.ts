/**
 * rddp's side of each benchmark figure. Bandwidth runs an RDMA Write's wire format: tagged DDP messages
 * whose RsvdULP is RDMAP's control octet (RV 1, opcode 0 — RFC 5040 §4.2), both ends in this process,
 * as the raw-TCP baseline runs. Transports and DDP Streams are composed by `@rddp/stack`.
 */
import { Access, StagTable } from '@rddp/ddp';
import { type LlpConnection, type LlpStream, MemoryBudget } from '@rddp/llp';
import { loopbackModule } from '@rddp/llp-loopback';
import { type MpaParams, mpaTcpModule } from '@rddp/llp-mpa-tcp';
import { createStack, type Stack } from '@rddp/stack';
import { firstValueFrom } from 'rxjs';
import { OpWindow } from '../perf/window.js';

/** RDMAP control octet of an RDMA Write: RV=1 (bits 0-1 = 01), opcode 0000 (RFC 5040 §4.2). */
export const RDMA_WRITE_CONTROL = 0x40;

/** A stack on MPA/TCP with `params` on both ends (receive arenas from `memoryBudget`, default the process's). */
export function mpaStack(params: MpaParams, memoryBudget?: MemoryBudget): Stack {
  return createStack(mpaTcpModule({ params, ...(memoryBudget ? { memoryBudget } : {}) }), {
    connectParams: params,
    listenParams: params,
  });
}

export async function mpaPair(
  params: MpaParams,
): Promise<{ stack: Stack; a: LlpConnection; b: LlpConnection; close(): Promise<void> }> {
  const stack = mpaStack(params);
  const [a, b] = await stack.pair({ host: '127.0.0.1', port: 0 });
  return {
    stack,
    a,
    b,
    async close() {
      a.abort();
      b.abort();
    },
  };
}

/** Streams `total` octets as tagged messages of `size` octets from a to b; MB/s (10^6 octets/s). Verifies the last message. */
export async function ddpWriteBandwidth(
  stack: Stack,
  a: LlpStream,
  b: LlpStream,
  size: number,
  total: number,
  depth = 16,
): Promise<number> {
  const stags = new StagTable();
  const sink = new Uint8Array(size);
  const region = stags.register({ pdId: 1, buffer: sink, access: Access.RemoteWrite });
  const tx = stack.ddpStream(a, { pdId: 1, stags: new StagTable() });
  const rx = stack.ddpStream(b, { pdId: 1, stags });
  const count = Math.max(1, Math.floor(total / size));
  let delivered = 0;
  const done = new Promise<void>((resolve, reject) => {
    rx.error$.subscribe((e) => reject(new Error(e.message)));
    rx.delivery$.subscribe(() => {
      if (++delivered === count) resolve();
    });
  });
  const payload = new Uint8Array(size).fill(0x5a);
  const parts = [payload];
  // A window of `depth` outstanding Writes, refilled as each completes (perftest's tx-depth).
  const ops = new OpWindow();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    ops.track(tx.sendTagged(region.stag, 0n, parts, RDMA_WRITE_CONTROL));
    if (ops.full(depth)) await ops.room(depth);
  }
  await ops.drain();
  await done;
  const ms = performance.now() - t0;
  if (sink[size - 1] !== 0x5a) throw new Error('verification failed: the sink does not hold the written data');
  return (count * size) / 1e3 / ms;
}

/** Half round-trip times (µs) of a `size`-octet untagged Send ping-pong between a and b. */
export async function ddpSendPingPong(
  stack: Stack,
  a: LlpStream,
  b: LlpStream,
  size: number,
  iters: number,
): Promise<number[]> {
  const A = stack.ddpStream(a, { pdId: 1, stags: new StagTable() });
  const B = stack.ddpStream(b, { pdId: 1, stags: new StagTable() });
  const msg = new Uint8Array(size).fill(1);
  const SEND = 0x43; // RDMAP control: RV 1, opcode 0011 Send (RFC 5040 §4.2)
  for (let i = 0; i < 8; i++) {
    A.postReceive(0, new Uint8Array(size));
    B.postReceive(0, new Uint8Array(size));
  }
  // Each delivered buffer is posted again (as rping does), so the figure carries no allocation per message.
  B.delivery$.subscribe((e) => {
    B.postReceive(0, e.tagged ? new Uint8Array(size) : e.buffer);
    void B.sendUntagged(0, [msg], SEND * 2 ** 32);
  });
  let wake: (() => void) | undefined;
  A.delivery$.subscribe((e) => {
    A.postReceive(0, e.tagged ? new Uint8Array(size) : e.buffer);
    wake?.();
  });
  const samples: number[] = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await new Promise<void>((r) => {
      wake = r;
      void A.sendUntagged(0, [msg], SEND * 2 ** 32);
    });
    samples.push(((performance.now() - t0) * 1e3) / 2);
  }
  return samples;
}

export async function loopbackWriteBandwidth(size: number, total: number): Promise<number> {
  const stack = createStack(loopbackModule({ mulpdu: 65_512 }));
  const [a, b] = await stack.pair({ host: 'bench-loopback', port: 0 });
  try {
    return await ddpWriteBandwidth(stack, a.streams[0] as LlpStream, b.streams[0] as LlpStream, size, total);
  } finally {
    a.abort();
    b.abort();
  }
}

/** Peak RSS growth (MiB) while writing `total` octets in 1 MiB messages over MPA/TCP with CRC. */
export async function rssGrowth(total: number): Promise<number> {
  global.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const { stack, a, b, close } = await mpaPair({ crc: true });
  try {
    await ddpWriteBandwidth(stack, a.streams[0] as LlpStream, b.streams[0] as LlpStream, 1 << 20, total);
  } finally {
    clearInterval(timer);
    await close();
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  return (peak - before) / (1 << 20);
}

/** Milliseconds to set up `n` MPA/TCP connections to one server (all held open at the end), and close them. */
/** Room for both ends' first receive arenas (64 KiB, held twice over) with room to spare. */
const ARENAS_PER_CONNECTION_PAIR = 512 * 1024;

export async function connectionSetup(n: number): Promise<number> {
  // Both ends are this process and one source (127.0.0.1): the figure gets a budget of its own that lets
  // one source hold all 2n receive arenas (the process budget gives a source a quarter).
  const stack = mpaStack({ crc: true }, new MemoryBudget({ limit: n * ARENAS_PER_CONNECTION_PAIR, sourceShare: 1 }));
  const listener = await stack.listen({ host: '127.0.0.1', port: 0 });
  const held: LlpConnection[] = [];
  listener.connections$.subscribe((c) => held.push(c));
  const t0 = performance.now();
  const clients: LlpConnection[] = [];
  const batch = 50;
  for (let i = 0; i < n; i += batch)
    clients.push(
      ...(await Promise.all(Array.from({ length: Math.min(batch, n - i) }, () => stack.connect(listener.address)))),
    );
  while (held.length < n) await new Promise((r) => setTimeout(r, 1));
  const ms = performance.now() - t0;
  // Torn down before the next round starts: every connection's receive arena is back in the budget (two
  // thousand of them from one source would otherwise overlap the next round's and meet its share).
  const all = [...clients, ...held];
  const closed = all.map((c) => firstValueFrom(c.closed$, { defaultValue: undefined }));
  for (const c of all) c.abort();
  await Promise.all(closed);
  await listener.close();
  return ms;
}
