/** The kit's reports: a terminal table, JUnit XML (CI systems), JSON (scripts) and Markdown. */
import type { CaseResult, RunSummary } from './types.js';

function modeText(s: RunSummary): string {
  return `MPA rev ${s.mode.mpaRev}, CRC ${s.mode.crc ? 'on' : 'off'}, Markers ${s.mode.markers ? 'on' : 'off'}`;
}

function headline(s: RunSummary): string {
  const who = s.role === 'client' ? `target ${s.peer}` : `clients on ${s.peer}`;
  return `rddp conformance: ${who} (${s.app}; ${modeText(s)})`;
}

function totals(s: RunSummary): string {
  return `${s.passed} passed, ${s.failed} failed, ${s.warned ?? 0} warned, ${s.informational ?? 0} informational, ${s.skipped} skipped in ${(s.ms / 1000).toFixed(1)} s`;
}

/** The grade as shown: the verdict, and for FAIL/WARN/INFO the strength of the words it rests on. */
export function gradeText(r: CaseResult): string {
  return r.verdict === 'PASS' || r.verdict === 'SKIP' ? r.verdict : `${r.verdict} (${r.strength})`;
}

/** One line per case, columns aligned; evidence cut to `width` characters. */
export function tableReport(s: RunSummary, width = 100): string {
  const nameW = Math.max(4, ...s.results.map((r) => r.name.length));
  const clauseW = Math.max(6, ...s.results.map((r) => r.clause.length));
  const cut = (x: string) => (x.length > width ? `${x.slice(0, width - 1)}…` : x);
  const lines = [
    headline(s),
    '',
    `${'case'.padEnd(nameW)}  ${'clause'.padEnd(clauseW)}  ${'result'.padEnd(13)}  evidence`,
    ...s.results.map(
      (r) => `${r.name.padEnd(nameW)}  ${r.clause.padEnd(clauseW)}  ${gradeText(r).padEnd(13)}  ${cut(r.evidence)}`,
    ),
    '',
    totals(s),
  ];
  return `${lines.join('\n')}\n`;
}

function xml(s: string): string {
  return (
    s
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      // XML 1.0 has no way to carry most control characters.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping them is the point
      .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '?')
  );
}

/** JUnit XML: one testsuite, one testcase per case (classname: its clause). */
export function junitReport(s: RunSummary): string {
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="rddp conformance" tests="${s.results.length}" failures="${s.failed}" skipped="${s.skipped}" time="${(s.ms / 1000).toFixed(3)}">`,
    `  <testsuite name="${xml(headline(s))}" tests="${s.results.length}" failures="${s.failed}" errors="0" skipped="${s.skipped}" time="${(s.ms / 1000).toFixed(3)}">`,
  ];
  for (const r of s.results) {
    const open = `    <testcase name="${xml(r.name)}" classname="${xml(r.clause)}" time="${(r.ms / 1000).toFixed(3)}"`;
    if (r.verdict === 'PASS' || r.verdict === 'WARN' || r.verdict === 'INFO')
      // WARN and INFO do not fail the run: they pass, with the grade and the words in the output.
      out.push(
        `${open}>`,
        `      <system-out>${xml(r.verdict === 'PASS' ? r.evidence : `${gradeText(r)}: ${r.evidence}\n${r.quote}`)}</system-out>`,
        '    </testcase>',
      );
    else if (r.verdict === 'SKIP')
      out.push(`${open}>`, `      <skipped message="${xml(r.evidence)}"/>`, '    </testcase>');
    else
      out.push(
        `${open}>`,
        `      <failure message="${xml(r.evidence)}" type="${xml(r.clause)}">${xml(`${r.title}\n${r.evidence}\n${r.strength}: ${r.quote}`)}</failure>`,
        '    </testcase>',
      );
  }
  out.push('  </testsuite>', '</testsuites>', '');
  return out.join('\n');
}

export function jsonReport(s: RunSummary): string {
  return `${JSON.stringify(s, null, 2)}\n`;
}

function md(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

export function markdownReport(s: RunSummary): string {
  const lines = [
    `# ${md(headline(s))}`,
    '',
    '| case | clause | result | strength | evidence |',
    '|---|---|---|---|---|',
    ...s.results.map((r) => `| \`${r.name}\` | ${md(r.clause)} | ${r.verdict} | ${r.strength} | ${md(r.evidence)} |`),
    '',
    totals(s),
    '',
  ];
  return lines.join('\n');
}
