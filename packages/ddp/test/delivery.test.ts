/**
 * RFC 5041 §5.4 Delivery reaches the ULP's direct consumer (`onDelivery`) first, then `delivery$`'s
 * observers; a consumer that throws does not stop the receive path.
 */
import { FakeLlpStream } from '@rddp/llp/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { DdpStream, type DeliveryEvent, encodeUntaggedHeader, StagTable } from '../src/index.js';

/** One untagged segment on QN 0 carrying `payload`, with its MSN (one message per segment). */
function send(msn: number, payload: Uint8Array): Uint8Array {
  const head = encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: 0, qn: 0, msn, mo: 0 });
  const u = new Uint8Array(head.length + payload.length);
  u.set(head);
  u.set(payload, head.length);
  return u;
}

const uncaught: unknown[] = [];
const onUncaught = (e: unknown) => uncaught.push(e);
afterEach(() => {
  process.off('uncaughtException', onUncaught);
  uncaught.length = 0;
});

describe('Delivery: the direct consumer first, then observers', () => {
  it('onDelivery sees each message before delivery$ does, in MSN order', () => {
    const seen: string[] = [];
    const llp = new FakeLlpStream();
    const ddp = new DdpStream(llp, {
      pdId: 1,
      stags: new StagTable(),
      onDelivery: (e: DeliveryEvent) => seen.push(`direct ${e.msn}`),
    });
    ddp.delivery$.subscribe((e) => seen.push(`observer ${e.msn}`));
    for (let i = 0; i < 2; i++) ddp.postReceive(0, new Uint8Array(8));
    llp.feedChunks([send(1, new Uint8Array(4))]);
    llp.feedChunks([send(2, new Uint8Array(4))]);
    expect(seen).toEqual(['direct 1', 'observer 1', 'direct 2', 'observer 2']);
  });

  it('a consumer that throws: the next message is still delivered, the error reported asynchronously', async () => {
    process.on('uncaughtException', onUncaught);
    const got: number[] = [];
    const llp = new FakeLlpStream();
    const ddp = new DdpStream(llp, {
      pdId: 1,
      stags: new StagTable(),
      onDelivery: (e: DeliveryEvent) => {
        got.push(e.msn as number);
        if (e.msn === 1) throw new Error('consumer bug');
      },
    });
    for (let i = 0; i < 2; i++) ddp.postReceive(0, new Uint8Array(8));
    expect(() => llp.feedChunks([send(1, new Uint8Array(4))])).not.toThrow();
    llp.feedChunks([send(2, new Uint8Array(4))]);
    expect(got).toEqual([1, 2]);
    await new Promise((r) => setTimeout(r, 10));
    expect(uncaught.map((e) => (e as Error).message)).toEqual(['consumer bug']);
  });
});
