/**
 * The parent's half of the hostile-argument tests of the optional native bindings (@rddp/crc32c-isal,
 * @rddp/writev): loading a binding that may not be built, running a child process that speaks the line
 * protocol of `native-child-harness.cjs`, and judging its run. Test-only: no package ships it.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

/** The module at `path` (relative to `base`, a test's `import.meta.url`), or undefined where it does not load. */
export function loadOptional<T = unknown>(base: string, path: string): T | undefined {
  try {
    return createRequire(base)(path) as T;
  } catch {
    return undefined;
  }
}

/** What a child process did: how it ended and what its lines said. */
export interface ChildRun {
  readonly signal: NodeJS.Signals | null;
  readonly status: number | null;
  readonly failures: string[];
  /** The call that was running when the child ended (the one that crashed, when it did). */
  readonly lastCase: string;
  readonly stats: Record<string, number>;
  readonly calls: number;
  readonly stderr: string;
}

/** A runner of the child script at `path` (relative to `base`, a test's `import.meta.url`) with arguments. */
export function childRunner(base: string, path: string): (...args: string[]) => ChildRun {
  const child = fileURLToPath(new URL(path, base));
  return (...args) => {
    const r = spawnSync(process.execPath, [child, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
      maxBuffer: 64 << 20,
    });
    const lines = (r.stdout ?? '').split('\n');
    const cases = lines.filter((l) => l.startsWith('case '));
    const stats = lines.find((l) => l.startsWith('stats '));
    const done = lines.find((l) => l.startsWith('done '));
    return {
      signal: r.signal,
      status: r.status,
      failures: lines.filter((l) => l.startsWith('fail ')),
      lastCase: cases.at(-1)?.slice(5) ?? '(none)',
      stats: stats ? JSON.parse(stats.slice(6)) : {},
      calls: done ? Number(done.slice(5)) : 0,
      stderr: `${r.error?.message ?? ''}${r.stderr ?? ''}`,
    };
  };
}

/** No signal, no wrong outcome, every call made. */
export function expectClean(r: ChildRun, calls: number): void {
  expect(r.signal, `the child ended by ${r.signal} during: ${r.lastCase}`).toBeNull();
  expect(r.failures).toEqual([]);
  expect(r.status, r.stderr).toBe(0);
  expect(r.calls).toBe(calls);
}
