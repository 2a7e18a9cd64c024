/**
 * RFC 5040 §7.2 checks on incoming messages and the RFC 5041 §7.2 errors DDP reports, each provoked by a
 * peer that writes DDP segments by hand; the Terminate that comes back is asserted octet for octet
 * (RFC 5040 §4.8 Figures 7–10, Appendix A.6), for both profiles.
 */
import { Access } from '@rddp/ddp';
import { RdmapOpcode as Op, type RdmapStream, type ReceiveCompletion } from '@rddp/rdmap';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  closed,
  ctrl,
  type PROFILES,
  rawPeer,
  readRequestHex,
  taggedHex,
  terminateHex,
  untaggedHex,
  until,
  VERSIONS,
} from './helpers.js';

type Profile = (typeof PROFILES)[number];
type Peer = Awaited<ReturnType<typeof rawPeer>>;

interface Case {
  /** The RFC section the case checks. */
  readonly rfc: string;
  readonly what: string;
  /** Sets up the RDMAP side; returns what the segment needs (STags). */
  readonly setup?: (peer: Peer) => Record<string, number>;
  /** The offending segment(s), as hex. The last one is the one the Terminate names. */
  readonly segments: (v: { dv: number; rv: number; s: Record<string, number> }) => string[];
  /** Terminate Control: Layer, EType, Error Code (RFC 5040 Figure 9; DDP values RFC 5041 §7.2). */
  readonly layer: number;
  readonly etype: number;
  readonly code: number;
  /** Figure 10: whether the DDP header and length are copied, and the Read Request Header. */
  readonly headers: 'ddp' | 'ddp+rdma' | 'none';
  /** Segments the stream sends before its Terminate (e.g. a Read Response). */
  readonly before?: number;
}

const rw = Access.RemoteWrite;
const rr = Access.RemoteRead;
const reg = (peer: Peer, o: { pdId?: number; length?: number; access: number; baseTo?: bigint }) =>
  peer.rdmap.stags.register({
    pdId: o.pdId ?? 1,
    buffer: new Uint8Array(o.length ?? 16),
    access: o.access,
    baseTo: o.baseTo ?? 0n,
  }).stag;
const P4 = 'a1a2a3a4';

const readRequest = (dv: number, rv: number, msn: number, o: Parameters<typeof readRequestHex>[0]) =>
  untaggedHex({ dv, c: ctrl(rv, Op.RdmaReadRequest), qn: 1, msn, payload: readRequestHex(o) });

