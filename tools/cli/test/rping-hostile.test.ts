/**
 * `rddp rping -s` against a raw peer whose buffer advertisement is not rping's 16-octet struct
 * rping_rdma_info (rping.c's server_recv(): "Received bogus data, size N"): the server answers with a
 * Terminate (RFC 5040 §6.2.1), closes the connection, and exits non-zero with one line.
 */
import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freePort, run } from './procs.js';
import { closedWithin, rawMpaPeer, sendFpdu, ulpdus } from './raw-rdmap.js';
import { rpingInfo } from './rping-wire.js';

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

/** Runs `rping -s`, sends it one advertisement from a raw peer; what came back, how the server ended. */
async function advertise(adv: Uint8Array) {
  const port = String(await freePort());
  const server = run(['rping', '-s', '-a', '127.0.0.1', '-p', port, '-d']);
  await waitForListening(server.child);
  const raw = await rawMpaPeer(Number(port));
  raw.socket.write(sendFpdu(1, adv));
  let closed: { reset: boolean; fin: boolean };
  try {
    closed = await closedWithin(raw, 10_000);
  } finally {
    raw.socket.destroy();
    // The old behaviour leaves the server running; end it so the test reports instead of hanging.
    const kill = setTimeout(() => server.child.kill(), 5000);
    server.done.finally(() => clearTimeout(kill));
  }
  const s = await server.done;
  // `-d` lines are rping's protocol events; what is left is the error line.
  const errors = s.err.split('\n').filter((l) => l !== '' && !l.startsWith('rping: '));
  return { frames: ulpdus(raw.received()), closed, code: s.code, errors, debug: s.err };
}

describe('rping -s: a bad buffer advertisement gets a Terminate, the close, and a non-zero exit', () => {
  for (const n of [4, 0]) {
    it(`a ${n}-octet advertisement: "Received bogus data, size ${n}", RFC 5040 §6.2.1 Terminate, exit 1`, async () => {
      const r = await advertise(new Uint8Array(n).fill(0x41));
      const term = r.frames.find((f) => f.opcode === 0x7);
      expect(term, `no Terminate among ${r.frames.length} FPDUs`).toBeDefined();
      // Terminate Control (RFC 5040 §4.8): Layer RDMA (0), the ULP's abortive termination.
      expect((term?.payload[0] as number) >> 4).toBe(0);
      expect(r.frames.filter((f) => f.opcode !== 0x7)).toHaveLength(0); // nothing read, nothing written
      expect(r.closed).toEqual({ reset: false, fin: true }); // §6.2.1: a graceful LLP teardown after it
      expect(r.code).toBe(1);
      expect(r.errors).toEqual([`rddp: Received bogus data, size ${n} (ERR_RPING_BOGUS_DATA)`]);
      expect(r.debug).toContain('Terminate sent');
    }, 30_000);
  }

  it('an advertisement of 2 GiB - 1 octets (over the 64 MiB this server follows): Terminate, exit 1', async () => {
    const r = await advertise(rpingInfo(0x7f00_0000_0000n, 0x100, 0x7fff_ffff));
    expect(r.frames.some((f) => f.opcode === 0x7)).toBe(true);
    expect(r.frames.some((f) => f.opcode === 0x1)).toBe(false); // no RDMA Read Request for it
    expect(r.code).toBe(1);
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/^rddp: client advertised 2147483647 octets, over this server's 67108864/);
  }, 30_000);
});
