/**
 * `RDDP_CRC32C` pins the CRC32c backend SCTP packets go through (RFC 4960 §6.8, Appendix B), by
 * @rddp/llp's one table and resolver: importing the package never throws; making the transport checks
 * the pin, and a name that is no backend is an error there, never the next backend in its place.
 * Checked in a child process (the pin is read from its environment).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const dir = fileURLToPath(new URL('..', import.meta.url));
/** Imports the package, then makes a transport; prints what happened at each step. */
const run = (pin: string) =>
  execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const m = await import('@rddp/llp-sctp').catch((e) => { console.log('import threw', e.code); process.exit(2); });
console.log('imported');
try { m.sctp(); console.log('made'); } catch (e) { console.log(e.code, e.message, e instanceof m.SctpCrc32cBackendError); }`,
    ],
    { cwd: dir, env: { ...process.env, RDDP_CRC32C: pin }, encoding: 'utf8' },
  ).trim();

it('RFC 4960 §6.8: RDDP_CRC32C=node-rs (always installed) makes the transport', () => {
  expect(run('node-rs')).toBe('imported\nmade');
});

it('chooseSctpCrc32cBackend chooses the pinned backend without a checksum and returns its package; the checksum is right', () => {
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const m = await import('@rddp/llp-sctp');
const c = await import('./dist/crc32c.js');
console.log(m.chooseSctpCrc32cBackend(), m.chooseSctpCrc32cBackend());
console.log(c.crc32c(new TextEncoder().encode('123456789')).toString(16));`,
    ],
    { cwd: dir, env: { ...process.env, RDDP_CRC32C: 'node-rs' }, encoding: 'utf8' },
  ).trim();
  expect(out).toBe('@node-rs/crc32 @node-rs/crc32\ne3069283');
});

it('RDDP_CRC32C naming no backend: the import succeeds, making the transport is ERR_LLP_CRC32C_BACKEND_UNKNOWN', () => {
  expect(run('crc64')).toBe(
    'imported\nERR_LLP_CRC32C_BACKEND_UNKNOWN RDDP_CRC32C=crc64 names no CRC32c backend (one of: isal, sse4_crc32, node-rs) true',
  );
});