const CASES: Case[] = [
  // ----- DDP layer, Tagged Buffer errors (RFC 5041 §7.2, type 1) -----
  {
    rfc: 'RFC 5041 §7.2 (tagged 0x00)',
    what: 'an RDMA Write to an STag that is not registered: DDP Invalid STag',
    segments: ({ dv, rv }) => [taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: 0x00abcd01, to: 0n, payload: P4 })],
    layer: 1,
    etype: 1,
    code: 0x00,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (tagged 0x01)',
    what: 'an RDMA Write past the end of the region: DDP Base or bounds violation',
    setup: (p) => ({ sink: reg(p, { length: 16, access: rw }) }),
    segments: ({ dv, rv, s }) => [taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: s.sink!, to: 14n, payload: P4 })],
    layer: 1,
    etype: 1,
    code: 0x01,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (tagged 0x02)',
    what: "an RDMA Write to another protection domain's STag: DDP STag not associated with DDP Stream",
    setup: (p) => ({ sink: reg(p, { pdId: 2, access: rw }) }),
    segments: ({ dv, rv, s }) => [taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: s.sink!, to: 0n, payload: P4 })],
    layer: 1,
    etype: 1,
    code: 0x02,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (tagged 0x03)',
    what: 'an RDMA Write whose TO + length wraps 2^64: DDP TO wrap',
    setup: (p) => ({ sink: reg(p, { length: 16, access: rw, baseTo: (1n << 64n) - 16n }) }),
    segments: ({ dv, rv, s }) => [
      taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: s.sink!, to: (1n << 64n) - 2n, payload: P4 }),
    ],
    layer: 1,
    etype: 1,
    code: 0x03,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (tagged 0x04)',
    what: 'a tagged segment of the other DDP Version: DDP Invalid DDP version',
    setup: (p) => ({ sink: reg(p, { access: rw }) }),
    segments: ({ dv, rv, s }) => [
      taggedHex({ dv: dv ^ 1, c: ctrl(rv, Op.RdmaWrite), stag: s.sink!, to: 0n, payload: P4 }),
    ],
    layer: 1,
    etype: 1,
    code: 0x04,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.1, RFC 5040 Figure 10',
    what: 'a segment shorter than its DDP header: DDP Local Catastrophic, no headers copied',
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1 }).slice(0, 20)],
    layer: 1,
    etype: 0,
    code: 0x00,
    headers: 'none',
  },
  // ----- DDP layer, Untagged Buffer errors (RFC 5041 §7.2, type 2) -----
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x01)',
    what: 'a Send on QN 3, which RDMAP does not have: DDP Invalid QN',
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 3, msn: 1, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x01,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x02)',
    what: 'a Send with no receive buffer posted: DDP Invalid MSN - no buffer available',
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x02,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §5.2.2, RFC 5041 §7.2 (untagged 0x02)',
    what: 'a Read Request beyond IRD finds no buffer on the Read Request queue: DDP no buffer available',
    segments: ({ dv, rv }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x500, sinkTo: 0n, size: 0, srcStag: 0, srcTo: 0n }),
      readRequest(dv, rv, 2, { sinkStag: 0x500, sinkTo: 0n, size: 0, srcStag: 0, srcTo: 0n }),
    ],
    layer: 1,
    etype: 2,
    code: 0x02,
    headers: 'ddp',
    before: 1, // the zero-length Read Response to the first Request
  },
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x03)',
    what: 'a Send with MSN 0, behind the window of posted buffers: DDP Invalid MSN - MSN range is not valid',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 0, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x03,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x04)',
    what: 'a first Send segment with MO 8: DDP Invalid MO',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1, mo: 8, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x04,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x05), RFC 5040 §5.3',
    what: 'a Send longer than the posted buffer: DDP Message too long',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(2));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 0, msn: 1, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x05,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5041 §7.2 (untagged 0x06)',
    what: 'an untagged segment of the other DDP Version: DDP Invalid DDP version',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv: dv ^ 1, c: ctrl(rv, Op.Send), qn: 0, msn: 1, payload: P4 })],
    layer: 1,
    etype: 2,
    code: 0x06,
    headers: 'ddp',
  },
  // ----- RDMA layer, Remote Protection Errors (RFC 5040 §7.2 4a–4e on Read Requests, Figure 9 type 1) -----
  {
    rfc: 'RFC 5040 §7.2 4a',
    what: 'a Read Request whose Data Source STag is not valid: Invalid STag, with the Read Request Header',
    segments: ({ dv, rv }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 4, srcStag: 0x00ee0001, srcTo: 0n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x00,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §7.2 4a',
    what: 'a Read Request whose Data Source STag was invalidated: Invalid STag',
    setup: (p) => {
      const stag = reg(p, { access: rr });
      p.rdmap.stags.invalidate(stag);
      return { src: stag };
    },
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 4, srcStag: s.src!, srcTo: 0n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x00,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §7.2 4b',
    what: "a Read Request from another protection domain's STag: STag not associated with RDMAP Stream",
    setup: (p) => ({ src: reg(p, { pdId: 3, access: rr }) }),
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 4, srcStag: s.src!, srcTo: 0n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x03,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §7.2 4c',
    what: 'a Read Request whose Data Source TO is below the base: Base or bounds violation',
    setup: (p) => ({ src: reg(p, { access: rr, baseTo: 0x100n }) }),
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 4, srcStag: s.src!, srcTo: 0xffn }),
    ],
    layer: 0,
    etype: 1,
    code: 0x01,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §7.2 4d',
    what: 'a Read Request whose TO + size runs past the region: Base or bounds violation',
    setup: (p) => ({ src: reg(p, { access: rr, length: 16 }) }),
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 8, srcStag: s.src!, srcTo: 12n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x01,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §7.2 4e',
    what: 'a Read Request whose TO + size wraps 2^64: TO wrap',
    setup: (p) => ({ src: reg(p, { access: rr, length: 16, baseTo: (1n << 64n) - 16n }) }),
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 32, srcStag: s.src!, srcTo: (1n << 64n) - 8n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x04,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §8.1.1, Figure 9',
    what: 'a Read Request of a region without Remote Read: Access rights violation',
    setup: (p) => ({ src: reg(p, { access: rw }) }),
    segments: ({ dv, rv, s }) => [
      readRequest(dv, rv, 1, { sinkStag: 0x700, sinkTo: 0n, size: 4, srcStag: s.src!, srcTo: 0n }),
    ],
    layer: 0,
    etype: 1,
    code: 0x02,
    headers: 'ddp+rdma',
  },
  {
    rfc: 'RFC 5040 §8.1.1, Figure 9',
    what: 'an RDMA Write to a region without Remote Write: Access rights violation (no RDMA header: not a Read Request)',
    setup: (p) => ({ sink: reg(p, { access: rr }) }),
    segments: ({ dv, rv, s }) => [taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: s.sink!, to: 0n, payload: P4 })],
    layer: 0,
    etype: 1,
    code: 0x02,
    headers: 'ddp',
  },
  // ----- Send with Invalidate (RFC 5040 §5.3, §7.2 4–5) -----
  {
    rfc: 'RFC 5040 §7.2 4 (Send with Invalidate)',
    what: 'a Send with Invalidate naming an STag that is not valid: Invalid STag',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [
      untaggedHex({ dv, c: ctrl(rv, Op.SendWithInvalidate), qn: 0, msn: 1, inv: 0x00ee0101, payload: P4 }),
    ],
    layer: 0,
    etype: 1,
    code: 0x00,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §5.3, §7.2 5 (Send with SE and Invalidate)',
    what: "a Send with SE and Invalidate naming another protection domain's STag: STag cannot be Invalidated",
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return { other: reg(p, { pdId: 9, access: rw }) };
    },
    segments: ({ dv, rv, s }) => [
      untaggedHex({
        dv,
        c: ctrl(rv, Op.SendWithSolicitedEventAndInvalidate),
        qn: 0,
        msn: 1,
        inv: s.other!,
        payload: P4,
      }),
    ],
    layer: 0,
    etype: 1,
    code: 0x09,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §5.3',
    what: 'a Send with Invalidate naming a region the peer may not invalidate (local access only): STag cannot be Invalidated',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return { local: reg(p, { access: Access.LocalWrite }) };
    },
    segments: ({ dv, rv, s }) => [
      untaggedHex({ dv, c: ctrl(rv, Op.SendWithInvalidate), qn: 0, msn: 1, inv: s.local!, payload: P4 }),
    ],
    layer: 0,
    etype: 1,
    code: 0x09,
    headers: 'ddp',
  },
  // ----- RDMA layer, Remote Operation Errors (RFC 5040 §7.2 2–3, Figure 9 type 2) -----
  {
    rfc: 'RFC 5040 §7.2 3',
    what: 'a Send of the other RDMAP Version: Invalid RDMAP version',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv ^ 1, Op.Send), qn: 0, msn: 1, payload: P4 })],
    layer: 0,
    etype: 2,
    code: 0x05,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §7.2 3',
    what: 'an RDMA Write of RDMAP Version 2: Invalid RDMAP version',
    setup: (p) => ({ sink: reg(p, { access: rw }) }),
    segments: ({ dv, s }) => [taggedHex({ dv, c: ctrl(2, Op.RdmaWrite), stag: s.sink!, to: 0n, payload: P4 })],
    layer: 0,
    etype: 2,
    code: 0x05,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §7.2 2, Figure 4',
    what: 'a reserved OpCode (1000b): Unexpected OpCode',
    setup: (p) => {
      p.rdmap.stream.postReceive(new Uint8Array(16));
      return {};
    },
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, 0b1000), qn: 0, msn: 1, payload: P4 })],
    layer: 0,
    etype: 2,
    code: 0x06,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §7.2 2, Figure 4',
    what: 'a Send on the Read Request queue (QN 1): Unexpected OpCode',
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 1, msn: 1, payload: P4 })],
    layer: 0,
    etype: 2,
    code: 0x06,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §7.2 2, Figure 4',
    what: 'an RDMA Write in an untagged segment: Unexpected OpCode',
    segments: ({ dv, rv }) => [untaggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), qn: 0, msn: 1, payload: P4 })],
    layer: 0,
    etype: 2,
    code: 0x06,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §5.2.2, §7.2 2',
    what: 'an RDMA Read Response when no RDMA Read is outstanding: Unexpected OpCode',
    setup: (p) => ({ sink: reg(p, { access: rw }) }),
    segments: ({ dv, rv, s }) => [
      taggedHex({ dv, c: ctrl(rv, Op.RdmaReadResponse), stag: s.sink!, to: 0n, payload: P4 }),
    ],
    layer: 0,
    etype: 2,
    code: 0x06,
    headers: 'ddp',
  },
  {
    rfc: 'RFC 5040 §4.4',
    what: 'an RDMA Read Request shorter than its 28-octet header: Unspecified Error',
    segments: ({ dv, rv }) => [
      untaggedHex({ dv, c: ctrl(rv, Op.RdmaReadRequest), qn: 1, msn: 1, payload: '00'.repeat(20) }),
    ],
    layer: 0,
    etype: 2,
    code: 0xff,
    headers: 'ddp',
  },
];

