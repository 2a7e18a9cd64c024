/**
 * The compliance suite as a plugin author runs it: its own vitest process, in a folder of its own with a
 * configuration of its own (none of this repository's: no `@rddp/source` condition, vitest's default 5 s
 * test timeout), on the packages' built entry points. The transport under test is the loopback LLP
 * made to carry no private data (capabilities.maxPrivateData 0) and to ignore the responder's reject:
 * the private-data check must be reported skipped with its reason, and the reject check must fail
 * saying what is missing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));

// Resolves @rddp/llp-compliance, @rddp/llp-loopback, rxjs and vitest as an installed package does.
const fixture = `
import { tests, transportContext } from '@rddp/llp-compliance';
import { LoopbackNetwork, loopback } from '@rddp/llp-loopback';
import { map } from 'rxjs';
import { describe } from 'vitest';

/** The loopback LLP without private data and without reject: what a minimal plugin may be. */
function limited() {
  const base = loopback({ network: new LoopbackNetwork() });
  const capabilities = { ...base.capabilities, maxPrivateData: 0 };
  const wrap = (c) =>
    new Proxy(c, {
      get: (t, k) => (k === 'capabilities' ? capabilities : typeof t[k] === 'function' ? t[k].bind(t) : t[k]),
    });
  return {
    name: 'limited-loopback',
    capabilities,
    connect: async (address, options) => wrap(await base.connect(address, options)),
    async listen(address, { onConnectRequest: _ignored, ...options } = {}) {
      const l = await base.listen(address, options);
      return { address: l.address, connections$: l.connections$.pipe(map(wrap)), errors$: l.errors$, close: () => l.close() };
    },
  };
}

describe('limited LLP', () => {
  tests({ setup: async () => transportContext(limited(), { host: 'srv', port: 0 }), teardown: async () => {} });
});
`;

interface JsonReport {
  testResults: {
    assertionResults: { title: string; status: string; failureMessages: string[] }[];
  }[];
}

describe('@rddp/llp-compliance outside this repository’s vitest configuration', () => {
  const dir = mkdtempSync(join(root, 'packages/llp-compliance/test/.standalone-'));
  let report: JsonReport;
  let output = '';

  beforeAll(() => {
    const build = spawnSync(
      process.execPath,
      [join(root, 'node_modules/typescript/bin/tsc'), '-b', 'packages/llp-compliance', 'packages/llp-loopback'],
      { cwd: root, encoding: 'utf8' },
    );
    if (build.status !== 0) throw new Error(`tsc -b failed:\n${build.stdout}${build.stderr}`);
    writeFileSync(join(dir, 'compliance.spec.mjs'), fixture);
    writeFileSync(join(dir, 'vitest.config.mjs'), "export default { test: { include: ['compliance.spec.mjs'] } };\n");
    const run = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules/vitest/vitest.mjs'),
        'run',
        '--root',
        dir,
        '--config',
        join(dir, 'vitest.config.mjs'),
        '--reporter=json',
        `--outputFile=${join(dir, 'report.json')}`,
      ],
      { cwd: dir, encoding: 'utf8', timeout: 120_000, env: { ...process.env, CI: '' } },
    );
    output = `${run.stdout}\n${run.stderr}`;
    report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as JsonReport;
  }, 180_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const result = (title: string) => {
    const all = report.testResults.flatMap((f) => f.assertionResults);
    const r = all.find((a) => a.title.startsWith(title));
    if (!r) throw new Error(`no test '${title}' in the report:\n${output}`);
    return r;
  };

  it('RFC 5041 §6.1: with maxPrivateData 0 the private-data check is reported skipped, not passed', () => {
    expect(result('RFC 5041 §6.1: private data').status).toBe('skipped');
  });

  it('a transport that ignores the reject fails the reject check with what is missing, not "expected false to be true"', () => {
    const r = result('a rejected connection carries');
    expect(r.status).toBe('failed');
    const message = r.failureMessages.join('\n');
    expect(message).toContain('ConnectionRejectedError (ERR_LLP_CONNECTION_REJECTED)');
    expect(message).toContain('the connect succeeded');
    expect(message).toContain('leave connectRejected out');
  });

  it('every other check passes under vitest defaults (the suite sets its own timeouts)', () => {
    const others = report.testResults
      .flatMap((f) => f.assertionResults)
      .filter((a) => !a.title.startsWith('a rejected connection'));
    expect(others.length).toBeGreaterThanOrEqual(14);
    expect(
      others.filter((a) => a.status === 'failed').map((a) => `${a.title}: ${a.failureMessages.join('\n')}`),
      output,
    ).toEqual([]);
  });
});
