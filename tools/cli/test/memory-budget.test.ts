/**
 * `--memory-budget`: the one memory budget of an `rddp` process, played from outside. A persistent rping
 * server (`rddp rping -s -P`, its own process) runs with a 1 MiB budget, so one source may hold a quarter:
 * two MPA/TCP connections' first receive arenas (128 KiB each reserved, docs/SECURITY.md). Raw MPA
 * Initiators from 127.0.0.2 (RFC 5044 §7.1.2) take them and sit idle; the next one from there is reset at
 * once, while a raw Initiator from 127.0.0.3 and an honest `rddp rping -c` from 127.0.0.1 are served.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startedProcesses, stderrMatches } from './procs.js';

const { run } = startedProcesses();
const sockets: net.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
});

/** A raw MPA startup from `from`: 'reply' once the MPA Reply arrived, 'reset' if refused first. */
function startup(port: number, from: string): Promise<'reply' | 'reset'> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
    sockets.push(s);
    let got = Buffer.alloc(0);
    s.on('error', () => resolve('reset'));
    s.on('close', () => resolve('reset'));
    s.on('connect', () => {
      const req = Buffer.alloc(20);
      req.write('MPA ID Req Frame');
      req[16] = 0x40; // C (RFC 5044 §7.1.1)
      req[17] = 1; // Rev 1
      s.write(req);
    });
    s.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= 20 && got.subarray(0, 16).toString() === 'MPA ID Rep Frame') resolve('reply');
    });
  });
}

describe('rddp --memory-budget (one budget per process, a quarter per source)', () => {
  it('rping -s -P --memory-budget 1m: a source past its quarter is reset, other sources and an honest rping are served', async () => {
    const port = await freePort();
    const server = run(['rping', '-s', '-P', '-a', '127.0.0.1', '-p', String(port), '--memory-budget', '1m']);
    await stderrMatches(server.child, /listening on/);
    const a = [await startup(port, '127.0.0.2'), await startup(port, '127.0.0.2'), await startup(port, '127.0.0.2')];
    expect(a).toEqual(['reply', 'reply', 'reset']);
    expect(await startup(port, '127.0.0.3')).toBe('reply');
    const honest = await run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), '-C', '5', '-V']).done;
    expect(honest.err).toBe('');
    expect(honest.code).toBe(0);
    server.child.kill('SIGTERM');
  });

  it('perf --persistent --memory-budget 2m: a HELLO asking for more than the process budget is REFUSED naming it; a small one is served', async () => {
    const port = await freePort();
    const server = run(['perf', 'write_bw', '-p', String(port), '--persistent', '--memory-budget', '2m']);
    await stderrMatches(server.child, /listening/);
    // 4 MiB messages need more than the whole 2 MiB budget, well within --max-memory's 512 MiB: the
    // process budget is what refuses (perf is held to the process limit, not a source's quarter).
    const big = await run(['perf', 'write_bw', '127.0.0.1', '-p', String(port), '-s', '4194304', '-n', '20']).done;
    expect(big.code).not.toBe(0);
    expect(big.err).toMatch(/server refused: busy: .*over the process memory budget/);
    const small = await run(['perf', 'write_bw', '127.0.0.1', '-p', String(port), '-s', '4096', '-n', '200']).done;
    expect(small.err).toBe('');
    expect(small.code).toBe(0);
    server.child.kill('SIGTERM');
  });

  it('--ipv6-source-prefix and --idle-timeout out of range are usage errors (exit 2, one line)', async () => {
    for (const args of [
      ['demo', '--ipv6-source-prefix', '129'],
      ['perf', 'write_bw', '--ipv6-source-prefix', '1.5'],
      ['demo', '--idle-timeout', '-1'],
    ]) {
      const r = await run(args).done;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });

  it('a budget that is not a size is a usage error before anything runs', async () => {
    const r = await run(['rping', '-s', '--memory-budget', 'lots']).done;
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(/--memory-budget/);
  });
});