async function provoke(profile: Profile, c: Case) {
  const { dv, rv } = VERSIONS[profile];
  const peer = await rawPeer(profile, { ird: 1 });
  const s = c.setup?.(peer) ?? {};
  const segments = c.segments({ dv, rv, s });
  for (const seg of segments) peer.send(seg);
  const end = await closed(peer.rdmap.stream);
  return { peer, segments, dv, rv, end };
}

for (const profile of ['ietf', 'rdmac'] as const) {
  describe(`RFC 5040 §7.2 errors on incoming messages → the exact Terminate (${profile})`, () => {
    for (const c of CASES) {
      it(`${c.rfc}: ${c.what}`, async () => {
        const { peer, segments, dv, rv, end } = await provoke(profile, c);
        const bad = segments[segments.length - 1] as string;
        const expected = terminateHex({
          dv,
          rv,
          layer: c.layer,
          etype: c.etype,
          code: c.code,
          ...(c.headers !== 'none' ? { segment: bad } : {}),
          ...(c.headers === 'ddp+rdma' ? { readRequest: bad.slice(36, 36 + 56) } : {}),
        });
        // Exactly one Terminate, after what was owed before it (RFC 5040 §5.4), then nothing.
        expect(peer.received.length).toBe((c.before ?? 0) + 1);
        expect(peer.received[peer.received.length - 1]).toBe(expected);
        // §7.1: the stream goes to error and the LLP is closed.
        expect(end).toMatchObject({ state: 'error', error: { code: 'ERR_RDMAP_TERMINATED' } });
        expect(peer.rdmap.stream.state).toBe('error');
        expect(peer.raw.state).toBe('closed');
      });
    }
  });
}

