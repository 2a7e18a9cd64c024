/**
 * STag guessing from outside (RFC 5040 §8 RNIC requirement 8, RFC 5042 §5.1.2: STags must be hard to
 * predict). A server keeps every client in ONE protection domain, so only the STag keeps one client out of
 * another's memory. A victim's region holds a secret; an attacker from raw TCP learns its own STag from
 * the server's advertisement and tries STags near it (index ±1..±32 with its own key, and the adjacent
 * indexes with 16 other keys): RDMA Read, RDMA Write and Send with Invalidate, each guess on a fresh
 * connection. Every guess must end in a Terminate; the secret is never read, written or invalidated.
 */
import { randomBytes } from 'node:crypto';
import { encodeTaggedHeader, encodeUntaggedHeader } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { FpduWriter, mpaTcp } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest } from '@rddp/rdmap';
import { Access, Device, type Mr } from '@rddp/verbs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RawPeer, rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { toolTransport } from '../src/index.js';

const tt = toolTransport({ transport: 'tcp', mpaRev: '1', crc: true });
const SECRET = new Uint8Array(randomBytes(32));
const REGION = 32;
/** Sink STags the raw peer names in its Read Requests (its own, never registered at the server). */
const GUESS_SINK = 0x1111_1100;
const OWN_SINK = 0x2222_2200;

let port = 0;
let closeServer: () => Promise<void>;
/** The server's region for each client, in connection order: the first is the victim's secret. */
const served: Mr[] = [];

beforeAll(async () => {
  const t = mpaTcp({ params: { revision: 1, crc: true }, handshakeTimeoutMs: 5000 });
  const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
  port = l.address.port as number;
  // One device, ONE protection domain for every client (RFC 5040 §8.1.1 allows it; STags must then protect).
  const device = new Device();
  const pd = device.allocPd();
  l.connections$.subscribe((c: LlpConnection) => {
    const cq = device.createCq();
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, ird: 4 });
    const data = new Uint8Array(REGION).fill(0x11);
    if (served.length === 0) data.set(SECRET);
    const mine = pd.registerMr(data, Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite);
    served.push(mine);
    const rx = [0, 1].map(() => pd.registerMr(new Uint8Array(64), Access.LocalWrite));
    const adv = pd.registerMr(new Uint8Array(12), Access.LocalRead);
    qp.connect(c);
    // The client says hello (MPA: the initiator sends first); the server answers with its region's STag and TO.
    const hello = qp.recv((rx[0] as Mr).sge());
    qp.recv((rx[1] as Mr).sge()).catch(() => {});
    hello
      .then(() => {
        const v = new DataView(adv.buffer.buffer, adv.buffer.byteOffset, 12);
        v.setUint32(0, mine.stag);
        v.setBigUint64(4, mine.baseTo);
        return qp.send(adv.sge());
      })
      .catch(() => {});
    qp.closed$.subscribe(() => {
      // A real server frees a gone client's buffers; the victim stays connected throughout.
      for (const m of [...rx, adv]) m.deregister();
    });
  });
  closeServer = () => l.close();
});

afterAll(async () => {
  await closeServer?.();
});

interface Seg {
  tagged: boolean;
  opcode: number;
  stag: number;
  payload: Buffer;
}

/** The DDP segments in the FPDUs after the MPA Reply (RFC 5044 §4: length, ULPDU, pad, CRC). */
function segments(rx: Buffer): Seg[] {
  if (rx.length < 20) return [];
  const out: Seg[] = [];
  let at = 20 + rx.readUInt16BE(18);
  while (at + 2 <= rx.length) {
    const len = rx.readUInt16BE(at);
    const end = at + 2 + len + ((4 - ((2 + len) % 4)) % 4) + 4;
    if (end > rx.length) break;
    const u = rx.subarray(at + 2, at + 2 + len);
    const tagged = ((u[0] as number) & 0x80) !== 0;
    out.push({
      tagged,
      opcode: (u[1] as number) & 0x0f,
      stag: tagged ? u.readUInt32BE(2) : 0,
      payload: u.subarray(tagged ? 14 : 18),
    });
    at = end;
  }
  return out;
}

const w = () => new FpduWriter({ crc: true, markers: false });
function fpdu(writer: FpduWriter, seg: Uint8Array): Buffer {
  const parts: Uint8Array[] = [];
  writer.frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}
/** Untagged RDMAP message (RFC 5040 §4.2): opcode in RsvdULP's control octet, then the Invalidate STag. */
function untagged(op: number, qn: number, msn: number, payload: Uint8Array, invalidate = 0): Uint8Array {
  const s = new Uint8Array(18 + payload.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | op) * 2 ** 32 + invalidate, qn, msn, mo: 0 }, s);
  s.set(payload, 18);
  return s;
}
function rdmaWrite(stag: number, to: bigint, n: number): Uint8Array {
  const s = new Uint8Array(14 + n).fill(0x5a);
  encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x40, stag, to }, s);
  return s;
}
const readRequest = (sinkStag: number, srcStag: number, size: number) =>
  encodeReadRequest({ sinkStag, sinkTo: 0n, size, srcStag, srcTo: 0n });

