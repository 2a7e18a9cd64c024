/**
 * Every code example of the READMEs (the root one, packages/*, docs/*) runs. A ```ts / ```js / ```mjs /
 * ```cjs block is preceded by one marker comment:
 *
 *   <!-- test -->                     run as a program (node, in its own process) and must exit 0;
 *   <!-- test stdout="text" -->       the same, and its standard output must be `text` (`\n`: a new line);
 *   <!-- test vitest -->              run as a vitest spec (its own vitest process and configuration),
 *                                     every test passing;
 *   <!-- test file="path" -->         the block is the file at `path` (relative to the README), which a
 *                                     test of that package runs.
 *
 * A block without a marker fails this test. Programs import the packages by name, as a user does: a
 * folder with `node_modules/@rddp/<name>` linked to each workspace package, resolved to their built
 * `dist` (the test builds them first); TypeScript is transpiled with the repository's TypeScript.
 *
 * The TSDoc `@example` blocks of the packages' entry points (each package's src/index.ts; a ```ts block after
 * the tag) and the plugin guide's example (packages/llp/examples) are type-checked against the built
 * packages, as a user's TypeScript sees them; those that are programs also run. A published README or
 * guide links only to files its package ships, or to a URL.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

interface Example {
  readme: string;
  line: number;
  lang: string;
  code: string;
  marker: string | undefined;
}

/** The READMEs with examples: the root one, each package's, and those under docs/. */
function readmes(): string[] {
  const dirs = (d: string) =>
    readdirSync(join(root, d), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(d, e.name, 'README.md'));
  return ['README.md', ...dirs('packages'), ...dirs('docs')].filter((f) => existsSync(join(root, f)));
}

/** The code blocks of a README in the languages above, each with the marker comment right before it. */
function examples(readme: string, text: string): Example[] {
  const lines = text.split('\n');
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(ts|js|mjs|cjs|typescript|javascript)\s*$/.exec(lines[i] ?? '');
    if (!open) {
      if (/^```/.test(lines[i] ?? '')) while (++i < lines.length && !/^```\s*$/.test(lines[i] ?? ''));
      continue;
    }
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^```\s*$/.test(lines[i] ?? '')) body.push(lines[i] ?? '');
    let m = start - 1;
    while (m >= 0 && (lines[m] ?? '').trim() === '') m--;
    const marker = /^<!--\s*(test\b.*?)\s*-->$/.exec((lines[m] ?? '').trim())?.[1];
    out.push({ readme, line: start + 1, lang: open[1] ?? '', code: `${body.join('\n')}\n`, marker });
  }
  return out;
}

/** `key="value"` attributes of a marker (`\n` in a value is a line break). */
function attr(marker: string, key: string): string | undefined {
  return new RegExp(`\\b${key}="([^"]*)"`).exec(marker)?.[1]?.replaceAll('\\n', '\n');
}

const all = readmes().flatMap((f) => examples(f, readFileSync(join(root, f), 'utf8')));

/** The ```ts blocks that follow an `@example` tag in the doc comments of the packages' entry points. */
function tsdocExamples(): { where: string; code: string }[] {
  const out: { where: string; code: string }[] = [];
  for (const p of readdirSync(join(root, 'packages'))) {
    const file = `packages/${p}/src/index.ts`;
    if (!existsSync(join(root, file))) continue;
    const text = readFileSync(join(root, file), 'utf8');
    for (const comment of text.matchAll(/\/\*\*[\s\S]*?\*\//g)) {
      const lines = comment[0].split('\n').map((l) => l.replace(/^\s*\/?\*+\/?\s?/, ''));
      const first = text.slice(0, comment.index).split('\n').length;
      for (let i = 0; i < lines.length; i++) {
        if (!/^@example\b/.test(lines[i] ?? '')) continue;
        let j = i + 1;
        while (j < lines.length && !/^```(ts|typescript)\s*$/.test(lines[j] ?? '')) j++;
        const body: string[] = [];
        while (++j < lines.length && !/^```\s*$/.test(lines[j] ?? '')) body.push(lines[j] ?? '');
        out.push({ where: `${file}:${first + i}`, code: `${body.join('\n')}\n` });
      }
    }
  }
  return out;
}

const tsdoc = tsdocExamples();

/** Each published package's README and guides: the folder, the file, and what `files` ships. */
function publishedDocs(): { dir: string; doc: string; files: string[] }[] {
  const out: { dir: string; doc: string; files: string[] }[] = [];
  for (const group of ['packages', 'tools']) {
    for (const name of readdirSync(join(root, group))) {
      const dir = `${group}/${name}`;
      const manifest = join(root, dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { private?: boolean; files?: string[] };
      if (pkg.private) continue;
      const files = pkg.files ?? [];
      for (const doc of ['README.md', ...files.filter((f) => f.endsWith('.md'))])
        if (existsSync(join(root, dir, doc))) out.push({ dir, doc, files });
    }
  }
  return out;
}
const work = mkdtempSync(join(root, '.readme-examples-'));

function run(cmd: string, args: string[], cwd: string, timeout: number) {
  return spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout,
    env: { ...process.env, CI: '', NO_COLOR: '1', FORCE_COLOR: '0' },
  });
}

