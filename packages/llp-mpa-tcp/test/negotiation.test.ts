/**
 * MPA startup negotiation: CRC (RFC 5044 §7.1.1 C), Markers per direction (M), Rev (RFC 5044 §7.1.1,
 * RFC 6581, RFC 5044 Appendix C), RTR choice and IRD/ORD (RFC 6581). Pure functions first, then the
 * same matrix over real sockets.
 */
import { describe, expect, it } from 'vitest';
import {
  buildReply,
  buildRequest,
  encodeEnhancedData,
  evaluateReply,
  evaluateRequest,
  INITIATOR_DEFAULTS,
  type MpaFrame,
  type MpaParams,
  mpaTcp,
  RESPONDER_DEFAULTS,
  type ReplyOutcome,
  resolveParams,
} from '../src/index.js';
import { tcpPair } from './helpers.js';

const EMPTY = new Uint8Array(0);
const ini = (p: MpaParams) => resolveParams(p as Record<string, unknown>, INITIATOR_DEFAULTS);
const rsp = (p: MpaParams) => resolveParams(p as Record<string, unknown>, RESPONDER_DEFAULTS);

function asFrame(f: ReturnType<typeof buildRequest>['frame']): MpaFrame {
  return {
    kind: f.kind,
    markers: f.markers,
    crc: f.crc,
    reject: f.reject ?? false,
    enhanced: f.enhanced ?? false,
    reserved: 0,
    revision: f.revision,
    privateData: f.privateData,
  };
}

/** Runs both halves of the negotiation in memory. */
function negotiate(i: MpaParams, r: MpaParams) {
  const sent = buildRequest(ini(i), EMPTY);
  const req = evaluateRequest(asFrame(sent.frame), rsp(r));
  if (req.kind !== 'offer') return { responder: req, initiator: undefined };
  const reply = asFrame(buildReply(req.offer, true, EMPTY));
  return { responder: req, initiator: evaluateReply(sent, reply) };
}

function accepted(o: ReplyOutcome | undefined) {
  if (o?.kind !== 'accepted') throw new Error(`not accepted: ${JSON.stringify(o)}`);
  return o.negotiated;
}

describe('CRC and Markers (RFC 5044 §7.1.1 C, M)', () => {
  for (const ic of [false, true])
    for (const rc of [false, true])
      it(`RFC 5044 §7.1.1 C: initiator C=${+ic}, responder C=${+rc} → CRC ${ic || rc ? 'on' : 'off'} both ways`, () => {
        const { responder, initiator } = negotiate({ crc: ic }, { crc: rc });
        if (responder.kind !== 'offer') throw new Error(responder.kind);
        expect(responder.offer.negotiated.crc).toBe(ic || rc);
        expect(accepted(initiator).crc).toBe(ic || rc);
      });

  for (const im of [false, true])
    for (const rm of [false, true])
      it(`RFC 5044 §7.1.1 M: initiator M=${+im}, responder M=${+rm} → Markers only towards whoever asked`, () => {
        const { responder, initiator } = negotiate({ markers: im }, { markers: rm });
        if (responder.kind !== 'offer') throw new Error(responder.kind);
        expect(responder.offer.negotiated).toMatchObject({ markersRx: rm, markersTx: im });
        expect(accepted(initiator)).toMatchObject({ markersRx: im, markersTx: rm });
      });
});

