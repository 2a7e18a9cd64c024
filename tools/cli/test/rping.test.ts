import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { decodeInfo, encodeInfo, fillPing } from '../src/rping/protocol.js';
import { freePort, run } from './procs.js';
import { rpingInfo, rpingPing } from './rping-wire.js';

async function waitForListening(server: ChildProcess): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    server.stderr?.on('data', (d) => {
      seen += d;
      if (seen.includes('listening on')) resolve();
    });
    server.once('exit', (c) => reject(new Error(`server exited ${c}: ${seen}`)));
  });
}

describe("rping's application protocol (librdmacm examples/rping.c)", () => {
  it('the buffer advertisement is struct rping_rdma_info: be64 buf, be32 rkey, be32 size', () => {
    const b = encodeInfo({ addr: 0x7f00_1234_5000n, rkey: 0x0000_0102, size: 4096 });
    expect(Buffer.from(b).toString('hex')).toBe('00007f0012345000' + '00000102' + '00001000');
    expect(decodeInfo(b)).toEqual({ addr: 0x7f00_1234_5000n, rkey: 0x102, size: 4096 });
  });

  it('the ping text: "rdma-ping-N: " then characters from start, wrapping z → A, NUL last', () => {
    const b = new Uint8Array(80);
    const next = fillPing(b, 7, 120);
    const text = Buffer.from(b.subarray(0, 79)).toString('latin1');
    expect(text.startsWith('rdma-ping-7: xyzABC')).toBe(true);
    expect(b[79]).toBe(0);
    expect(next).toBe(121);
    expect(fillPing(new Uint8Array(30), 0, 122)).toBe(65);
  });

  it("the tests' hand-written messages (rping-wire.ts, what raw peers send) are the same octets", () => {
    for (const [addr, rkey, size] of [
      [0x7f00_1234_5000n, 0x102, 4096],
      [0n, 0, 0],
      [(1n << 64n) - 1n, 0xffff_ffff, 0x7fff_ffff],
    ] as const)
      expect(Buffer.from(rpingInfo(addr, rkey, size))).toEqual(Buffer.from(encodeInfo({ addr, rkey, size })));
    for (const size of [1, 13, 64, 200]) {
      const b = new Uint8Array(size);
      fillPing(b, 3, 65);
      expect(rpingPing(3, size)).toEqual(b);
    }
  });
});

const modes: [string, string[]][] = [
  ['MPA rev 1, CRC', []],
  ['MPA rev 1, no CRC', ['--no-crc']],
  ['MPA rev 1, markers both directions', ['--markers']],
  ['MPA rev 2 (RFC 6581)', ['--mpa-rev', '2']],
  ['MPA rev 2, peer-to-peer, Write RTR', ['--mpa-rev', '2', '--p2p', 'write']],
  ['MPA rev 2, peer-to-peer, Read RTR', ['--mpa-rev', '2', '--p2p', 'read']],
  ['MPA rev 2, peer-to-peer, Send RTR', ['--mpa-rev', '2', '--p2p', 'send']],
  ['MPA rev 0, RDMA Consortium profile (DDP/RDMAP version 0)', ['--mpa-rev', '0']],
  ['SCTP (RFC 5043, UDP encapsulation)', ['--transport', 'sctp']],
];

describe('tools/rddp rping between two processes', () => {
  for (const [name, flags] of modes) {
    it(`${name}: -c -C 100 -S 4096 -V succeeds and the server ends with the client`, async () => {
      const port = String(await freePort());
      const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', port, '-d', ...flags]);
      await waitForListening(server.child);
      const client = run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-C', '100', '-S', '4096', '-V', ...flags]);
      const c = await client.done;
      const s = await server.done;
      expect(c.err).toBe('');
      expect(c.code).toBe(0);
      expect(s.code).toBe(0);
      expect(s.err).toContain('served 100 pings');
    }, 60_000);
  }

  it('-v prints the ping data on both ends', async () => {
    const port = String(await freePort());
    const server = run(['rping', '-s', '-p', port, '-v', '-d']);
    await waitForListening(server.child);
    const c = await run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-C', '2', '-v']).done;
    const s = await server.done;
    expect(c.out).toBe(
      'ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\n' +
        'ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs\n',
    );
    expect(s.out).toContain('server ping data: rdma-ping-1: BCDEF');
  }, 60_000);

  it('bad flags exit 2 with a clear message; a refused connection exits 1 without a stack trace', async () => {
    const bad = await run(['rping', '-c', '--mpa-rev', '3']).done;
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--mpa-rev must be 0, 1 or 2');
    const both = await run(['rping', '-c', '-s']).done;
    expect(both.code).toBe(2);
    const port = String(await freePort());
    const refused = await run(['rping', '-c', '-a', '127.0.0.1', '-p', port, '-C', '1']).done;
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/^rddp: /);
    expect(refused.err).not.toContain('    at ');
  }, 60_000);
});
