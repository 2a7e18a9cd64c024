/**
 * No import cycles (issue 36): none at run time anywhere, and none even through `import type` in the
 * protocol layers (DDP, RDMAP, verbs), so each file can be read after the files it imports.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
/** Where even a type-only cycle is one too many. */
const LAYERED = ['packages/ddp/', 'packages/rdmap/', 'packages/verbs/'];

type Graph = Map<string, Set<string>>;

function* tsFiles(dir: string): Generator<string> {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* tsFiles(p);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield p;
  }
}

/** `./x.js` → `./x.ts`, `./dir` → `./dir/index.ts`; undefined for a package or a file not found. */
function resolveRelative(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

/**
 * A source's static imports and re-exports, each marked type-only or not. With `verbatimModuleSyntax` only
 * `import type` and `export type` are erased: `import { type A } from './a.js'` is emitted as
 * `import {} from './a.js'`, which still loads `a.js`: a runtime edge. (A dynamic `import()` is no edge.)
 */
function importsOf(source: string): { spec: string; typeOnly: boolean }[] {
  const sf = ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest);
  const out: { spec: string; typeOnly: boolean }[] = [];
  for (const s of sf.statements) {
    if (ts.isImportDeclaration(s) && ts.isStringLiteral(s.moduleSpecifier)) {
      out.push({ spec: s.moduleSpecifier.text, typeOnly: !!s.importClause?.isTypeOnly });
    } else if (ts.isExportDeclaration(s) && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier)) {
      out.push({ spec: s.moduleSpecifier.text, typeOnly: s.isTypeOnly });
    }
  }
  return out;
}

/** The runtime graph (type-only edges left out) and the full graph of every package's and tool's sources. */
function buildGraphs(): { runtime: Graph; full: Graph } {
  const runtime: Graph = new Map();
  const full: Graph = new Map();
  for (const group of ['packages', 'tools']) {
    for (const pkg of readdirSync(join(ROOT, group))) {
      for (const file of tsFiles(join(ROOT, group, pkg, 'src'))) {
        const from = relative(ROOT, file);
        runtime.set(from, runtime.get(from) ?? new Set());
        full.set(from, full.get(from) ?? new Set());
        for (const { spec, typeOnly } of importsOf(readFileSync(file, 'utf8'))) {
          const target = resolveRelative(file, spec);
          if (!target) continue;
          const to = relative(ROOT, target);
          full.get(from)!.add(to);
          if (!typeOnly) runtime.get(from)!.add(to);
        }
      }
    }
  }
  return { runtime, full };
}

/** Strongly connected components of more than one file, or of one file importing itself (Tarjan). */
function cyclesOf(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || graph.get(v)?.has(v)) out.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

const describeCycles = (cycles: string[][]): string => cycles.map((c) => `cycle: ${c.join(' ↔ ')}`).join('\n');

describe('import cycles', () => {
  const { runtime, full } = buildGraphs();

  it('the sources are scanned', () => {
    expect(runtime.size).toBeGreaterThan(100);
    expect([...full.keys()].some((f) => f.startsWith('packages/rdmap/src/'))).toBe(true);
  });

  it('no runtime import cycle in any package or tool', () => {
    expect(describeCycles(cyclesOf(runtime))).toBe('');
  });

  it('no import cycle, not even type-only, in packages/ddp, packages/rdmap, packages/verbs', () => {
    const layered = cyclesOf(full).filter((c) => c.some((f) => LAYERED.some((p) => f.startsWith(p))));
    expect(describeCycles(layered)).toBe('');
  });

  it('type-only edges are told from runtime ones', () => {
    const src = [
      `import type { A } from './a.js';`,
      `import { type B } from './b.js';`, // still loads b.js (verbatimModuleSyntax)
      `export type { C } from './c.js';`,
      `export * from './d.js';`,
      `import './e.js';`,
      `const f = () => import('./f.js');`,
    ].join('\n');
    expect(importsOf(src)).toEqual([
      { spec: './a.js', typeOnly: true },
      { spec: './b.js', typeOnly: false },
      { spec: './c.js', typeOnly: true },
      { spec: './d.js', typeOnly: false },
      { spec: './e.js', typeOnly: false },
    ]);
  });

  it('the detector finds a known cycle in a tiny graph (and nothing in an acyclic one)', () => {
    const g: Graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a', 'd'])],
      ['d', new Set()],
      ['e', new Set(['e'])],
    ]);
    expect(cyclesOf(g)).toEqual([['a', 'b', 'c'], ['e']]);
    expect(
      cyclesOf(
        new Map([
          ['a', new Set(['b'])],
          ['b', new Set()],
        ]),
      ),
    ).toEqual([]);
  });
});
