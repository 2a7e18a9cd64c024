/**
 * `rddp conformance --listen` as a separate process against a crowd of clients that each send 63 MiB:
 * at most 16 wait for a case, unread; the rest are refused with one note line (and one line with the
 * count when the kit ends); the kit's peak RSS stays far below the octets thrown at it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RDDP } from './procs.js';

const dir = mkdtempSync(join(tmpdir(), 'rddp-conformance-listen-'));
const sockets: net.Socket[] = [];
afterAll(() => {
  for (const s of sockets) s.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe('rddp conformance --listen against 24 clients of 63 MiB each', () => {
  it('16 wait unread, 7 are refused with one note, the kit stays small', async () => {
    const preload = join(dir, 'max-rss.cjs');
    const rssFile = join(dir, 'rss');
    writeFileSync(
      preload,
      `if (/main\\.js$/.test(process.argv[1] ?? ''))
  process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(rssFile)}, String(process.resourceUsage().maxRSS)));\n`,
    );
    // One case, waiting 4 s for the first client's MPA Request (that client stays silent).
    const kit = spawn(RDDP, ['conformance', '--listen', '0', '--only', 'mpa.startup', '--wait', '4000'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${preload}` },
    });
    let err = '';
    kit.stderr?.on('data', (d) => (err += d));
    kit.stdout?.resume();
    const exited = once(kit, 'exit');
    const t0 = Date.now();
    while (!/listening on port (\d+)/.test(err)) {
      if (Date.now() - t0 > 120_000) throw new Error(`the kit did not listen: ${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const port = Number(/listening on port (\d+)/.exec(err)?.[1]);
    const connect = () => {
      const s = net.connect(port, '127.0.0.1');
      sockets.push(s);
      s.on('error', () => {});
      return s;
    };
    const silent = connect();
    await once(silent, 'connect');
    await new Promise((r) => setTimeout(r, 200));
    const chunk = Buffer.alloc(1 << 20, 0x41);
    const closedEarly: boolean[] = [];
    for (let i = 0; i < 23; i++) {
      const s = connect();
      const k = closedEarly.push(false) - 1;
      s.on('close', () => (closedEarly[k] = true));
      let sent = 0;
      const pump = () => {
        while (sent < 63 && !s.destroyed) {
          sent++;
          if (!s.write(chunk)) {
            s.once('drain', pump);
            return;
          }
        }
      };
      s.once('connect', pump);
    }
    await new Promise((r) => setTimeout(r, 2000));
    // The refused are closed while the case still runs.
    expect(closedEarly.filter(Boolean)).toHaveLength(23 - 16);
    const [code] = await exited;
    expect(code).toBe(1); // the silent client's case FAILs
    const refusals = err.split('\n').filter((l) => l.includes('refused'));
    expect(refusals).toEqual([
      expect.stringMatching(
        /^rddp conformance: a client from 127\.0\.0\.1:\d+ refused: 16 clients already wait for a case \(MAX_QUEUED_CLIENTS\)$/,
      ),
      'rddp conformance: 7 clients refused in all (more than 16 waiting)',
    ]);
    // 23 × 63 MiB thrown at it; kept: none of the waiting clients' octets (the old kit held them twice).
    const maxRssKiB = Number(readFileSync(rssFile, 'utf8'));
    expect(maxRssKiB).toBeLessThan(300 << 10);
  }, 180_000);
});
