import {
  Access,
  DdpErrorType,
  encodeTaggedHeader,
  encodeUntaggedHeader,
  TaggedErrorCode,
  UntaggedErrorCode,
} from '@rddp/ddp';
import { describe, expect, it } from 'vitest';
import { rawPeer, until } from './helpers.js';

const T = DdpErrorType.TaggedBuffer;
const U = DdpErrorType.UntaggedBuffer;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Sends `segment` raw, waits for the sink's one error, checks nothing was placed, and that later segments are dropped. */
async function provoke(
  setup: (sink: Awaited<ReturnType<typeof rawPeer>>['sink']) => { segment: Uint8Array; guard?: Uint8Array },
  profile: 'ietf' | 'rdmac' = 'ietf',
) {
  const { raw, sink } = await rawPeer({ profile });
  const { segment, guard } = setup(sink);
  const before = guard ? Uint8Array.from(guard) : undefined;
  raw.send([segment]);
  await until(() => sink.errors.length === 1);
  // §7.1: DDP MUST silently drop any subsequent incoming DDP Segments.
  raw.send([segment]);
  await until(() => sink.ddp.stats.dropped === 1);
  expect(sink.errors).toHaveLength(1);
  expect(sink.ddp.state).toBe('error');
  if (guard && before) expect(guard).toEqual(before);
  expect(sink.placements).toEqual([]);
  expect(sink.deliveries).toEqual([]);
  const e = sink.errors[0] as (typeof sink.errors)[number];
  expect(hex(e.headerBytes)).toBe(hex(segment.subarray(0, e.header?.tagged ? 14 : 18)));
  return e;
}

function tagged(stag: number, to: bigint, n: number, dv: 0 | 1 = 1): Uint8Array {
  const s = new Uint8Array(14 + n).fill(0xee);
  encodeTaggedHeader({ last: true, dv, rsvdUlp: 0x41, stag, to }, s);
  return s;
}
function untagged(qn: number, msn: number, mo: number, n: number, dv: 0 | 1 = 1, last = true): Uint8Array {
  const s = new Uint8Array(18 + n).fill(0xee);
  encodeUntaggedHeader({ last, dv, rsvdUlp: 0x4100000000, qn, msn, mo }, s);
  return s;
}

describe('RFC 5041 §7.1/§7.2 tagged buffer errors (type 1)', () => {
  it('§7.2 type 1 code 0x00 Invalid STag: never registered', async () => {
    const e = await provoke(() => ({ segment: tagged(0x1234_5600, 0n, 8) }));
    expect([e.layer, e.type, e.code]).toEqual(['ddp', T, TaggedErrorCode.InvalidStag]);
  });

  it('§7.2 type 1 code 0x00 Invalid STag: invalidated, and a stale consumer key', async () => {
    const buf = new Uint8Array(16);
    const e = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
      s.stags.invalidate(r.stag);
      return { segment: tagged(r.stag, 0n, 8), guard: buf };
    });
    expect(e.code).toBe(TaggedErrorCode.InvalidStag);
    const e2 = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
      return { segment: tagged((r.stag & ~0xff) | ((r.stag + 1) & 0xff), 0n, 8), guard: buf };
    });
    expect(e2.code).toBe(TaggedErrorCode.InvalidStag);
  });

  it('§7.2 type 1 code 0x01 Base or bounds violation: past the end, and below an address-based base', async () => {
    const buf = new Uint8Array(16);
    const e = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
      return { segment: tagged(r.stag, 9n, 8), guard: buf };
    });
    expect([e.type, e.code]).toEqual([T, TaggedErrorCode.BaseOrBoundsViolation]);
    const e2 = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite, baseTo: 0x1000n });
      return { segment: tagged(r.stag, 0xfffn, 4), guard: buf };
    });
    expect(e2.code).toBe(TaggedErrorCode.BaseOrBoundsViolation);
  });

  it('§7.2 type 1 code 0x02 STag not associated with DDP Stream (another protection domain, §8.2)', async () => {
    const buf = new Uint8Array(16);
    const e = await provoke((s) => {
      const r = s.stags.register({ pdId: 2, buffer: buf, access: Access.RemoteWrite });
      return { segment: tagged(r.stag, 0n, 8), guard: buf };
    });
    expect([e.type, e.code]).toEqual([T, TaggedErrorCode.StagNotAssociatedWithStream]);
  });

  it('§7.2 type 1 code 0x03 TO wrap: TO + length passes 2^64', async () => {
    const buf = new Uint8Array(16);
    const e = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite, baseTo: 2n ** 64n - 16n });
      return { segment: tagged(r.stag, 2n ** 64n - 4n, 8), guard: buf };
    });
    expect([e.type, e.code]).toEqual([T, TaggedErrorCode.ToWrap]);
  });

  it('§7.2 type 1 code 0x04 Invalid DDP version: DV=0 on an IETF stream, DV=1 on an RDMA Consortium stream', async () => {
    const buf = new Uint8Array(16);
    const e = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
      return { segment: tagged(r.stag, 0n, 8, 0), guard: buf };
    });
    expect([e.type, e.code]).toEqual([T, TaggedErrorCode.InvalidDdpVersion]);
    const e2 = await provoke((s) => {
      const r = s.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
      return { segment: tagged(r.stag, 0n, 8, 1), guard: buf };
    }, 'rdmac');
    expect(e2.code).toBe(TaggedErrorCode.InvalidDdpVersion);
  });
});

