/**
 * `RDDP_CRC32C` pins the CRC32c backend SCTP packets go through (RFC 4960 Appendix B): a pinned backend
 * this install does not load, or a name that is no backend, is an error at load, never the next backend
 * in its place. Checked in a child process (the pin is read once, as the package loads).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const dir = fileURLToPath(new URL('..', import.meta.url));
const load = (pin: string) =>
  execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      "import('@rddp/llp-sctp').then((m) => console.log('loaded', m.sctpCrc32cBackend ?? ''), (e) => console.log(e.code, e.message))",
    ],
    { cwd: dir, env: { ...process.env, RDDP_CRC32C: pin }, encoding: 'utf8' },
  ).trim();

it('RDDP_CRC32C=node-rs (always installed) loads; a name that is no backend is ERR_SCTP_CRC32C_BACKEND', () => {
  expect(load('node-rs')).toMatch(/^loaded/);
  expect(load('crc64')).toMatch(/^ERR_SCTP_CRC32C_BACKEND RDDP_CRC32C=crc64 names no CRC32c backend/);
});
