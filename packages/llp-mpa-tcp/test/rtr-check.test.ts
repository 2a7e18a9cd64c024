/**
 * RFC 6581 peer-to-peer mode: the Responder's LLP consumes the Initiator's RTR, so it must check every
 * field of it — the negotiated type, DDP version 1 (RFC 5041 §4.2 DV), RDMAP version 1 (RFC 5040 §4.1 RV),
 * L=1, QN/MSN 1/MO 0 for the untagged ones, and zero length. A raw initiator sends each wrong RTR: the
 * startup fails (`no-matching-rtr`, RFC 6581 code 7, on `errors$`), the TCP connection is reset, and no
 * connection surfaces. The Initiator checks the Read Response to its Read RTR the same way.
 */
import type { LlpCloseEvent, LlpConnection, LlpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeEnhancedData,
  encodeReadResponse,
  encodeRtr,
  FpduWriter,
  type MpaTcpListener,
  mpaTcp,
  type RtrType,
} from '../src/index.js';
import { rawConnect, rawServer } from './raw.js';

const t = mpaTcp({ handshakeTimeoutMs: 2000 });

function fpdu(ulpdu: Uint8Array): Buffer {
  const out: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([ulpdu], ulpdu.byteLength, out);
  return Buffer.concat(out);
}

/** An enhanced Rev 2 Request (C=1) offering exactly this RTR type, peer-to-peer. */
function p2pRequest(type: RtrType): Buffer {
  const h = Buffer.alloc(20);
  h.write('MPA ID Req Frame');
  h[16] = 0x40 | 0x10;
  h[17] = 2;
  h.writeUInt16BE(4, 18);
  const pd = encodeEnhancedData({
    ird: 4,
    ord: 4,
    p2p: true,
    write: type === 'write',
    read: type === 'read',
    send: type === 'send',
  });
  return Buffer.concat([h, pd]);
}

function mutate(type: RtrType, f: (b: Uint8Array) => void): Uint8Array {
  const b = encodeRtr(type);
  f(b);
  return b;
}

function withPayload(type: RtrType): Uint8Array {
  const b = encodeRtr(type);
  const out = new Uint8Array(b.byteLength + 4);
  out.set(b);
  out.set([1, 2, 3, 4], b.byteLength);
  return out;
}

function setU32(b: Uint8Array, off: number, v: number): void {
  new DataView(b.buffer, b.byteOffset).setUint32(off, v);
}

/** [label, negotiated type, RTR sent, what the error must say]. */
const cases: [string, RtrType, Uint8Array, RegExp][] = [];
for (const type of ['write', 'read', 'send'] as const) {
  cases.push(
    [`DV 0 (RDMAC DDP version)`, type, mutate(type, (b) => (b[0] = (b[0] as number) & ~0x03)), /DDP version 0, not 1/],
    [`DV 2`, type, mutate(type, (b) => (b[0] = ((b[0] as number) & ~0x03) | 2)), /DDP version 2, not 1/],
    [`RV 0 (RDMAC RDMAP version)`, type, mutate(type, (b) => (b[1] = (b[1] as number) & 0x3f)), /RDMAP version 0/],
    [`RV 2`, type, mutate(type, (b) => (b[1] = ((b[1] as number) & 0x3f) | 0x80)), /RDMAP version 2/],
    [`L 0`, type, mutate(type, (b) => (b[0] = (b[0] as number) & ~0x40)), /L=0/],
    [`4 octets of payload`, type, withPayload(type), /4 octets of payload/],
  );
}
cases.push(
  ['a Send RTR instead', 'write', encodeRtr('send'), /T=0 \(a tagged message expected\)/],
  ['a Write RTR instead', 'read', encodeRtr('write'), /T=1 \(an untagged message expected\)/],
  ['a Read RTR instead', 'send', encodeRtr('read'), /RDMAP opcode 1, not 3/],
  ['a Send RTR instead', 'read', encodeRtr('send'), /RDMAP opcode 3, not 1/],
  ['MSN 2', 'send', mutate('send', (b) => setU32(b, 10, 2)), /MSN 2, not 1/],
  ['MSN 0', 'send', mutate('send', (b) => setU32(b, 10, 0)), /MSN 0, not 1/],
  ['MSN 2', 'read', mutate('read', (b) => setU32(b, 10, 2)), /MSN 2, not 1/],
  ['MSN 0x80000001', 'read', mutate('read', (b) => setU32(b, 10, 0x80000001)), /MSN 2147483649, not 1/],
  ['QN 1', 'send', mutate('send', (b) => setU32(b, 6, 1)), /QN 1, not 0/],
  ['QN 2', 'read', mutate('read', (b) => setU32(b, 6, 2)), /QN 2, not 1/],
  ['MO 8', 'send', mutate('send', (b) => setU32(b, 14, 8)), /MO 8, not 0/],
  ['MO 8', 'read', mutate('read', (b) => setU32(b, 14, 8)), /MO 8, not 0/],
  ['RDMA Read Message Size 1', 'read', mutate('read', (b) => setU32(b, 30, 1)), /Read Message Size 1, not 0/],
);

