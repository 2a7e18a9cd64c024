/**
 * MPA startup negotiation (RFC 5044 §7.1, RFC 6581, RFC 5044 Appendix C for the RDMA Consortium
 * profile): what the Initiator asks for, how the Responder answers, and what both then use.
 * Pure functions over frames; the socket side lives in handshake.ts. Rule sources: README.md.
 */
import { InvalidArgumentError, type LlpParams } from '@rddp/llp';
import { MpaErrorCode, MpaProtocolError } from './errors.js';
import {
  decodeEnhancedData,
  type EnhancedData,
  encodeEnhancedData,
  type FrameFields,
  MPA_ENHANCED_DATA_LENGTH,
  MPA_MAX_PD_LENGTH,
  type MpaFrame,
  ulpPrivateData,
} from './frames.js';

/** 0: RDMA Consortium MPA (RDMAC profile); 1: RFC 5044; 2: RFC 6581 enhanced connection establishment. */
export type MpaRevision = 0 | 1 | 2;
/** The zero-length message the Initiator sends as Ready-To-Receive in peer-to-peer mode (RFC 6581). */
export type RtrType = 'write' | 'read' | 'send';
/** RFC 5044 Appendix C: a permissive IETF implementation also speaks the RDMAC profile (Rev 0). */
export type IetfMode = 'permissive' | 'non-permissive';

/**
 * MPA parameters, as `LlpConnectOptions.params` / `LlpListenOptions.params` (or transport defaults).
 * Initiator: what to ask for. Responder: what to accept (`revision` is the highest it accepts).
 * A type alias (not an interface) so it passes as `LlpParams`.
 */
export type MpaParams = {
  readonly revision?: MpaRevision;
  /** Want CRCs (RFC 5044 §7.1.1 C). Used both ways if either side wants them. Default true. */
  readonly crc?: boolean;
  /** Want Markers in the FPDUs this side receives (RFC 5044 §7.1.1 M). Default false. */
  readonly markers?: boolean;
  /**
   * Peer-to-peer mode (RFC 6581, Rev 2): the RTR types offered (Initiator) or accepted (Responder),
   * or false. Default: Initiator false; Responder accepts all three.
   */
  readonly rtr?: RtrType | readonly RtrType[] | false;
  /** Alias of `rtr`; `true` offers what Linux siw offers (`['write', 'read']`). */
  readonly p2p?: RtrType | readonly RtrType[] | boolean;
  /** RFC 6581 IRD / ORD this side offers (Rev 2; 0..16383). Default 16 each. */
  readonly ird?: number;
  readonly ord?: number;
  /** RFC 5044 Appendix C. Default 'non-permissive'. */
  readonly ietfMode?: IetfMode;
};

export interface ResolvedMpaParams {
  readonly revision: MpaRevision;
  readonly crc: boolean;
  readonly markers: boolean;
  /** Empty: no peer-to-peer. In preference order for a Responder. */
  readonly rtr: readonly RtrType[];
  readonly ird: number;
  readonly ord: number;
  readonly ietfMode: IetfMode;
}

/** What one end of a connection uses after startup (`connection.setup.negotiated`). */
export type MpaNegotiated = {
  readonly revision: MpaRevision;
  /** Rev 0: the RDMA Consortium profile (DDP/RDMAP version 0 above; markers and CRC both ways). */
  readonly rdmac: boolean;
  readonly crc: boolean;
  /** The peer puts Markers in the FPDUs this side receives. */
  readonly markersRx: boolean;
  /** This side puts Markers in the FPDUs it sends. */
  readonly markersTx: boolean;
  /** RFC 6581 IRD/ORD were exchanged. */
  readonly enhanced: boolean;
  readonly p2p: boolean;
  /** The RTR message exchanged (sent and consumed by the LLP), or false. */
  readonly rtr: RtrType | false;
  /** Enhanced only: the IRD and ORD this side should use, and what the peer announced. */
  readonly ird?: number;
  readonly ord?: number;
  readonly peerIrd?: number;
  readonly peerOrd?: number;
};

/** Both ends of an RDMAC-profile connection (Rev 0, RFC 5044 Appendix C): Markers and CRC both ways, no RFC 6581. */
const RDMAC_NEGOTIATED: MpaNegotiated = Object.freeze({
  revision: 0,
  rdmac: true,
  crc: true,
  markersRx: true,
  markersTx: true,
  enhanced: false,
  p2p: false,
  rtr: false,
});

const RTR_ORDER: readonly RtrType[] = ['write', 'read', 'send'];

