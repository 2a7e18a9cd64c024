/**
 * `raw-socket` is optional: without it, raw IPv4 encapsulation (SCTP as IP protocol 132) fails at
 * listen/connect with RawSocketUnavailableError (ERR_LLP_CAPABILITY) naming the package and how to get
 * it, and the default UDP encapsulation works and never loads it. Run in a child process (the built
 * `dist`) in which `raw-socket` cannot be resolved, as when it is not installed.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const dist = new URL('../dist/index.js', import.meta.url).href;

function withoutRawSocket(body: string) {
  const source = `
import Module from 'node:module';
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'raw-socket') throw Object.assign(new Error("Cannot find module 'raw-socket'"), { code: 'MODULE_NOT_FOUND' });
  return resolve.call(this, request, ...rest);
};
const { sctp, RawSocketUnavailableError } = await import(${JSON.stringify(dist)});
${body}
`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    cwd: root,
    encoding: 'utf8',
    timeout: 20_000,
  });
}

beforeAll(() => {
  const built = spawnSync(
    process.execPath,
    [fileURLToPath(new URL('node_modules/typescript/bin/tsc', `file://${root}/`)), '-b', 'packages/llp-sctp'],
    { cwd: root, encoding: 'utf8' },
  );
  if (built.status !== 0) throw new Error(`tsc -b failed:\n${built.stdout}${built.stderr}`);
}, 120_000);

describe('raw-socket is an optional dependency', () => {
  it('raw encapsulation without it: listen and connect fail with RawSocketUnavailableError saying how to get it', () => {
    const r = withoutRawSocket(`
const t = sctp({ encapsulation: 'raw' });
const out = [];
for (const attempt of [() => t.listen({ host: '127.0.0.1', port: 0 }), () => t.connect({ host: '127.0.0.1', port: 9 })]) {
  try { await attempt(); out.push('no error'); }
  catch (e) { out.push({ typed: e instanceof RawSocketUnavailableError, code: e.code, message: e.message, cause: e.cause?.code }); }
}
console.log(JSON.stringify(out));
`);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim()) as { typed: boolean; code: string; message: string; cause: string }[];
    expect(out).toHaveLength(2);
    for (const e of out) {
      expect(e).toMatchObject({ typed: true, code: 'ERR_LLP_CAPABILITY', cause: 'MODULE_NOT_FOUND' });
      expect(e.message).toMatch(/optional 'raw-socket' package/);
      expect(e.message).toMatch(/npm install raw-socket/);
      expect(e.message).toMatch(/UDP encapsulation/);
    }
  });

  it('UDP encapsulation (the default) works without it', () => {
    const r = withoutRawSocket(`
const t = sctp();
const listener = await t.listen({ host: '127.0.0.1', port: 0 });
const accepted = new Promise((resolve) => listener.connections$.subscribe(resolve));
const conn = await t.connect(listener.address);
const peer = await accepted;
const got = new Promise((resolve) => peer.streams[0].setReceiver((u) => resolve(Buffer.concat(u.chunks).toString())));
conn.streams[0].send([new TextEncoder().encode('over UDP')]);
console.log(await got);
await conn.close();
await listener.close();
`);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('over UDP');
  });
});