describe('RFC 6581: the Responder refuses an RTR that is not exactly the negotiated one', () => {
  let listener: MpaTcpListener;
  const errors: LlpError[] = [];
  let emitted = 0;
  beforeAll(async () => {
    listener = await t.listen({ host: '127.0.0.1', port: 0 });
    listener.errors$.subscribe((e) => errors.push(e));
    listener.connections$.subscribe((c) => {
      emitted++;
      c.abort();
    });
  });
  afterAll(async () => {
    await listener.close();
  });

  it.each(
    cases,
  )('%s where the %s RTR was negotiated: reset, no-matching-rtr, no connection', async (_l, type, rtr, says) => {
    const n = errors.length;
    const before = emitted;
    const raw = await rawConnect(listener.address.port as number);
    raw.socket.write(p2pRequest(type));
    await raw.waitFor(24); // the Reply with its 4 octets of IRD/ORD
    raw.socket.write(fpdu(rtr));
    const closed = await raw.closed;
    expect(closed.reset).toBe(true);
    const end = Date.now() + 2000;
    while (errors.length === n && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
    expect(errors[n]).toMatchObject({ code: 'ERR_LLP_PROTOCOL', violation: 'no-matching-rtr', mpaErrorCode: 7 });
    expect(errors[n]?.message).toMatch(says);
    // Nothing but the Reply came back: no Read Response, no FPDU.
    expect(raw.received().byteLength).toBe(24);
    expect(emitted).toBe(before);
  });
});

describe('RFC 6581: the Initiator refuses a Read Response to its Read RTR that is not DV 1, RV 1', () => {
  const bad: [string, (b: Uint8Array) => void, RegExp][] = [
    ['RV 0', (b) => (b[1] = (b[1] as number) & 0x3f), /RDMAP version 0/],
    ['DV 0', (b) => (b[0] = (b[0] as number) & ~0x03), /DDP version 0/],
  ];
  it.each(bad)('%s: the connection is reset with no-matching-rtr', async (_l, change, says) => {
    const server = await rawServer(async (p) => {
      await p.waitFor(24); // Request + IRD/ORD
      const h = Buffer.alloc(20);
      h.write('MPA ID Rep Frame');
      h[16] = 0x40 | 0x10;
      h[17] = 2;
      h.writeUInt16BE(4, 18);
      const ed = encodeEnhancedData({ ird: 4, ord: 4, p2p: true, write: false, read: true, send: false });
      p.socket.write(Buffer.concat([h, ed]));
      await p.waitFor(24 + 52); // the Read RTR: 2 + 46 + 4
      const rsp = encodeReadResponse(0, new Uint8Array(8));
      change(rsp);
      p.socket.write(fpdu(rsp));
    });
    try {
      const c: LlpConnection = await t.connect(
        { host: '127.0.0.1', port: server.port },
        { params: { revision: 2, rtr: 'read' } },
      );
      const e: LlpCloseEvent = await firstValueFrom(c.closed$);
      expect(e.graceful).toBe(false);
      expect(e.error).toMatchObject({ violation: 'no-matching-rtr', mpaErrorCode: 7 });
      expect(e.error?.message).toMatch(says);
    } finally {
      server.close();
    }
  });
});
