/**
 * `DdpStreamOptions.ulpAccepts`: the segments a ULP takes without its check are data, not a call. DDP
 * asks `ulpCheck` about every segment the table does not accept (and, once the ULP clears the table, about
 * every segment), and its own RFC 5041 §7.1 checks run on accepted segments all the same.
 */
import { FakeLlpStream } from '@rddp/llp/testing';
import { expect, it } from 'vitest';
import { Access, DdpStream, encodeTaggedHeader, encodeUntaggedHeader, StagTable, TWO_32 } from '../src/index.js';

function untagged(control: number, msn: number, payload: number): Uint8Array {
  const seg = new Uint8Array(18 + payload);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: control * TWO_32, qn: 0, msn, mo: 0 }, seg);
  return seg;
}

function setup() {
  const llp = new FakeLlpStream();
  const stags = new StagTable();
  const asked: number[] = [];
  const ulpCheck = (h: { rsvdUlp: number; tagged: boolean }) => {
    asked.push(h.tagged ? h.rsvdUlp : Math.floor(h.rsvdUlp / TWO_32));
    return undefined;
  };
  const accepts = { tagged: new Uint8Array(256), untagged: [new Uint8Array(256)] };
  (accepts.untagged[0] as Uint8Array)[0x43] = 1; // RDMAP's Send control octet
  accepts.tagged[0x40] = Access.RemoteWrite; // RDMAP's Write control octet, into writable regions
  const ddp = new DdpStream(llp, { pdId: 1, stags, ulpCheck, ulpAccepts: accepts });
  const deliveries: number[] = [];
  ddp.delivery$.subscribe((d) => deliveries.push(d.length));
  return { llp, stags, ddp, asked, accepts, deliveries };
}

it('an untagged segment the table accepts is placed without the ULP check; any other is checked', () => {
  const { llp, ddp, asked, deliveries } = setup();
  for (let i = 0; i < 3; i++) ddp.postReceive(0, new Uint8Array(16));
  for (const [control, msn] of [
    [0x43, 1],
    [0x44, 2],
    [0x43, 3],
  ] as const) {
    const seg = untagged(control, msn, 4);
    llp.feed({ length: seg.length, chunks: [seg] });
  }
  expect(asked).toEqual([0x44]);
  expect(deliveries).toEqual([4, 4, 4]);
});

it("DDP's own checks still refuse an accepted segment (RFC 5041 §7.1: no buffer for its MSN)", () => {
  const { llp, ddp, asked } = setup();
  const errors: number[] = [];
  ddp.error$.subscribe((e) => errors.push(e.code));
  const seg = untagged(0x43, 1, 4); // no receive posted
  llp.feed({ length: seg.length, chunks: [seg] });
  expect(asked).toEqual([]);
  expect(errors).toHaveLength(1);
});

it('a tagged segment is accepted only into a region granting the access its entry names', () => {
  const { llp, stags, asked } = setup();
  const writable = stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.RemoteWrite });
  const readable = stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.RemoteRead });
  for (const [stag, control] of [
    [writable.stag, 0x40],
    [readable.stag, 0x40],
    [writable.stag, 0x42],
  ] as const) {
    const seg = new Uint8Array(14 + 8);
    encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: control, stag, to: 0n }, seg);
    llp.feed({ length: seg.length, chunks: [seg] });
  }
  expect(asked).toEqual([0x40, 0x42]);
});

it('once the ULP clears its table, every segment meets its check', () => {
  const { llp, ddp, asked, accepts } = setup();
  for (let i = 0; i < 2; i++) ddp.postReceive(0, new Uint8Array(16));
  const first = untagged(0x43, 1, 4);
  llp.feed({ length: first.length, chunks: [first] });
  for (const t of accepts.untagged) t.fill(0);
  const second = untagged(0x43, 2, 4);
  llp.feed({ length: second.length, chunks: [second] });
  expect(asked).toEqual([0x43]);
});
