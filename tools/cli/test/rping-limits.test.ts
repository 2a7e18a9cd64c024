/** `rddp rping -s`'s bounds in-process: a client's buffer reservation and the step timer (src/rping/limits.ts). */
import { MemoryBudget } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { RpingServerBusyError, RpingStepTimeoutError } from '../src/rping/errors.js';
import { clientSource, RpingBufferReservation, withinStep } from '../src/rping/limits.js';

describe('RpingBufferReservation', () => {
  const setup = () => {
    const shared = { budget: new MemoryBudget({ limit: 1000, sourceShare: 1 }), perSource: 400 };
    const proc = new MemoryBudget({ limit: 2000, sourceShare: 0.25 }); // 500 per source
    return { shared, proc };
  };

  it('grows within --max-memory-per-source, refuses past it naming the source; another source still fits', () => {
    const { shared, proc } = setup();
    const a = new RpingBufferReservation('10.0.0.1', shared, proc);
    a.grow(64);
    a.grow(400);
    expect([a.octets, shared.budget.usedBy('10.0.0.1'), proc.usedBy('10.0.0.1')]).toEqual([400, 400, 400]);
    const a2 = new RpingBufferReservation('10.0.0.1', shared, proc);
    expect(() => a2.grow(1)).toThrow(
      'busy: a buffer of 1 octets asked, source 10.0.0.1 holds 400 of --max-memory-per-source 400',
    );
    const b = new RpingBufferReservation('10.0.0.2', shared, proc);
    b.grow(400);
    a.release();
    a.release(); // idempotent
    expect([shared.budget.used, proc.used]).toEqual([400, 400]);
    a2.grow(300);
    expect(shared.budget.usedBy('10.0.0.1')).toBe(300);
  });

  it('refuses past --max-memory with the message it always had', () => {
    const { shared, proc } = setup();
    const a = new RpingBufferReservation('10.0.0.1', { ...shared, perSource: 1000 }, proc);
    const e = (() => {
      try {
        a.grow(1001);
      } catch (x) {
        return x;
      }
    })();
    expect(e).toBeInstanceOf(RpingServerBusyError);
    expect((e as RpingServerBusyError).code).toBe('ERR_RPING_SERVER_BUSY');
    expect((e as Error).message).toBe('busy: a buffer of 1001 octets asked, 0 of --max-memory 1000 in use');
  });

  it("the process budget's share per source: refused, and the -P reservation rolled back", () => {
    const { shared, proc } = setup();
    const a = new RpingBufferReservation('10.0.0.1', { ...shared, perSource: 1000 }, proc);
    a.grow(100);
    expect(() => a.grow(600)).toThrow(
      "busy: a buffer of 600 octets asked, source 10.0.0.1 holds 100 of the process memory budget's share per source 500",
    );
    expect([a.octets, shared.budget.used, proc.used]).toEqual([100, 100, 100]);
    // Without -P (the one-shot server): the process budget alone.
    const one = new RpingBufferReservation('10.0.0.2', undefined, proc);
    one.grow(500);
    expect(proc.usedBy('10.0.0.2')).toBe(500);
    one.release();
    expect(proc.usedBy('10.0.0.2')).toBe(0);
  });

  it('sources: IPv4-mapped addresses are their IPv4 address, IPv6 grouped by the prefix', () => {
    expect(clientSource({ host: '::ffff:127.0.0.2', port: 1 })).toBe('127.0.0.2');
    expect(clientSource({ host: '2001:db8:1:2::1' })).toBe(clientSource({ host: '2001:db8:1:2::ffff' }));
    expect(clientSource({ host: '2001:db8:1:2::1' }, 128)).not.toBe(clientSource({ host: '2001:db8:1:2::2' }, 128));
  });
});

describe('withinStep', () => {
  it('passes a settled promise through; past the time, an RpingStepTimeoutError naming the step', async () => {
    await expect(withinStep(Promise.resolve(7), 50, 'x')).resolves.toBe(7);
    await expect(withinStep(Promise.reject(new Error('no')), 50, 'x')).rejects.toThrow('no');
    const late = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('flushed')), 100));
    const e = await withinStep(late, 20, 'the RDMA Read Response of 64 octets').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RpingStepTimeoutError);
    expect((e as RpingStepTimeoutError).code).toBe('ERR_RPING_STEP_TIMEOUT');
    expect((e as Error).message).toBe(
      'timed out after --step-timeout 20 ms waiting for the RDMA Read Response of 64 octets',
    );
    await new Promise((r) => setTimeout(r, 120)); // the late rejection is handled (no unhandled rejection)
  });
});
