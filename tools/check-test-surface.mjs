#!/usr/bin/env node
// Issue 36, "tests on the public surface": how many test files import package internals.
//
// A test file (packages/*/test/**/*.test.ts, tools/*/test/**/*.test.ts, test/**/*.test.ts) counts as
// internal when any of its import / export-from specifiers
//   - contains `/src/` and does not end in `src/index.js`, or
//   - ends in `/testing` or `/testing.js` (e.g. `@rddp/llp/testing`).
// Prints `N/M (P %)` and the internal files with the offending specifiers; exits 1 above the limit.
//
// Usage: node tools/check-test-surface.mjs [--max <percent>] [--quiet]  (--quiet: the list only when above the limit)

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const args = process.argv.slice(2);
const maxArg = args.indexOf('--max');
const maxPercent = maxArg >= 0 ? Number(args[maxArg + 1]) : 35;
const quiet = args.includes('--quiet');

/** Every `*.test.ts` under `dir`, recursively, skipping node_modules and dist. */
function testFilesUnder(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const out = [];
  for (const e of entries) {
    if (e.name === 'node_modules' || e.name === 'dist') continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...testFilesUnder(p));
    else if (e.isFile() && e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

function subdirs(dir) {
  return readdirSync(dir)
    .map((n) => join(dir, n))
    .filter((p) => statSync(p).isDirectory());
}

const files = [
  ...subdirs(join(root, 'packages')).flatMap((p) => testFilesUnder(join(p, 'test'))),
  ...subdirs(join(root, 'tools')).flatMap((p) => testFilesUnder(join(p, 'test'))),
  ...testFilesUnder(join(root, 'test')),
]
  .map((p) => relative(root, p).split('\\').join('/'))
  .sort();

// Static `import … from '…'`, `import '…'`, `export … from '…'` (multi-line clauses included) and
// dynamic `import('…')` with a literal specifier.
const specifierRe =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g;

function isInternal(spec) {
  if (spec.includes('/src/') && !spec.endsWith('src/index.js')) return true;
  return spec.endsWith('/testing') || spec.endsWith('/testing.js');
}

const internal = [];
for (const f of files) {
  const text = readFileSync(join(root, f), 'utf8');
  const bad = new Set();
  for (const m of text.matchAll(specifierRe)) {
    const spec = m[1] ?? m[2];
    if (isInternal(spec)) bad.add(spec);
  }
  if (bad.size > 0) internal.push({ file: f, specifiers: [...bad] });
}

const n = internal.length;
const m = files.length;
const percent = m === 0 ? 0 : (100 * n) / m;
console.log(`${n}/${m} (${percent.toFixed(1)} %) test files import package internals (limit ${maxPercent} %)`);
if (!quiet || percent > maxPercent) {
  for (const { file, specifiers } of internal) console.log(`  ${file}: ${specifiers.join(', ')}`);
}
if (percent > maxPercent) {
  console.error(`check-test-surface: above ${maxPercent} %; test through the packages' public entries instead`);
  process.exit(1);
}
