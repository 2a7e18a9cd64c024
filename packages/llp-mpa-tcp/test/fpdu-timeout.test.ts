/**
 * The mid-FPDU timer (`fpduTimeoutMs`): a peer that sends part of an FPDU and then nothing — or drips
 * it an octet at a time — has the connection reset with `LlpTimeoutError`, instead of holding it (and
 * the octets received so far) forever. Played from a raw TCP initiator.
 */
import type { LlpCloseEvent, LlpConnection } from '@rddp/llp';
import { collect } from '@rddp/llp-compliance';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FpduWriter, type MpaTcpListener, mpaTcp } from '../src/index.js';
import { pattern } from './helpers.js';
import { mpaRequest, type RawPeer, rawConnect } from './raw.js';

function fpdu(ulpdu: Uint8Array): Buffer {
  const out: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([ulpdu], ulpdu.byteLength, out);
  return Buffer.concat(out);
}

/** `closed$`, or a failure if it has not fired within `ms`. */
function closedWithin(c: LlpConnection, ms: number): Promise<LlpCloseEvent> {
  return Promise.race([
    firstValueFrom(c.closed$),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not closed within ${ms} ms`)), ms)),
  ]);
}

describe('fpduTimeoutMs: a peer that stops in the middle of an FPDU', () => {
  let listener: MpaTcpListener;
  beforeAll(async () => {
    listener = await mpaTcp({ fpduTimeoutMs: 300 }).listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await listener.close();
  });

  async function established(): Promise<{ raw: RawPeer; b: LlpConnection; got: ReturnType<typeof collect> }> {
    const accepted = firstValueFrom(listener.connections$);
    const raw = await rawConnect(listener.address.port as number);
    raw.socket.write(mpaRequest());
    await raw.waitFor(20);
    const b = await accepted;
    return { raw, b, got: collect(b.streams[0]!) };
  }

  it('half an FPDU, then silence: reset with LlpTimeoutError; whole FPDUs before it were delivered', async () => {
    const { raw, b, got } = await established();
    const whole = fpdu(pattern(40, 1));
    const half = fpdu(pattern(100, 2)).subarray(0, 53);
    raw.socket.write(Buffer.concat([whole, half]));
    const e = await closedWithin(b, 3000);
    expect(e.graceful).toBe(false);
    expect(e.error).toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
    expect(e.error?.message).toMatch(/middle of an FPDU/);
    expect((await raw.closed).reset).toBe(true);
    expect(got.ulpdus.map((u) => u.byteLength)).toEqual([40]);
  });

  it('an FPDU dripped one octet every 40 ms is reset at the deadline counted from its first octet', async () => {
    const { raw, b } = await established();
    const f = fpdu(pattern(200, 3));
    let i = 0;
    const drip = setInterval(() => {
      if (i < f.byteLength && !raw.socket.destroyed) raw.socket.write(f.subarray(i, ++i));
    }, 40);
    try {
      const e = await closedWithin(b, 3000);
      expect(e.error).toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
      expect(i).toBeLessThan(f.byteLength);
    } finally {
      clearInterval(drip);
    }
  });

  it('the option is checked (integer ms, 0 turns it off) and defaults to 30 s', () => {
    expect(() => mpaTcp({ fpduTimeoutMs: -1 })).toThrow(/fpduTimeoutMs must be an integer/);
    expect(mpaTcp({ fpduTimeoutMs: 0 }).options.fpduTimeoutMs).toBe(0);
    expect(mpaTcp().options.fpduTimeoutMs).toBe(30_000);
  });
});
