import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files run in parallel, at least two at a time: vitest's default (cores − 1) is one file at a time
 * on a 2-core machine, while most files here wait on sockets, child processes or captures. Files are
 * written to be parallel-safe: ports are 0 (the kernel's), network namespaces and temp folders are named
 * per process. RDDP_TEST_WORKERS=n overrides.
 */
const workers = Number(process.env.RDDP_TEST_WORKERS) || Math.max(2, availableParallelism());

/**
 * The files that take a minute or more (their own processes, namespaces, captures), longest first. They
 * start first, so a fresh clone (no timing cache yet) does not end with one of them running alone.
 */
const LONG_FILES = [
  'tools/cli/test/experiment.test.ts',
  'tools/cli/test/attack.test.ts',
  'tools/cli/test/conformance.test.ts',
  'test/pack-install.test.ts',
  'tools/cli/test/bench-headline.test.ts',
  'tools/cli/test/conformance-targets.test.ts',
  'tools/cli/test/lossy.test.ts',
  'tools/cli/test/rping-bounds.test.ts',
  'tools/cli/test/tools-end.test.ts',
];

class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONG_FILES.findIndex((l) => f.moduleId.endsWith(l));
      return i < 0 ? LONG_FILES.length : i;
    };
    return [...(await super.sort(files))].sort((a, b) => rank(a) - rank(b)); // stable: the rest keep their order
  }
}

/**
 * In-process tests: the packages' own tests and the integration tests. They import the protocol stack's
 * TypeScript sources and run nothing outside the process, so a worker keeps one module graph across files
 * (vitest's `isolate: false`) instead of loading it again per file. They must leave nothing behind:
 * sockets closed, timers cleared (a timer firing in a later file fails that file).
 */
export const IN_PROCESS = ['packages/*/test/**/*.test.ts', 'test/integration/**/*.test.ts'];

// Tests import packages' TypeScript sources through the `@rddp/source` export condition,
// so `vitest` needs no build step; `tsc -b` type-checks the same sources.
export default defineConfig({
  resolve: { conditions: ['@rddp/source'] },
  ssr: { resolve: { conditions: ['@rddp/source'] } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: workers,
    sequence: { sequencer: LongFilesFirst },
    projects: [
      { extends: true, test: { name: 'in-process', include: IN_PROCESS, isolate: false } },
      {
        extends: true,
        // Tools and end-to-end tests (child processes, captures, namespaces, installs): a fresh worker each.
        test: {
          name: 'tools',
          include: ['tools/*/test/**/*.test.ts', 'test/**/*.test.ts', 'docs/**/*.test.ts'],
          exclude: ['**/node_modules/**', 'test/integration/**'],
        },
      },
    ],
  },
});
