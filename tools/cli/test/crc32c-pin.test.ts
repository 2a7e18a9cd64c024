import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Ended, nodeWith, startedProcesses } from './procs.js';

const CLI_DIR = path.resolve(__dirname, '..');
const MAIN = path.join(CLI_DIR, 'dist/main.js');

const procs = startedProcesses();

/** `node args…` in tools/cli with `env` added, `missing` hidden; all it wrote and its status. */
function node(args: string[], env: Record<string, string>, missing?: string): Promise<Ended> {
  const p = nodeWith(args, { env, cwd: CLI_DIR, ...(missing ? { missing } : {}) });
  procs.track(p.child);
  return p.done;
}

const perf = (transport: string) => [MAIN, 'perf', 'write_bw', '--loopback', '-n', '10', '--transport', transport];

beforeAll(async () => {
  // tools/rddp rebuilds dist when a source is newer; dist is run directly below.
  const r = procs.run(['--version']);
  expect((await r.done).code).toBe(0);
}, 180_000);

describe.each(['tcp', 'sctp'])('RDDP_CRC32C on --transport %s', (transport) => {
  it('a name that is no backend: one line with ERR_LLP_CRC32C_BACKEND_UNKNOWN, exit 1, nothing on stdout', async () => {
    const r = await node(perf(transport), { RDDP_CRC32C: 'bogus' });
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(
      'rddp: RDDP_CRC32C=bogus names no CRC32c backend (one of: isal, sse4_crc32, node-rs) (ERR_LLP_CRC32C_BACKEND_UNKNOWN)\n',
    );
  }, 30_000);

  it('a pinned backend that does not load: one line with ERR_LLP_CRC32C_BACKEND_MISSING and how to get it, exit 1', async () => {
    const r = await node(perf(transport), { RDDP_CRC32C: 'isal' }, '@rddp/crc32c-isal');
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err.split('\n')).toHaveLength(2);
    expect(r.err).toMatch(
      /^rddp: RDDP_CRC32C=isal pins @rddp\/crc32c-isal, which does not load here: apt-get install libisal-dev.*; or unset RDDP_CRC32C \(ERR_LLP_CRC32C_BACKEND_MISSING\)\n$/,
    );
  }, 30_000);

  it('the same install unpinned runs on the next backend, and a pin to one that loads is honoured', async () => {
    const unpinned = await node(perf(transport), {}, '@rddp/crc32c-isal');
    expect(unpinned.code, unpinned.err).toBe(0);
    const pinned = await node(perf(transport), { RDDP_CRC32C: 'node-rs' });
    expect(pinned.code, pinned.err).toBe(0);
    // MPA's header names the backend its CRC runs (SCTP's has no CRC line).
    if (transport === 'tcp') expect(pinned.out).toMatch(/CRC\s+: on \(@node-rs\/crc32\)/);
  }, 30_000);
});

it('`RDDP_CRC32C=bogus rddp demo`: one line with the code, exit 1, before the demo prints anything', async () => {
  const r = await node([MAIN, 'demo'], { RDDP_CRC32C: 'bogus' });
  expect(r.code).toBe(1);
  expect(r.out).toBe('');
  expect(r.err).toMatch(/^rddp: RDDP_CRC32C=bogus names no CRC32c backend .*\(ERR_LLP_CRC32C_BACKEND_UNKNOWN\)\n$/);
}, 30_000);

it('importing @rddp/llp-mpa-tcp and @rddp/llp-sctp with RDDP_CRC32C=bogus does not throw; choosing or making a transport does', async () => {
  const script = `
const mpa = await import('@rddp/llp-mpa-tcp');
const sctp = await import('@rddp/llp-sctp');
console.log('imported', mpa.crc32cBackend);
for (const f of [mpa.chooseCrc32cBackend, () => mpa.mpaTcp(), sctp.chooseSctpCrc32cBackend, () => sctp.sctp()]) {
  try { f(); console.log('done'); } catch (e) { console.log(e.code); }
}`;
  const r = await node(['--input-type=module', '-e', script], { RDDP_CRC32C: 'bogus' });
  expect(r.err).toBe('');
  expect(r.code).toBe(0);
  expect(r.out).toBe(`imported undefined\n${'ERR_LLP_CRC32C_BACKEND_UNKNOWN\n'.repeat(4)}`);
}, 30_000);

it('chooseCrc32cBackend / chooseSctpCrc32cBackend choose the pinned backend without a CRC; crc32cBackend is undefined until then', async () => {
  const script = `
const mpa = await import('@rddp/llp-mpa-tcp');
const sctp = await import('@rddp/llp-sctp');
console.log(mpa.crc32cBackend);
console.log(mpa.chooseCrc32cBackend(), mpa.crc32cBackend, mpa.chooseCrc32cBackend());
console.log(sctp.chooseSctpCrc32cBackend());
console.log(mpa.crc32c(new TextEncoder().encode('123456789')).toString(16));`;
  const r = await node(['--input-type=module', '-e', script], { RDDP_CRC32C: 'node-rs' });
  expect(r.err).toBe('');
  expect(r.out).toBe('undefined\n@node-rs/crc32 @node-rs/crc32 @node-rs/crc32\n@node-rs/crc32\ne3069283\n');
}, 30_000);

describe('rddp doctor names the backend RDDP_CRC32C chooses', () => {
  it('pinned to one that loads: that one, exit 0', async () => {
    const r = await node([MAIN, 'doctor'], { RDDP_CRC32C: 'node-rs' }, '@rddp/crc32c-isal');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^crc32c:\s+@node-rs\/crc32 \(available: isal no, sse4_crc32 (yes|no), node-rs yes\)$/m);
    expect(r.out).toMatch(/^isa-l:\s+MISSING @rddp\/crc32c-isal not built — get: apt-get install libisal-dev/m);
  }, 30_000);

  it('a name that is no backend: the error on the crc32c line, exit 1', async () => {
    const r = await node([MAIN, 'doctor'], { RDDP_CRC32C: 'bogus' });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/^crc32c:\s+MISSING RDDP_CRC32C=bogus names no CRC32c backend .*node-rs yes\)$/m);
  }, 30_000);
});