export const INITIATOR_DEFAULTS: ResolvedMpaParams = {
  revision: 1,
  crc: true,
  markers: false,
  rtr: [],
  ird: 16,
  ord: 16,
  ietfMode: 'non-permissive',
};

export const RESPONDER_DEFAULTS: ResolvedMpaParams = { ...INITIATOR_DEFAULTS, revision: 2, rtr: RTR_ORDER };

function bad(message: string): never {
  throw new InvalidArgumentError(message);
}

function rtrList(v: unknown, key: string): readonly RtrType[] {
  if (v === false) return [];
  if (v === true) return ['write', 'read'];
  const list =
    typeof v === 'string'
      ? [v]
      : Array.isArray(v)
        ? v
        : bad(`params.${key} must be an RTR type, a list of them, or false`);
  for (const t of list)
    if (!RTR_ORDER.includes(t as RtrType))
      bad(`params.${key}: unknown RTR type ${JSON.stringify(t)} (write, read, send)`);
  // Keep preference order, drop duplicates.
  return RTR_ORDER.filter((t) => list.includes(t));
}

/** Merges `params` over `base`, checking every value (a caller's mistake is an InvalidArgumentError). */
export function resolveParams(params: LlpParams | undefined, base: ResolvedMpaParams): ResolvedMpaParams {
  const p = (params ?? {}) as Record<string, unknown>;
  const known = new Set(['revision', 'crc', 'markers', 'rtr', 'p2p', 'ird', 'ord', 'ietfMode']);
  for (const k of Object.keys(p)) if (!known.has(k)) bad(`unknown MPA parameter "${k}"`);
  const out = { ...base } as { -readonly [K in keyof ResolvedMpaParams]: ResolvedMpaParams[K] };
  if (p.revision !== undefined) {
    if (p.revision !== 0 && p.revision !== 1 && p.revision !== 2)
      bad(`params.revision must be 0, 1 or 2, got ${String(p.revision)}`);
    out.revision = p.revision;
  }
  for (const k of ['crc', 'markers'] as const)
    if (p[k] !== undefined) {
      if (typeof p[k] !== 'boolean') bad(`params.${k} must be a boolean`);
      out[k] = p[k];
    }
  if (p.rtr !== undefined && p.p2p !== undefined) bad('give params.rtr or params.p2p, not both');
  if (p.rtr !== undefined) out.rtr = rtrList(p.rtr, 'rtr');
  if (p.p2p !== undefined) out.rtr = rtrList(p.p2p, 'p2p');
  for (const k of ['ird', 'ord'] as const)
    if (p[k] !== undefined) {
      const v = p[k];
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0x3fff)
        bad(`params.${k} must be an integer 0..16383 (14 bits, RFC 6581), got ${String(v)}`);
      out[k] = v;
    }
  if (p.ietfMode !== undefined) {
    if (p.ietfMode !== 'permissive' && p.ietfMode !== 'non-permissive')
      bad(`params.ietfMode must be 'permissive' or 'non-permissive'`);
    out.ietfMode = p.ietfMode;
  }
  return out;
}