async function until(raw: RawPeer, done: (s: Seg[]) => boolean): Promise<Seg[]> {
  let closed = false;
  void raw.closed.then(() => {
    closed = true;
  });
  const t0 = Date.now();
  for (;;) {
    const s = segments(raw.received());
    if (done(s) || closed) return s;
    if (Date.now() - t0 > 10_000) throw new Error(`no answer: ${raw.received().length} octets received`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A raw client: MPA Request, hello Send, and the STag the server advertises back. */
async function client(): Promise<{ raw: RawPeer; writer: FpduWriter; stag: number }> {
  const raw = await rawConnect(port);
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // CRC
  req[17] = 1;
  raw.socket.write(req);
  await raw.waitFor(20);
  const writer = w();
  raw.socket.write(fpdu(writer, untagged(3, 0, 1, new Uint8Array(4))));
  const s = await until(raw, (x) => x.some((g) => !g.tagged && g.opcode === 3));
  const adv = s.find((g) => !g.tagged && g.opcode === 3);
  if (!adv) throw new Error('no advertisement from the server');
  return { raw, writer, stag: adv.payload.readUInt32BE(0) };
}

type Kind = 'read' | 'write' | 'invalidate';
interface Outcome {
  guess: number;
  kind: Kind;
  terminated: boolean;
  readBack?: Buffer;
}

/**
 * One guess on a fresh connection, then a Read of the client's own region: a Terminate ends the
 * connection at the guess (a miss); the own Read's Response means the guess was accepted.
 */
async function guess(kind: Kind, stag: number): Promise<Outcome> {
  const { raw, writer, stag: own } = await client();
  const first =
    kind === 'read'
      ? untagged(1, 1, 1, readRequest(GUESS_SINK, stag, REGION))
      : kind === 'write'
        ? rdmaWrite(stag, 0n, REGION)
        : untagged(4, 0, 2, new Uint8Array(4), stag);
  const own_ = untagged(1, 1, kind === 'read' ? 2 : 1, readRequest(OWN_SINK, own, 4));
  raw.socket.write(Buffer.concat([fpdu(writer, first), fpdu(writer, own_)]));
  const s = await until(raw, (x) => x.some((g) => g.opcode === 7 || (g.tagged && g.stag === OWN_SINK)));
  raw.socket.destroy();
  const back = s.find((g) => g.tagged && g.opcode === 2 && g.stag === GUESS_SINK);
  return {
    guess: stag,
    kind,
    terminated: s.some((g) => !g.tagged && g.opcode === 7),
    ...(back ? { readBack: Buffer.from(back.payload) } : {}),
  };
}

describe('RFC 5040 §8, RFC 5042 §5.1.2: STags are hard to guess for a client sharing the protection domain', () => {
  it('an attacker trying the 64 STags next to its own (Read, Write, Send with Invalidate) never reaches the victim', async () => {
    // The victim connects first and reads its own secret: the right STag does work.
    const victim = await client();
    victim.raw.socket.write(fpdu(victim.writer, untagged(1, 1, 1, readRequest(OWN_SINK, victim.stag, REGION))));
    const vs = await until(victim.raw, (x) => x.some((g) => g.tagged && g.stag === OWN_SINK));
    expect(vs.find((g) => g.tagged && g.stag === OWN_SINK)?.payload).toEqual(Buffer.from(SECRET));

    // The attacker learns its own STag, then guesses around it (24-bit index, 8-bit key).
    const me = await client();
    me.raw.socket.destroy();
    const index = me.stag >>> 8;
    const key = me.stag & 0xff;
    const at = (i: number, k: number) => ((((index + i) & 0xff_ffff) << 8) | (k & 0xff)) >>> 0;
    const guesses: number[] = [];
    for (let d = 1; d <= 16; d++) guesses.push(at(-d, key), at(d, key));
    for (let k = 1; k <= 16; k++) guesses.push(at(-1, key + k), at(1, key + k));
    expect(new Set(guesses).size).toBe(64);

    const outcomes: Outcome[] = [];
    for (const kind of ['read', 'write', 'invalidate'] as const)
      for (let n = 0; n < guesses.length; n += 16)
        outcomes.push(...(await Promise.all(guesses.slice(n, n + 16).map((g) => guess(kind, g)))));

    const secretRead = outcomes.filter((o) => o.readBack?.equals(Buffer.from(SECRET)));
    expect(secretRead.map((o) => o.guess.toString(16))).toEqual([]);
    // Every guess named nothing this client may touch: RFC 5041 §7.2 / RFC 5040 §7.2 Terminate.
    const accepted = outcomes.filter((o) => !o.terminated);
    expect(accepted.map((o) => `${o.kind} 0x${o.guess.toString(16)}`)).toEqual([]);

    // The victim's region: untouched, still valid, and still read by the victim.
    const secretMr = served[0] as Mr;
    expect(secretMr.valid).toBe(true);
    expect(secretMr.buffer).toEqual(SECRET);
    victim.raw.socket.write(fpdu(victim.writer, untagged(1, 1, 2, readRequest(OWN_SINK, victim.stag, REGION))));
    const again = await until(victim.raw, (x) => x.filter((g) => g.tagged && g.stag === OWN_SINK).length === 2);
    expect(again.filter((g) => g.tagged && g.stag === OWN_SINK)[1]?.payload).toEqual(Buffer.from(SECRET));
    victim.raw.socket.destroy();
  }, 60_000);
});
