/**
 * openTun attaches to a persistent TUN device in another network namespace from this process, which stays
 * in its own; watchTun reads what the kernel routes out of the device. Checked with a UDP echo in that
 * namespace: a packet written to the descriptor arrives at its socket, and the answer comes back out.
 * Needs Linux, root and the native build; skipped otherwise (visibly), unless RDDP_REQUIRE_WRITEV=1 (CI),
 * which makes an absent build fail.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

type Binding = typeof import('../index.cjs');
const binding: Binding | undefined = (() => {
  try {
    return createRequire(import.meta.url)('../index.cjs');
  } catch {
    return undefined;
  }
})();
const required = process.env.RDDP_REQUIRE_WRITEV === '1';
const root = process.platform === 'linux' && process.getuid?.() === 0;
if (!binding && !required) console.warn('@rddp/writev not built here: its TUN tests are skipped');
else if (!root) console.warn('@rddp/writev TUN tests need Linux and root (network namespaces): skipped');
const runs = (binding !== undefined || required) && root;

const NS = `rddp-tuntest-${process.pid}-w`;
const DEV = 'rtw0';
const LOCAL = '10.97.0.1';
const PEER = '10.97.0.2';
const sh = (...args: string[]) => execFileSync(args[0] as string, args.slice(1), { stdio: 'pipe' }).toString();
const selfNs = () => fs.readlinkSync('/proc/thread-self/ns/net');

/** An IPv4 UDP packet (UDP checksum 0: none, which IPv4 allows). */
function udpPacket(src: string, dst: string, sport: number, dport: number, payload: Buffer): Buffer {
  const p = Buffer.alloc(28 + payload.length);
  p.writeUInt8(0x45, 0);
  p.writeUInt16BE(p.length, 2);
  p.writeUInt8(64, 8);
  p.writeUInt8(17, 9);
  Buffer.from(src.split('.').map(Number)).copy(p, 12);
  Buffer.from(dst.split('.').map(Number)).copy(p, 16);
  let sum = 0;
  for (let i = 0; i < 20; i += 2) sum += p.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  p.writeUInt16BE(~sum & 0xffff, 10);
  p.writeUInt16BE(sport, 20);
  p.writeUInt16BE(dport, 22);
  p.writeUInt16BE(8 + payload.length, 24);
  payload.copy(p, 28);
  return p;
}

describe.runIf(runs)('openTun / watchTun', () => {
  const t = binding as Binding;
  beforeAll(() => {
    sh('ip', 'netns', 'add', NS);
    sh('ip', '-n', NS, 'tuntap', 'add', 'dev', DEV, 'mode', 'tun');
    sh('ip', '-n', NS, 'addr', 'add', LOCAL, 'peer', PEER, 'dev', DEV);
    sh('ip', '-n', NS, 'link', 'set', DEV, 'up');
  });
  afterAll(() => {
    try {
      sh('ip', 'netns', 'del', NS);
    } catch {
      // not made
    }
  });

  it('attaches to the device in the namespace, leaves this thread in its own, carries packets both ways', async () => {
    const before = selfNs();
    const fd = t.openTun(DEV, `/run/netns/${NS}`);
    expect(selfNs()).toBe(before);
    let echo: ChildProcess | undefined;
    let stop: (() => void) | undefined;
    try {
      expect(fd).toBeGreaterThan(2);
      // Blocking as opened (O_NONBLOCK is 0o4000 in the descriptor's flags).
      const flags = fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
      expect(Number.parseInt(/flags:\s*(\d+)/.exec(flags)?.[1] ?? '', 8) & 0o4000).toBe(0);
      echo = spawn(
        'ip',
        ['netns', 'exec', NS, process.execPath, '-e'].concat(
          `const s = require('node:dgram').createSocket('udp4');
           s.on('message', (m, r) => { console.log('GOT ' + m); s.send(Buffer.concat([Buffer.from('re: '), m]), r.port, r.address); });
           s.bind(7000, '${LOCAL}', () => console.log('BOUND'));`,
        ),
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      echo.stdout?.on('data', (d: Buffer) => (out += d));
      while (!out.includes('BOUND')) await once(echo.stdout as NodeJS.ReadableStream, 'data');
      const packets: Buffer[] = [];
      const reply = new Promise<Buffer>((resolve, reject) => {
        stop = t.watchTun(
          fd,
          (p) => {
            packets.push(p);
            // IPv4 UDP from LOCAL:7000 (IPv6 router solicitations may come out of the device too).
            if (p[0] === 0x45 && p[9] === 17 && p.readUInt16BE(20) === 7000) resolve(p);
          },
          reject,
        );
      });
      fs.writeSync(fd, udpPacket(PEER, LOCAL, 5555, 7000, Buffer.from('ping')));
      const p = await reply;
      // The echo's own line may come after its answer.
      while (!out.includes('GOT ping')) await once(echo.stdout as NodeJS.ReadableStream, 'data');
      expect(p.subarray(12, 16)).toEqual(Buffer.from(LOCAL.split('.').map(Number)));
      expect(p.subarray(16, 20)).toEqual(Buffer.from(PEER.split('.').map(Number)));
      expect(p.readUInt16BE(22)).toBe(5555);
      expect(p.subarray(28).toString()).toBe('re: ping');
      expect(selfNs()).toBe(before);
    } finally {
      stop?.();
      stop?.(); // idempotent
      fs.closeSync(fd);
      echo?.kill();
    }
  });

  it('without netnsPath looks in this thread’s namespace; a missing device is ENODEV, never a new device', () => {
    const before = selfNs();
    expect(() => t.openTun(DEV)).toThrow(expect.objectContaining({ code: 'ENODEV' }));
    expect(() => t.openTun('rtw-none', `/run/netns/${NS}`)).toThrow(
      expect.objectContaining({ code: 'ENODEV', message: expect.stringContaining('rtw-none') }),
    );
    expect(sh('ip', '-n', NS, '-o', 'link', 'show')).not.toContain('rtw-none');
    expect(selfNs()).toBe(before);
  });

  it('a bad namespace path: ENOENT when missing, EINVAL when not a network namespace; this thread stays', () => {
    const before = selfNs();
    expect(() => t.openTun(DEV, `/run/netns/${NS}-missing`)).toThrow(
      expect.objectContaining({ code: 'ENOENT', message: expect.stringContaining(`${NS}-missing`) }),
    );
    expect(() => t.openTun(DEV, '/proc/self/ns/uts')).toThrow(expect.objectContaining({ code: 'EINVAL' }));
    expect(selfNs()).toBe(before);
  });

  it('malformed arguments are a TypeError or RangeError', () => {
    const open = t.openTun as (...a: unknown[]) => number;
    expect(() => open()).toThrow(TypeError);
    expect(() => open(7)).toThrow(TypeError);
    expect(() => open('')).toThrow(RangeError);
    expect(() => open('0123456789abcdef')).toThrow(RangeError); // 16 octets
    expect(() => open('a/b')).toThrow(RangeError);
    expect(() => open(DEV, 5)).toThrow(TypeError);
    expect(() => open(DEV, '')).toThrow(RangeError);
    const watch = t.watchTun as (...a: unknown[]) => () => void;
    expect(() =>
      watch(
        -1,
        () => {},
        () => {},
      ),
    ).toThrow(TypeError);
    expect(() => watch(0, 'x', () => {})).toThrow(TypeError);
    expect(() => watch(0, () => {})).toThrow(TypeError);
  });
});

describe.runIf(!runs && required && !binding)('@rddp/writev (required)', () => {
  it('is built', () => {
    expect(binding).toBeDefined();
  });
});
