/**
 * `rping -s` as a separate process against a raw TCP peer whose first FPDU is bad (RFC 5044 §8), then
 * FIN inside the receive-error grace: the server's Terminate cannot go out before a valid FPDU (§7.1.2), the
 * connection is torn down once, and the process exits — no socket handle is left to keep it spinning.
 */
import type { ChildProcess } from 'node:child_process';
import { FpduWriter } from '@rddp/llp-mpa-tcp';
import { describe, expect, it } from 'vitest';
import { rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { freePort, run } from './procs.js';

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

function badCrcFpdu(): Buffer {
  const parts: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([new Uint8Array(30).fill(0x11)], 30, parts);
  const b = Buffer.concat(parts.map((p) => Buffer.from(p)));
  b[b.byteLength - 1] ^= 0x5a;
  return b;
}

function oversizedFpdu(): Buffer {
  const b = Buffer.alloc(64);
  b.writeUInt16BE(64769, 0); // RFC 5044 §3: over 64768
  return b;
}

const cases: [string, () => Buffer][] = [
  ['a bad CRC (RFC 5044 §8 code 2)', badCrcFpdu],
  ['ULPDU_Length 64769 (RFC 5044 §3)', oversizedFpdu],
];

describe('rping -s: a framing error in the first FPDU, then the peer’s FIN', () => {
  for (const [name, frame] of cases)
    it(`${name}: the server process ends the connection and exits within seconds`, async () => {
      const port = await freePort();
      const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', String(port), '-d']);
      try {
        await waitForListening(server.child);
        const raw = await rawConnect(port);
        const req = Buffer.alloc(20);
        req.write('MPA ID Req Frame');
        req[16] = 0x40; // C
        req[17] = 1; // Rev 1
        raw.socket.write(req);
        await raw.waitFor(20);
        raw.socket.write(frame());
        raw.socket.end();
        const ended = await Promise.race([
          server.done,
          new Promise<'still running'>((r) => setTimeout(() => r('still running'), 8000)),
        ]);
        expect(ended).not.toBe('still running');
        const s = ended as Awaited<typeof server.done>;
        expect(s.code).toBe(1); // exited by itself, as a failure
        expect(s.err).not.toMatch(/^\s+at /m); // no stack trace
        expect(s.err.split('\n').filter((l) => l.startsWith('rddp: '))).toHaveLength(1); // one line says why
        // -d says what went on the wire: the Terminate RDMAP issued was held, never sent (RFC 5044 §7.1.2).
        expect(s.err).toMatch(/Terminate not sent \(.*RFC 5044 §7\.1\.2/);
        expect(s.err).not.toMatch(/Terminate sent/);
        // Only the 20-octet Reply reached the peer: the Responder sends no FPDU before a valid one (§7.1.2).
        const closed = await raw.closed;
        expect(closed.fin || closed.reset).toBe(true);
        expect(raw.received().byteLength).toBe(20);
      } finally {
        if (server.child.exitCode === null) server.child.kill('SIGKILL');
      }
    }, 30_000);
});
