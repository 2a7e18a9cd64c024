// Builds the optional ISA-L binding at install. Whatever happens it prints one line naming the CRC32c
// backend rddp will use and exits 0: without ISA-L's headers (Debian: libisal-dev), node-gyp or Node's
// headers, @rddp/crc32c falls back to sse4_crc32 or @node-rs/crc32. node-gyp's own output is kept
// for RDDP_CRC32C_ISAL_VERBOSE=1, and RDDP_REQUIRE_ISAL=1 (CI) turns a failed build into a failed install.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const tag = '@rddp/crc32c-isal:';
const fallback = 'CRC32c will use sse4_crc32 if installed, else @node-rs/crc32';
const required = process.env.RDDP_REQUIRE_ISAL === '1';
const verbose = process.env.RDDP_CRC32C_ISAL_VERBOSE === '1';

function skip(reason, log) {
  if (required) {
    if (log) process.stderr.write(log);
    console.error(`${tag} ${reason}, and RDDP_REQUIRE_ISAL=1 requires the ISA-L backend`);
    process.exit(1);
  }
  console.log(`${tag} ${reason}; ${fallback}`);
  process.exit(0);
}

if (!fs.existsSync('/usr/include/isa-l/crc.h') && !fs.existsSync('/usr/local/include/isa-l/crc.h'))
  skip('ISA-L headers not found (Debian: apt-get install libisal-dev)');

// node-gyp would download Node's headers; a system Node (Debian: nodejs, libnode-dev) ships them.
const args = ['rebuild'];
const sysHeaders = path.join(path.dirname(path.dirname(process.execPath)), 'include', 'node', 'node.h');
if (!process.env.npm_config_nodedir && fs.existsSync(sysHeaders))
  args.push(`--nodedir=${path.dirname(path.dirname(path.dirname(sysHeaders)))}`);

// npm and pnpm put their bundled node-gyp on PATH for install scripts; npm_config_node_gyp names it too.
const gyp = process.env.npm_config_node_gyp;
const [cmd, cmdArgs] = gyp && fs.existsSync(gyp) ? [process.execPath, [gyp, ...args]] : ['node-gyp', args];
const r = spawnSync(cmd, cmdArgs, {
  cwd: root,
  encoding: 'utf8',
  stdio: verbose ? 'inherit' : 'pipe',
  shell: process.platform === 'win32',
});
const log = `${r.stdout ?? ''}${r.stderr ?? ''}`;
if (r.error) skip(`node-gyp not runnable (${r.error.code ?? r.error.message})`, log);
if (r.status !== 0) {
  const first = log.split('\n').find((l) => /error|not found|cannot/i.test(l) && !/^gyp info/.test(l));
  skip(`native build failed (${(first ?? `node-gyp exit ${r.status}`).replace(/^gyp ERR! /, '').trim()})`, log);
}
try {
  require(path.join(root, 'index.cjs'));
} catch (e) {
  skip(`built binding does not load (${e.message.split('\n')[0]})`, log);
}
console.log(`${tag} built; CRC32c will use ISA-L's crc32_iscsi`);
