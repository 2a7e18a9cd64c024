/**
 * The dependency rule: core packages (DDP, RDMAP, verbs) depend on the LLP contract only — never on a
 * transport, a socket API or another LLP package.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

export const CORE_PACKAGES = ['ddp', 'rdmap', 'verbs'] as const;
const ALLOWED = new Set([
  '@rddp/llp',
  '@rddp/ddp',
  '@rddp/rdmap',
  '@rddp/verbs',
  'rxjs',
  'inversify',
  'reflect-metadata',
]);
/** What a core package's tests may import beyond the rule: the test runner and property testing. */
const TEST_ONLY = new Set(['vitest', 'fast-check']);
/** Node builtins a core package may use: none that do I/O. */
const ALLOWED_BUILTINS = new Set(['node:events', 'events', 'node:util', 'util', 'node:buffer', 'buffer']);

function* sourceFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* sourceFiles(p);
    else if (/\.(c|m)?tsx?$|\.(c|m)?js$/.test(name)) yield p;
  }
}

/**
 * The specifiers a source text imports — static, dynamic and `require` — as TypeScript's pre-processor
 * reads them: an import inside a comment (a TSDoc `@example`) or a string is not one.
 */
export function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

function isAllowed(spec: string): boolean {
  if (spec.startsWith('.')) return true;
  if (spec.startsWith('node:') || !spec.includes('/') || spec.startsWith('@')) {
    const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string);
    return ALLOWED.has(pkg) || ALLOWED_BUILTINS.has(spec);
  }
  return ALLOWED.has(spec.split('/')[0] as string);
}

/** Violations of the rule in one package directory: forbidden dependencies and imports. */
export function checkPackage(dir: string): string[] {
  const out: string[] = [];
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  // Tests too: a core package's own tests use transport-free fakes; end-to-end tests over a transport
  // live in the repository's test/integration/.
  const allowedDev = new Set([...ALLOWED, 'vitest', 'fast-check', '@types/node', 'typescript']);
  for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies }))
    if (!ALLOWED.has(dep)) out.push(`${dir}/package.json depends on ${dep}`);
  for (const dep of Object.keys(pkg.devDependencies ?? {}))
    if (!allowedDev.has(dep)) out.push(`${dir}/package.json devDepends on ${dep}`);
  for (const sub of ['src', 'test']) {
    if (!existsSync(join(dir, sub))) continue;
    const tests = sub === 'test';
    for (const file of sourceFiles(join(dir, sub)))
      for (const spec of importsOf(readFileSync(file, 'utf8')))
        if (!isAllowed(spec) && !(tests && TEST_ONLY.has(spec))) out.push(`${file} imports ${spec}`);
  }
  return out;
}
