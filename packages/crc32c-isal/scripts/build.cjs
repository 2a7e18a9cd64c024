// Builds the optional ISA-L binding. Without ISA-L's headers (Debian: libisal-dev) or a compiler the
// build is skipped with a warning: rddp then computes CRC32c with sse4_crc32 or @node-rs/crc32.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
if (!fs.existsSync('/usr/include/isa-l/crc.h') && !fs.existsSync('/usr/local/include/isa-l/crc.h')) {
  console.warn(
    '@rddp/crc32c-isal: ISA-L headers not found (Debian: apt-get install libisal-dev); skipping the optional build',
  );
  process.exit(0);
}
const r = spawnSync('node-gyp', ['rebuild'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
if (r.status !== 0)
  console.warn(
    `@rddp/crc32c-isal: node-gyp rebuild failed (${r.error ? r.error.message : `exit ${r.status}`}); CRC32c falls back to sse4_crc32 / @node-rs/crc32`,
  );