describe('RFC 5040 §4.8 Terminate fields, spelled out', () => {
  it('RFC 5040 Figure 16: a DDP Invalid STag Terminate, octet by octet (ietf)', async () => {
    const { peer } = await provoke('ietf', CASES[0] as Case);
    expect(peer.received[0]).toBe(
      [
        '41', // DDP control: T=0, L=1, DV=1
        '47', // RDMAP control: RV=1, Terminate
        '00000000', // Invalidate STag: zero
        '00000002', // QN 2: Terminate queue
        '00000001', // MSN 1
        '00000000', // MO 0
        '11', // Layer DDP, EType Tagged Buffer
        '00', // Error Code Invalid STag
        'c0', // M=1, D=1, R=0
        '00', // reserved
        '0012', // DDP Segment Length: 14 + 4
        'c14000abcd010000000000000000', // Terminated DDP Header, as received
      ].join(''),
    );
  });

  it('RFC 5040 Figure 16: a Remote Protection Terminate on a Read Request carries the Read Request Header (rdmac)', async () => {
    const { peer } = await provoke('rdmac', CASES.find((c) => c.rfc === 'RFC 5040 §7.2 4a') as Case);
    const readRequestDdpHeader = ['40', '01', '00000000', '00000001', '00000001', '00000000'].join('');
    const readRequestHeader = ['00000700', '0000000000000000', '00000004', '00ee0001', '0000000000000000'].join('');
    expect(peer.received[0]).toBe(
      [
        '40', // DDP control: T=0, L=1, DV=0
        '07', // RDMAP control: RV=0, Terminate
        '00000000', // Invalidate STag: zero
        '00000002', // QN 2
        '00000001', // MSN 1
        '00000000', // MO 0
        '01', // Layer RDMA, EType Remote Protection
        '00', // Error Code Invalid STag
        'e0', // M=1, D=1, R=1
        '00', // reserved
        '002e', // DDP Segment Length: 18 + 28
        readRequestDdpHeader, // Terminated DDP Header
        readRequestHeader, // Terminated RDMA Header: the original Read Request Header (§4.8)
      ].join(''),
    );
  });
});

