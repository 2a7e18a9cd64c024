/**
 * `RDDP_CRC32C`'s one table and resolver, for every transport with a CRC32c digest (MPA's CRC,
 * RFC 5044 §4.4; SCTP's checksum, RFC 4960 §6.8): the fastest backend that loads when unpinned; the
 * pinned one or an error, never the next one in its place (issue 37: a pin is never ignored).
 */
import {
  CRC32C_BACKEND_NAMES,
  CRC32C_BACKENDS,
  CRC32C_CHECK_VALUE,
  CRC32C_PIN_ENV,
  Crc32cBackendError,
  Crc32cBackendMissingError,
  Crc32cBackendUnknownError,
  type Crc32cLoaders,
  isRddpError,
  LlpError,
  resolveCrc32cBackend,
} from '@rddp/llp';
import { describe, expect, it } from 'vitest';

type Name = (typeof CRC32C_BACKEND_NAMES)[number];

/** Loaders where `loads` names what loads; each throws otherwise, as `require` of a missing package does. Records calls. */
function loaders(...loads: Name[]): { loaders: Crc32cLoaders<string>; called: Name[] } {
  const called: Name[] = [];
  const one = (name: Name) => () => {
    called.push(name);
    if (!loads.includes(name)) throw new Error(`Cannot find module '${CRC32C_BACKENDS[name].package}'`);
    return `backend ${name}`;
  };
  return { loaders: { isal: one('isal'), sse4_crc32: one('sse4_crc32'), 'node-rs': one('node-rs') }, called };
}

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

describe('RDDP_CRC32C table (RFC 5044 §4.4, RFC 4960 §6.8: one CRC32c backend choice for every transport)', () => {
  it('names the three backends fastest first, each with its package and how to get it', () => {
    expect(CRC32C_PIN_ENV).toBe('RDDP_CRC32C');
    expect(CRC32C_BACKEND_NAMES).toEqual(['isal', 'sse4_crc32', 'node-rs']);
    expect(CRC32C_BACKENDS.isal.package).toBe('@rddp/crc32c-isal');
    expect(CRC32C_BACKENDS.isal.get).toContain('libisal-dev');
    expect(CRC32C_BACKENDS.sse4_crc32.package).toBe('sse4_crc32');
    expect(CRC32C_BACKENDS['node-rs'].package).toBe('@node-rs/crc32');
    for (const n of CRC32C_BACKEND_NAMES) expect(CRC32C_BACKENDS[n].get.length, n).toBeGreaterThan(0);
  });

  it('RFC 3720 §B.4: each check passes a module computing 0xE3069283 for "123456789" through its own API, and fails any other', () => {
    expect(CRC32C_CHECK_VALUE).toBe(0xe3069283);
    const asked: string[] = [];
    /** A CRC "function" answering `value` and recording the octets it was given, as text. */
    const crcOf =
      (value: number) =>
      (b: Uint8Array, start = 0, end = b.length) => {
        asked.push(new TextDecoder().decode(b.subarray(start, end)));
        return value;
      };
    const good = CRC32C_CHECK_VALUE;
    expect(CRC32C_BACKENDS.isal.check({ calculate: crcOf(good) })).toBe(true);
    expect(CRC32C_BACKENDS.isal.check({ calculate: crcOf(0) })).toBe(false);
    expect(CRC32C_BACKENDS.sse4_crc32.check({ calculate: crcOf(good), hardware_support: true })).toBe(true);
    expect(CRC32C_BACKENDS.sse4_crc32.check({ calculate: crcOf(0), hardware_support: true })).toBe(false);
    expect(CRC32C_BACKENDS['node-rs'].check({ crc32c: crcOf(good) })).toBe(true);
    expect(CRC32C_BACKENDS['node-rs'].check({ crc32c: crcOf(1) })).toBe(false);
    expect(asked).toEqual(Array(6).fill('123456789'));
    // sse4_crc32 without SSE4.2 answers from a table: right, but not the backend the pin means.
    expect(CRC32C_BACKENDS.sse4_crc32.check({ calculate: crcOf(good), hardware_support: false })).toBe(false);
  });
});

