/**
 * `rddp rping -s` against peers that try to hold it (issue 34): clients that advertise 64 MiB and never
 * answer the RDMA Read, idle connections, a client that stops mid-ping. Each step a client must take is
 * bounded by --step-timeout (past it: a Terminate, the close, the budget and the place given back); one
 * source (an IPv4 address) may hold a quarter of --max-clients and of --max-memory by default; the ping
 * buffers are also reserved from the process's memory budget (RDDP_MEMORY_BUDGET). The hostile peers are
 * raw sockets bound to 127.0.0.x; the honest clients are `tools/rddp rping -c` processes, through a TCP
 * relay bound to 127.0.0.2 when they must come from another source than 127.0.0.1.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { Access } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { type RawPeer, wrap } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { toolTransport } from '../src/index.js';
import { endsWithin, freePort, RDDP, startedProcesses } from './procs.js';
import { closedWithin, sendFpdu, ulpdus } from './raw-rdmap.js';
import { rpingInfo, rpingPing } from './rping-wire.js';

const MiB = 1024 * 1024;

/** Every socket and relay a test opens; whatever is still open after the test is ended. */
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanups.splice(0)) f();
});
const { run, track } = startedProcesses(); // registered last, its afterEach runs first: processes, then sockets

/** `tools/rddp rping …` as a server: its stderr so far, and a wait for a pattern in it. */
async function server(args: string[], env: Record<string, string> = {}) {
  const child = spawn(RDDP, ['rping', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  track(child);
  let err = '';
  child.stderr?.on('data', (d) => (err += d));
  const done = once(child, 'exit').then(([code]) => code as number | null);
  const waitErr = async (re: RegExp, ms = 30_000): Promise<string> => {
    await until(() => re.test(err) || child.exitCode !== null, ms, `${re} on the server's stderr`);
    if (!re.test(err)) throw new Error(`server exited ${child.exitCode} before ${re}: ${err}`);
    return err;
  };
  await waitErr(/listening on/);
  /** The server's -P lines about clients (`rping: <host>:<port>: …`). */
  const clientLines = () => err.split('\n').filter((l) => /^rping: 127\.0\.0\.\d+:\d+: /.test(l));
  return { child, done, err: () => err, waitErr, clientLines };
}

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A raw MPA Rev 1 peer (CRCs, no Markers) connecting from `from`; resolves after the MPA Reply. */
async function rawPeerFrom(port: number, from: string): Promise<RawPeer> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from, allowHalfOpen: true });
  cleanups.push(() => socket.destroy());
  const raw = wrap(socket);
  await once(socket, 'connect');
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C: CRC
  req[17] = 1;
  socket.write(req);
  await raw.waitFor(20);
  return raw;
}

/** A peer from `from` that advertises `size` octets and never answers the server's RDMA Read Request. */
async function stalledReader(port: number, from: string, size: number): Promise<RawPeer> {
  const raw = await rawPeerFrom(port, from);
  raw.socket.write(sendFpdu(1, rpingInfo(0x7f00_0000_0000n, 0x100, size)));
  return raw;
}

/** RDMAP opcodes (RFC 5040 §4.2) the server sent `raw`. */
const opcodes = (raw: RawPeer) => ulpdus(raw.received()).map((f) => f.opcode);
const READ_REQUEST = 0x1;
const TERMINATE = 0x7;