describe('Revision (RFC 5044 §7.1.1 Rev, RFC 6581, RFC 5044 Appendix C)', () => {
  it('RFC 5044 §7.1.1 Rev: Rev 1 ↔ responder up to Rev 2 → Rev 1, no RFC 6581 data', () => {
    expect(accepted(negotiate({ revision: 1 }, {}).initiator)).toMatchObject({ revision: 1, enhanced: false });
  });

  it('RFC 6581: Rev 2 ↔ Rev 2 → enhanced; ORD of each side never exceeds the other’s IRD', () => {
    const { responder, initiator } = negotiate({ revision: 2, ird: 3, ord: 8 }, { ird: 5, ord: 7 });
    if (responder.kind !== 'offer') throw new Error(responder.kind);
    expect(responder.offer.negotiated).toMatchObject({
      revision: 2,
      enhanced: true,
      ird: 5,
      ord: 3,
      peerIrd: 3,
      peerOrd: 8,
    });
    expect(accepted(initiator)).toMatchObject({ revision: 2, enhanced: true, ird: 3, ord: 5, peerIrd: 5, peerOrd: 3 });
  });

  it('RFC 6581: a Rev 1-only responder answers a Rev 2 Request in Rev 1; the initiator carries on in Rev 1', () => {
    const { responder, initiator } = negotiate({ revision: 2 }, { revision: 1 });
    if (responder.kind !== 'offer') throw new Error(responder.kind);
    expect(responder.offer.replyBase.revision).toBe(1);
    expect(accepted(initiator)).toMatchObject({ revision: 1, enhanced: false });
  });

  it('RFC 6581: peer-to-peer asked of a Rev 1-only responder fails with no-matching-rtr', () => {
    expect(negotiate({ revision: 2, rtr: 'write' }, { revision: 1 }).initiator).toMatchObject({
      kind: 'error',
      error: { violation: 'no-matching-rtr', mpaErrorCode: 7 },
    });
  });

  it('RFC 5044 Appendix C: Rev 0 to a non-permissive responder is closed without a Reply', () => {
    expect(negotiate({ revision: 0 }, {}).responder).toMatchObject({
      kind: 'close',
      error: { violation: 'bad-revision' },
    });
  });

  it('RFC 5044 Appendix C: Rev 0 to a permissive responder → RDMAC profile, Markers and CRC both ways', () => {
    const { responder, initiator } = negotiate({ revision: 0 }, { ietfMode: 'permissive', crc: false });
    if (responder.kind !== 'offer') throw new Error(responder.kind);
    const both = { revision: 0, rdmac: true, crc: true, markersRx: true, markersTx: true };
    expect(responder.offer.negotiated).toMatchObject(both);
    expect(responder.offer.replyBase).toMatchObject({ revision: 0, markers: true, crc: true });
    expect(accepted(initiator)).toMatchObject(both);
  });

  it('RFC 5044 Appendix C: an RDMAC responder (revision 0) answers Rev 1 with Rev 0; only a permissive initiator goes on', () => {
    expect(accepted(negotiate({ revision: 1, ietfMode: 'permissive' }, { revision: 0 }).initiator)).toMatchObject({
      revision: 0,
      rdmac: true,
    });
    expect(negotiate({ revision: 1 }, { revision: 0 }).initiator).toMatchObject({
      kind: 'error',
      error: { violation: 'bad-revision' },
    });
  });

  it('RFC 5044 §7.1.1 Rev: Rev 3 is closed by a responder and refused by an initiator', () => {
    const req: MpaFrame = {
      kind: 'request',
      markers: false,
      crc: true,
      reject: false,
      enhanced: false,
      reserved: 0,
      revision: 3,
      privateData: EMPTY,
    };
    expect(evaluateRequest(req, rsp({}))).toMatchObject({
      kind: 'close',
      error: { violation: 'bad-revision', mpaErrorCode: 4 },
    });
    const sent = buildRequest(ini({}), EMPTY);
    expect(evaluateReply(sent, { ...req, kind: 'reply' })).toMatchObject({
      kind: 'error',
      error: { violation: 'bad-revision' },
    });
  });

  it('RFC 5044 §7.1.1 Rev: a Reply of a higher Rev than the Request is refused; Rev 0 asked, Rev 1 answered too', () => {
    const sent = buildRequest(ini({ revision: 1 }), EMPTY);
    const rep: MpaFrame = {
      kind: 'reply',
      markers: false,
      crc: true,
      reject: false,
      enhanced: false,
      reserved: 0,
      revision: 2,
      privateData: EMPTY,
    };
    expect(evaluateReply(sent, rep)).toMatchObject({ kind: 'error', error: { violation: 'bad-revision' } });
    expect(evaluateReply(buildRequest(ini({ revision: 0 }), EMPTY), { ...rep, revision: 1 })).toMatchObject({
      kind: 'error',
    });
  });
});