/** Most octets of ULP private data at this revision: 512, less the 4 octets of RFC 6581 data at Rev 2. */
export function maxUlpPrivateData(revision: MpaRevision): number {
  return revision === 2 ? MPA_MAX_PD_LENGTH - MPA_ENHANCED_DATA_LENGTH : MPA_MAX_PD_LENGTH;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

/** What the Initiator sent, kept to read the Reply against. */
export interface SentRequest {
  readonly params: ResolvedMpaParams;
  readonly frame: FrameFields;
  readonly enhanced: EnhancedData | null;
}

/** The Initiator's MPA Request (RFC 5044 §7.1.2 rule 1; RFC 6581 at Rev 2). */
export function buildRequest(p: ResolvedMpaParams, ulpPd: Uint8Array): SentRequest {
  if (p.rtr.length > 0 && p.revision !== 2)
    bad(`peer-to-peer mode (params.rtr) needs MPA Rev 2 (RFC 6581); revision is ${p.revision}`);
  const max = maxUlpPrivateData(p.revision);
  if (ulpPd.byteLength > max)
    bad(
      `private data of ${ulpPd.byteLength} octets exceeds ${max} at MPA Rev ${p.revision} (RFC 5044 §7.1.1, RFC 6581)`,
    );
  if (p.revision === 0)
    // RDMAC profile: Markers and CRC always (our reading of RFC 5044 Appendix C).
    return {
      params: p,
      enhanced: null,
      frame: { kind: 'request', markers: true, crc: true, revision: 0, privateData: ulpPd },
    };
  if (p.revision === 1)
    return {
      params: p,
      enhanced: null,
      frame: { kind: 'request', markers: p.markers, crc: p.crc, revision: 1, privateData: ulpPd },
    };
  const enhanced: EnhancedData = {
    ird: p.ird,
    // siw behaviour: a Read RTR needs an ORD of at least 1 (siw_connect raises ORD to 1 in p2p mode).
    ord: p.rtr.includes('read') ? Math.max(1, p.ord) : p.ord,
    p2p: p.rtr.length > 0,
    send: p.rtr.includes('send'),
    write: p.rtr.includes('write'),
    read: p.rtr.includes('read'),
  };
  return {
    params: p,
    enhanced,
    frame: {
      kind: 'request',
      markers: p.markers,
      crc: p.crc,
      enhanced: true,
      revision: 2,
      privateData: concat(encodeEnhancedData(enhanced), ulpPd),
    },
  };
}

/** A Request the Responder can accept; what it would use if its ULP accepts. */
export interface ResponderOffer {
  readonly request: MpaFrame;
  readonly negotiated: MpaNegotiated;
  /** The Initiator's private data for the ULP (RFC 6581 data removed). */
  readonly ulpPrivateData: Uint8Array;
  /** What the Initiator asked for, as the ULP's `LlpConnectRequest.params`. */
  readonly requested: LlpParams;
  /** Reply fields except Private Data and R. */
  readonly replyBase: Omit<FrameFields, 'privateData' | 'reject'>;
  /** RFC 6581 data the Reply carries (null when not enhanced). */
  readonly replyEnhanced: EnhancedData | null;
}

export type RequestOutcome =
  /** Close without a Reply (RFC 5044 §7.1.1: a Rev the receiver cannot interoperate with). */
  | { readonly kind: 'close'; readonly error: MpaProtocolError }
  /** Send this Reply with R=1, then close. */
  | { readonly kind: 'reject'; readonly error: MpaProtocolError; readonly reply: FrameFields }
  | { readonly kind: 'offer'; readonly offer: ResponderOffer };

function chooseRtr(offered: EnhancedData, accepted: readonly RtrType[]): RtrType | false {
  const any = offered.write || offered.read || offered.send;
  for (const t of accepted) {
    // siw behaviour: P without any RTR type gets a zero-length Write proposed.
    if (!any && t === 'write') return t;
    if (offered[t]) return t;
  }
  return false;
}

/** The Responder's reading of an MPA Request (RFC 5044 §7.1.1–7.1.2, RFC 6581, RFC 5044 Appendix C). */
export function evaluateRequest(req: MpaFrame, p: ResolvedMpaParams): RequestOutcome {
  const rev = req.revision;
  if (rev > 2)
    return {
      kind: 'close',
      error: new MpaProtocolError(
        'bad-revision',
        MpaErrorCode.invalidRequestReply,
        `MPA Request Rev ${rev} is not one this responder interoperates with (RFC 5044 §7.1.1 Rev)`,
      ),
    };
  // RFC 5044 Appendix C: only a permissive IETF implementation speaks the RDMAC profile.
  const rdmacPeer = rev === 0;
  if (rdmacPeer && p.ietfMode !== 'permissive')
    return {
      kind: 'close',
      error: new MpaProtocolError(
        'bad-revision',
        MpaErrorCode.invalidRequestReply,
        'MPA Request Rev 0 (RDMA Consortium profile) refused by a non-permissive IETF responder (RFC 5044 Appendix C)',
      ),
    };
  // A responder configured for the RDMAC profile (revision 0) answers every Request in it.
  const rdmac = rdmacPeer || p.revision === 0;
  const requested: Record<string, unknown> = { revision: rev, crc: req.crc, markers: req.markers };

  let enhancedReq: EnhancedData | null = null;
  if (rev === 2 && req.enhanced) {
    if (req.privateData.byteLength < MPA_ENHANCED_DATA_LENGTH) {
      const error = new MpaProtocolError(
        'malformed-frame',
        MpaErrorCode.invalidRequestReply,
        `enhanced MPA Request with PD_Length ${req.privateData.byteLength} < 4 octets of IRD/ORD (RFC 6581)`,
      );
      // siw behaviour: reject (R=1), no Private Data.
      return {
        kind: 'reject',
        error,
        reply: {
          kind: 'reply',
          markers: false,
          crc: req.crc,
          reject: true,
          revision: 2,
          privateData: new Uint8Array(0),
        },
      };
    }
    enhancedReq = decodeEnhancedData(req.privateData);
    const offered = RTR_ORDER.filter((t) => (enhancedReq as EnhancedData)[t]);
    Object.assign(requested, {
      ird: enhancedReq.ird,
      ord: enhancedReq.ord,
      rtr: enhancedReq.p2p ? (offered.length > 0 ? offered : ['write']) : false,
    });
  }
  const ulpPd = ulpPrivateData(req);

  if (rdmac) {
    return {
      kind: 'offer',
      offer: {
        request: req,
        negotiated: RDMAC_NEGOTIATED,
        ulpPrivateData: ulpPd,
        requested,
        replyBase: { kind: 'reply', markers: true, crc: true, revision: 0 },
        replyEnhanced: null,
      },
    };
  }

  const crc = req.crc || p.crc;
  // Rev 2 only when both sides do it; a Rev 1-only responder answers Rev 1 (declining RFC 6581).
  const revision: MpaRevision = rev === 2 && p.revision === 2 ? 2 : 1;
  const enhanced = revision === 2 && enhancedReq !== null;
  const base = { kind: 'reply' as const, markers: p.markers, crc, revision, enhanced };

  if (!enhanced || enhancedReq === null) {
    const negotiated: MpaNegotiated = {
      revision,
      rdmac: false,
      crc,
      markersRx: p.markers,
      markersTx: req.markers,
      enhanced: false,
      p2p: false,
      rtr: false,
    };
    return {
      kind: 'offer',
      offer: { request: req, negotiated, ulpPrivateData: ulpPd, requested, replyBase: base, replyEnhanced: null },
    };
  }

  const peer = enhancedReq;
  let rtr: RtrType | false = false;
  if (peer.p2p) {
    rtr = chooseRtr(peer, p.rtr);
    if (rtr === false) {
      const replyEnhanced = {
        ird: p.ird,
        ord: Math.min(p.ord, peer.ird),
        p2p: true,
        send: false,
        write: false,
        read: false,
      };
      return {
        kind: 'reject',
        error: new MpaProtocolError(
          'no-matching-rtr',
          MpaErrorCode.noMatchingRtr,
          `no RTR type offered by the initiator (${RTR_ORDER.filter((t) => peer[t]).join(', ') || 'none'}) is accepted here (${p.rtr.join(', ') || 'peer-to-peer disabled'}) (RFC 6581)`,
        ),
        reply: { ...base, reject: true, privateData: encodeEnhancedData(replyEnhanced) },
      };
    }
  }
  // RFC 6581: the Responder's ORD never exceeds the Initiator's IRD; it announces its own IRD.
  const ord = Math.min(p.ord, peer.ird);
  // siw behaviour: the peer serves a Read RTR from an ORD taken from this IRD, so it must be at least 1.
  const ird = rtr === 'read' ? Math.max(1, p.ird) : p.ird;
  const replyEnhanced: EnhancedData = {
    ird,
    ord,
    p2p: peer.p2p,
    send: rtr === 'send',
    write: rtr === 'write',
    read: rtr === 'read',
  };
  const negotiated: MpaNegotiated = {
    revision: 2,
    rdmac: false,
    crc,
    markersRx: p.markers,
    markersTx: req.markers,
    enhanced: true,
    p2p: peer.p2p,
    rtr,
    ird,
    ord,
    peerIrd: peer.ird,
    peerOrd: peer.ord,
  };
  return {
    kind: 'offer',
    offer: { request: req, negotiated, ulpPrivateData: ulpPd, requested, replyBase: base, replyEnhanced },
  };
}

/** The Responder's Reply: accepted with the ULP's private data, or rejected (R=1) with it. */
export function buildReply(offer: ResponderOffer, accept: boolean, ulpPd: Uint8Array): FrameFields {
  const max = offer.replyEnhanced ? maxUlpPrivateData(2) : MPA_MAX_PD_LENGTH;
  if (ulpPd.byteLength > max)
    bad(`reply private data of ${ulpPd.byteLength} octets exceeds ${max} octets (RFC 5044 §7.1.1, RFC 6581)`);
  const pd = offer.replyEnhanced ? concat(encodeEnhancedData(offer.replyEnhanced), ulpPd) : ulpPd;
  return { ...offer.replyBase, reject: !accept, privateData: pd };
}

export type ReplyOutcome =
  | { readonly kind: 'error'; readonly error: MpaProtocolError }
  | { readonly kind: 'rejected'; readonly ulpPrivateData: Uint8Array }
  | { readonly kind: 'accepted'; readonly negotiated: MpaNegotiated; readonly ulpPrivateData: Uint8Array };

function replyError(
  violation: 'bad-revision' | 'malformed-frame' | 'no-matching-rtr' | 'insufficient-ird',
  message: string,
): ReplyOutcome {
  const code =
    violation === 'no-matching-rtr'
      ? MpaErrorCode.noMatchingRtr
      : violation === 'insufficient-ird'
        ? MpaErrorCode.insufficientIrd
        : MpaErrorCode.invalidRequestReply;
  return { kind: 'error', error: new MpaProtocolError(violation, code, message) };
}

/** The Initiator's reading of the MPA Reply to `sent` (RFC 5044 §7.1.1–7.1.2, RFC 6581, Appendix C). */
export function evaluateReply(sent: SentRequest, rep: MpaFrame): ReplyOutcome {
  const p = sent.params;
  const rev = rep.revision;
  if (rev > 2)
    return replyError(
      'bad-revision',
      `MPA Reply Rev ${rev} is not one this initiator interoperates with (RFC 5044 §7.1.1 Rev)`,
    );
  if (rep.reject) return { kind: 'rejected', ulpPrivateData: ulpPrivateData(rep) };

  if (rev === 0 || p.revision === 0) {
    if (rev !== 0)
      return replyError(
        'bad-revision',
        `asked for the RDMAC profile (Rev 0), the responder replied Rev ${rev} (RFC 5044 Appendix C)`,
      );
    if (p.revision !== 0 && p.ietfMode !== 'permissive')
      return replyError(
        'bad-revision',
        'the responder replied Rev 0 (RDMA Consortium profile); a non-permissive IETF initiator closes (RFC 5044 Appendix C)',
      );
    return {
      kind: 'accepted',
      ulpPrivateData: rep.privateData,
      negotiated: RDMAC_NEGOTIATED,
    };
  }
  if (rev > p.revision)
    return replyError(
      'bad-revision',
      `asked for MPA Rev ${p.revision}, the responder replied Rev ${rev} (RFC 5044 §7.1.1 Rev)`,
    );

  const crc = sent.frame.crc || rep.crc;
  const common = { rdmac: false, crc, markersRx: sent.frame.markers, markersTx: rep.markers };
  const wantedP2p = sent.enhanced?.p2p === true;

  if (rev === 1 || !sent.enhanced) {
    if (wantedP2p)
      return replyError('no-matching-rtr', 'asked for peer-to-peer mode, the responder replied MPA Rev 1 (RFC 6581)');
    if (rev === 2 && rep.enhanced)
      return replyError('malformed-frame', 'enhanced MPA Reply to a Request that was not enhanced (RFC 6581)');
    return {
      kind: 'accepted',
      ulpPrivateData: rep.privateData,
      negotiated: { revision: rev as MpaRevision, ...common, enhanced: false, p2p: false, rtr: false },
    };
  }
  // Rev 2, enhanced Request: the Reply must be enhanced too (siw behaviour: protocol failure otherwise).
  if (!rep.enhanced || rep.privateData.byteLength < MPA_ENHANCED_DATA_LENGTH)
    return replyError('malformed-frame', 'MPA Reply Rev 2 to an enhanced Request lacks the RFC 6581 IRD/ORD data');
  const peer = decodeEnhancedData(rep.privateData);
  let rtr: RtrType | false = false;
  if (wantedP2p) {
    const chosen = RTR_ORDER.filter((t) => peer[t]);
    if (!peer.p2p || chosen.length !== 1 || !p.rtr.includes(chosen[0] as RtrType))
      return replyError(
        'no-matching-rtr',
        `asked for an RTR among ${p.rtr.join(', ')}, the responder answered ${peer.p2p ? chosen.join(', ') || 'none' : 'client-server mode'} (RFC 6581)`,
      );
    rtr = chosen[0] as RtrType;
  }
  // RFC 6581: the Responder's ORD must fit this side's IRD.
  if (peer.ord > p.ird)
    return replyError(
      'insufficient-ird',
      `the responder's ORD ${peer.ord} exceeds this initiator's IRD ${p.ird} (RFC 6581)`,
    );
  return {
    kind: 'accepted',
    ulpPrivateData: ulpPrivateData(rep),
    negotiated: {
      revision: 2,
      ...common,
      enhanced: true,
      p2p: wantedP2p,
      rtr,
      ird: p.ird,
      ord: Math.min(sent.enhanced.ord, peer.ird),
      peerIrd: peer.ird,
      peerOrd: peer.ord,
    },
  };
}
