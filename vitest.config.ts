import { defineConfig } from 'vitest/config';

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
  },
});
