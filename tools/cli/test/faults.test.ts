/**
 * `--faults`: the loopback LLP's fault injection (`LoopbackFaults`) reaching `perf --loopback
 * --transport loopback`; faults DDP cannot run on (RFC 5041 §3: reliable, ordered) are refused up front.
 */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { type PerfOptions, perfLoopback } from '../src/commands/perf.js';
import { faultsOption, parseFaults } from '../src/faults.js';
import { toolTransport } from '../src/transports.js';

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
      expect(() => parseFaults(list), list).toThrow(message);
      expect(() => toolTransport({ transport: 'loopback', faults: list }), list).toThrow(/^--faults: /);
    }
    expect(() => toolTransport({ transport: 'tcp', faults: 'delay=1' })).toThrow(/--transport loopback only/);
    expect(parseFaults('chunk=7,delay=2,abort-after=5,seed=9')).toEqual({
      chunking: { maxChunk: 7, seed: 9 },
      delayMs: 2,
      abortAfterUlpdus: 5,
    });
  });

  it('the option: a bad list is a usage error when the command line is parsed', () => {
    const errors: string[] = [];
    const cmd = new Command('perf')
      .exitOverride()
      .configureOutput({ writeErr: (s) => errors.push(s) })
      .addOption(faultsOption())
      .action(() => {});
    expect(() => cmd.parse(['--faults', 'drop=0.1'], { from: 'user' })).toThrow();
    expect(errors.join('')).toContain("option '--faults <list>' argument 'drop=0.1' is invalid");
    cmd.parse(['--faults', 'chunk=3'], { from: 'user' });
    expect(cmd.opts().faults).toBe('chunk=3');
  });
});
