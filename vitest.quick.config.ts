import { defineConfig } from 'vitest/config';
import base, { IN_PROCESS } from './vitest.config';

/**
 * `pnpm test:quick`: the in-process tests (the packages' unit tests and the integration tests), one module
 * graph per worker — no child processes, no wire captures (tshark), no network namespaces, no package
 * install, none of the long compliance runs. `pnpm test` (what CI runs) still runs every test file.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    projects: undefined,
    isolate: false,
    include: IN_PROCESS,
    exclude: [
      '**/node_modules/**',
      // child processes, tshark, TUN devices, installs
      'packages/crc32c-isal/test/install-line.test.ts',
      'packages/llp-compliance/test/standalone.test.ts',
      'packages/llp-sctp/test/raw-optional.test.ts',
      'packages/llp-sctp/test/tshark.test.ts',
      'packages/sctp/test/deps.test.ts',
      'packages/sctp/test/lifecycle.test.ts',
      'packages/writev/test/tun.test.ts',
      'packages/llp-mpa-tcp/test/congestion.test.ts',
      'packages/llp-mpa-tcp/test/tx-direct.test.ts',
      'packages/llp-mpa-tcp/test/wire.test.ts',
      // the LLP compliance contract run under every framing mode, and bulk receive-path runs (tens of s)
      'packages/*/test/compliance.test.ts',
      'packages/llp-mpa-tcp/test/socket-rx.test.ts',
      'packages/llp-sctp/test/independence.test.ts',
      // timers that run for seconds: startup and close timeouts, slow peers
      'packages/llp-mpa-tcp/test/slowloris.test.ts',
      'packages/llp-mpa-tcp/test/fpdu-timeout.test.ts',
    ],
  },
});
