/**
 * @rddp/sctp without the npm `ip` package (advisory GHSA-2p57-rm9w-gvfp) and with `raw-socket` optional:
 * - lib/ip.js turns the addresses SCTP carries (RFC 4960 §3.3.2.1 IPv4/IPv6 Address parameters, the
 *   HEARTBEAT's sender-specific information, the raw IPv4 header) into octets and back;
 * - raw IP encapsulation without `raw-socket` fails with RawSocketUnavailableError
 *   (ERR_SCTP_RAW_SOCKET_UNAVAILABLE) as the server's 'error', naming how to get it, and UDP
 *   encapsulation never loads it.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const ip = require('@rddp/sctp/lib/ip') as {
  isV4Format(a: string): boolean;
  toBuffer(a: string, b?: Buffer, offset?: number): Buffer;
  toString(b: Buffer, offset?: number, length?: number): string;
};
const pkgDir = new URL('..', import.meta.url);

describe('lib/ip.js (in place of the npm ip package)', () => {
  it('IPv4: dotted decimal to 4 octets and back, into a buffer at an offset', () => {
    expect(ip.toBuffer('192.0.2.1').toString('hex')).toBe('c0000201');
    const info = Buffer.alloc(12, 7); // a HEARTBEAT's nonce and address (association.js)
    ip.toBuffer('10.1.2.3', info, 8);
    expect(info.toString('hex')).toBe('07070707070707070a010203');
    expect(ip.toString(info, 8, 4)).toBe('10.1.2.3');
    expect(ip.toString(Buffer.from([127, 0, 0, 1]))).toBe('127.0.0.1');
  });

  it('IPv6: RFC 4291 §2.2 text forms to 16 octets, RFC 5952 text back', () => {
    const cases: [string, string, string][] = [
      ['::1', '00000000000000000000000000000001', '::1'],
      ['::', '00000000000000000000000000000000', '::'],
      ['2001:DB8::8:800:200C:417A', '20010db80000000000080800200c417a', '2001:db8::8:800:200c:417a'],
      ['::ffff:192.0.2.1', '00000000000000000000ffffc0000201', '::ffff:c000:201'],
      ['1:2:3:4:5:6:1.2.3.4', '00010002000300040005000601020304', '1:2:3:4:5:6:102:304'],
      ['1:0:0:2:0:0:0:3', '00010000000000020000000000000003', '1:0:0:2::3'], // RFC 5952 §4.2.3: the longest run
      ['1:0:0:2:0:0:3:4', '00010000000000020000000000030004', '1::2:0:0:3:4'], // §4.2.3: the first of equals
      ['1:2:3:4:5:6:0:8', '00010002000300040005000600000008', '1:2:3:4:5:6:0:8'], // §4.2.2: one 0 stays
      ['fe80::1%eth0', 'fe800000000000000000000000000001', 'fe80::1'], // the zone index is not on the wire
    ];
    for (const [text, hex, back] of cases) {
      const b = ip.toBuffer(text);
      expect(b.toString('hex'), text).toBe(hex);
      expect(ip.toString(b), text).toBe(back);
    }
  });

  it('refuses what is not an address (the npm package made octets of 256.1.1.1)', () => {
    for (const bad of ['256.1.1.1', '1.2.3', 'localhost', '', '1:2:3:4:5:6:7:8:9']) {
      expect(() => ip.toBuffer(bad), bad).toThrow(/Invalid IP address/);
    }
    expect(ip.isV4Format('192.0.2.1')).toBe(true);
    expect(ip.isV4Format('::1')).toBe(false);
    expect(ip.isV4Format('999.0.0.1')).toBe(false);
  });

  it('package.json: no ip dependency, raw-socket an optional peer (not installed, not compiled, unless asked for)', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', pkgDir), 'utf8'));
    expect(pkg.dependencies.ip).toBeUndefined();
    expect(pkg.dependencies['raw-socket']).toBeUndefined();
    expect(pkg.optionalDependencies?.['raw-socket']).toBeUndefined();
    expect(pkg.peerDependencies['raw-socket']).toBeDefined();
    expect(pkg.peerDependenciesMeta['raw-socket']).toEqual({ optional: true });
  });
});

/** Runs a CommonJS program in a child in which `raw-socket` cannot be resolved (as when it is not installed). */
function withoutRawSocket(program: string) {
  const hide = `
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'raw-socket') throw Object.assign(new Error("Cannot find module 'raw-socket'"), { code: 'MODULE_NOT_FOUND' });
  return resolve.call(this, request, ...rest);
};
const sctp = require(${JSON.stringify(new URL('lib/index.js', pkgDir).pathname)});
`;
  return spawnSync(process.execPath, ['-e', hide + program], { encoding: 'utf8', timeout: 15_000 });
}

describe('raw-socket is optional', () => {
  it('raw IP encapsulation without it: the server emits RawSocketUnavailableError saying how to get it', () => {
    const r = withoutRawSocket(`
const server = sctp.createServer();
server.on('error', (e) => console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message, cause: e.cause?.code, typed: e instanceof sctp.RawSocketUnavailableError })));
server.listen({ port: 5000 });
`);
    expect(r.status, r.stderr).toBe(0);
    const e = JSON.parse(r.stdout.trim());
    expect(e).toMatchObject({
      name: 'RawSocketUnavailableError',
      code: 'ERR_SCTP_RAW_SOCKET_UNAVAILABLE',
      cause: 'MODULE_NOT_FOUND',
      typed: true,
    });
    expect(e.message).toMatch(/optional 'raw-socket' package/);
    expect(e.message).toMatch(/npm install raw-socket/);
    expect(e.message).toMatch(/udpTransport/);
  });

  it('UDP encapsulation works without it (and never loads it)', () => {
    const r = withoutRawSocket(`
const dgram = require('node:dgram');
const a = dgram.createSocket('udp4');
const b = dgram.createSocket('udp4');
a.bind(0, '127.0.0.1', () => b.bind(0, '127.0.0.1', () => {
  const peer = (s) => ({ address: '127.0.0.1', port: s.address().port });
  const server = sctp.connect({ passive: true, localPort: 5002, port: 5001, udpTransport: b, udpPeer: peer(a) });
  server.on('data', (d) => { console.log(String(d)); server.end(); });
  server.on('end', () => b.close());
  const client = sctp.connect({ localPort: 5001, port: 5002, udpTransport: a, udpPeer: peer(b) });
  client.on('connect', () => client.write(Buffer.from('over UDP')));
  client.on('end', () => a.close());
}));
`);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('over UDP');
  });
});
