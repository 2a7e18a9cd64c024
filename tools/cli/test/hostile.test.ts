/**
 * Hostile peers from raw sockets against one MPA/TCP + RDMAP server (RFC 5042 §5; RFC 5040 §7; RFC 5044
 * §7–8). Each victim connection must end the RFC's way, and an honest rping connection to the same server
 * must keep working throughout.
 */
import { encodeTaggedHeader, encodeUntaggedHeader } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { FpduWriter, mpaTcp } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest } from '@rddp/rdmap';
import { Access, type Mr, type ProtectionDomain, type QueuePair } from '@rddp/verbs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RawPeer, rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { rpingClient, rpingServe, toolTransport } from '../src/index.js';

const quiet = { log: () => {}, debug: () => {} };
const tt = toolTransport({ transport: 'tcp', mpaRev: '1', crc: true });

/** A server connection the hostile peer attacks: a verbs queue pair on a device of its own. */
interface Victim {
  connection: LlpConnection;
  pd: ProtectionDomain;
  qp: QueuePair;
  rwBuffer: Uint8Array;
  rw: Mr;
  ro: Mr;
  stale: Mr;
}

let port = 0;
let closeServer: () => Promise<void>;
const victims: Victim[] = [];
let honestPings = 0;
let honest: LlpConnection | undefined;
const setupFailures: string[] = [];

beforeAll(async () => {
  const t = mpaTcp({ params: { revision: 1, crc: true }, handshakeTimeoutMs: 1500 });
  const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  port = l.address.port as number;
  l.errors$.subscribe((e) => setupFailures.push(e.message));
  let first = true;
  l.connections$.subscribe((c: LlpConnection) => {
    if (first) {
      // The honest client's connection: rping served for as long as it pings.
      first = false;
      // Aborted by afterAll at the end; a failure before that shows as a stall in honestProgresses().
      rpingServe(c, tt, { size: 64, verbose: false }, quiet).catch(() => {});
      return;
    }
    const pd = tt.stack.device().allocPd();
    const qp = tt.stack.queuePair(pd, c, { ird: 2, maxSendWr: 512 });
    const rwBuffer = new Uint8Array(256);
    // Address-based regions, as rping advertises them (virtual addresses as Tagged Offsets).
    const rw = pd.registerMr(rwBuffer, Access.LocalWrite | Access.RemoteWrite, { baseTo: 0x7f00_0000_0000n });
    const ro = pd.registerMr(new Uint8Array(256), Access.RemoteRead, { baseTo: 0x7f00_0000_1000n });
    const stale = pd.registerMr(new Uint8Array(256), Access.LocalWrite | Access.RemoteWrite, {
      baseTo: 0x7f00_0000_2000n,
    });
    stale.invalidate();
    victims.push({ connection: c, pd, qp, rwBuffer, rw, ro, stale });
  });
  closeServer = () => l.close();
  // The honest client pings without end (rping -C 0) until the suite ends; each ping read by the server counts.
  honest = await t.connect({ host: '127.0.0.1', port }, { params: tt.connectParams });
  void rpingClient(
    honest,
    tt,
    { count: 0, size: 1024, verbose: false, validate: true },
    {
      log: () => {},
      debug: (m) => {
        if (m.includes('source read')) honestPings++;
      },
    },
  ).catch((e: Error) => setupFailures.push(`honest client failed: ${e.message}`));
});

afterAll(async () => {
  honest?.abort();
  await closeServer?.();
});

async function handshake(): Promise<RawPeer> {
  const raw = await rawConnect(port);
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40;
  req[17] = 1;
  raw.socket.write(req);
  await raw.waitFor(20);
  return raw;
}

const writer = () => new FpduWriter({ crc: true, markers: false });
function fpdu(w: FpduWriter, seg: Uint8Array): Buffer {
  const parts: Uint8Array[] = [];
  w.frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}

/** The Terminate header (layer, type, code) of the first FPDU after the Reply. */
function terminateOf(rx: Buffer): { layer: number; type: number; code: number } {
  const f = rx.subarray(20);
  expect(f[3]! & 0x0f).toBe(0x7); // RDMAP opcode Terminate
  return { layer: f[20]! >> 4, type: f[20]! & 0x0f, code: f[21]! };
}