beforeAll(() => {
  // The packages as a user installs them: their dist, reached by name.
  const packages = readdirSync(join(root, 'packages'));
  const built = packages.filter((p) => existsSync(join(root, 'packages', p, 'tsconfig.json')));
  const tsc = run(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-b', ...built.map((p) => `packages/${p}`)],
    root,
    600_000,
  );
  if (tsc.status !== 0) throw new Error(`tsc -b failed:\n${tsc.stdout}${tsc.stderr}`);
  mkdirSync(join(work, 'node_modules/@rddp'), { recursive: true });
  for (const p of packages) {
    const manifest = join(root, 'packages', p, 'package.json');
    if (!existsSync(manifest)) continue;
    const name = (JSON.parse(readFileSync(manifest, 'utf8')) as { name: string }).name;
    symlinkSync(join(root, 'packages', p), join(work, 'node_modules', name), 'dir');
  }
}, 600_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('TSDoc examples', () => {
  it("every @example of the entry points, and the plugin guide's example, type-check", () => {
    expect(tsdoc.map((e) => e.where).join('\n')).toMatch(/stack[\s\S]*verbs/);
    expect(tsdoc.length).toBeGreaterThanOrEqual(6);
    expect(tsdoc.filter((e) => !/from '@rddp\//.test(e.code)).map((e) => e.where)).toEqual([]);
    const dir = join(work, 'tsdoc');
    mkdirSync(dir);
    const names = tsdoc.map((e, k) => {
      const path = join(dir, `example-${k}.mts`);
      writeFileSync(path, e.code);
      return path;
    });
    const program = ts.createProgram([...names, join(root, 'packages/llp/examples/duplex-llp.ts')], {
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts'],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      typeRoots: [join(root, 'node_modules/@types')],
      strict: true,
      skipLibCheck: true,
      noEmit: true,
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file || d.start === undefined) return text;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      const k = names.indexOf(d.file.fileName);
      const where =
        k >= 0 ? `${tsdoc[k]?.where} (example line ${line + 1})` : `${relative(root, d.file.fileName)}:${line + 1}`;
      return `${where}: ${text}`;
    });
    expect(problems).toEqual([]);
  }, 120_000);

  for (const [k, e] of tsdoc.entries()) {
    if (/from 'vitest'|@rddp\/llp-compliance/.test(e.code)) continue; // a spec: type-checked above
    it(`${e.where} runs`, () => {
      const path = join(work, `tsdoc-example-${k}.mjs`);
      const { outputText } = ts.transpileModule(e.code, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      });
      // A core package's example takes the two ends of any LLP connection (it names no transport: the
      // dependency rule): it runs here over the loopback LLP.
      const driver = /^export async function example\(/m.test(e.code)
        ? "\nconst [a, b] = await (await import('@rddp/llp-loopback')).createLoopbackPair();\nawait example(a, b);\n"
        : '';
      writeFileSync(path, outputText + driver);
      const r = run(process.execPath, [relative(work, path)], work, 60_000);
      expect(r.status, `${e.where} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`).toBe(0);
      if (driver) expect(r.stdout.trim(), `${e.where}: example() ran and printed`).not.toBe('');
    }, 90_000);
  }
});

describe('published docs', () => {
  it('link only to files their package ships, or to a URL', () => {
    const bad: string[] = [];
    for (const { dir, doc, files } of publishedDocs()) {
      const text = readFileSync(join(root, dir, doc), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = (m[1] ?? '').split('#')[0] ?? '';
        if (target === '' || /^[a-z]+:/.test(target)) continue;
        const top = target.replace(/^\.\//, '').split('/')[0] ?? '';
        const shipped = ['README.md', 'LICENSE', 'package.json'].includes(top) || files.includes(top);
        if (target.startsWith('../') || !shipped || !existsSync(join(root, dir, target)))
          bad.push(`${dir}/${doc}: ${target}`);
      }
    }
    expect(bad).toEqual([]);
  });
});

describe('README examples', () => {
  it('every example block carries a test marker', () => {
    const unmarked = all.filter((e) => e.marker === undefined).map((e) => `${e.readme}:${e.line}`);
    expect(unmarked, 'blocks without <!-- test ... -->').toEqual([]);
    expect(all.length).toBeGreaterThanOrEqual(15);
  });

  for (const [k, e] of all.entries()) {
    if (e.marker === undefined) continue;
    const marker = e.marker;
    const where = `${e.readme}:${e.line}`;
    const file = attr(marker, 'file');
    if (file !== undefined) {
      it(`${where} is ${file}`, () => {
        const path = join(root, dirname(e.readme), file);
        expect(e.code.trim()).toBe(readFileSync(path, 'utf8').trim());
      });
      continue;
    }
    if (/\bvitest\b/.test(marker)) {
      it(`${where} passes as a vitest spec`, () => {
        const dir = join(work, `spec-${k}`);
        mkdirSync(dir);
        writeFileSync(join(dir, 'example.spec.mjs'), e.code);
        writeFileSync(join(dir, 'vitest.config.mjs'), "export default { test: { include: ['example.spec.mjs'] } };\n");
        const r = run(
          process.execPath,
          [
            join(root, 'node_modules/vitest/vitest.mjs'),
            'run',
            '--root',
            dir,
            '--config',
            join(dir, 'vitest.config.mjs'),
          ],
          dir,
          180_000,
        );
        expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
        expect(stripVTControlCharacters(r.stdout)).toMatch(/Tests\s+\d+ passed/);
      }, 200_000);
      continue;
    }
    it(`${where} runs`, () => {
      const ext = e.lang === 'cjs' || /require\(/.test(e.code) ? 'cjs' : 'mjs';
      const code =
        e.lang === 'ts' || e.lang === 'typescript'
          ? ts.transpileModule(e.code, {
              compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
            }).outputText
          : e.code;
      const path = join(work, `example-${k}.${ext}`);
      writeFileSync(path, code);
      const r = run(process.execPath, [relative(work, path)], work, 60_000);
      expect(r.status, `${where} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`).toBe(0);
      const stdout = attr(marker, 'stdout');
      if (stdout !== undefined) expect(r.stdout.trim()).toBe(stdout);
    }, 90_000);
  }
});