describe('RFC 5041 §7.1/§7.2 untagged buffer errors (type 2)', () => {
  it('§7.2 type 2 code 0x01 Invalid QN', async () => {
    const e = await provoke(() => ({ segment: untagged(3, 1, 0, 4) }));
    expect([e.layer, e.type, e.code]).toEqual(['ddp', U, UntaggedErrorCode.InvalidQn]);
  });

  it('§7.2 type 2 code 0x02 Invalid MSN - no buffer available', async () => {
    const e = await provoke((s) => {
      s.ddp.postReceive(0, new Uint8Array(8));
      return { segment: untagged(0, 2, 0, 4) };
    });
    expect([e.type, e.code]).toEqual([U, UntaggedErrorCode.InvalidMsnNoBufferAvailable]);
  });

  it('§7.2 type 2 code 0x03 Invalid MSN - MSN range is not valid (behind the window)', async () => {
    const e = await provoke((s) => {
      s.ddp.postReceive(0, new Uint8Array(8));
      return { segment: untagged(0, 0, 0, 4) };
    });
    expect([e.type, e.code]).toEqual([U, UntaggedErrorCode.InvalidMsnRangeNotValid]);
  });

  it('§7.2 type 2 code 0x04 Invalid MO: a gap on an ordered LLP, and an MO past the buffer', async () => {
    const buf = new Uint8Array(64);
    const e = await provoke((s) => {
      s.ddp.postReceive(0, buf);
      return { segment: untagged(0, 1, 8, 4), guard: buf };
    });
    expect([e.type, e.code]).toEqual([U, UntaggedErrorCode.InvalidMo]);
    const e2 = await provoke((s) => {
      s.ddp.postReceive(0, buf);
      return { segment: untagged(0, 1, 65, 0), guard: buf };
    });
    expect(e2.code).toBe(UntaggedErrorCode.InvalidMo);
  });

  it('§7.2 type 2 code 0x05 DDP Message too long for available buffer', async () => {
    const buf = new Uint8Array(8);
    const e = await provoke((s) => {
      s.ddp.postReceive(0, buf);
      return { segment: untagged(0, 1, 0, 9), guard: buf };
    });
    expect([e.type, e.code]).toEqual([U, UntaggedErrorCode.MessageTooLong]);
    // RFC 5040 §4.8: the Terminate may copy the RDMAP header after the DDP header; DDP hands it up.
    expect(e.ulpHeaderBytes.length).toBe(9);
  });

  it('§7.2 type 2 code 0x06 Invalid DDP version', async () => {
    const e = await provoke((s) => {
      s.ddp.postReceive(0, new Uint8Array(8));
      return { segment: untagged(0, 1, 0, 4, 0) };
    });
    expect([e.type, e.code]).toEqual([U, UntaggedErrorCode.InvalidDdpVersion]);
  });

  it('a segment shorter than its header is reported (Local Catastrophic, type 0) without a decoded header', async () => {
    const { raw, sink } = await rawPeer();
    raw.send([new Uint8Array([0x81, 0, 0])]);
    await until(() => sink.errors.length === 1);
    expect(sink.errors[0]).toMatchObject({
      layer: 'ddp',
      type: DdpErrorType.LocalCatastrophic,
      code: 0,
      header: undefined,
    });
    expect(hex(sink.errors[0]?.headerBytes as Uint8Array)).toBe('810000');
  });
});

