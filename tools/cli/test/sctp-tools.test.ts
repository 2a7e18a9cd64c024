import { describe, expect, it } from 'vitest';
import { perfLoopback } from '../src/index.js';
import { endsWithin, startedProcesses } from './procs.js';

const { run } = startedProcesses();

const base = { port: '0', size: '4096', iters: '10', txDepth: '8', verify: true, transport: 'sctp' } as const;

describe('multi-stream SCTP from the tools (RFC 5043: one DDP Stream per SCTP stream)', () => {
  it('perf write_bw --transport sctp --streams 64: 64 queue pairs on one association move verified data at once', async () => {
    const lines: string[] = [];
    const r = await perfLoopback('write_bw', { ...base, streams: '64' }, (s) => lines.push(s));
    expect(r).toHaveLength(1);
    expect(r[0]?.verified).toBe(true);
    expect(r[0]?.row.iterations).toBe(64 * 10);
    expect(lines.join('\n')).toContain('sctp, 64 streams (aggregate)');
  }, 120_000);

  it('every RDMAP operation over SCTP: Write, Read, Send with verification', async () => {
    for (const test of ['write_bw', 'read_bw', 'send_bw', 'read_lat', 'send_lat'])
      expect((await perfLoopback(test, { ...base, streams: '2' }, () => {}))[0]?.verified).toBe(true);
  }, 120_000);

  it('rddp sctp-experiment: aggregate and per-stream bandwidth, and ping latency on stream 0 under load', async () => {
    const args = ['--streams', '1,3', '--size', '4096', '--iters', '20', '--pings', '10', '--json'];
    const r = await endsWithin(run(['sctp-experiment', ...args]), 120_000);
    expect(r.code, r.err).toBe(0);
    const rows = r.out
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            streams: number;
            verified: boolean;
            aggregateMBps: number;
            perStreamMinMBps: number;
            perStreamMaxMBps: number;
            pingP50us: number;
          },
      );
    expect(rows.map((r) => r.streams)).toEqual([1, 3]);
    for (const r of rows) {
      expect(r.verified).toBe(true);
      expect(r.aggregateMBps).toBeGreaterThan(0);
      expect(r.perStreamMinMBps).toBeLessThanOrEqual(r.perStreamMaxMBps);
      expect(r.pingP50us).toBeGreaterThan(0);
    }
  }, 120_000);

  it('--streams above what the transport carries is a usage error', async () => {
    await expect(perfLoopback('write_bw', { ...base, transport: 'tcp', streams: '2' }, () => {})).rejects.toThrow(
      /at most 1 stream/,
    );
  });
});