/** A TCP relay on 127.0.0.1 whose connections reach `port` from `from`: a client of another source. */
async function relayFrom(from: string, port: number): Promise<number> {
  const relay = net.createServer((c) => {
    const u = net.connect({ host: '127.0.0.1', port, localAddress: from });
    c.pipe(u);
    u.pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
    c.on('close', () => u.destroy());
    u.on('close', () => c.destroy());
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  cleanups.push(() => relay.close());
  return (relay.address() as net.AddressInfo).port;
}

const client = (port: number, ...flags: string[]) =>
  run(['rping', '-c', '-a', '127.0.0.1', '-p', String(port), ...flags]);

describe('rping -s -P: clients that advertise 64 MiB and never answer the RDMA Read', () => {
  it('4 from one source: one holds its 64 MiB share, 3 are refused busy naming the source; another source is served meanwhile; past --step-timeout the stalled one is Terminated and 127.0.0.1 is served again', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--step-timeout', '3000']);
    const hostile: RawPeer[] = [];
    for (let i = 0; i < 4; i++) hostile.push(await stalledReader(port, '127.0.0.1', 64 * MiB));
    // Whichever advertisement the server took first holds the share (a Read Request); there is one.
    const reading = () => hostile.filter((h) => opcodes(h).includes(READ_REQUEST));
    await until(() => reading().length > 0, 10_000, 'RDMA Read Request');
    const held = reading()[0] as RawPeer;
    const rest = hostile.filter((h) => h !== held);
    // The others: a Terminate and the close at once, no Read Request (their source holds its share).
    for (const r of rest) {
      await closedWithin(r, 10_000);
      expect(opcodes(r)).toEqual([TERMINATE]);
    }
    // Meanwhile: a client from 127.0.0.2 is served (its source's share is its own).
    const relay = await relayFrom('127.0.0.2', port);
    const other = await endsWithin(client(relay, '-C', '2', '-S', '4096', '-V'), 30_000);
    expect({ code: other.code, err: other.err }).toEqual({ code: 0, err: '' });
    // The stalled one: Terminated once --step-timeout has passed since its Read Request; its share is freed
    // (while it held all 64 MiB of it, no buffer at all from 127.0.0.1 fitted).
    await closedWithin(held, 15_000);
    expect(opcodes(held)).toEqual([READ_REQUEST, TERMINATE]);
    const again = await endsWithin(client(port, '-C', '3', '-S', '4096', '-V'), 30_000);
    expect({ code: again.code, err: again.err }).toEqual({ code: 0, err: '' });
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    const lines = s.clientLines();
    expect(
      lines.filter((l) =>
        /: failed: busy: a buffer of 67108864 octets asked, source 127\.0\.0\.1 holds 67108864 of --max-memory-per-source 67108864 \(ERR_RPING_SERVER_BUSY\)$/.test(
          l,
        ),
      ),
    ).toHaveLength(3);
    expect(
      lines.filter((l) =>
        l.endsWith(
          ': failed: timed out after --step-timeout 3000 ms waiting for the RDMA Read Response of 67108864 octets (ERR_RPING_STEP_TIMEOUT)',
        ),
      ),
    ).toHaveLength(1);
    expect(lines.filter((l) => /^rping: 127\.0\.0\.2:\d+: served 2 pings$/.test(l))).toHaveLength(1);
    expect(lines.filter((l) => /^rping: 127\.0\.0\.1:\d+: served 3 pings$/.test(l))).toHaveLength(1);
    expect(lines).toHaveLength(6);
  }, 120_000);

  it('4 from 4 sources fill --max-memory (4 × 64 MiB) only until --step-timeout: then all are Terminated and a client is served', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--step-timeout', '1500']);
    const hostile = await Promise.all(
      ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].map((from) => stalledReader(port, from, 64 * MiB)),
    );
    for (const h of hostile) await until(() => opcodes(h).includes(READ_REQUEST), 10_000, 'RDMA Read Request');
    const t0 = Date.now();
    for (const h of hostile) await closedWithin(h, 15_000);
    for (const h of hostile) expect(opcodes(h)).toEqual([READ_REQUEST, TERMINATE]);
    expect(Date.now() - t0).toBeLessThan(12_000);
    const honest = await endsWithin(client(port, '-C', '3', '-V'), 30_000);
    expect({ code: honest.code, err: honest.err }).toEqual({ code: 0, err: '' });
    s.child.kill('SIGTERM');
    expect(await s.done).toBe(0);
    const lines = s.clientLines();
    for (const from of ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'])
      expect(lines).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^rping: ${from.replaceAll('.', '\\.')}:\\d+: failed: timed out after --step-timeout 1500 ms waiting for the RDMA Read Response of 67108864 octets \\(ERR_RPING_STEP_TIMEOUT\\)$`,
          ),
        ),
      );
    expect(lines.filter((l) => l.endsWith(': served 3 pings'))).toHaveLength(1);
  }, 60_000);
});

describe('rping -s -P: idle connections', () => {
  it('one source hits --max-clients-per-source (a quarter of --max-clients by default); another source is served', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--max-clients', '12', '--step-timeout', '60000']);
    const idle: RawPeer[] = [];
    for (let i = 0; i < 3; i++) idle.push(await rawPeerFrom(port, '127.0.0.1'));
    // The fourth from 127.0.0.1: refused (the connection aborted), the three idle ones untouched.
    const fourth = await rawPeerFrom(port, '127.0.0.1').catch(() => undefined);
    if (fourth) await closedWithin(fourth, 10_000);
    await s.waitErr(/refused: source 127\.0\.0\.1 has 3 clients served at once \(--max-clients-per-source 3\)/);
    const direct = await endsWithin(client(port, '-C', '1'), 30_000);
    expect(direct.code).toBe(1);
    const relay = await relayFrom('127.0.0.2', port);
    const other = await endsWithin(client(relay, '-C', '5', '-V'), 30_000);
    expect({ code: other.code, err: other.err }).toEqual({ code: 0, err: '' });
    for (const r of idle) expect(r.socket.destroyed).toBe(false);
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    const lines = s.clientLines();
    expect(
      lines.filter((l) =>
        /^rping: 127\.0\.0\.1:\d+: refused: source 127\.0\.0\.1 has 3 clients served at once \(--max-clients-per-source 3\)$/.test(
          l,
        ),
      ),
    ).toHaveLength(2);
    expect(lines.filter((l) => /^rping: 127\.0\.0\.2:\d+: served 5 pings$/.test(l))).toHaveLength(1);
  }, 60_000);

  it('an idle connection is aborted past --step-timeout (no Terminate can precede its first FPDU) and its place given back', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--max-clients-per-source', '1', '--step-timeout', '2000']);
    const idle = await rawPeerFrom(port, '127.0.0.1');
    const t0 = Date.now();
    // While it idles, its source's one place is taken: another connection from 127.0.0.1 is refused.
    const second = await rawPeerFrom(port, '127.0.0.1').catch(() => undefined);
    if (second) await closedWithin(second, 10_000);
    expect(Date.now() - t0).toBeLessThan(2000); // (else the refusal above proves nothing)
    await s.waitErr(/refused: source 127\.0\.0\.1 has 1 clients served at once \(--max-clients-per-source 1\)/);
    await closedWithin(idle, 10_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1900);
    // RFC 5044 §7.1.2: a Responder sends no FPDU before the Initiator's first, a Terminate neither: aborted.
    expect(opcodes(idle)).toEqual([]);
    const served = await endsWithin(client(port, '-C', '3', '-V'), 30_000);
    expect({ code: served.code, err: served.err }).toEqual({ code: 0, err: '' });
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    expect(s.clientLines()).toContainEqual(
      expect.stringMatching(
        /: failed: timed out after --step-timeout 2000 ms waiting for the first buffer advertisement \(a Send\) after the connection was established \(ERR_RPING_STEP_TIMEOUT\)$/,
      ),
    );
    expect(s.clientLines().filter((l) => l.endsWith(': served 3 pings'))).toHaveLength(1);
  }, 60_000);

  it('the one-shot server (no -P): an idle client is dropped past --step-timeout, exit 1 with one line', async () => {
    const port = await freePort();
    const s = await server(['-s', '-p', String(port), '--step-timeout', '800', '-d']); // -d: the listening line
    const idle = await rawPeerFrom(port, '127.0.0.1');
    await closedWithin(idle, 10_000);
    expect(opcodes(idle)).toEqual([]); // aborted: no Terminate can precede the Initiator's first FPDU
    expect(await s.done).toBe(1);
    // `-d` lines are rping's protocol events; what is left is the error line.
    expect(
      s
        .err()
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('rping: ')),
    ).toEqual([
      'rddp: timed out after --step-timeout 800 ms waiting for the first buffer advertisement (a Send) after the connection was established (ERR_RPING_STEP_TIMEOUT)',
    ]);
  }, 30_000);
});

describe('rping -s -P: a client that stops mid-ping', () => {
  it('its source buffer read, it never advertises the sink: Terminated past --step-timeout', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--step-timeout', '1000']);
    // The stack in this process as the client: it answers the Read, then says nothing more.
    const tt = toolTransport({ transport: 'tcp', crc: true });
    const conn = await tt.transport.connect(
      { host: '127.0.0.1', port },
      { params: tt.connectParams, signal: AbortSignal.timeout(10_000) },
    );
    cleanups.push(() => conn.abort());
    // A verbs queue pair through the tool transport's stack (its profile and factories).
    const pd = tt.stack.device().allocPd();
    const qp = tt.stack.queuePair(pd, conn);
    const terminated = firstValueFrom(qp.terminate$);
    const closed = firstValueFrom(conn.closed$);
    const src = pd.registerMr(rpingPing(0, 64), Access.RemoteRead, { baseTo: 0x7f00_0000_0000n });
    const goAhead = qp.recv(pd.registerMr(new Uint8Array(16), Access.LocalWrite).sge());
    await qp.send(pd.registerMr(rpingInfo(src.baseTo, src.stag, 64), 0).sge());
    await goAhead; // the server has read the buffer
    const t0 = Date.now();
    const term = await terminated;
    await closed;
    expect(term.direction).toBe('received');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    await s.waitErr(/waiting for the sink buffer advertisement/);
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    expect(s.clientLines()).toEqual([
      expect.stringMatching(
        /^rping: 127\.0\.0\.1:\d+: failed: timed out after --step-timeout 1000 ms waiting for the sink buffer advertisement \(a Send\) \(ERR_RPING_STEP_TIMEOUT\)$/,
      ),
    ]);
  }, 30_000);
});

describe('rping -s -P: the ping buffers per source', () => {
  it('--max-memory-per-source (a quarter of --max-memory): a source holding its share is refused as busy, another is served meanwhile', async () => {
    const port = await freePort();
    const s = await server(['-s', '-P', '-p', String(port), '--max-memory', '400000', '--step-timeout', '60000']);
    // 127.0.0.1's share is 100 000 octets: one stalled client holds all of it.
    const held = await stalledReader(port, '127.0.0.1', 100_000);
    await until(() => opcodes(held).includes(READ_REQUEST), 10_000, 'RDMA Read Request');
    const same = await endsWithin(client(port, '-C', '1', '-S', '1000'), 30_000);
    expect(same.code).toBe(1);
    expect(same.err).toMatch(/^rddp: the peer terminated the connection/);
    const relay = await relayFrom('127.0.0.2', port);
    const other = await endsWithin(client(relay, '-C', '3', '-S', '100000', '-V'), 30_000);
    expect({ code: other.code, err: other.err }).toEqual({ code: 0, err: '' });
    // 127.0.0.2's share was given back when its client left: the same again fits.
    const again = await endsWithin(client(relay, '-C', '1', '-S', '100000'), 30_000);
    expect(again.code).toBe(0);
    expect(held.socket.destroyed).toBe(false);
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    const lines = s.clientLines();
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^rping: 127\.0\.0\.1:\d+: failed: busy: a buffer of 1000 octets asked, source 127\.0\.0\.1 holds 100000 of --max-memory-per-source 100000 \(ERR_RPING_SERVER_BUSY\)$/,
      ),
    );
    expect(lines.filter((l) => /^rping: 127\.0\.0\.2:\d+: served [13] pings$/.test(l))).toHaveLength(2);
  }, 60_000);

  it("the process memory budget (RDDP_MEMORY_BUDGET): past a source's share of it, busy; released when the client goes", async () => {
    const port = await freePort();
    // 8 MiB for the process, 2 MiB of it per source; --max-memory (256 MiB) would allow far more.
    const s = await server(['-s', '-P', '-p', String(port)], { RDDP_MEMORY_BUDGET: '8m' });
    const big = await endsWithin(client(port, '-C', '1', '-S', '3000000'), 30_000);
    expect(big.code).toBe(1);
    const fits = await endsWithin(client(port, '-C', '2', '-S', '1000000', '-V'), 30_000);
    expect({ code: fits.code, err: fits.err }).toEqual({ code: 0, err: '' });
    const again = await endsWithin(client(port, '-C', '2', '-S', '1000000', '-V'), 30_000);
    expect(again.code).toBe(0);
    s.child.kill('SIGINT');
    expect(await s.done).toBe(0);
    const lines = s.clientLines();
    expect(lines).toContainEqual(
      expect.stringMatching(
        /: failed: busy: a buffer of 3000000 octets asked, source 127\.0\.0\.1 holds \d+ of the process memory budget's share per source 2097152 \(ERR_RPING_SERVER_BUSY\)$/,
      ),
    );
    expect(lines.filter((l) => l.endsWith(': served 2 pings'))).toHaveLength(2);
  }, 60_000);
});
