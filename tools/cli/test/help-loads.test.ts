/**
 * Issue 37: `rddp <command> --help` loads that command's flags only, never the protocol stack. Each
 * command's help runs as a separate `node --import <hook> dist/main.js <command> --help` process; the hook
 * records every module that process resolves (ESM resolve hook) and every CommonJS module it required
 * (at exit), and the test names the packages among them.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MAX_REPORT_ENTRIES, DEFAULT_MAX_STATE_OCTETS, MAX_CAPTURE_BYTES } from '@rddp/conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATTACKS } from '../src/attack/attacks.js';
import { ATTACK_NAMES } from '../src/commands/attack-command.js';
import * as dissect from '../src/commands/dissect.js';
import { COMMANDS } from '../src/launch.js';
import { startedProcesses } from './procs.js';

const MAIN = path.resolve(__dirname, '../dist/main.js');
const ROOT = path.resolve(__dirname, '../../..');

/** What `<command> --help` must not load: the protocol packages and the stack's libraries. */
const PROTOCOL = /^(@rddp\/(ddp|rdmap|verbs|llp|llp-.+|sctp|conformance|stack)|rxjs|inversify)$/;

const procs = startedProcesses();
let dir = '';

/** Workspace package directories (realpath, as the loader resolves them) and their names. */
const WORKSPACE: readonly (readonly [string, string])[] = ['packages', 'tools'].flatMap((top) =>
  readdirSync(path.join(ROOT, top), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => {
      const pkg = path.join(ROOT, top, d.name);
      try {
        const { name } = JSON.parse(readFileSync(path.join(pkg, 'package.json'), 'utf8')) as { name: string };
        return [[`${realpathSync(pkg)}/`, name] as const];
      } catch {
        return [];
      }
    }),
);

/** The package a loaded file belongs to: the innermost node_modules entry, else its workspace package. */
function packageOf(file: string): string | undefined {
  const m = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file);
  if (m) return m[1];
  return WORKSPACE.find(([d]) => file.startsWith(d))?.[1];
}

/** Runs `dist/main.js args…` under the hook: its status, stdout, and the packages it loaded. */
async function loads(args: string[]): Promise<{ code: number | null; out: string; packages: Set<string> }> {
  const record = path.join(dir, `${args.join('_').replace(/[^\w-]/g, '')}.loaded`);
  await writeFile(record, '');
  const child = procs.track(
    spawn(process.execPath, ['--import', path.join(dir, 'hook.mjs'), MAIN, ...args], {
      env: { ...process.env, RDDP_TEST_LOADED: record },
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  );
  let out = '';
  child.stdout?.on('data', (d) => (out += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  const files = (await readFile(record, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((u) => (u.startsWith('file:') ? fileURLToPath(u) : u));
  const packages = new Set(files.map(packageOf).filter((p): p is string => p !== undefined));
  return { code, out, packages };
}

const protocolIn = (packages: Set<string>) => [...packages].filter((p) => PROTOCOL.test(p)).sort();

beforeAll(async () => {
  // tools/rddp rebuilds dist when a source is newer; dist/main.js is run directly below.
  expect((await procs.run(['--version']).done).code).toBe(0);
  dir = await mkdtemp(path.join(tmpdir(), 'rddp-help-loads-'));
  await writeFile(
    path.join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.RDDP_TEST_LOADED, r.url + '\\n');
  return r;
}
`,
  );
  await writeFile(
    path.join(dir, 'hook.mjs'),
    `import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
register('./hooks.mjs', import.meta.url);
const required = createRequire(import.meta.url).cache;
process.on('exit', () => appendFileSync(process.env.RDDP_TEST_LOADED, Object.keys(required).map((f) => f + '\\n').join('')));
`,
  );
}, 180_000);

afterAll(() => rm(dir, { recursive: true, force: true }));

describe('rddp <command> --help loads no protocol code (issue 37)', () => {
  it('a real run is seen loading the protocol packages (the hook works)', async () => {
    // An unknown attack is a usage error once the attacks and the stack are loaded; a missing capture
    // fails once @rddp/conformance is.
    const [attack, dissect] = await Promise.all([
      loads(['attack', 'no-such-attack']),
      loads(['dissect', path.join(dir, 'no-such.pcap')]),
    ]);
    expect(attack.code).toBe(2);
    expect(dissect.code).toBe(1);
    const seen = protocolIn(new Set([...attack.packages, ...dissect.packages]));
    for (const p of [
      '@rddp/ddp',
      '@rddp/rdmap',
      '@rddp/verbs',
      '@rddp/stack',
      '@rddp/conformance',
      'rxjs',
      'inversify',
    ])
      expect(seen).toContain(p);
    expect(seen.some((p) => p.startsWith('@rddp/llp-'))).toBe(true);
  }, 60_000);

  it('every command in COMMANDS: --help exits 0 having loaded none of them', async () => {
    const names = Object.keys(COMMANDS);
    const runs = await Promise.all(names.map((name) => loads([name, '--help'])));
    const loaded = Object.fromEntries(names.map((name, i) => [name, protocolIn(runs[i]?.packages ?? new Set())]));
    expect(loaded).toEqual(Object.fromEntries(names.map((name) => [name, []])));
    for (const [i, name] of names.entries()) {
      expect(runs[i]?.code, name).toBe(0);
      expect(runs[i]?.out, name).toMatch(new RegExp(`^Usage: rddp ${name} `));
    }
  }, 60_000);

  it("help text built without the packages says what they hold: dissect's defaults, attack's names", async () => {
    // The light modules re-declare them; they must be the packages' own.
    expect([dissect.DEFAULT_MAX_REPORT_ENTRIES, dissect.DEFAULT_MAX_STATE_OCTETS, dissect.MAX_CAPTURE_BYTES]).toEqual([
      DEFAULT_MAX_REPORT_ENTRIES,
      DEFAULT_MAX_STATE_OCTETS,
      MAX_CAPTURE_BYTES,
    ]);
    expect(ATTACK_NAMES).toEqual(ATTACKS.map((a) => a.name));
    const [dissectHelp, attackHelp] = await Promise.all([loads(['dissect', '--help']), loads(['attack', '--help'])]);
    const flat = (s: string) => s.replace(/\s+/g, ' ');
    // The option's own entry: no other option's flag before its default.
    for (const [flag, value] of [
      ['--max-events <n>', DEFAULT_MAX_REPORT_ENTRIES],
      ['--max-capture-bytes <n>', MAX_CAPTURE_BYTES],
      ['--max-state <octets>', DEFAULT_MAX_STATE_OCTETS],
    ] as const)
      expect(flat(dissectHelp.out)).toMatch(new RegExp(`${flag} (?:(?! --).)*\\(default: "${value}"\\)`));
    expect(flat(attackHelp.out)).toContain(`attacks to run (default all): ${ATTACKS.map((a) => a.name).join(', ')}`);
  }, 60_000);
});
