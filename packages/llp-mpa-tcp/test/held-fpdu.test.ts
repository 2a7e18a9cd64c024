/**
 * RFC 5044 §7.1.2: a Responder sends no FPDU before it has received the Initiator's first; what its ULP
 * sends meanwhile is held. When the connection ends first, each held FPDU is discarded and its `done`
 * callback gets `MpaFpduNotSentError` (`notSent: true`), so a ULP can tell "never on the wire" from
 * "written" — e.g. a Terminate it must not log as sent. Checked from a raw initiator: nothing but the
 * Reply reaches it.
 */
import type { LlpConnection, LlpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FpduWriter, MpaFpduNotSentError, type MpaTcpListener, mpaTcp } from '../src/index.js';
import { mpaRequest, type RawPeer, rawConnect } from './raw.js';

function badCrcFpdu(): Buffer {
  const out: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([new Uint8Array(30).fill(7)], 30, out);
  const b = Buffer.concat(out);
  b[b.byteLength - 1] ^= 0x5a;
  return b;
}

describe('RFC 5044 §7.1.2: FPDUs a Responder held are reported as never sent when the connection ends', () => {
  let listener: MpaTcpListener;
  beforeAll(async () => {
    listener = await mpaTcp({ closeTimeoutMs: 1000 }).listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await listener.close();
  });

  async function heldSend(): Promise<{ raw: RawPeer; b: LlpConnection; done: Promise<LlpError | undefined> }> {
    const accepted = firstValueFrom(listener.connections$);
    const raw = await rawConnect(listener.address.port as number);
    raw.socket.write(mpaRequest());
    await raw.waitFor(20);
    const b = await accepted;
    b.streams[0]!.setReceiver(() => {});
    const done = new Promise<LlpError | undefined>((resolve) =>
      b.streams[0]!.send([new Uint8Array(28).fill(1)], (e) => resolve(e)),
    );
    return { raw, b, done };
  }

  const ends: [string, (raw: RawPeer, b: LlpConnection) => void, string][] = [
    ['a bad CRC in the first FPDU', (raw) => raw.socket.write(badCrcFpdu()), 'ERR_LLP_DIGEST'],
    ['the ULP closing', (_raw, b) => void b.close(), 'ERR_LLP_STREAM_CLOSED'],
    ['the ULP aborting', (_raw, b) => b.abort(), 'ERR_LLP_STREAM_CLOSED'],
    ['the initiator’s FIN', (raw) => raw.socket.end(), 'ERR_LLP_STREAM_CLOSED'],
  ];
  it.each(ends)('ended by %s: done gets MpaFpduNotSentError and no FPDU reaches the wire', async (_l, end, cause) => {
    const { raw, b, done } = await heldSend();
    end(raw, b);
    const e = await done;
    expect(e).toBeInstanceOf(MpaFpduNotSentError);
    expect(e).toMatchObject({ code: 'ERR_LLP_STREAM_CLOSED', notSent: true, heldBy: 'RFC 5044 §7.1.2' });
    expect((e?.cause as LlpError).code).toBe(cause);
    await raw.closed;
    expect(raw.received().byteLength).toBe(20); // the Reply, nothing after it
  });
});