describe('Peer-to-peer RTR choice (RFC 6581)', () => {
  const cases: [MpaParams['rtr'], MpaParams['rtr'], string | false][] = [
    [['write', 'read'], undefined, 'write'],
    ['read', undefined, 'read'],
    ['send', undefined, 'send'],
    [['read', 'send'], ['send', 'read'], 'read'],
    ['send', ['write', 'read'], false],
  ];
  for (const [offered, accepts, chosen] of cases)
    it(`RFC 6581: offered ${JSON.stringify(offered)}, accepted ${JSON.stringify(accepts ?? 'all')} → ${chosen || 'reject'}`, () => {
      const { responder, initiator } = negotiate(
        { revision: 2, rtr: offered },
        accepts === undefined ? {} : { rtr: accepts },
      );
      if (chosen === false) {
        expect(responder).toMatchObject({ kind: 'reject', error: { violation: 'no-matching-rtr', mpaErrorCode: 7 } });
        return;
      }
      if (responder.kind !== 'offer') throw new Error(responder.kind);
      expect(responder.offer.negotiated).toMatchObject({ p2p: true, rtr: chosen });
      expect(accepted(initiator)).toMatchObject({ p2p: true, rtr: chosen });
    });

  it('siw behaviour: P set with no RTR type gets a zero-length Write chosen', () => {
    const pd = encodeEnhancedData({ ird: 1, ord: 1, p2p: true, send: false, write: false, read: false });
    const req: MpaFrame = {
      kind: 'request',
      markers: false,
      crc: false,
      reject: false,
      enhanced: true,
      reserved: 0,
      revision: 2,
      privateData: pd,
    };
    expect(evaluateRequest(req, rsp({}))).toMatchObject({ kind: 'offer', offer: { negotiated: { rtr: 'write' } } });
  });

  const sent = buildRequest(ini({ revision: 2, rtr: ['write'], ird: 4, ord: 4 }), EMPTY);
  const reply = (d: Parameters<typeof encodeEnhancedData>[0]): MpaFrame => ({
    kind: 'reply',
    markers: false,
    crc: true,
    reject: false,
    enhanced: true,
    reserved: 0,
    revision: 2,
    privateData: encodeEnhancedData(d),
  });
  it('RFC 6581: a Reply choosing an RTR that was not offered, two RTRs, or client-server mode is refused', () => {
    for (const d of [
      { ird: 4, ord: 4, p2p: true, send: false, write: false, read: true },
      { ird: 4, ord: 4, p2p: true, send: false, write: true, read: true },
      { ird: 4, ord: 4, p2p: false, send: false, write: false, read: false },
    ])
      expect(evaluateReply(sent, reply(d))).toMatchObject({ kind: 'error', error: { violation: 'no-matching-rtr' } });
  });

  it('RFC 6581: a responder ORD above the initiator IRD fails with insufficient-ird (code 6)', () => {
    expect(
      evaluateReply(sent, reply({ ird: 4, ord: 5, p2p: true, send: false, write: true, read: false })),
    ).toMatchObject({
      kind: 'error',
      error: { violation: 'insufficient-ird', mpaErrorCode: 6 },
    });
  });

  it('RFC 6581: an enhanced Request too short for IRD/ORD is rejected (R=1), as siw_proc_mpareq() does', () => {
    const req: MpaFrame = {
      kind: 'request',
      markers: false,
      crc: false,
      reject: false,
      enhanced: true,
      reserved: 0,
      revision: 2,
      privateData: new Uint8Array(2),
    };
    expect(evaluateRequest(req, rsp({}))).toMatchObject({
      kind: 'reject',
      reply: { reject: true },
      error: { violation: 'malformed-frame' },
    });
  });
});

