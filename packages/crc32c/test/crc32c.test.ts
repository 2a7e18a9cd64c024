/**
 * CRC32c (RFC 3720 §B.4; RFC 5044 §4.4; RFC 4960 Appendix B): the table against the known vectors, and
 * the table against every backend that loads here on random ranges, each backend pinned with
 * `RDDP_CRC32C` in its own process (the choice is once per process).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { CRC32C_BACKEND_NAMES, CRC32C_BACKENDS, type Crc32cBackendName } from '@rddp/llp';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  chooseCrc32cBackend,
  crc32c,
  crc32cBackend,
  crc32cBackendsAvailable,
  crc32cRange,
  crc32cTable,
  crc32cU16,
  crc32cZeros,
} from '../src/index.js';

const dir = fileURLToPath(new URL('..', import.meta.url));
const ascii = (s: string) => new TextEncoder().encode(s);

/** RFC 3720 §B.4: the check value, and the iSCSI vectors of 32 zero and 32 0xFF octets. */
const VECTORS: [string, Uint8Array, number][] = [
  ['"123456789"', ascii('123456789'), 0xe3069283],
  ['32 octets of 0x00', new Uint8Array(32), 0x8a9136aa],
  ['32 octets of 0xFF', new Uint8Array(32).fill(0xff), 0x62a8ab43],
];

describe('RFC 3720 §B.4 vectors', () => {
  it.each(VECTORS)('the table: CRC32c(%s)', (_, bytes, want) => {
    expect(crc32cTable(bytes, 0, bytes.length, 0)).toBe(want);
  });

  it.each(VECTORS)(`crc32c and crc32cRange (long runs via ${chooseCrc32cBackend()}): CRC32c(%s)`, (_, bytes, want) => {
    expect(crc32c(bytes)).toBe(want);
    const framed = new Uint8Array(bytes.length + 10).fill(0x5a);
    framed.set(bytes, 7);
    expect(crc32cRange(framed, 7, 7 + bytes.length, 0)).toBe(want);
  });

  it('crc32cZeros and crc32cU16 continue a CRC as the table does over those octets', () => {
    expect(crc32cZeros(32, 0)).toBe(0x8a9136aa);
    expect(crc32cZeros(0, 0x1234)).toBe(0x1234);
    expect(crc32cU16(0xffff, crc32cTable(new Uint8Array(30).fill(0xff), 0, 30, 0))).toBe(0x62a8ab43);
    const head = ascii('12345');
    expect(crc32cU16(0x3637, crc32cRange(head, 0, 5, 0))).toBe(crc32c(ascii('1234567')));
  });
});

describe('the backend chosen', () => {
  it('is one of the table entries, and crc32cBackend names it (its state before a choice: tools/cli/test/crc32c-pin)', () => {
    expect(crc32cBackend).toBe(chooseCrc32cBackend());
    expect(Object.values(CRC32C_BACKENDS).map((b) => b.package)).toContain(crc32cBackend);
  });

  it('crc32cBackendsAvailable: @node-rs/crc32 (a dependency) and the backend chosen load here and pass their check', () => {
    const available = crc32cBackendsAvailable();
    expect(available['node-rs']).toBe(true);
    const chosen = Object.entries(CRC32C_BACKENDS).find(([, b]) => b.package === chooseCrc32cBackend())?.[0];
    expect(available[chosen as keyof typeof available]).toBe(true);
  });

  it('an empty range leaves the CRC as it was', () => {
    expect(crc32cRange(new Uint8Array(8), 4, 4, 0x1234)).toBe(0x1234);
  });

  it('equals the table on random ranges, incremental over any split', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.array(fc.nat(), { maxLength: 6 }), (data, cuts) => {
        const points = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        let crc = 0;
        let at = 0;
        for (const p of [...points, data.length]) {
          crc = crc32cRange(data, at, p, crc);
          at = p;
        }
        expect(crc).toBe(crc32cTable(data, 0, data.length, 0));
      }),
      { numRuns: 300 },
    );
  });
});

/** The backends whose package loads here and passes its check (sse4_crc32 only with SSE4.2). */
const req = createRequire(import.meta.url);
const loadable = CRC32C_BACKEND_NAMES.filter((n: Crc32cBackendName) => {
  try {
    return CRC32C_BACKENDS[n].check(req(CRC32C_BACKENDS[n].package) as never);
  } catch {
    return false;
  }
});

it('@node-rs/crc32 (a dependency) loads here', () => {
  expect(loadable).toContain('node-rs');
});

/** In a child process on the built package with `RDDP_CRC32C=name`: the backend chosen, then the property's failure or 'ok'. */
const PROPERTY = `
import fc from 'fast-check';
const m = await import('./dist/index.js');
console.log(m.chooseCrc32cBackend());
try {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 5000 }),
      fc.nat(),
      fc.nat(),
      fc.nat({ max: 0xffffffff }),
      (data, a, b, crc) => {
        const s = Math.min(a % (data.length + 1), b % (data.length + 1));
        const e = Math.max(a % (data.length + 1), b % (data.length + 1));
        return m.crc32cRange(data, s, e, crc) === m.crc32cTable(data, s, e, crc);
      },
    ),
    { numRuns: 500 },
  );
  for (let n = 0; n <= 1100; n++) {
    const d = Uint8Array.from({ length: n + 3 }, (_, i) => (i * 131 + n) & 0xff);
    if (m.crc32cRange(d, 3, n + 3, 7) !== m.crc32cTable(d, 3, n + 3, 7)) throw new Error('length ' + n);
  }
  console.log('ok');
} catch (e) {
  console.log(String(e.message).split('\\n').slice(0, 3).join(' '));
}`;

describe.each(loadable)('RDDP_CRC32C=%s', (name) => {
  it('the table and the backend agree on random ranges (any length, start and CRC so far) and on every length to 1100', () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', PROPERTY], {
      cwd: dir,
      env: { ...process.env, RDDP_CRC32C: name },
      encoding: 'utf8',
    });
    expect(out.trim()).toBe(`${CRC32C_BACKENDS[name].package}\nok`);
  });
});
