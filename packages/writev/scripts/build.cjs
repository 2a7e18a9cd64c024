// Builds the optional writev binding at install. Whatever happens it prints one line naming the transmit
// path rddp's MPA/TCP will use and exits 0: without a C compiler, node-gyp or Node's headers (or on
// Windows), MPA/TCP writes through Node's socket. node-gyp's own output is kept for
// RDDP_WRITEV_VERBOSE=1, and RDDP_REQUIRE_WRITEV=1 (CI) turns a failed build into a failed install.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const tag = '@rddp/writev:';
const required = process.env.RDDP_REQUIRE_WRITEV === '1';

function skip(reason, log) {
  if (required) {
    if (log) process.stderr.write(log);
    console.error(`${tag} ${reason}, and RDDP_REQUIRE_WRITEV=1 requires the native build`);
    process.exit(1);
  }
  console.log(`${tag} ${reason}; MPA/TCP will write through Node's socket`);
  process.exit(0);
}

if (process.platform === 'win32') skip('no socket descriptors to write to on Windows');

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
  stdio: process.env.RDDP_WRITEV_VERBOSE === '1' ? 'inherit' : 'pipe',
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
console.log(`${tag} built; MPA/TCP will send gathered FPDUs straight to the socket`);
