/**
 * The install script of the optional binding, run as npm runs it (node-gyp on PATH) in a scratch copy with
 * Node's headers unreachable: one line on stdout naming the CRC32c backend, exit 0, no `gyp ERR!` output.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const copy = mkdtempSync(join(tmpdir(), 'crc32c-isal-'));
for (const f of ['binding.gyp', 'index.cjs', 'src', 'scripts'])
  cpSync(join(pkg, f), join(copy, f), { recursive: true });
afterAll(() => rmSync(copy, { recursive: true, force: true }));

// npm's own node-gyp shim, which npm puts on PATH for install scripts.
const npmRoot = join(dirname(dirname(process.execPath)), 'lib/node_modules/npm');
const gypBin = join(npmRoot, 'bin/node-gyp-bin');

describe('@rddp/crc32c-isal install script', () => {
  it('a failed native build prints one line naming the fallback backend and exits 0', (ctx) => {
    if (!existsSync(join(gypBin, 'node-gyp'))) ctx.skip(`npm's node-gyp not found at ${gypBin}`);
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${gypBin}${delimiter}${process.env.PATH}` };
    env.npm_config_nodedir = join(copy, 'no-node-headers-here');
    delete env.RDDP_REQUIRE_ISAL;
    delete env.npm_config_node_gyp;
    const r = spawnSync(process.execPath, ['scripts/build.cjs'], {
      cwd: copy,
      encoding: 'utf8',
      env,
      timeout: 120_000,
    });
    expect(r.status).toBe(0);
    expect(`${r.stdout}${r.stderr}`).not.toContain('gyp ERR!');
    expect(r.stderr).toBe('');
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^@rddp\/crc32c-isal: .*CRC32c will use (sse4_crc32|ISA-L)/);
  });
});
