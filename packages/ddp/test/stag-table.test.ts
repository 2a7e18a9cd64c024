/**
 * STags must be hard to predict (RFC 5040 §8 RNIC requirement 8, RFC 5042 §5.1.2): random index among
 * the free ones, random key, index 0 (STag 0 and the MPA RTR's STag 1) never handed out, a freed index
 * quarantined for the next STAG_QUARANTINE frees, and a reused index never given its old key.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Access, isDdpError, type MemoryRegion, StagTable } from '../src/index.js';
import { STAG_QUARANTINE } from '../src/stag-table.js';

const index = (stag: number) => stag >>> 8;
const key = (stag: number) => stag & 0xff;
const buf = new Uint8Array(16);
const reg = (t: StagTable, k?: number) =>
  t.register({ pdId: 1, buffer: buf, access: Access.RemoteRead, ...(k === undefined ? {} : { key: k }) });

describe('RFC 5040 §8, RFC 5042 §5.1.2: STags are hard to predict', () => {
  it('any interleaving of registrations and deregistrations: live STags distinct, never index 0, a freed index not reused, a freed STag refused', () => {
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.record({ reg: fc.constant(true), key: fc.option(fc.nat({ max: 255 })) }) },
      { weight: 2, arbitrary: fc.record({ reg: fc.constant(false), pick: fc.nat() }) },
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 400 }), (ops) => {
        const t = new StagTable();
        const live: MemoryRegion[] = [];
        const freed = new Set<number>(); // fewer than STAG_QUARANTINE frees: all still quarantined
        const freedStags: number[] = [];
        for (const o of ops) {
          if (o.reg) {
            const r = reg(t, o.key ?? undefined);
            expect(index(r.stag)).not.toBe(0); // STag 0x00–0xff: "no STag", the RTR's STag 1
            if (o.key !== null && o.key !== undefined) expect(key(r.stag)).toBe(o.key);
            expect(freed.has(index(r.stag))).toBe(false);
            expect(live.some((l) => index(l.stag) === index(r.stag))).toBe(false);
            expect(t.lookup(r.stag)).toBe(r);
            live.push(r);
          } else if (live.length > 0) {
            const [r] = live.splice(o.pick % live.length, 1) as [MemoryRegion];
            t.deregister(r.stag);
            freed.add(index(r.stag));
            freedStags.push(r.stag);
          }
        }
        expect(t.size).toBe(live.length);
        expect(t.quarantined).toBe(freed.size);
        for (const s of freedStags) expect(t.lookup(s)).toBeUndefined();
      }),
      { numRuns: 200 },
    );
  });

  it('1000 registrations are spread: indexes not adjacent, high index bits and keys all over their range', () => {
    const t = new StagTable();
    const stags = Array.from({ length: 1000 }, () => reg(t).stag);
    expect(new Set(stags).size).toBe(1000);
    // Uniform indexes: two in a row within ±64 of each other has odds 129/2^24 per pair.
    let near = 0;
    for (let n = 1; n < stags.length; n++)
      if (Math.abs(index(stags[n] as number) - index(stags[n - 1] as number)) <= 64) near++;
    expect(near).toBeLessThanOrEqual(2);
    // 1000 uniform draws over 256 values cover about 251 of them.
    expect(new Set(stags.map((s) => s >>> 24)).size).toBeGreaterThan(200);
    expect(new Set(stags.map(key)).size).toBeGreaterThan(200);
  });

  it(`a freed index waits out the last ${STAG_QUARANTINE} frees, and a reused index never gets its old key`, () => {
    const t = new StagTable();
    const freedAt = new Map<number, { n: number; key: number }>();
    let reused = 0;
    // One region live at a time: after the quarantine fills, old indexes come back by chance (birthday odds).
    const cycles = 5 * STAG_QUARANTINE;
    for (let n = 0; n < cycles; n++) {
      const s = reg(t).stag;
      const before = freedAt.get(index(s));
      if (before) {
        reused++;
        if (n - before.n <= STAG_QUARANTINE) throw new Error(`index ${index(s)} reused after ${n - before.n} frees`);
        if (key(s) === before.key) throw new Error(`index ${index(s)} reused with its old key ${before.key}`);
      }
      t.deregister(s);
      freedAt.set(index(s), { n, key: key(s) });
    }
    expect(t.quarantined).toBe(STAG_QUARANTINE);
    // ~ (4·2^16)^2 / 2^25 ≈ 2000 reuses expected: enough for a 1-in-256 key repeat to show up.
    expect(reused).toBeGreaterThan(500);
  });

  it('a caller-chosen key is never put on an index that last had the same key', () => {
    const t = new StagTable();
    const used = new Set<number>();
    for (let n = 0; n < 5 * STAG_QUARANTINE; n++) {
      const s = reg(t, 7).stag;
      if (key(s) !== 7) throw new Error(`asked for key 7, got ${key(s)}`);
      if (used.has(index(s))) throw new Error(`index ${index(s)} reused with its old key 7`);
      used.add(index(s));
      t.deregister(s);
    }
  });

  it('the limits still hold: maxRegions and maxRegisteredBytes refuse with StagTableFullError, freed room is usable again', () => {
    const t = new StagTable(3, 40);
    const a = reg(t);
    reg(t);
    expect(t.bytes).toBe(32);
    const full = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return isDdpError(e, 'ERR_DDP_STAG_TABLE_FULL');
      }
      return false;
    };
    expect(full(() => reg(t))).toBe(true); // 48 octets > 40
    t.register({ pdId: 1, buffer: new Uint8Array(8), access: 0 });
    expect(full(() => t.register({ pdId: 1, buffer: new Uint8Array(0), access: 0 }))).toBe(true); // 3 regions
    t.deregister(a.stag);
    expect(t.lookup(a.stag)).toBeUndefined();
    expect(a.valid).toBe(false);
    expect(reg(t).stag).not.toBe(a.stag);
    expect(t.size).toBe(3);
  });

  it('invalidate and revalidate keep the STag; a stale STag (other key, same index) is refused', () => {
    const t = new StagTable();
    const r = reg(t);
    t.invalidate(r.stag);
    expect(t.lookup(r.stag)?.valid).toBe(false);
    t.revalidate(r.stag);
    expect(t.lookup(r.stag)?.valid).toBe(true);
    const stale = ((index(r.stag) << 8) | ((key(r.stag) + 1) & 0xff)) >>> 0;
    expect(t.lookup(stale)).toBeUndefined();
    expect(() => t.invalidate(stale)).toThrow(expect.objectContaining({ code: 'ERR_DDP_UNKNOWN_STAG' }));
  });
});

describe('StagTable errors carry their data as fields', () => {
  it('StagTableFullError names the limit, its size, what is in use and what was asked; UnknownStagError the STag', () => {
    const t = new StagTable(1, 100);
    const r = t.register({ buffer: new Uint8Array(60), pdId: 1, access: Access.LocalWrite });
    expect(() => t.register({ buffer: new Uint8Array(1), pdId: 1, access: Access.LocalWrite })).toThrow(
      expect.objectContaining({ code: 'ERR_DDP_STAG_TABLE_FULL', limit: 'regions', max: 1, inUse: 1, asked: 1 }),
    );
    const octets = new StagTable(4, 100);
    octets.register({ buffer: new Uint8Array(60), pdId: 1, access: Access.LocalWrite });
    expect(() => octets.register({ buffer: new Uint8Array(50), pdId: 1, access: Access.LocalWrite })).toThrow(
      expect.objectContaining({ limit: 'registered octets', max: 100, inUse: 60, asked: 50 }),
    );
    const stale = (r.stag ^ 0x01) >>> 0;
    expect(() => t.deregister(stale)).toThrow(
      expect.objectContaining({
        code: 'ERR_DDP_UNKNOWN_STAG',
        stag: stale,
        message: `STag 0x${stale.toString(16).padStart(8, '0')} is not registered`,
      }),
    );
  });
});
