/** docs/CONFORMANCE.md's case table says what the kit runs: every case, its clause and its title. */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { CASES } from '../src/index.js';

it('docs/CONFORMANCE.md lists every case with its clause and title, in run order', () => {
  const doc = readFileSync(new URL('../../../docs/CONFORMANCE.md', import.meta.url), 'utf8');
  const table = doc.slice(doc.indexOf('| case | clause | roles | checks |'));
  const rows = table
    .split('\n')
    .slice(2)
    .filter((l, i, all) => l.startsWith('| `') && all.slice(0, i).every((p) => p.startsWith('| `')))
    .map((l) => {
      const cells = l.split(/(?<!\\)\|/).map((c) => c.trim());
      return { name: cells[1]?.replaceAll('`', ''), clause: cells[2], title: cells[4]?.replaceAll('\\|', '|') };
    });
  expect(rows).toEqual(CASES.map((c) => ({ name: c.name, clause: c.clause, title: c.title })));
});
