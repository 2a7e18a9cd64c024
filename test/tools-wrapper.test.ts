/**
 * tools/rddp, the bash wrapper, run from a copy in a scratch workspace: before `pnpm install` one line and
 * exit 1 (no stack); a dist/ older than a source file is rebuilt (tsc -b) before it runs.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function scratch(installed: boolean): string {
  const w = mkdtempSync(join(tmpdir(), 'rddp-wrapper-'));
  dirs.push(w);
  mkdirSync(join(w, 'tools/cli/src'), { recursive: true });
  cpSync(join(root, 'tools/rddp'), join(w, 'tools/rddp'));
  if (installed) {
    mkdirSync(join(w, 'node_modules'));
    symlinkSync(join(root, 'node_modules/typescript'), join(w, 'node_modules/typescript'));
    mkdirSync(join(w, 'tools/cli/node_modules/commander'), { recursive: true });
    writeFileSync(join(w, 'tsconfig.json'), JSON.stringify({ files: [], references: [{ path: 'tools/cli' }] }));
    writeFileSync(
      join(w, 'tools/cli/tsconfig.json'),
      JSON.stringify({
        compilerOptions: { composite: true, rootDir: 'src', outDir: 'dist', module: 'NodeNext', types: [] },
        include: ['src'],
      }),
    );
  }
  return w;
}

const rddp = (w: string, ...args: string[]) =>
  spawnSync('bash', [join(w, 'tools/rddp'), ...args], { encoding: 'utf8', timeout: 60_000 });

describe('tools/rddp', () => {
  it('before pnpm install: one line naming `pnpm install`, exit 1, no stack trace', () => {
    const r = rddp(scratch(false), '--help');
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('pnpm install');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('rebuilds a dist/ that is older than a source file before running it', () => {
    const w = scratch(true);
    const main = join(w, 'tools/cli/src/main.ts');
    writeFileSync(main, "console.log('first build');\n");
    expect(rddp(w).stdout.trim()).toBe('first build');
    writeFileSync(main, "console.log('second build');\n");
    const later = new Date(Date.now() + 5_000); // newer than dist/ whatever the file system's time granularity
    utimesSync(main, later, later);
    expect(rddp(w).stdout.trim()).toBe('second build');
  });
});
