import { loopbackModule } from '@rddp/llp-loopback';
import { createStack, type RdmapStreamBuilder, rdmapStreamOn } from '@rddp/stack';
import { type CompletionQueue, Device } from '@rddp/verbs';
import { describe, expect, it } from 'vitest';
import { median, medianSorted, quantile, sorted, summarizeLatency } from '../src/bench/stats.js';
import { perfLoopback, perfParams, printHeader } from '../src/commands/perf.js';
import { cqModFor, PERF_TESTS, perfClient, perfServe } from '../src/perf/engine.js';
import { allSizes, perfLatency } from '../src/perf/format.js';
import { CQ_MOD_SIZE_LIMIT, DEFAULT_TX_DEPTH } from '../src/perf/limits.js';
import { toolTransport } from '../src/transports.js';
import { freePort, run } from './procs.js';

/** A device that keeps the completion queues made on it (the session's send CQ is the first). */
class CountingDevice extends Device {
  readonly cqs: CompletionQueue[] = [];
  override createCq(): CompletionQueue {
    const cq = super.createCq();
    this.cqs.push(cq);
    return cq;
  }
}

const base = { port: '0', size: '4096', iters: '40', txDepth: '16', verify: true } as const;

describe('rddp perf: perftest tests, both ends in one process', () => {
  for (const transport of ['loopback', 'tcp']) {
    for (const test of PERF_TESTS) {
      it(`${test} over ${transport}: verified results, perftest table`, async () => {
        const lines: string[] = [];
        const results = await perfLoopback(test, { ...base, transport }, (s) => lines.push(s));
        expect(results).toHaveLength(1);
        expect(results[0]?.verified).toBe(true);
        expect(results[0]?.row.iterations).toBe(40);
        expect(lines.join('\n')).toContain(
          test.endsWith('_bw') ? '#bytes     #iterations    BW peak[MB/sec]' : 't_typical[usec]',
        );
      }, 30_000);
    }
  }

  it('-a sweeps 2 octets to 8 MiB doubling, as perftest does; --json prints one object per size', async () => {
    expect(allSizes()[0]).toBe(2);
    expect(allSizes().at(-1)).toBe(8 << 20);
    expect(allSizes()).toHaveLength(23);
    const lines: string[] = [];
    const r = await perfLoopback(
      'send_bw',
      { ...base, transport: 'loopback', iters: '5', all: true, json: true },
      (s) => lines.push(s),
    );
    expect(r).toHaveLength(23);
    expect(r.every((x) => x.verified)).toBe(true);
    expect(lines.map((l) => JSON.parse(l).row.bytes)).toEqual(allSizes());
  }, 60_000);

  it('RFC 5040 §5.2.2: back-to-back large Reads with tx-depth above ORD never find the responder without an IRD buffer', async () => {
    for (const transport of ['loopback', 'tcp']) {
      const r = await perfLoopback(
        'read_bw',
        { ...base, transport, size: String(1 << 20), iters: '100', txDepth: '64' },
        () => {},
      );
      expect(r[0]?.verified).toBe(true);
      expect(r[0]?.row.iterations).toBe(100);
    }
  }, 60_000);

  it('--markers with --marker-framing copy (RFC 5044 §4.3): Writes with Markers framed by copy arrive verified; a bad value is a usage error', async () => {
    for (const markerFraming of ['gather', 'copy']) {
      const r = await perfLoopback(
        'write_bw',
        { ...base, transport: 'tcp', markers: true, markerFraming, size: '65536', iters: '200' },
        () => {},
      );
      expect(r[0]?.verified, markerFraming).toBe(true);
    }
    expect(() => toolTransport({ transport: 'tcp', markerFraming: 'zero' })).toThrow(
      /--marker-framing must be gather or copy/,
    );
    expect(() => toolTransport({ transport: 'sctp', markerFraming: 'copy' })).toThrow(/--transport tcp only/);
  }, 60_000);

  it('--send-path direct|socket: Writes with and without Markers arrive verified either way; a bad value is a usage error', async () => {
    for (const sendPath of ['direct', 'socket'])
      for (const markers of [false, true]) {
        const r = await perfLoopback(
          'write_bw',
          { ...base, transport: 'tcp', markers, sendPath, size: '65536', iters: '200' },
          () => {},
        );
        expect(r[0]?.verified, `${sendPath} markers ${markers}`).toBe(true);
      }
    expect(() => toolTransport({ transport: 'tcp', sendPath: 'kernel' })).toThrow(
      /--send-path must be direct or socket/,
    );
    expect(() => toolTransport({ transport: 'sctp', sendPath: 'socket' })).toThrow(/--transport tcp only/);
  }, 60_000);

  it("perfLatency: ib_send_lat's figures of unsorted samples, odd and even counts, and none", () => {
    for (const n of [1, 2, 999, 1000]) {
      const samples = Array.from({ length: n }, (_, i) => ((i * 7919) % 1013) + 0.25 * (i % 3));
      const l = perfLatency(samples);
      const mean = samples.reduce((a, b) => a + b, 0) / n;
      const sd = Math.sqrt(samples.reduce((a, v) => a + (v - mean) ** 2, 0) / n);
      expect(l).toEqual({ ...summarizeLatency(samples), stdev: l.stdev, p999: quantile(sorted(samples), 0.999) });
      expect(l.stdev).toBeCloseTo(sd, 9);
    }
    expect(Object.values(perfLatency([])).every(Number.isNaN)).toBe(true);
  });

  it('medianSorted: the middle value, or the mean of the middle two; median sorts first; both NaN when empty', () => {
    expect(medianSorted([1, 2, 9])).toBe(2);
    expect(medianSorted([1, 2, 4, 9])).toBe(3);
    expect(median([9, 1, 4, 2])).toBe(3);
    expect(summarizeLatency([9, 1, 4, 2]).median).toBe(3);
    expect(medianSorted([])).toBeNaN();
    expect(median([])).toBeNaN();
  });

  it('bad flags are typed usage errors', () => {
    expect(() => perfParams('write_bandwidth', { ...base, transport: 'tcp' })).toThrow(/unknown test/);
    expect(() => perfParams('write_bw', { ...base, transport: 'tcp', size: '0' })).toThrow(/-s must be/);
    expect(() => perfParams('write_bw', { ...base, transport: 'tcp', cqMod: '0' })).toThrow(/--cq-mod must be/);
    expect(() => perfParams('read_bw', { ...base, transport: 'tcp', outs: '129' })).toThrow(/--outs must be/);
  });

  it('-o N (perftest --outs): the client keeps N RDMA Reads outstanding (its ORD), the server serves up to 128 (its IRD), RFC 5040 §6.1', async () => {
    const stack = createStack(loopbackModule());
    const [c, s] = await stack.pair({ host: 'perf-outs', port: 0 });
    const built: { role: string; ord: number; ird: number }[] = [];
    const rdmapFactory: RdmapStreamBuilder = (llp, request) => {
      const r = rdmapStreamOn(llp, request);
      built.push({ role: r.role, ord: r.ord, ird: r.ird });
      return r;
    };
    const serving = perfServe(s, 'ietf', () => {}, 0, { rdmapFactory });
    const params = { test: 'read_bw', sizes: [4096], iters: 200, txDepth: 64, outs: 32, verify: true } as const;
    const [r] = await perfClient(c, 'ietf', params, () => {}, undefined, 0, { rdmapFactory });
    await serving;
    expect(r?.verified).toBe(true);
    expect(built).toContainEqual(expect.objectContaining({ role: 'initiator', ord: 32 }));
    expect(built).toContainEqual(expect.objectContaining({ role: 'responder', ird: 128 }));
  }, 30_000);

  it("without -o the client keeps the device's most RDMA Reads outstanding (128, as perftest takes max_qp_rd_atom; siw: 128)", async () => {
    const stack = createStack(loopbackModule());
    const [c, s] = await stack.pair({ host: 'perf-outs-default', port: 0 });
    const built: { role: string; ord: number }[] = [];
    const rdmapFactory: RdmapStreamBuilder = (llp, request) => {
      const r = rdmapStreamOn(llp, request);
      built.push({ role: r.role, ord: r.ord });
      return r;
    };
    const serving = perfServe(s, 'ietf', () => {}, 0, { rdmapFactory });
    const params = { test: 'read_bw', sizes: [4096], iters: 200, txDepth: 64, verify: true } as const;
    const [r] = await perfClient(c, 'ietf', params, () => {}, undefined, 0, { rdmapFactory });
    await serving;
    expect(r?.verified).toBe(true);
    expect(built).toContainEqual(expect.objectContaining({ role: 'initiator', ord: 128 }));
  }, 30_000);

  it('-Q N (perftest --cq-mod): through verbs, one send work request in N is signaled and the last one; every operation counts', async () => {
    for (const test of ['write_bw', 'read_bw', 'send_bw'] as const) {
      const stack = createStack(loopbackModule());
      const [c, s] = await stack.pair({ host: `perf-cq-mod-${test}`, port: 0 });
      const device = new CountingDevice();
      const serving = perfServe(s, 'ietf', () => {}, 0);
      const params = { test, sizes: [256], iters: 50, txDepth: 16, cqMod: 8, verify: true };
      const [r] = await perfClient(c, 'ietf', params, () => {}, undefined, 0, { device });
      await serving;
      expect(r?.verified).toBe(true);
      expect(r?.row.iterations).toBe(50);
      expect(device.cqs[0]?.reported).toBe(Math.ceil(50 / 8));
    }
  }, 30_000);

  it('--warm-up N in bandwidth tests: N operations go first, unmeasured; the atomic word counts them too', async () => {
    for (const test of ['atomic_bw', 'send_bw', 'read_bw'] as const) {
      const stack = createStack(loopbackModule());
      const [c, s] = await stack.pair({ host: `perf-warm-${test}`, port: 0 });
      const device = new CountingDevice();
      const serving = perfServe(s, 'ietf', () => {}, 0);
      const params = { test, sizes: [1024], iters: 40, txDepth: 16, cqMod: 16, verify: true } as const;
      const [r] = await perfClient(c, 'ietf', params, () => {}, undefined, 0, { device, warmUp: 25 });
      await serving;
      // Verification checks the remote word after every Fetch-and-Add, the warm-up's included.
      expect(r?.verified, test).toBe(true);
      expect(r?.row.iterations, test).toBe(40);
      // Signaled: ⌈25/16⌉ of the warm-up and ⌈40/16⌉ measured (the last of each is signaled too).
      expect(device.cqs[0]?.reported, test).toBe(2 + 3);
    }
  }, 30_000);

  it('-q with --warm-up: per size, every QP warms up, all start together, and none verifies before all have finished', async () => {
    const qps = [0, 1].map(() => new CountingDevice());
    const reads = qps.map(() => 0); // RDMA Reads each QP posted: its verification reads the server's region back
    // When the last QP reaches a line (a start or a finish, per size): each QP's reported completions × 100
    // + the Reads it has posted.
    const reached = (lines: number[][]) => {
      let arrived = 0;
      let release: () => void = () => {};
      let together = new Promise<void>((r) => (release = r));
      return async (): Promise<void> => {
        const passing = together;
        if (++arrived === qps.length) {
          lines.push(qps.map((d, i) => (d.cqs[0]?.reported ?? -1) * 100 + (reads[i] as number)));
          arrived = 0;
          release();
          together = new Promise<void>((r) => (release = r));
        }
        await passing;
      };
    };
    const atStart: number[][] = [];
    const atFinish: number[][] = [];
    const start = reached(atStart);
    const finish = reached(atFinish);
    const runs = qps.map(async (device, i) => {
      const stack = createStack(loopbackModule());
      const [c, s] = await stack.pair({ host: `perf-qp-warm-${i}`, port: 0 });
      const serving = perfServe(s, 'ietf', () => {}, 0);
      const params = { test: 'write_bw', sizes: [2048, 1024], iters: 30, txDepth: 8, cqMod: 8, verify: true } as const;
      const rdmapFactory: RdmapStreamBuilder = (llp, request) => {
        const r = rdmapStreamOn(llp, request);
        const post = r.postSend.bind(r);
        r.postSend = (wr) => {
          if (wr.op.type === 'read') reads[i] = (reads[i] as number) + 1;
          post(wr);
        };
        return r;
      };
      const options = { device, rdmapFactory, warmUp: 20, start, finish };
      const results = await perfClient(c, 'ietf', params, () => {}, undefined, 0, options);
      await serving;
      return results;
    });
    const results = (await Promise.all(runs)).flat();
    expect(results.every((r) => r?.verified && r.row.iterations === 30)).toBe(true);
    // Signaled per size: ⌈20/8⌉ = 3 in the warm-up, ⌈30/8⌉ = 4 measured; then one Read verifies the size.
    // Size 1: start after its warm-up (3), finish after its measured Writes (7), before either QP's Read.
    // Size 2: start at 7 + 3 after size 1's Read, finish at 14, before size 2's Read.
    expect(atStart).toEqual([
      [300, 300],
      [1001, 1001],
    ]);
    expect(atFinish).toEqual([
      [700, 700],
      [1401, 1401],
    ]);
  }, 30_000);

  it("without -Q, perftest's rule: messages over 8 KiB are signaled one by one, smaller ones one in 100 (at most the tx-depth)", async () => {
    expect(cqModFor({ txDepth: DEFAULT_TX_DEPTH }, CQ_MOD_SIZE_LIMIT + 1)).toBe(1);
    expect(cqModFor({ txDepth: DEFAULT_TX_DEPTH }, CQ_MOD_SIZE_LIMIT)).toBe(100);
    expect(cqModFor({ txDepth: 64 }, 64)).toBe(64);
    expect(cqModFor({ txDepth: DEFAULT_TX_DEPTH, cqMod: 16 }, 1 << 16)).toBe(16);
    for (const [size, reported] of [
      [16384, 30],
      [4096, 1],
    ] as const) {
      const stack = createStack(loopbackModule());
      const [c, s] = await stack.pair({ host: `perf-cq-default-${size}`, port: 0 });
      const device = new CountingDevice();
      const serving = perfServe(s, 'ietf', () => {}, 0);
      const params = { test: 'read_bw', sizes: [size], iters: 30, txDepth: DEFAULT_TX_DEPTH, verify: true } as const;
      const [r] = await perfClient(c, 'ietf', params, () => {}, undefined, 0, { device });
      await serving;
      expect(r?.verified).toBe(true);
      expect(device.cqs[0]?.reported).toBe(reported);
    }
    // The header says which moderation a run uses, and warns where perftest warns.
    const lines: string[] = [];
    printHeader(perfParams('read_bw', { ...base, size: '65536', txDepth: '128' }), 'tcp', (l) => lines.push(l));
    expect(lines.join('\n')).toContain('CQ moderation: 1');
    lines.length = 0;
    printHeader(perfParams('read_bw', { ...base, size: '65536', txDepth: '128', cqMod: '16' }), 'tcp', (l) =>
      lines.push(l),
    );
    expect(lines.join('\n')).toMatch(/CQ moderation: 16[\s\S]*Warning: large messages with CQ moderation/);
  }, 30_000);
});

describe('rddp perf between two processes', () => {
  it('`perf write_bw` (server) and `perf write_bw 127.0.0.1` (client) print the perftest table', async () => {
    const port = String(await freePort());
    const server = run(['perf', 'write_bw', '-p', port, '-n', '200']);
    await new Promise<void>((resolve) => {
      let seen = '';
      server.child.stderr?.on('data', (d) => {
        seen += d;
        if (seen.includes('listening')) resolve();
      });
    });
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-n', '200', '-s', '65536']).done;
    const s = await server.done;
    expect(c.code).toBe(0);
    expect(c.out).toMatch(/#bytes\s+#iterations\s+BW peak\[MB\/sec\]\s+BW average\[MB\/sec\]\s+MsgRate\[Mpps\]/);
    expect(c.out).toMatch(/\n 65536\s+200\s+\d/);
    expect(s.code).toBe(0);
    expect(s.out).toMatch(/\n 65536\s+200\s+\d/);
  }, 60_000);
});
