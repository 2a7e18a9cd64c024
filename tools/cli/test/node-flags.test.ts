import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../src/node-flags.js';

const read = (p: string) => readFileSync(new URL(p, import.meta.url), 'utf8');

describe("rddp's processes run with its V8 flags (src/node-flags.ts says why)", () => {
  it('tools/rddp, the installed bin, pnpm demo and pnpm bench pass every flag', () => {
    const launchers = {
      'tools/rddp': read('../../rddp')
        .split('\n')
        .find((l) => l.startsWith('exec node')),
      'bin/rddp.js': read('../bin/rddp.js').split('\n')[0],
      'pnpm demo': JSON.parse(read('../../../package.json')).scripts.demo,
      'pnpm bench': JSON.parse(read('../../../package.json')).scripts.bench,
    };
    for (const [where, line] of Object.entries(launchers))
      for (const flag of NODE_FLAGS) expect(line, `${where} lacks ${flag}`).toContain(flag);
  });
});
