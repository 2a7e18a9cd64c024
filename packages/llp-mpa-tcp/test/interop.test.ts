/**
 * Interoperating with imperfect peers, opt-in (docs/MPA.md "Deviations"): `maxUlpduLength` up to 65535
 * (RFC 5044 §3 bounds it at 64768) and `tolerateEarlyResponderFpdu` (RFC 5044 §7.1.2 forbids a Responder
 * FPDU before the Initiator's first). Played from raw TCP peers; the defaults keep refusing both.
 */
import type { LlpCloseEvent } from '@rddp/llp';
import { collect } from '@rddp/llp-compliance';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FpduWriter, type MpaTcpListener, type MpaTcpTransport, mpaTcp } from '../src/index.js';
import { pattern } from './helpers.js';
import { type RawPeer, rawConnect, rawServer } from './raw.js';

function fpdu(ulpdu: Uint8Array): Buffer {
  const out: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([ulpdu], ulpdu.byteLength, out);
  return Buffer.concat(out);
}

/** MPA Request / Reply, Rev 1, C=1, no private data (RFC 5044 §7.1.1). */
function frame(key: 'Req' | 'Rep'): Buffer {
  const h = Buffer.alloc(20);
  h.write(`MPA ID ${key} Frame`);
  h[16] = 0x40;
  h[17] = 1;
  return h;
}

describe('maxUlpduLength: ULPDUs up to 65535 octets received when asked (RFC 5044 §3 deviation)', () => {
  let t: MpaTcpTransport;
  let listener: MpaTcpListener;
  beforeAll(async () => {
    t = mpaTcp({ maxUlpduLength: 65535 });
    listener = await t.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await listener.close();
  });

  it('FPDUs with ULPDU_Length 64769 and 65535 are delivered whole', async () => {
    const accepted = firstValueFrom(listener.connections$);
    const raw = await rawConnect(listener.address.port as number);
    raw.socket.write(frame('Req'));
    await raw.waitFor(20);
    const b = await accepted;
    const got = collect(b.streams[0]!);
    const big = pattern(65535, 1);
    raw.socket.write(Buffer.concat([fpdu(pattern(64769, 2)), fpdu(big)]));
    await got.wait(2, 5000);
    expect(got.ulpdus.map((u) => u.byteLength)).toEqual([64769, 65535]);
    expect(Buffer.from(got.ulpdus[1] as Uint8Array).equals(Buffer.from(big))).toBe(true);
    await b.close();
  });

  it('the option is checked: 64768..65535 only', () => {
    for (const v of [64767, 65536, 65000.5, '65535'])
      expect(() => mpaTcp({ maxUlpduLength: v as number })).toThrow(/maxUlpduLength must be an integer 64768\.\.65535/);
    expect(mpaTcp({ maxUlpduLength: 64768 }).options.maxUlpduLength).toBe(64768);
    expect(mpaTcp().options.maxUlpduLength).toBe(64768);
  });
});

describe('tolerateEarlyResponderFpdu: an Initiator accepts a Responder FPDU sent before its own first (RFC 5044 §7.1.2 deviation)', () => {
  /** A raw Responder that answers the Request with a Reply and `early` FPDUs, `apart` in a later write. */
  async function responder(early: Buffer[], apart: boolean) {
    let peer: RawPeer | undefined;
    const server = await rawServer(async (p) => {
      peer = p;
      await p.waitFor(20);
      if (apart) {
        p.socket.write(frame('Rep'));
        await new Promise((r) => setTimeout(r, 50));
        p.socket.write(Buffer.concat(early));
      } else p.socket.write(Buffer.concat([frame('Rep'), ...early]));
    });
    return { server, peer: () => peer as RawPeer };
  }

  it.each([
    ['in the TCP segment of the Reply', false],
    ['right after the Reply', true],
  ])('FPDUs %s are delivered in order, and the Initiator then sends normally', async (_l, apart) => {
    const t = mpaTcp({ tolerateEarlyResponderFpdu: true });
    const { server, peer } = await responder([fpdu(pattern(8, 1)), fpdu(pattern(300, 2))], apart);
    try {
      const c = await t.connect({ host: '127.0.0.1', port: server.port });
      const got = collect(c.stream);
      await got.wait(2, 3000);
      expect(got.ulpdus[0]).toEqual(pattern(8, 1));
      expect(got.ulpdus[1]).toEqual(pattern(300, 2));
      c.stream.send([pattern(12, 3)]);
      const wire = await peer().waitFor(20 + 2 + 12 + 2 + 4);
      expect(wire.subarray(22, 34)).toEqual(Buffer.from(pattern(12, 3)));
      expect(c.state).toBe('open');
      await c.close();
    } finally {
      server.close();
    }
  });

  it('off by default: an early FPDU in a later segment ends the connection (early-data)', async () => {
    const { server } = await responder([fpdu(pattern(8, 1))], true);
    try {
      const c = await mpaTcp().connect({ host: '127.0.0.1', port: server.port });
      collect(c.stream);
      const e: LlpCloseEvent = await firstValueFrom(c.closed$);
      expect(e.error).toMatchObject({ violation: 'early-data' });
      // The option only bends the Initiator's rule, and is checked.
      expect(() => mpaTcp({ tolerateEarlyResponderFpdu: 'yes' as unknown as boolean })).toThrow(/must be a boolean/);
    } finally {
      server.close();
    }
  });
});
