import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Fifo } from '../src/index.js';

describe('Fifo', () => {
  it('behaves as an array used with push/shift, through any mix of operations (compaction included)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constant('shift'),
            fc.constant('drain'),
            fc.constant('remove'),
            fc.integer({ min: 1, max: 3000 }),
          ),
          { maxLength: 60 },
        ),
        (ops) => {
          const f = new Fifo<number>();
          const model: number[] = [];
          let next = 0;
          for (const op of ops) {
            if (op === 'shift') expect(f.shift()).toBe(model.shift());
            else if (op === 'drain') expect(f.drain()).toEqual(model.splice(0));
            else if (op === 'remove') {
              // An item from the middle (or none when empty), then one that is not there.
              const x = model[model.length >> 1];
              if (x !== undefined) {
                expect(f.remove(x)).toBe(true);
                model.splice(model.length >> 1, 1);
              }
              expect(f.remove(-1)).toBe(false);
            } else
              for (let i = 0; i < op; i++) {
                f.push(next);
                model.push(next++);
                // Long runs shift as they push, so the dead front grows past the compaction point.
                if (i % 3 === 2) expect(f.shift()).toBe(model.shift());
              }
            expect(f.length).toBe(model.length);
            expect(f.peek()).toBe(model[0]);
            expect([...f]).toEqual(model);
            expect(f.find((x) => x % 7 === 3)).toBe(model.find((x) => x % 7 === 3));
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('an emptied queue holds no reference to what it held', () => {
    const f = new Fifo<object>();
    const a = {};
    f.push(a);
    f.push({});
    f.shift();
    f.shift();
    expect(f.length).toBe(0);
    expect(f.peek()).toBeUndefined();
    expect(f.shift()).toBeUndefined();
    expect((f as unknown as { items: unknown[] }).items.every((x) => x === undefined)).toBe(true);
  });
});