describe('resolveCrc32cBackend unpinned: the fastest that loads', () => {
  it('takes the first in order whose loader gives a backend, and loads no further', () => {
    const all = loaders('isal', 'sse4_crc32', 'node-rs');
    expect(resolveCrc32cBackend(undefined, all.loaders)).toEqual({
      name: 'isal',
      package: '@rddp/crc32c-isal',
      backend: 'backend isal',
    });
    expect(all.called).toEqual(['isal']);
    const noIsal = loaders('sse4_crc32', 'node-rs');
    expect(resolveCrc32cBackend(undefined, noIsal.loaders).name).toBe('sse4_crc32');
    const onlyNodeRs = loaders('node-rs');
    expect(resolveCrc32cBackend(undefined, onlyNodeRs.loaders).package).toBe('@node-rs/crc32');
    expect(onlyNodeRs.called).toEqual(['isal', 'sse4_crc32', 'node-rs']);
  });

  it('a loader that returns undefined (a build that fails the check value) counts as not loading', () => {
    const l = loaders('sse4_crc32', 'node-rs');
    const r = resolveCrc32cBackend(undefined, { ...l.loaders, isal: () => undefined });
    expect(r.name).toBe('sse4_crc32');
  });

  it('none loading is Crc32cBackendMissingError, with the last failure as its cause', () => {
    const e = thrown(() => resolveCrc32cBackend(undefined, loaders().loaders));
    expect(e).toBeInstanceOf(Crc32cBackendMissingError);
    expect((e as Crc32cBackendMissingError).code).toBe('ERR_LLP_CRC32C_BACKEND_MISSING');
    expect((e as Error).message).toMatch(/^no CRC32c backend loads here .*@node-rs\/crc32.*: pnpm install$/);
    expect(((e as Error).cause as Error).message).toContain('@node-rs/crc32');
  });
});

describe('resolveCrc32cBackend pinned: the pinned backend or an error, never another', () => {
  it('a pinned backend that loads is taken even where a faster one loads; no other loader runs', () => {
    for (const pin of CRC32C_BACKEND_NAMES) {
      const all = loaders('isal', 'sse4_crc32', 'node-rs');
      expect(resolveCrc32cBackend(pin, all.loaders)).toEqual({
        name: pin,
        package: CRC32C_BACKENDS[pin].package,
        backend: `backend ${pin}`,
      });
      expect(all.called).toEqual([pin]);
    }
  });

  it('a pinned backend that does not load is ERR_LLP_CRC32C_BACKEND_MISSING naming its package and how to get it', () => {
    for (const pin of CRC32C_BACKEND_NAMES) {
      const others = loaders(...CRC32C_BACKEND_NAMES.filter((n) => n !== pin));
      const e = thrown(() => resolveCrc32cBackend(pin, others.loaders));
      expect(others.called, pin).toEqual([pin]);
      expect(e, pin).toBeInstanceOf(Crc32cBackendMissingError);
      expect(isRddpError(e, 'ERR_LLP_CRC32C_BACKEND_MISSING'), pin).toBe(true);
      const { package: pkg, get } = CRC32C_BACKENDS[pin];
      expect((e as Error).message).toBe(
        `RDDP_CRC32C=${pin} pins ${pkg}, which does not load here: ${get}; or unset RDDP_CRC32C`,
      );
      expect(((e as Error).cause as Error).message).toContain(pkg);
    }
    const checkFails = thrown(() =>
      resolveCrc32cBackend('isal', { ...loaders('isal').loaders, isal: () => undefined }),
    );
    expect(checkFails).toBeInstanceOf(Crc32cBackendMissingError);
  });

  it('a name that is no backend is ERR_LLP_CRC32C_BACKEND_UNKNOWN listing the names; nothing is loaded', () => {
    for (const pin of ['bogus', '', 'ISAL', 'node_rs', 'constructor', 'toString', '__proto__']) {
      const all = loaders('isal', 'sse4_crc32', 'node-rs');
      const e = thrown(() => resolveCrc32cBackend(pin, all.loaders));
      expect(e, pin).toBeInstanceOf(Crc32cBackendUnknownError);
      expect((e as Crc32cBackendUnknownError).code).toBe('ERR_LLP_CRC32C_BACKEND_UNKNOWN');
      expect((e as Error).message).toBe(
        `RDDP_CRC32C=${pin} names no CRC32c backend (one of: isal, sse4_crc32, node-rs)`,
      );
      expect(all.called, pin).toEqual([]);
    }
  });

  it('both errors are LLP errors under Crc32cBackendError, named for their class', () => {
    const unknown = new Crc32cBackendUnknownError('x');
    const missing = new Crc32cBackendMissingError('x');
    for (const e of [unknown, missing]) {
      expect(e).toBeInstanceOf(Crc32cBackendError);
      expect(e).toBeInstanceOf(LlpError);
    }
    expect(unknown.name).toBe('Crc32cBackendUnknownError');
    expect(missing).not.toBeInstanceOf(Crc32cBackendUnknownError);
  });
});
