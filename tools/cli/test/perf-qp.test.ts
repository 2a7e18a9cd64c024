import { once } from 'node:events';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort, run } from './procs.js';

/** Starts `rddp perf <args>` as a server on a free port; resolves once it says it listens. */
async function server(args: string[]): Promise<{ port: string; s: ReturnType<typeof run> }> {
  const port = String(await freePort());
  const s = run(['perf', ...args, '-p', port, '--bind_source_ip', '127.0.0.1']);
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    s.child.stderr?.on('data', (d) => {
      seen += d;
      if (seen.includes('listening')) resolve();
    });
    s.done.then((r) => reject(new Error(`server exited: ${r.err}`)));
  });
  return { port, s };
}

/** A table header's MPA lines (revision and Markers, CRC, send path, congestion) and its Transport line. */
function mpaHeader(out: string): string[] {
  return out.split('\n').filter((l) => /^ (MPA revision|CRC|Send path|Congestion)\s+:/.test(l));
}

interface QpsJson {
  verified: boolean;
  qps: number;
  row: { bytes: number; iterations: number };
  perQp: { qp: number; serverPid?: number; verified: boolean; row: { iterations: number } }[];
}

describe('rddp perf -q N: N queue pairs over N connections, two processes', () => {
  it('write_bw -q 4: aggregate of 4 × -n iterations, each QP verified, server prints every QP', async () => {
    const { port, s } = await server(['write_bw', '-q', '4']);
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-q', '4', '-n', '50', '-s', '8192', '--json'])
      .done;
    const sr = await s.done;
    expect(c.code).toBe(0);
    const j = JSON.parse(c.out.trim().split('\n').at(-1) as string) as QpsJson;
    expect(j.qps).toBe(4);
    expect(j.verified).toBe(true);
    expect(j.row.bytes).toBe(8192);
    expect(j.row.iterations).toBe(200);
    expect(j.perQp.map((q) => q.qp)).toEqual([0, 1, 2, 3]);
    expect(j.perQp.every((q) => q.verified && q.row.iterations === 50)).toBe(true);
    // One server process served all four: READY carries its pid.
    expect(new Set(j.perQp.map((q) => q.serverPid))).toEqual(new Set([s.child.pid]));
    expect(sr.code).toBe(0);
    // The server's header names the QPs as the client's does.
    expect(sr.out).toMatch(/Transport: tcp, 4 QPs/);
    expect(sr.out).toMatch(/\n 8192\s+200\s+.*\(aggregate of 4 QPs\)/);
    expect(sr.out.match(/QP \d, server pid \d+/g)).toHaveLength(4);
  }, 60_000);

  it('send_lat -q 3 --warm-up 20: each QP reports -n measured round trips, table shows per-QP rows', async () => {
    const { port, s } = await server(['send_lat', '-q', '3']);
    const c = await run([
      'perf',
      'send_lat',
      '127.0.0.1',
      '-p',
      port,
      '-q',
      '3',
      '-n',
      '40',
      '-s',
      '64',
      '--warm-up',
      '20',
    ]).done;
    await s.done;
    expect(c.code).toBe(0);
    expect(c.out).toMatch(/Transport: tcp, 3 QPs/);
    expect(c.out).toMatch(/\n 64\s+40\s+.*\(aggregate of 3 QPs\)/);
    expect(c.out.match(/\n 64\s+40\s+.*QP \d, server pid \d+/g)).toHaveLength(3);
  }, 60_000);

  it('a QP the server refuses (over --max-memory) ends every QP of the run: no QP waits at the start forever', async () => {
    // write_bw of 4096 octets needs 4096 + 4 control buffers of 64 KiB on the server: one QP fits, two do not.
    const { port, s } = await server(['write_bw', '-q', '2', '--max-memory', '300000']);
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-q', '2', '-n', '20', '-s', '4096']).done;
    const sr = await s.done;
    expect(c.code).not.toBe(0);
    expect(c.err).toMatch(/busy/);
    expect(sr.code).toBe(1);
    expect(sr.err).toMatch(/connections failed/);
  }, 60_000);

  it('a peer that is not an MPA responder: the client aborts the connections it opened and exits, no hang', async () => {
    const held: net.Socket[] = [];
    const srv = net.createServer((sock) => {
      held.push(sock);
      sock.on('data', () => sock.end('HTTP/1.0 400 Bad Request\r\n\r\n'));
    });
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    const port = String((srv.address() as net.AddressInfo).port);
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-q', '8', '-n', '10']).done;
    expect(c.code).toBe(1);
    expect(c.err).toMatch(/expected an MPA Reply .*RFC 5044 §7\.1\.1/);
    for (const h of held) h.destroy();
    srv.close();
  }, 60_000);

  it('-q, --workers and --warm-up out of range are usage errors (exit 2)', async () => {
    for (const [args, said] of [
      [
        ['perf', 'write_bw', '127.0.0.1', '-q', '0'],
        /'-q, --qps <n>' argument '0' is invalid\. must be an integer in 1\.\.1024/,
      ],
      [['perf', 'write_bw', '127.0.0.1', '-q', '1025'], /argument '1025' is invalid\. must be an integer in 1\.\.1024/],
      [['perf', 'write_bw', '--workers', '0'], /--workers must be 'auto' or an integer in 1\.\.256 \(got 0\)/],
      [['perf', 'write_bw', '--workers', 'many'], /--workers must be 'auto' or an integer in 1\.\.256 \(got many\)/],
      [['perf', 'write_bw', '--workers', '2', '--transport', 'sctp'], /--workers serves MPA\/TCP connections/],
      [['perf', 'write_bw', '127.0.0.1', '--workers', '2'], /--workers applies to the server/],
      [['perf', 'send_lat', '127.0.0.1', '--warm-up', '-1'], /'--warm-up <n>' argument '-1' is invalid/],
    ] as const) {
      const r = await run([...args]).done;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toMatch(said);
    }
  }, 60_000);
});