describe('§7.1: the ULP check runs before placement', () => {
  it('a ULP refusal places nothing and is reported with the ULP layer', async () => {
    const buf = new Uint8Array(16);
    const { raw, sink } = await rawPeer({
      ulpCheck: (h, n, region) =>
        h.tagged && region && !(region.access & Access.RemoteWrite)
          ? { layer: 'rdmap', type: 2, code: 2, message: `no remote write on a ${n}-octet segment` }
          : undefined,
    });
    const r = sink.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteRead });
    raw.send([tagged(r.stag, 0n, 8)]);
    await until(() => sink.errors.length === 1);
    expect(sink.errors[0]).toMatchObject({ layer: 'rdmap', type: 2, code: 2 });
    expect(buf.every((x) => x === 0)).toBe(true);
  });

  it("after an error, the stream can still send one more message (the ULP's Terminate)", async () => {
    const { raw, sink } = await rawPeer();
    raw.send([untagged(7, 1, 0, 0)]);
    await until(() => sink.errors.length === 1);
    const got: number[] = [];
    raw.setReceiver((u) => got.push(u.length));
    await sink.ddp.sendUntagged(2, [new Uint8Array(28)], 0);
    await until(() => got.length === 1);
    expect(got).toEqual([18 + 28]);
  });
});

describe('robustness of the ULP hook', () => {
  it('a ULP check that throws is reported as Local Catastrophic (type 0), places nothing, and the stream does not hang', async () => {
    const { raw, sink } = await rawPeer({
      ulpCheck: () => {
        throw new Error('bug in the ULP');
      },
    });
    sink.ddp.postReceive(0, new Uint8Array(8));
    raw.send([untagged(0, 1, 0, 4)]);
    await until(() => sink.errors.length === 1);
    expect(sink.errors[0]).toMatchObject({
      layer: 'ddp',
      type: DdpErrorType.LocalCatastrophic,
      code: 0,
      segmentLength: 22,
    });
    expect(sink.errors[0]?.message).toContain('bug in the ULP');
    expect(sink.deliveries).toEqual([]);
  });
});

describe('resource limits of the STag table (RFC 5042: resource consumption)', () => {
  it('registering past the region or octet limit throws StagTableFullError; deregistering frees room', async () => {
    const { StagTable, StagTableFullError } = await import('@rddp/ddp');
    const t = new StagTable(2, 100);
    const a = t.register({ pdId: 1, buffer: new Uint8Array(60), access: Access.RemoteWrite });
    expect(() => t.register({ pdId: 1, buffer: new Uint8Array(41), access: Access.RemoteWrite })).toThrow(
      StagTableFullError,
    );
    t.register({ pdId: 1, buffer: new Uint8Array(40), access: Access.RemoteWrite });
    expect(t.bytes).toBe(100);
    expect(() => t.register({ pdId: 1, buffer: new Uint8Array(0), access: Access.RemoteWrite })).toThrow(
      /limit of 2 regions/,
    );
    t.deregister(a.stag);
    expect(t.bytes).toBe(40);
    expect(t.register({ pdId: 1, buffer: new Uint8Array(60), access: Access.RemoteWrite }).stag).not.toBe(a.stag);
  });
});

describe('STag hygiene (RFC 5042): deregistration while a message is in flight', () => {
  it('segments after the STag is deregistered are refused (Invalid STag) and write nothing into the old buffer', async () => {
    const { raw, sink } = await rawPeer();
    const buf = new Uint8Array(64);
    const r = sink.stags.register({ pdId: 1, buffer: buf, access: Access.RemoteWrite });
    const first = new Uint8Array(14 + 16).fill(0x11);
    encodeTaggedHeader({ last: false, dv: 1, rsvdUlp: 0, stag: r.stag, to: 0n }, first);
    raw.send([first]);
    await until(() => sink.placements.length === 1);
    sink.stags.deregister(r.stag); // the application takes the buffer back mid-message
    const second = new Uint8Array(14 + 16).fill(0x22);
    encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0, stag: r.stag, to: 16n }, second);
    raw.send([second]);
    await until(() => sink.errors.length === 1);
    expect([sink.errors[0]?.type, sink.errors[0]?.code]).toEqual([T, TaggedErrorCode.InvalidStag]);
    expect(buf.subarray(0, 16).every((x) => x === 0x11)).toBe(true);
    expect(buf.subarray(16).every((x) => x === 0)).toBe(true);
    // A new registration does not bring the old STag back: a freed index is quarantined, and a reused
    // index gets another consumer key (DDPP core draft §3.4: no immediate STag reuse).
    const again = sink.stags.register({ pdId: 1, buffer: new Uint8Array(64), access: Access.RemoteWrite });
    expect(again.stag).not.toBe(r.stag);
    expect(sink.stags.lookup(r.stag)).toBeUndefined();
  });
});