async function honestProgresses(): Promise<void> {
  const before = honestPings;
  const t0 = Date.now();
  while (honestPings < before + 3) {
    if (Date.now() - t0 > 10_000)
      throw new Error(`the honest connection stalled at ${honestPings} pings ${setupFailures.join('; ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function tagged(stag: number, to: bigint, n: number): Uint8Array {
  const s = new Uint8Array(14 + n).fill(0x5a);
  encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x40, stag, to }, s);
  return s;
}
function untagged(op: number, qn: number, msn: number, payload: Uint8Array): Uint8Array {
  const s = new Uint8Array(18 + payload.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | op) * 2 ** 32, qn, msn, mo: 0 }, s);
  s.set(payload, 18);
  return s;
}

describe('hostile peers; an honest rping connection keeps working throughout', () => {
  it('RFC 5044 §7.1: a handshake sent one octet at a time, too slowly, is cut by the startup timer', async () => {
    const raw = await rawConnect(port);
    const req = Buffer.alloc(20);
    req.write('MPA ID Req Frame');
    req[17] = 1;
    let i = 0;
    const timer = setInterval(() => {
      if (i < req.length && !raw.socket.destroyed) raw.socket.write(req.subarray(i, ++i));
    }, 200);
    const closed = await raw.closed;
    clearInterval(timer);
    expect(i).toBeLessThan(20);
    expect(closed.reset || closed.fin).toBe(true);
    await honestProgresses();
  }, 30_000);

  it('RFC 5044 §7.1: a handshake never finished is cut by the startup timer', async () => {
    const raw = await rawConnect(port);
    const closed = await raw.closed;
    expect(closed.reset || closed.fin).toBe(true);
    await honestProgresses();
  }, 30_000);

  it('RFC 5044 §7.1.1: PD_Length over 512 closes the connection without a Reply', async () => {
    const raw = await rawConnect(port);
    const req = Buffer.alloc(20);
    req.write('MPA ID Req Frame');
    req[17] = 1;
    req.writeUInt16BE(600, 18);
    raw.socket.write(req);
    await raw.closed;
    expect(raw.received().length).toBe(0);
    await honestProgresses();
  }, 30_000);

  it('RFC 5040 §5.2.2: a flood of Read Requests past IRD gets the Terminate for "no buffer available"', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    const w = writer();
    const frames: Buffer[] = [];
    for (let msn = 1; msn <= 50; msn++) {
      const rr = encodeReadRequest({ sinkStag: 0x100, sinkTo: 0n, size: 64, srcStag: v.ro.stag, srcTo: v.ro.baseTo });
      frames.push(fpdu(w, untagged(1, 1, msn, rr)));
    }
    raw.socket.write(Buffer.concat(frames));
    await raw.closed;
    const rx = raw.received();
    // Read Responses for what fit, then the Terminate: DDP (1), Untagged Buffer (2), no buffer (0x02).
    const idx = rx.indexOf(Buffer.from([0x41, 0x47]));
    expect(idx).toBeGreaterThan(0);
    const term = rx.subarray(idx + 18, idx + 21);
    expect([term[0]! >> 4, term[0]! & 0xf, term[1]]).toEqual([1, 2, 0x02]);
    await honestProgresses();
  }, 30_000);

  it('RFC 5041 §7.1 / RFC 5040 §7.1 case 3: a Read Request whose Data Sink TO + size wraps 2^64 gets a Terminate (Remote Protection, TO wrap) carrying its header, not a dropped connection', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    const rr = encodeReadRequest({
      sinkStag: 0x100,
      sinkTo: (1n << 64n) - 16n,
      size: 64,
      srcStag: v.ro.stag,
      srcTo: v.ro.baseTo,
    });
    raw.socket.write(fpdu(writer(), untagged(1, 1, 1, rr)));
    const closed = await raw.closed;
    expect(closed.reset).toBe(false);
    const rx = raw.received();
    expect(terminateOf(rx)).toEqual({ layer: 0, type: 1, code: 0x04 });
    // Figure 8: M, D and R set; the Terminated RDMA Header is the Read Request's own 28 octets.
    const f = rx.subarray(20);
    expect(f[22]! & 0xe0).toBe(0xe0);
    expect(Buffer.from(f.subarray(20 + 4 + 2 + 18, 20 + 4 + 2 + 18 + 28))).toEqual(Buffer.from(rr));
    await honestProgresses();
  }, 30_000);

  it('RFC 5041 §7.2: a Send with no receive posted gets "no buffer available"', async () => {
    const raw = await handshake();
    raw.socket.write(fpdu(writer(), untagged(3, 0, 1, new Uint8Array(8))));
    await raw.closed;
    expect(terminateOf(raw.received())).toEqual({ layer: 1, type: 2, code: 0x02 });
    await honestProgresses();
  }, 30_000);

  it('RFC 5041 §7.2: a Write to an invalidated STag gets "Invalid STag"', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    raw.socket.write(fpdu(writer(), tagged(v.stale.stag, v.stale.baseTo, 8)));
    await raw.closed;
    expect(terminateOf(raw.received())).toEqual({ layer: 1, type: 1, code: 0x00 });
    await honestProgresses();
  }, 30_000);

  it("RFC 5041 §7.2 / RFC 5042: a Write to another connection's STag (another PD) gets a tagged error", async () => {
    const raw = await handshake();
    const mine = victims.at(-1) as Victim;
    const other = victims.at(-2) as Victim;
    expect(other).toBeDefined();
    raw.socket.write(fpdu(writer(), tagged(other.rw.stag, other.rw.baseTo, 8)));
    await raw.closed;
    const t = terminateOf(raw.received());
    // Each connection has its own STag table and PD: the foreign STag names nothing the peer may write
    // here (invalid, out of bounds or another PD), and the other connection's memory is untouched.
    expect([t.layer, t.type]).toEqual([1, 1]);
    expect([0x00, 0x01, 0x02]).toContain(t.code);
    expect(other.rwBuffer.every((x) => x === 0)).toBe(true);
    expect(mine.rwBuffer.every((x) => x === 0)).toBe(true);
    await honestProgresses();
  }, 30_000);

  it('RFC 5040 §7.2: a Write to a remote-read-only STag gets Remote Protection "Access rights violation", nothing placed', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    raw.socket.write(fpdu(writer(), tagged(v.ro.stag, v.ro.baseTo, 8)));
    await raw.closed;
    expect(terminateOf(raw.received())).toEqual({ layer: 0, type: 1, code: 0x02 });
    await honestProgresses();
  }, 30_000);

  it('RFC 5041 §7.2: an MSN jump gets "no buffer available" (beyond the window)', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    v.qp.postRecv({ sgList: [v.pd.registerMr(new Uint8Array(64), Access.LocalWrite).sge()] });
    raw.socket.write(fpdu(writer(), untagged(3, 0, 1000, new Uint8Array(8))));
    await raw.closed;
    expect(terminateOf(raw.received())).toEqual({ layer: 1, type: 2, code: 0x02 });
    await honestProgresses();
  }, 30_000);

  it('an abrupt RST in the middle of an FPDU ends that connection only', async () => {
    const raw = await handshake();
    const v = victims.at(-1) as Victim;
    const f = fpdu(writer(), tagged(v.rw.stag, v.rw.baseTo, 200));
    raw.socket.write(f.subarray(0, 100));
    await new Promise((r) => setTimeout(r, 50));
    raw.socket.resetAndDestroy();
    await raw.closed;
    await new Promise((r) => setTimeout(r, 100));
    expect(v.qp.state).toMatch(/error|closed/);
    await honestProgresses();
  }, 30_000);

  it('a peer that never reads: the send path stops at the high-water mark, posted work waits, nothing grows without bound', async () => {
    const raw = await handshake();
    raw.socket.pause(); // never read
    const v = victims.at(-1) as Victim;
    const mpa = v.connection as unknown as { stream: { queuedOctets: number } };
    const payload = v.pd.registerMr(new Uint8Array(64 * 1024), 0).sge();
    const posted = Array.from({ length: 400 }, () =>
      v.qp.write(payload, { stag: 0x100, to: 0n }).then(
        () => 'done',
        () => 'flushed',
      ),
    );
    await new Promise((r) => setTimeout(r, 1000));
    // 25 MiB were posted; what waits in user space (Node's socket buffer and the direct-send queue) stays
    // near the high-water mark (the kernel's socket buffers take their share first).
    expect(mpa.stream.queuedOctets).toBeLessThan(3 * 1024 * 1024);
    raw.socket.resetAndDestroy();
    const outcomes = await Promise.all(posted);
    expect(outcomes).toContain('flushed'); // never delivered, reported, not lost silently
    await honestProgresses();
  }, 30_000);
});
