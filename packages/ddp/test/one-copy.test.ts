import { FakeLlpStream, pattern } from '@rddp/llp/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Access, DdpStream, encodeTaggedHeader, encodeUntaggedHeader, StagTable } from '../src/index.js';

/** Counts every octet copied by TypedArray.prototype.set while `fn` runs, by destination buffer. */
function countCopies(fn: () => void): Map<ArrayBufferLike, number> {
  const proto = Object.getPrototypeOf(Uint8Array.prototype) as {
    set: (src: ArrayLike<number>, offset?: number) => void;
  };
  const orig = proto.set;
  const by = new Map<ArrayBufferLike, number>();
  const spy = vi.spyOn(proto, 'set').mockImplementation(function (
    this: Uint8Array,
    src: ArrayLike<number>,
    offset?: number,
  ) {
    by.set(this.buffer, (by.get(this.buffer) ?? 0) + src.length);
    return orig.call(this, src, offset);
  });
  const concat = vi.spyOn(Buffer, 'concat');
  try {
    fn();
  } finally {
    spy.mockRestore();
  }
  expect(concat).not.toHaveBeenCalled();
  concat.mockRestore();
  return by;
}

afterEach(() => vi.restoreAllMocks());

describe('receive path: one copy per payload octet, LLP chunk → registered buffer', () => {
  it('tagged: a segment split over 7 chunks is copied once, straight into the region, and nowhere else', () => {
    const llp = new FakeLlpStream();
    const stags = new StagTable();
    const ddp = new DdpStream(llp, { pdId: 1, stags });
    const region = stags.register({ pdId: 1, buffer: new Uint8Array(60_000), access: Access.RemoteWrite });
    const payload = pattern(50_000);
    const seg = new Uint8Array(14 + payload.length);
    encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0, stag: region.stag, to: 100n }, seg);
    seg.set(payload, 14);
    const cuts = [0, 14, 1000, 1001, 20_000, 33_333, 49_000, seg.length];
    const chunks = cuts.slice(1).map((end, i) => seg.subarray(cuts[i], end));
    const copies = countCopies(() => llp.feed({ length: seg.length, chunks }));
    expect(copies.get(region.buffer.buffer)).toBe(50_000);
    expect([...copies.keys()]).toEqual([region.buffer.buffer]);
    expect(region.buffer.subarray(100, 50_100)).toEqual(payload);
    expect(ddp.state).toBe('open');
  });

  it('untagged: a header straddling chunks costs only its own octets in scratch; the payload is copied once', () => {
    const llp = new FakeLlpStream();
    const ddp = new DdpStream(llp, { pdId: 1, stags: new StagTable() });
    const buf = new Uint8Array(4096);
    ddp.postReceive(0, buf);
    const payload = pattern(4000);
    const seg = new Uint8Array(18 + payload.length);
    encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: 0, qn: 0, msn: 1, mo: 0 }, seg);
    seg.set(payload, 18);
    const chunks = [seg.subarray(0, 5), seg.subarray(5, 2000), seg.subarray(2000)];
    const copies = countCopies(() => llp.feed({ length: seg.length, chunks }));
    expect(copies.get(buf.buffer)).toBe(4000);
    const other = [...copies.entries()].filter(([k]) => k !== buf.buffer).reduce((n, [, v]) => n + v, 0);
    expect(other).toBeLessThanOrEqual(18); // the header gathered from two chunks
    expect(buf.subarray(0, 4000)).toEqual(payload);
  });

  it("transmit path: the payload goes down as slices of the caller's buffer, never copied or concatenated", async () => {
    const llp = new FakeLlpStream({ mulpdu: 1014 });
    const ddp = new DdpStream(llp, { pdId: 1, stags: new StagTable() });
    const payload = pattern(5000);
    await ddp.sendTagged(5, 0n, [payload], 0);
    expect(llp.sent).toHaveLength(5);
    for (const [i, parts] of llp.sent.entries()) {
      expect(parts[0]?.length).toBe(14);
      expect(parts[1]?.buffer).toBe(payload.buffer);
      expect(parts[1]?.byteOffset).toBe(i * 1000);
    }
  });
});
