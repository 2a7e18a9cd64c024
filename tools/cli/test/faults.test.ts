/**
 * `--faults`: the loopback LLP's fault injection (`LoopbackFaults`) reaching `perf --loopback
 * --transport loopback`; faults DDP cannot run on (RFC 5041 §3: reliable, ordered) are refused up front.
 */
import type { LlpConnection } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { buildProgram, perfLoopback, toolTransport } from '../src/index.js';

type PerfOptions = Parameters<typeof perfLoopback>[1];

const base = { port: '0', size: '4096', iters: '40', txDepth: '16', verify: true, transport: 'loopback' } as const;
const withFaults = (faults: string): PerfOptions => ({ ...base, faults }) as PerfOptions;

describe('rddp perf --transport loopback --faults', () => {
  it('chunk and delay reach the transport (a ULPDU of 100 octets in chunks of at most 7); perf still verifies its data', async () => {
    const tt = toolTransport({ transport: 'loopback', faults: 'chunk=7,seed=3' });
    const [client, server] = await tt.stack.pair({ host: 'faults', port: 0 });
    const chunks = new Promise<number[]>((resolve) =>
      server.streams[0]?.setReceiver((u) => resolve(u.chunks.map((c) => c.byteLength))),
    );
    client.streams[0]?.send([new Uint8Array(100)]);
    const lengths = await chunks;
    expect(lengths.length).toBeGreaterThan(100 / 7 - 1);
    expect(Math.max(...lengths)).toBeLessThanOrEqual(7);
    expect(lengths.reduce((a, b) => a + b, 0)).toBe(100);
    client.abort();
    const results = await perfLoopback('write_bw', withFaults('chunk=7,delay=1,seed=3'), () => {});
    expect(results[0]?.verified).toBe(true);
    expect(results[0]?.row.iterations).toBe(40);
  }, 60_000);

  it('abort-after: the connection is aborted mid-run and perf fails instead of completing', async () => {
    await expect(perfLoopback('write_bw', withFaults('abort-after=10'), () => {})).rejects.toThrow();
  }, 60_000);

  it('reorder, duplicate and drop are refused (RFC 5041 §3), as are unknown names, bad values and other transports', () => {
    for (const [list, message] of [
      ['drop=1', /RFC 5041 §3/],
      ['reorder=3', /unordered or unreliable/],
      ['duplicate=1', /unordered or unreliable/],
      ['stall=1', /unknown fault 'stall'/],
      ['chunk=0', /chunk must be an integer in 1\.\.65536/],
      ['chunk', /expected chunk=<integer>/],
      ['delay=1.5', /expected delay=<integer>/],
      ['seed=4', /seed applies to chunk/],
    ] as const) {
      expect(() => toolTransport({ transport: 'loopback', faults: list }), list).toThrow(message);
      expect(() => toolTransport({ transport: 'loopback', faults: list }), list).toThrow(/^--faults: /);
    }
    expect(() => toolTransport({ transport: 'tcp', faults: 'delay=1' })).toThrow(/--transport loopback only/);
  });

  it('a list of several faults takes effect together: chunks of at most 7 (the same cuts for the same seed), delayed, aborted after 5 ULPDUs', async () => {
    const run = async () => {
      const tt = toolTransport({ transport: 'loopback', faults: 'chunk=7,delay=2,abort-after=5,seed=9' });
      const [client, server] = await tt.stack.pair({ host: 'faults-list', port: 0 });
      const delivered: number[][] = [];
      server.streams[0]?.setReceiver((u) => delivered.push(u.chunks.map((c) => c.byteLength)));
      const ended = Promise.all([client, server].map((c: LlpConnection) => firstValueFrom(c.closed$)));
      for (let i = 0; i < 8; i++) client.streams[0]?.send([new Uint8Array(100)]);
      await new Promise((r) => setImmediate(r));
      const beforeDelay = delivered.length; // without the delay, the first turn would have delivered them
      const events = await ended;
      return { delivered, beforeDelay, events };
    };
    const first = await run();
    expect(first.beforeDelay).toBe(0);
    expect(first.delivered).toHaveLength(5);
    for (const lengths of first.delivered) {
      expect(Math.max(...lengths)).toBeLessThanOrEqual(7);
      expect(lengths.reduce((a, b) => a + b, 0)).toBe(100);
    }
    expect(first.events.every((e) => !e.graceful)).toBe(true);
    expect((await run()).delivered).toEqual(first.delivered);
  });

  it('the option of `rddp perf`: a bad list is a usage error when the command line is parsed', () => {
    const perf = buildProgram().commands.find((c) => c.name() === 'perf');
    if (perf === undefined) throw new Error('rddp has no perf command');
    const errors: string[] = [];
    perf.exitOverride().configureOutput({ writeErr: (s) => errors.push(s) });
    expect(() => perf.parseOptions(['--faults', 'drop=0.1'])).toThrow();
    expect(errors.join('')).toContain("option '--faults <list>' argument 'drop=0.1' is invalid");
    perf.parseOptions(['--faults', 'chunk=3']);
    expect(perf.opts().faults).toBe('chunk=3');
  });
});
