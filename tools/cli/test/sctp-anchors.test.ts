import { describe, expect, it } from 'vitest';
import { anchorMissing, type SctpRun, usrsctpTwoProcess, weriftTwoProcess } from '../src/bench/sctp-anchors.js';
import { CpuTrace, cpuMsOf } from '../src/bench/two-process.js';
import { run } from './procs.js';

// The anchor programs run from dist (as the bench runs them): build it when stale.
const built = run(['--version']).done;
const usrsctp = await anchorMissing('node-datachannel');
const werift = await anchorMissing('werift-sctp');
const linux = cpuMsOf(process.pid) !== undefined;

/** A run's figures are numbers a reader could believe: no timing is asserted. */
function sane(r: SctpRun): void {
  expect(r.MBps).toBeGreaterThan(0);
  expect(Number.isFinite(r.MBps)).toBe(true);
  for (const side of ['sender', 'receiver'] as const) {
    const ms = r.cpuMsPerMB[side];
    if (!linux) expect(ms).toBeNaN();
    else {
      // /proc counts in 10 ms ticks, so a short span may read 0; never negative, never absurd.
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(10_000);
    }
  }
}

describe('bench: the SCTP anchors, each side in its own process', () => {
  it('an anchor that cannot be loaded is named with the reason', async () => {
    expect(await anchorMissing('rddp-no-such-sctp-anchor')).toMatch(
      /^rddp-no-such-sctp-anchor cannot be loaded here \(.+\)$/,
    );
  });

  it.skipIf(usrsctp !== undefined)(
    'usrsctp (node-datachannel): 1 MiB of 64 KiB messages after 256 KiB',
    async () => {
      expect((await built).code).toBe(0);
      sane(await usrsctpTwoProcess(64 * 1024, 1 << 20, 256 * 1024));
    },
    60_000,
  );

  it.skipIf(usrsctp !== undefined)(
    'usrsctp (node-datachannel): 1 KiB messages, no warm-up',
    async () => {
      expect((await built).code).toBe(0);
      sane(await usrsctpTwoProcess(1024, 256 * 1024, 0));
    },
    60_000,
  );

  it.skipIf(werift !== undefined)(
    'werift-sctp: 1 MiB of 64 KiB messages after 256 KiB',
    async () => {
      expect((await built).code).toBe(0);
      sane(await weriftTwoProcess(64 * 1024, 1 << 20, 256 * 1024));
    },
    60_000,
  );

  it.skipIf(werift !== undefined)(
    'werift-sctp: 1 KiB messages, no warm-up',
    async () => {
      expect((await built).code).toBe(0);
      sane(await weriftTwoProcess(1024, 256 * 1024, 0));
    },
    60_000,
  );

  it.skipIf(!linux)('CpuTrace reads this process’s CPU over a span, interpolated between samples', async () => {
    const trace = new CpuTrace(process.pid, 5);
    const from = performance.now();
    const until = from + 120;
    let x = 0;
    while (performance.now() < until) x += Math.sqrt(x + 1); // busy: ≈120 ms of CPU
    const to = performance.now();
    trace.sample(); // after the span's end, as the bench samples once a result line has arrived
    trace.stop();
    expect(x).toBeGreaterThan(0);
    const ms = trace.between(from, to);
    expect(ms).toBeGreaterThanOrEqual(60);
    expect(ms).toBeLessThanOrEqual(to - from + 40);
    // Outside the samples: no figure rather than a guess.
    expect(trace.between(from - 1000, to)).toBeNaN();
  });
});
