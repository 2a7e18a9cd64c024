/**
 * Opening a connection to (or from) the implementation under test, in the case's role: MPA startup,
 * the RFC 6581 RTR exchange when peer-to-peer mode was agreed, and the rping steps a case needs before
 * it plants its fault (an STag of the target's to aim at).
 */
import { Opcode } from '../wire/constants.js';
import type { EnhancedSetup } from '../wire/mpa.js';
import { decodeReadRequest } from '../wire/rdmap.js';
import { ConformanceProtocolError } from './errors.js';
import {
  checkReadOfSource,
  decodeInfo,
  encodeInfo,
  KIT_PING_SIZE,
  KIT_SINK_STAG,
  KIT_SINK_TO,
  KIT_SOURCE_STAG,
  KIT_SOURCE_TO,
  pingText,
  RPING_INFO_LENGTH,
  type RpingInfo,
  RxCheck,
  readRequest,
  respondRead,
} from './rping.js';
import { enhancedOf, type FrameOverrides, KitSession } from './session.js';
import type { CaseContext } from './types.js';

export interface Peer {
  readonly s: KitSession;
  readonly rx: RxCheck;
}

export type RtrType = 'write' | 'read' | 'send';

/** RFC 6581 RTR messages (what the Initiator sends first in peer-to-peer mode). */
function sendRtr(s: KitSession, type: RtrType): void {
  if (type === 'write') s.sendUlpdu(s.tagged(Opcode.RdmaWrite, 1, 0n, new Uint8Array(0)));
  else if (type === 'read') s.readRequest({ sinkStag: 0, sinkTo: 0n, size: 0, srcStag: 1, srcTo: 0n });
  else s.send(new Uint8Array(0));
}

function rtrOf(e: EnhancedSetup | undefined): RtrType | undefined {
  if (!e?.peerToPeer) return undefined;
  return e.writeRtr ? 'write' : e.readRtr ? 'read' : e.sendRtr ? 'send' : undefined;
}

/** Client role: MPA startup, and the RTR when the target's Reply chose one (RFC 6581). */
export async function openClient(
  ctx: CaseContext,
  o: { request?: FrameOverrides; enhanced?: Partial<EnhancedSetup> } = {},
): Promise<Peer> {
  const conn = await ctx.connect();
  const s = await KitSession.connect(conn, ctx.mode, ctx.waitMs, o);
  const rtr = s.rev === 2 && o.enhanced?.peerToPeer ? rtrOf(enhancedOf(s.peerFrame)) : undefined;
  const rx = new RxCheck(s);
  if (rtr) {
    sendRtr(s, rtr);
    // A Read RTR is answered by a zero-length Read Response before anything else (RFC 6581 §7).
    if (rtr === 'read') await rx.tagged(Opcode.RdmaReadResponse, 0, 0n, 0, 'the Read RTR’s zero-length Read Response');
  }
  return { s, rx };
}

/** Server role: the client's MPA Request answered, and its RTR taken (and a Read RTR answered). */
export async function openServer(
  ctx: CaseContext,
  o: { reply?: FrameOverrides; enhanced?: Partial<EnhancedSetup>; withReply?: (s: KitSession) => void } = {},
): Promise<Peer> {
  const conn = await ctx.accept();
  const s = await KitSession.accept(conn, ctx.mode, ctx.waitMs, o);
  const q = enhancedOf(s.peerFrame);
  const rtr = s.rev === 2 ? rtrOf(q) : undefined;
  const msns = new Map<number, number>();
  if (rtr) {
    const raw = new RxCheck(s);
    const m = await raw.next('the RFC 6581 RTR message');
    if (rtr === 'send' && m.opcode === Opcode.Send && m.payload.byteLength === 0) msns.set(0, 1);
    else if (rtr === 'write' && m.opcode === Opcode.RdmaWrite && m.payload.byteLength === 0) {
      // A zero-length Write places nothing.
    } else if (rtr === 'read' && m.opcode === Opcode.RdmaReadRequest) {
      const rr = decodeReadRequest(m.payload);
      if (!rr || rr.size !== 0)
        throw new ConformanceProtocolError('RFC 6581: the Read RTR is a zero-length Read Request');
      msns.set(1, 1);
      respondRead(s, rr, new Uint8Array(0));
    } else throw new ConformanceProtocolError(`RFC 6581: the first FPDU is not the ${rtr} RTR the Reply chose`);
  }
  return { s, rx: new RxCheck(s, msns) };
}

/** The role's own way in. */
export function open(ctx: CaseContext): Promise<Peer> {
  return ctx.role === 'client' ? openClient(ctx) : openServer(ctx);
}

/** Client role: advertises the kit's source buffer and returns the target's Read Request (its sink STag). */
export async function clientToReadRequest(p: Peer) {
  p.s.send(encodeInfo({ addr: KIT_SOURCE_TO, rkey: KIT_SOURCE_STAG, size: KIT_PING_SIZE }));
  const rr = await readRequest(p.rx, 'the RDMA Read Request of the source buffer');
  checkReadOfSource(rr, KIT_PING_SIZE);
  return rr;
}

/** Server role: the client's source advertisement (its first Send). */
export async function serverToSource(p: Peer): Promise<RpingInfo> {
  const adv = await p.rx.expect(Opcode.Send, "the client's source advertisement");
  const src = decodeInfo(adv.payload);
  if (!src || src.size === 0 || src.size > 1 << 20)
    throw new ConformanceProtocolError(`an rping advertisement of ${adv.payload.byteLength} octets`);
  return src;
}

/** Server role: one ping up to the client's sink advertisement; returns both buffers. */
export async function serverToSink(p: Peer): Promise<{ src: RpingInfo; dst: RpingInfo }> {
  const src = await serverToSource(p);
  p.s.readRequest({ sinkStag: KIT_SINK_STAG, sinkTo: KIT_SINK_TO, size: src.size, srcStag: src.rkey, srcTo: src.addr });
  await p.rx.tagged(Opcode.RdmaReadResponse, KIT_SINK_STAG, KIT_SINK_TO, src.size, 'the Read Response');
  p.s.send(new Uint8Array(RPING_INFO_LENGTH));
  const adv = await p.rx.expect(Opcode.Send, "the client's sink advertisement");
  const dst = decodeInfo(adv.payload);
  if (!dst) throw new ConformanceProtocolError(`an rping advertisement of ${adv.payload.byteLength} octets`);
  return { src, dst };
}

export { pingText };