describe('rddp perf --workers N: N server processes behind one port', () => {
  it('-q 4 against --workers 2: both workers serve connections (two distinct pids, neither the primary)', async () => {
    const { port, s } = await server(['write_bw', '-q', '4', '--workers', '2']);
    const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-q', '4', '-n', '40', '-s', '4096', '--json'])
      .done;
    const sr = await s.done;
    expect(c.code).toBe(0);
    const j = JSON.parse(c.out.trim().split('\n').at(-1) as string) as QpsJson;
    expect(j.verified).toBe(true);
    expect(j.row.iterations).toBe(160);
    const pids = new Set(j.perQp.map((q) => q.serverPid));
    expect(pids.size).toBe(2);
    expect(pids.has(s.child.pid)).toBe(false);
    expect(sr.code).toBe(0);
    expect(sr.err).toMatch(/listening on 127\.0\.0\.1:\d+ \(tcp, 2 workers\)/);
    // The primary's table names the worker that served each QP.
    const served = new Set([...sr.out.matchAll(/server pid (\d+)/g)].map((m) => Number(m[1])));
    expect(served).toEqual(pids);
    // The primary's header has the MPA lines its workers' connections ran, as a two-process client's has.
    expect(mpaHeader(sr.out)).toHaveLength(4);
    expect(sr.out).toMatch(/MPA revision\s+: 1\s+Markers: not sent, not received/);
  }, 60_000);

  it('--workers 2 --persistent serves clients one after another until SIGTERM, then exits 0', async () => {
    const { port, s } = await server(['write_bw', '--workers', '2', '--persistent']);
    const clients: string[] = [];
    for (let i = 0; i < 2; i++) {
      const c = await run(['perf', 'write_bw', '127.0.0.1', '-p', port, '-n', '20', '-s', '4096']).done;
      expect(c.code).toBe(0);
      clients.push(c.out);
    }
    s.child.kill('SIGTERM');
    const sr = await s.done;
    expect(sr.code).toBe(0);
    expect(sr.err.match(/worker \d+ served a client/g)).toHaveLength(2);
    // Each client's header, as its worker's connection gives it, printed by the primary (issue 37).
    const mine = mpaHeader(clients.join(''));
    expect(mine).toHaveLength(8);
    expect(mpaHeader(sr.out)).toEqual(mine);
  }, 60_000);
});