describe('RFC 5040 §7.1 error surfacing on the stream that detects the error', () => {
  it('RFC 5040 §7.1: the Terminate sent is surfaced to the local ULP, decoded', async () => {
    const peer = await rawPeer('ietf');
    const events = firstValueFrom(peer.rdmap.stream.terminate$);
    peer.send(untaggedHex({ dv: 1, c: ctrl(1, Op.Send), qn: 0, msn: 1, payload: P4 }));
    const t = await events;
    expect(t).toMatchObject({
      direction: 'sent',
      header: { layer: 1, errorType: 2, errorCode: 2, m: true, d: true, r: false, ddpSegmentLength: 22 },
      description: 'DDP: Untagged Buffer Error: Invalid MSN - no buffer available',
      error: { code: 'ERR_RDMAP_TERMINATED', direction: 'sent' },
    });
  });

  it('RFC 5040 §5.3, §7.1: the receive a too-long Send was aimed at completes with a local length error, the rest flushed', async () => {
    const peer = await rawPeer('ietf');
    const got: ReceiveCompletion[] = [];
    peer.rdmap.stream.completions$.subscribe((c) => got.push(c as ReceiveCompletion));
    peer.rdmap.stream.postReceive(new Uint8Array(2), 'short');
    peer.rdmap.stream.postReceive(new Uint8Array(64), 'next');
    peer.send(untaggedHex({ dv: 1, c: ctrl(1, Op.Send), qn: 0, msn: 1, payload: P4 }));
    await closed(peer.rdmap.stream);
    expect(got.map((c) => [c.id, c.status])).toEqual([
      ['short', 'local-length-error'],
      ['next', 'flushed'],
    ]);
  });

  it('RFC 5040 §5.4, §7.1 rule 4: at most one Terminate per stream; the first error is the one reported', async () => {
    const { dv, rv } = VERSIONS.ietf;
    const peer = await rawPeer('ietf');
    // Three bad segments back to back: only the first is reported.
    peer.send(untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 5, msn: 1, payload: P4 }));
    peer.send(untaggedHex({ dv, c: ctrl(rv, 0xf), qn: 0, msn: 1 }));
    peer.send(taggedHex({ dv, c: ctrl(rv, Op.RdmaWrite), stag: 1, to: 0n, payload: P4 }));
    await closed(peer.rdmap.stream);
    expect(peer.received).toHaveLength(1);
    expect(peer.received[0]).toBe(
      terminateHex({
        dv,
        rv,
        layer: 1,
        etype: 2,
        code: 1,
        segment: untaggedHex({ dv, c: ctrl(rv, Op.Send), qn: 5, msn: 1, payload: P4 }),
      }),
    );
  });

  it('RFC 5040 §5.4: after a Terminate nothing more is accepted from the ULP', async () => {
    const peer = await rawPeer('ietf');
    peer.send(untaggedHex({ dv: 1, c: ctrl(1, Op.Send), qn: 0, msn: 1, payload: P4 }));
    await until(() => peer.rdmap.stream.state !== 'rts', 'the Terminate');
    const s: RdmapStream = peer.rdmap.stream;
    expect(() => s.postSend({ op: { type: 'send', payload: [] } })).toThrowError(
      expect.objectContaining({ code: 'ERR_RDMAP_STATE' }),
    );
    expect(() => s.postReceive(new Uint8Array(1))).toThrowError(expect.objectContaining({ code: 'ERR_RDMAP_STATE' }));
  });
});
