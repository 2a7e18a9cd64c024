/**
 * What a consumer gets: every workspace package packed (`pnpm -r pack`, which turns `workspace:*` into
 * versions), the tarballs installed with plain npm into an empty folder outside the workspace, and there an
 * RDMA Write + Read + Send program over MPA/TCP on 127.0.0.1 and the `rddp` command line. The packed
 * manifests are the published ones: repository, homepage and bugs, no `@rddp/source` export condition
 * (publishConfig.exports replaces the workspace's exports); @rddp/llp carries the plugin guide. Slow (about
 * a minute: npm fetches rxjs, inversify, … from the registry, or its cache); skipped with a message when the
 * registry is unreachable.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'rddp-pack-'));
const tarballs = join(work, 'tarballs');
const consumer = join(work, 'consumer');
const env = {
  ...process.env,
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
  npm_config_prefer_offline: 'true', // what npm's cache already holds is not fetched again
};

/** Reachability of the registry npm uses; null when reachable, else why not. */
function registryProblem(): string | null {
  const r = spawnSync('npm', ['view', 'rxjs@7', 'version', '--json'], { encoding: 'utf8', timeout: 60_000, env });
  return r.status === 0 ? null : (r.stderr || r.error?.message || `npm exit ${r.status}`).trim().split('\n')[0]!;
}