describe('caller errors are typed (InvalidArgumentError)', () => {
  it('peer-to-peer below Rev 2, unknown keys, bad values, private data over the limit', () => {
    expect(() => buildRequest(ini({ revision: 1, rtr: 'write' }), EMPTY)).toThrow(/needs MPA Rev 2/);
    expect(() => ini({ crc: 'yes' } as unknown as MpaParams)).toThrow(/params.crc/);
    expect(() => ini({ revison: 2 } as unknown as MpaParams)).toThrow(/unknown MPA parameter/);
    expect(() => ini({ ird: 0x4000 })).toThrow(/14 bits/);
    expect(() => ini({ rtr: 'atomic' } as unknown as MpaParams)).toThrow(/unknown RTR type/);
    expect(() => buildRequest(ini({ revision: 2 }), new Uint8Array(509))).toThrow(/exceeds 508/);
    expect(() => buildRequest(ini({ revision: 1 }), new Uint8Array(513))).toThrow(/exceeds 512/);
    try {
      ini({ revision: 4 as 1 });
    } catch (e) {
      expect(e).toMatchObject({ code: 'ERR_LLP_INVALID_ARGUMENT' });
    }
  });
});

describe('negotiation over real sockets', () => {
  const t = mpaTcp();
  const matrix: { label: string; connect: MpaParams; listen: MpaParams; a: object; b: object; caps: object }[] = [
    {
      label: 'Rev 1, CRC from the responder only, Markers from the initiator only',
      connect: { revision: 1, crc: false, markers: true },
      listen: { crc: true },
      a: { revision: 1, crc: true, markersRx: true, markersTx: false },
      b: { revision: 1, crc: true, markersRx: false, markersTx: true },
      caps: { strongDigest: true, maxPrivateData: 512, maxStreams: 1 },
    },
    {
      label: 'Rev 1, no CRC',
      connect: { revision: 1, crc: false },
      listen: { crc: false },
      a: { crc: false },
      b: { crc: false },
      caps: { strongDigest: false },
    },
    {
      label: 'Rev 2 peer-to-peer, Read RTR',
      connect: { revision: 2, rtr: 'read', ird: 2, ord: 3 },
      listen: { ird: 9, ord: 9 },
      a: { revision: 2, p2p: true, rtr: 'read', ird: 2, ord: 3 },
      b: { revision: 2, p2p: true, rtr: 'read', ird: 9, ord: 2 },
      caps: { maxPrivateData: 508 },
    },
    {
      label: 'Rev 0, permissive responder',
      connect: { revision: 0 },
      listen: { ietfMode: 'permissive' },
      a: { revision: 0, rdmac: true, crc: true, markersRx: true, markersTx: true },
      b: { revision: 0, rdmac: true, crc: true, markersRx: true, markersTx: true },
      caps: { strongDigest: true, maxPrivateData: 512 },
    },
  ];
  for (const m of matrix)
    it(`both ends agree: ${m.label}`, async () => {
      const [a, b] = await tcpPair(t, { params: m.connect }, { params: m.listen });
      try {
        expect(a.setup.negotiated).toMatchObject(m.a);
        expect(b.setup.negotiated).toMatchObject(m.b);
        expect(a.capabilities).toMatchObject(m.caps);
        expect(b.capabilities).toMatchObject(m.caps);
      } finally {
        a.abort();
        b.abort();
      }
    });

  it('RFC 6581: the responder’s ULP sees what the initiator asked for, and may answer with its own params', async () => {
    let seen: unknown;
    const [a, b] = await tcpPair(
      t,
      { params: { revision: 2, ird: 7, ord: 6, rtr: ['write', 'read'] }, privateData: Uint8Array.of(1, 2, 3) },
      {
        onConnectRequest: (r) => {
          seen = r;
          return { accept: true, params: { rtr: ['read'], ord: 1 } };
        },
      },
    );
    try {
      expect(seen).toMatchObject({
        privateData: Uint8Array.of(1, 2, 3),
        params: { revision: 2, ird: 7, ord: 6, rtr: ['write', 'read'], crc: true, markers: false },
      });
      expect(b.setup.negotiated).toMatchObject({ rtr: 'read', ord: 1 });
      expect(a.setup.negotiated).toMatchObject({ rtr: 'read' });
    } finally {
      a.abort();
      b.abort();
    }
  });

  it('RFC 5044 Appendix C: a non-permissive initiator refuses an RDMAC (Rev 0) responder', async () => {
    const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: { revision: 0 } });
    try {
      await expect(t.connect(l.address, { params: { revision: 1 } })).rejects.toMatchObject({
        code: 'ERR_LLP_PROTOCOL',
        violation: 'bad-revision',
      });
    } finally {
      await l.close();
    }
  });
});
