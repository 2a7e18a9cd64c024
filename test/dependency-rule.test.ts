import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CORE_PACKAGES, checkPackage, importsOf } from './dependency-rule.js';

describe('dependency rule: core packages depend on the LLP contract only', () => {
  for (const name of CORE_PACKAGES) {
    it(`packages/${name} (sources and tests) imports no transport, socket API or LLP plugin`, () => {
      expect(checkPackage(join(import.meta.dirname, '..', 'packages', name))).toEqual([]);
    });
  }

  it('finds every import form', () => {
    expect(
      importsOf(`import net from 'node:net';
import { x } from "./x.js";
export * from '@rddp/llp-loopback';
import 'sctp';
const d = await import('dgram');
const r = require("net");`),
    ).toEqual(['node:net', './x.js', '@rddp/llp-loopback', 'sctp', 'dgram', 'net']);
  });

  it('an import in a comment (a TSDoc @example) or a string is not an import', () => {
    expect(
      importsOf(`/**
 * @example
 * import { loopbackModule } from '@rddp/llp-loopback';
 */
// import net from 'node:net';
const s = "import x from 'sctp'";
import { y } from './y.js';`),
    ).toEqual(['./y.js']);
  });

  it('fails when a core package imports node:net or depends on a transport (synthetic package)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rddp-deprule-'));
    try {
      mkdirSync(join(dir, 'src', 'sub'), { recursive: true });
      writeFileSync(
        join(dir, 'package.json'),
        JSON.stringify({ dependencies: { '@rddp/llp': '*', '@rddp/llp-mpa-tcp': '*', rxjs: '*' } }),
      );
      writeFileSync(
        join(dir, 'src', 'ok.ts'),
        `import { Subject } from 'rxjs';\nimport type { LlpStream } from '@rddp/llp';\n`,
      );
      writeFileSync(join(dir, 'src', 'sub', 'bad.ts'), `import 'node:net';\nimport { sctp } from '@rddp/llp-sctp';\n`);
      // A test that reaches for a transport breaks the rule too.
      mkdirSync(join(dir, 'test'));
      writeFileSync(
        join(dir, 'test', 'x.test.ts'),
        `import { it } from 'vitest';\nimport { createLoopbackPair } from '@rddp/llp-loopback';\n`,
      );
      const v = checkPackage(dir);
      expect(v).toHaveLength(4);
      expect(v.join('\n')).toMatch(/test\/x\.test\.ts imports @rddp\/llp-loopback/);
      expect(v.join('\n')).toMatch(/depends on @rddp\/llp-mpa-tcp/);
      expect(v.join('\n')).toMatch(/imports node:net/);
      expect(v.join('\n')).toMatch(/imports @rddp\/llp-sctp/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
