/**
 * The transports the tools can run on, by `--transport` name. Each entry turns the common flags into an
 * LLP transport and says which DDP/RDMAP profile its negotiation selects.
 */
import type { LlpConnection, LlpParams, LlpTransport } from '@rddp/llp';
import { loopback } from '@rddp/llp-loopback';
import { type MpaParams, type MpaRevision, mpaTcp, type RtrType } from '@rddp/llp-mpa-tcp';
import { sctp } from '@rddp/llp-sctp';

export interface TransportFlags {
  transport: string;
  mpaRev?: string;
  crc?: boolean;
  markers?: boolean;
  p2p?: string;
  ird?: number;
  ord?: number;
  /** `--max-ulpdu <n>`: largest ULPDU_Length accepted, 64768..65535 (interop deviation, docs/MPA.md). */
  maxUlpdu?: number | string;
  /** `--tolerate-early-fpdu`: the initiator accepts a responder FPDU before its own first (interop deviation). */
  tolerateEarlyFpdu?: boolean;
}

export interface ToolTransport {
  readonly transport: LlpTransport;
  /** Parameters for connect (initiator). */
  readonly connectParams: LlpParams;
  /** Parameters for listen (responder): what it accepts. */
  readonly listenParams: LlpParams;
  /** DDP/RDMAP profile of a connection: MPA Rev 0 is the RDMA Consortium profile (DV=0, RV=0). */
  profileOf(c: LlpConnection): 'ietf' | 'rdmac';
}

export class UsageError extends Error {
  readonly code = 'ERR_RDDP_USAGE';
  readonly exitCode = 2;
}

/** `loopback` is the in-process LLP: both ends must run in one process (`perf --loopback`). */
export const TRANSPORT_NAMES = ['tcp', 'sctp', 'loopback'] as const;

export function toolTransport(f: TransportFlags): ToolTransport {
  switch (f.transport) {
    case 'tcp': {
      const rev = f.mpaRev === undefined ? 1 : Number(f.mpaRev);
      if (![0, 1, 2].includes(rev)) throw new UsageError(`--mpa-rev must be 0, 1 or 2 (got ${f.mpaRev})`);
      let rtr: RtrType | false = false;
      if (f.p2p !== undefined) {
        if (!['write', 'read', 'send'].includes(f.p2p))
          throw new UsageError(`--p2p must be write, read or send (got ${f.p2p})`);
        if (rev !== 2) throw new UsageError('--p2p needs --mpa-rev 2 (RFC 6581 peer-to-peer mode)');
        rtr = f.p2p as RtrType;
      }
      const params: MpaParams = {
        revision: rev as MpaRevision,
        crc: f.crc ?? true,
        markers: f.markers ?? false,
        ...(rtr ? { rtr } : {}),
        ...(f.ird !== undefined ? { ird: f.ird } : {}),
        ...(f.ord !== undefined ? { ord: f.ord } : {}),
        ...(rev === 0 ? { ietfMode: 'permissive' as const } : {}),
      };
      // The responder accepts up to the revision asked for (all of them by default), and is a permissive
      // IETF implementation (RFC 5044 Appendix C), so an RDMAC-era Rev 0 initiator is served too.
      const listenParams: MpaParams = {
        ...params,
        revision: f.mpaRev === undefined ? 2 : (rev as MpaRevision),
        rtr: rtr ? [rtr] : ['write', 'read', 'send'],
        ietfMode: 'permissive',
      };
      const maxUlpdu = f.maxUlpdu === undefined ? undefined : Number(f.maxUlpdu);
      if (maxUlpdu !== undefined && (!Number.isInteger(maxUlpdu) || maxUlpdu < 64768 || maxUlpdu > 65535))
        throw new UsageError(`--max-ulpdu must be an integer 64768..65535 (got ${f.maxUlpdu})`);
      return {
        // Interop deviations (off by default, docs/MPA.md): longer received ULPDUs, an early responder FPDU.
        transport: mpaTcp({
          params,
          ...(maxUlpdu !== undefined ? { maxUlpduLength: maxUlpdu } : {}),
          ...(f.tolerateEarlyFpdu ? { tolerateEarlyResponderFpdu: true } : {}),
        }),
        connectParams: params,
        listenParams,
        profileOf: (c) => ((c.setup.negotiated as { rdmac?: boolean }).rdmac ? 'rdmac' : 'ietf'),
      };
    }
    case 'sctp':
      // RFC 5043 over the npm `sctp` package, UDP-encapsulated (no privileges); IETF DDP/RDMAP (DV=1, RV=1).
      if (f.mpaRev !== undefined || f.p2p !== undefined || f.markers || f.maxUlpdu !== undefined || f.tolerateEarlyFpdu)
        throw new UsageError(
          '--mpa-rev, --p2p, --markers, --max-ulpdu and --tolerate-early-fpdu apply to --transport tcp only',
        );
      return {
        transport: sctp({ encapsulation: 'udp' }),
        connectParams: {},
        listenParams: {},
        profileOf: () => 'ietf',
      };
    case 'loopback':
      return { transport: loopback(), connectParams: {}, listenParams: {}, profileOf: () => 'ietf' };
    default:
      throw new UsageError(`unknown --transport '${f.transport}' (one of: ${TRANSPORT_NAMES.join(', ')})`);
  }
}
