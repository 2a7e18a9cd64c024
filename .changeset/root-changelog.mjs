import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Writes the root CHANGELOG.md from the changesets in this folder (each entry once, with the packages it
// touches), newest first: node .changeset/root-changelog.mjs. `pnpm changeset version` ignores this file.
process.chdir(fileURLToPath(new URL('..', import.meta.url)));
const dir = '.changeset';
const order = [
  'rdma-engineer-habits',
  'message-path',
  'docs-that-ship',
  'public-edges',
  'conformance-and-dissect',
  'native-arguments',
  'process-budget-and-sources',
];
const files = readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md');
const added = (f) => {
  const t = execFileSync('git', ['log', '--diff-filter=A', '--format=%ct', '--', `${dir}/${f}`], {
    encoding: 'utf8',
  }).trim();
  return t ? Number(t.split('\n').pop()) : Infinity;
};
const entries = files.map((f) => {
  const text = readFileSync(`${dir}/${f}`, 'utf8');
  const [, head, body] = /^---\n([\s\S]*?)\n---\n+([\s\S]*)$/.exec(text);
  const bumps = head
    .split('\n')
    .map((l) => /^"([^"]+)":\s*(\w+)/.exec(l))
    .filter(Boolean)
    .map((m) => [m[1], m[2]]);
  return { f: f.replace(/\.md$/, ''), bumps, body: body.trim(), at: added(f) };
});
entries.sort((a, b) => b.at - a.at || order.indexOf(a.f) - order.indexOf(b.f));
const TITLES = {
  'rdma-engineer-habits': "perftest's and rping's habits, rddp doctor, pinned backends, a fast start",
  'message-path': 'One file per layer on each message path; DDP accept tables',
  'docs-that-ship': 'Docs that ship',
  'public-edges': 'Every public send checks its input; no /testing subpaths',
  'conformance-and-dissect': 'Graded conformance verdicts; streamed, bounded dissection',
  'native-arguments': 'Native bindings read each argument once',
  'process-budget-and-sources': 'One memory budget per process, one share per source',
  'sctp-cookie-hmac': 'SCTP State Cookies signed with HMAC-SHA-256',
  'sctp-send-path': 'SCTP streams independent on send; SCTP 5–10 × faster',
  'experiment-evidence': 'rddp experiment measures head-of-line stall from captures',
  'direct-send': 'MPA/TCP sends FPDUs straight to the socket descriptor (@rddp/writev)',
  'transmit-at-once': 'MPA/TCP writes the first FPDU of a turn to an idle socket at once',
  'marker-framing-copy': "MPA/TCP markerFraming: 'copy'",
  'send-path-per-message': 'The per-message send path: 64-octet RDMA Writes 0.51 → 1.01 M/s',
  'perf-qp-lines': 'rddp perf -q N: queue pairs measure together',
  'mpa-high-water-mark': 'MPA/TCP highWaterMark defaults to 4 MiB',
  'perf-perftest-defaults': "rddp perf takes perftest's defaults",
  'receive-arenas': 'MPA/TCP reads into a per-connection receive arena',
  'publishable-packages': 'Publishable packages',
};
const title = (e) => TITLES[e.f] ?? fallback(e);
const fallback = (e) => {
  const first = e.body.split('\n')[0];
  const m = /^(.*?[.:])(\s|$)/.exec(e.body.replace(/\n/g, ' '));
  return (m ? m[1] : first).replace(/[.:]$/, '');
};
const pkgs = new Map();
entries.forEach((e, i) => {
  for (const [p, b] of e.bumps) {
    const x = pkgs.get(p) ?? { minor: [], patch: [], major: [] };
    x[b].push(i + 1);
    pkgs.set(p, x);
  }
});
let out = `# Changelog

What changed for users of the rddp packages, from the changesets in \`.changeset/\` (one file per change,
naming the packages it touches and how: minor or patch). Nothing here is released yet: at release,
\`pnpm changeset version\` bumps the versions and writes each package's own CHANGELOG.md from the same files
(\`@rddp/sctp\` follows its upstream as 1.0.0-rddp.N: set its version by hand, or changesets makes it 1.0.0).
This file is written by \`node .changeset/root-changelog.mjs\`.

## Unreleased

### By package

| Package | Minor changes | Patch changes |
|---|---|---|
`;
for (const p of [...pkgs.keys()].sort()) {
  const x = pkgs.get(p);
  const refs = (l) => l.map((n) => `[${n}](#${n})`).join(', ') || '—';
  out += `| \`${p}\` | ${refs(x.minor)} | ${refs(x.patch)} |\n`;
}
out += '\n### Changes, newest first\n';
entries.forEach((e, i) => {
  out += `\n<a id="${i + 1}"></a>\n\n#### ${i + 1}. ${title(e)}\n\n`;
  out += `${e.bumps.map(([p, b]) => `\`${p}\` (${b})`).join(', ')}\n\n${e.body}\n`;
});
writeFileSync('CHANGELOG.md', out);
