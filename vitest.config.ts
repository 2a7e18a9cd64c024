import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Test files run in parallel, at least two at a time: vitest's default (cores − 1) is one file at a time
 * on a 2-core machine, while most files here wait on sockets, child processes or captures. Files are
 * written to be parallel-safe: ports are 0 (the kernel's), network namespaces and temp folders are named
 * per process. RDDP_TEST_WORKERS=n overrides.
 */
const workers = Number(process.env.RDDP_TEST_WORKERS) || Math.max(2, availableParallelism());

// Tests import packages' TypeScript sources through the `@rddp/source` export condition,
// so `vitest` needs no build step; `tsc -b` type-checks the same sources.
export default defineConfig({
  resolve: { conditions: ['@rddp/source'] },
  ssr: { resolve: { conditions: ['@rddp/source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tools/*/test/**/*.test.ts', 'test/**/*.test.ts', 'docs/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: workers,
  },
});