function run(cmd: string, args: string[], cwd: string, timeout = 300_000): { out: string; err: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`);
  return { out: r.stdout, err: r.stderr };
}

// The program a consumer writes (docs/rdma-example): only the packages' published entry points. It ends by
// itself once its queue pairs are closed, on every transport (no process.exit: a handle left open fails it).
const program = (transport: 'mpa' | 'sctp') => `
import { ${transport === 'mpa' ? 'mpaTcpModule' : 'sctpModule'} } from '${transport === 'mpa' ? '@rddp/llp-mpa-tcp' : '@rddp/llp-sctp'}';
import { createStack } from '@rddp/stack';
import { Access } from '@rddp/verbs';

const stack = createStack(${transport === 'mpa' ? 'mpaTcpModule()' : 'sctpModule()'});
const [clientLink, serverLink] = await stack.pair({ host: '127.0.0.1', port: 0 });
const [client, server] = [stack.device().allocPd(), stack.device().allocPd()];
const qp = stack.queuePair(client, clientLink);
const peer = stack.queuePair(server, serverLink);
const exposed = server.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite);
const inbox = server.registerMr(new Uint8Array(64), Access.LocalWrite);
const delivered = peer.recv(inbox.sge());
const data = client.registerMr(new TextEncoder().encode('hello, remote memory'), 0);
await qp.write(data.sge(), exposed.remote());
const copy = client.registerMr(new Uint8Array(data.length), Access.LocalWrite);
await qp.read(copy.sge(), exposed.remote());
await qp.send(copy.sge(0, 5), { solicited: true });
const wc = await delivered;
await Promise.all([qp.close(), peer.close()]);
const text = new TextDecoder();
console.log(JSON.stringify({ read: text.decode(copy.buffer), received: text.decode(inbox.buffer.subarray(0, wc.byteLen)) }));
`;

const unreachable = registryProblem();

describe('packed tarballs installed with npm outside the workspace', () => {
  let files: string[] = [];

  beforeAll(() => {
    if (unreachable) return;
    run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b'], root);
    mkdirSync(tarballs);
    // tsc -b just built every package: their `prepack` (tsc -b again) is skipped here, and checked below.
    run('pnpm', ['-r', '--config.ignore-scripts=true', 'pack', '--pack-destination', tarballs], root);
    files = readdirSync(tarballs)
      .filter((f) => f.endsWith('.tgz'))
      .map((f) => join(tarballs, f));
    mkdirSync(consumer);
    run('npm', ['init', '-y'], consumer);
    run('npm', ['install', '--no-audit', '--no-fund', ...files], consumer, 600_000);
  }, 900_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('every workspace package is packed, with dist/, LICENSE, a README, its repository and no workspace: range or @rddp/source condition', (ctx) => {
    if (unreachable) ctx.skip(`npm registry unreachable (${unreachable}): pack-and-install not run`);
    const names = files.map((f) => f.slice(tarballs.length + 1));
    expect(names.length).toBe(16);
    for (const f of files) {
      const list = execFileSync('tar', ['tzf', f], { encoding: 'utf8' }).split('\n');
      const manifest = execFileSync('tar', ['xzfO', f, 'package/package.json'], { encoding: 'utf8' });
      const pkg = JSON.parse(manifest) as {
        name: string;
        license?: string;
        publishConfig?: { access?: string };
        repository?: { url?: string; directory?: string };
        homepage?: string;
        bugs?: { url?: string };
      };
      // An unbuilt clone packs built tarballs: every TypeScript package builds before it is packed.
      const own = JSON.parse(readFileSync(join(root, pkg.repository?.directory ?? '', 'package.json'), 'utf8'));
      if (list.includes('package/dist/index.js')) expect(own.scripts?.prepack, pkg.name).toBe('tsc -b');
      expect(manifest, pkg.name).not.toContain('workspace:');
      expect(manifest, pkg.name).not.toContain('@rddp/source'); // the workspace's own export condition
      expect(pkg.repository?.url, pkg.name).toMatch(/^git\+https:\/\/github\.com\/.+\.git$/);
      expect(pkg.repository?.directory, pkg.name).toMatch(/^(packages|tools)\/[a-z0-9-]+$/);
      expect(pkg.homepage, pkg.name).toMatch(/^https:\/\//);
      expect(pkg.bugs?.url, pkg.name).toMatch(/^https:\/\//);
      expect(pkg.license, pkg.name).toBe('MIT');
      expect(pkg.publishConfig?.access, pkg.name).toBe('public');
      expect(list, pkg.name).toContain('package/LICENSE');
      expect(list, pkg.name).toContain('package/README.md');
      if (!['@rddp/sctp', '@rddp/crc32c-isal', '@rddp/writev'].includes(pkg.name))
        expect(list, pkg.name).toContain('package/dist/index.js');
      if (pkg.name === '@rddp/llp') {
        // The plugin guide and its example ship with the contract (the README links them).
        expect(list).toContain('package/PLUGINS.md');
        expect(list).toContain('package/examples/duplex-llp.ts');
      }
    }
  });

  it('@rddp/llp-sctp brings @rddp/sctp with the loss-recovery fixes (RFC 4960 §6.3.1, §10.1 M)', (ctx) => {
    if (unreachable) ctx.skip(`npm registry unreachable (${unreachable}): pack-and-install not run`);
    const sctpPkg = JSON.parse(readFileSync(join(consumer, 'node_modules/@rddp/llp-sctp/package.json'), 'utf8'));
    expect(sctpPkg.dependencies['@rddp/sctp']).toMatch(/^\d/);
    const association = readFileSync(join(consumer, 'node_modules/@rddp/sctp/lib/association.js'), 'utf8');
    expect(association).toContain('SETPROTOCOLPARAMETERS');
    expect(readdirSync(join(consumer, 'node_modules')).includes('sctp')).toBe(false);
  });

  it('npm built the optional native bindings at install (a compiler and Node headers here; CI requires them)', (ctx) => {
    if (unreachable) ctx.skip(`npm registry unreachable (${unreachable}): pack-and-install not run`);
    const probe = `const w = require('@rddp/writev'); console.log(typeof w.writeRanges, w.RANGE_FIELDS)`;
    const r = spawnSync(process.execPath, ['-e', probe], { cwd: consumer, encoding: 'utf8', env });
    if (r.status !== 0 && process.env.RDDP_REQUIRE_WRITEV !== '1')
      ctx.skip(`@rddp/writev did not build here (no compiler?): ${r.stderr.split('\n')[0]}`);
    expect(r.stdout.trim()).toBe('function 5');
  });

  it.for([
    ['MPA/TCP', 'mpa'],
    ['SCTP', 'sctp'],
  ] as const)('RFC 5040 §5: RDMA Write + Read + Send over %s on 127.0.0.1, and the program ends by itself', (row, ctx) => {
    const transport = row[1];
    if (unreachable) ctx.skip(`npm registry unreachable (${unreachable}): pack-and-install not run`);
    writeFileSync(join(consumer, `main-${transport}.mjs`), program(transport));
    // run() fails on the timeout: a program that does not end by itself is a failure here.
    const { out } = run(process.execPath, [`main-${transport}.mjs`], consumer, 60_000);
    expect(JSON.parse(out.trim())).toEqual({ read: 'hello, remote memory', received: 'hello' });
  });

  it('npx rddp --help, --version and perf write_bw over the loopback LLP', (ctx) => {
    if (unreachable) ctx.skip(`npm registry unreachable (${unreachable}): pack-and-install not run`);
    expect(run('npx', ['--no-install', 'rddp', '--help'], consumer, 60_000).out).toContain('perf');
    // The rest through the bin link npx found (one npm start is enough to show npx finds it).
    const rddp = join(consumer, 'node_modules/.bin/rddp');
    const version = JSON.parse(readFileSync(join(root, 'tools/cli/package.json'), 'utf8')).version as string;
    expect(run(rddp, ['--version'], consumer, 60_000).out.trim()).toBe(version);
    // perftest's habits and the backends, from the installed CLI (issue 37).
    const gbits = run(
      rddp,
      ['perf', 'write_bw', '--loopback', '--transport', 'loopback', '-n', '100', '-d', 'rddp0', '-F', '--report_gbits'],
      consumer,
      120_000,
    );
    expect(gbits.out).toMatch(/#bytes\s+#iterations\s+BW peak\[Gb\/sec\]/);
    expect(gbits.out).toMatch(/BW average\[Gb\/sec\]/);
    expect(gbits.out).toContain('rddp0');
    expect(run(rddp, ['doctor'], consumer, 60_000).out).toMatch(/^crc32c:/m);
  });
});
