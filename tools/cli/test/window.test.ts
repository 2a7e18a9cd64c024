import { describe, expect, it } from 'vitest';
import { OpWindow } from '../src/perf/window.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('OpWindow (perftest tx-depth)', () => {
  it('is full at depth, makes room as operations settle, drains to zero', async () => {
    let done = 0;
    const w = new OpWindow(() => done++);
    const ops = [deferred(), deferred(), deferred()];
    for (const d of ops) w.track(d.promise);
    expect(w.full(3)).toBe(true);
    expect(w.full(4)).toBe(false);
    const room = w.room(3);
    ops[1]?.resolve();
    await room;
    expect(done).toBe(1);
    expect(w.full(3)).toBe(false);
    const drained = w.drain();
    ops[0]?.resolve();
    ops[2]?.resolve();
    await drained;
    expect(done).toBe(3);
    expect(w.full(1)).toBe(false);
  });

  it('the first failure is thrown by the next full/room/drain', async () => {
    const w = new OpWindow();
    const a = deferred();
    const b = deferred();
    w.track(a.promise);
    w.track(b.promise);
    a.reject(new Error('first'));
    b.reject(new Error('second'));
    await expect(w.drain()).rejects.toThrow('first');
    expect(() => w.full(5)).toThrow('first');
  });
});
