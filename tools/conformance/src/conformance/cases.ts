/**
 * The cases, each named by what it checks and citing the clause; ordered by value: MPA startup, the
 * honest exchange, RFC 5041 §7.2 errors, RFC 5040 §7 Terminates, FPDU framing, RFC 6581, ordering,
 * Send with Invalidate, RFC 7306 and the perf tests.
 */
import { MPA_MAX_PRIVATE_DATA, Opcode, TerminateLayer } from '../wire/constants.js';
import { encodeReadRequest } from '../wire/rdmap.js';
import { encodeTerminate } from '../wire/terminate.js';
import { ConformancePeerClosedError, ConformanceRejectedError } from './errors.js';
import { type ActedOn, checkTerminate, expectLlpRefusal, expectTerminate, type TerminateSpec } from './expect.js';
import { clientToReadRequest, open, openClient, openServer, type Peer, serverToSink, serverToSource } from './peer.js';
import { irdOutcome, perfCases } from './perf.js';
import {
  encodeInfo,
  KIT_PING_SIZE,
  KIT_SINK_STAG,
  KIT_SINK_TO,
  KIT_SOURCE_STAG,
  KIT_SOURCE_TO,
  pingText,
  RPING_INFO_LENGTH,
  rpingClient,
  rpingServer,
} from './rping.js';
import { describe, enhancedOf, KIT_IRD, MPA_FLAG_ENHANCED, readMpaFrame, terminateOf } from './session.js';
import {
  type CaseContext,
  type CaseOutcome,
  type ConformanceCase,
  fail,
  info,
  type Mode,
  may,
  must,
  pass,
  type Requirement,
  skip,
} from './types.js';

/** The too-long Send: far longer than the 16-octet messages rping posts its receive buffers for. */
const TOO_LONG = 4096;

/** A Read Response to a faulty Read Request: the target read memory it must not have (an information leak). */
const READ_ANSWERED: ActedOn = { opcode: Opcode.RdmaReadResponse, what: 'data read for it' };

/** An STag no implementation hands out before it has registered a great many regions. */
export const UNKNOWN_STAG = 0xfffe_ff00;

const both = ['client', 'server'] as const;
const clientOnly = ['client'] as const;
const serverOnly = ['server'] as const;

/** DDP Layer / Error Types (RFC 5041 §7.2), RDMAP Error Types (RFC 5040 §4.8). */
const DDP = TerminateLayer.Ddp;
const RDMA = TerminateLayer.Rdma;
const TAGGED = 1;
const UNTAGGED = 2;
const PROTECTION = 1;
const OPERATION = 2;

/**
 * The honest exchange: one rping (client role: the kit pings, then closes and the target must close
 * too; server role: the kit serves one ping and the client must close after it).
 */
export async function honestRping(ctx: CaseContext): Promise<CaseOutcome> {
  const p = await open(ctx);
  if (ctx.role === 'client') {
    const r = await rpingClient(p.s, p.rx);
    p.s.conn.end();
    const end = await p.s.conn.waitClose(ctx.waitMs);
    if (!end) return fail(`${r.pings} ping served, but the target did not close after the kit's FIN`);
    return pass(
      `${r.pings} ping of ${r.octets} octets (Send, Read, Write), then ${end.how === 'fin' ? 'FIN' : 'reset'}`,
    );
  }
  const data = await rpingServer(p.s, p.rx);
  const end = await p.s.conn.waitClose(ctx.waitMs);
  if (!end) return fail('one ping served, but the client did not end the connection');
  const text = Buffer.from(data.subarray(0, Math.max(0, data.indexOf(0)))).toString('latin1');
  if (!text.startsWith('rdma-ping-')) return fail(`the client's ping text is ${JSON.stringify(text.slice(0, 20))}`);
  return pass(
    `one ping of ${data.length} octets ("${text.slice(0, 14)}…"), then the client's ${end.how === 'fin' ? 'FIN' : 'reset'}`,
  );
}

/**
 * Client role: the fault rides on a Read Response, which RFC 5040 §5.2.2 ties to its Read Request; a
 * target that checks that first answers Remote Operation Error (Figure 10: never a Protection Error).
 */
function readResponseAlso(ctx: CaseContext): Pick<TerminateSpec, 'also'> {
  return ctx.role === 'client' ? { also: [{ layer: RDMA, etype: OPERATION, codes: [0xff] }] } : {};
}

/** Client role: a fault right after startup; server role: after the client's first Send. */
async function ready(ctx: CaseContext): Promise<Peer> {
  const p = await open(ctx);
  if (ctx.role === 'server') await serverToSource(p);
  return p;
}

/** What would show the faulty message was acted upon: the target's answer to it had it been taken. */
interface Carrier {
  /** The payload of the Send the exchange expects next from the kit. */
  readonly payload: Uint8Array;
  readonly actedOn: ActedOn;
}

/**
 * The Send the rping exchange expects next from the kit, for one fault to ride on (one change in an
 * otherwise valid message): the client role's source advertisement (taken: the target Reads it), the
 * server role's go-ahead after the Read of the client's source (taken: the client advertises its sink).
 */
async function nextSend(ctx: CaseContext, p: Peer): Promise<Carrier> {
  if (ctx.role === 'client')
    return {
      payload: encodeInfo({ addr: KIT_SOURCE_TO, rkey: KIT_SOURCE_STAG, size: KIT_PING_SIZE }),
      actedOn: { opcode: Opcode.RdmaReadRequest, what: 'the Read Request of the source the Send advertises' },
    };
  const src = await serverToSource(p);
  p.s.readRequest({ sinkStag: KIT_SINK_STAG, sinkTo: KIT_SINK_TO, size: src.size, srcStag: src.rkey, srcTo: src.addr });
  await p.rx.tagged(Opcode.RdmaReadResponse, KIT_SINK_STAG, KIT_SINK_TO, src.size, 'the Read Response');
  return {
    payload: new Uint8Array(RPING_INFO_LENGTH),
    actedOn: { opcode: Opcode.Send, what: 'the sink advertisement the go-ahead Send asks for' },
  };
}

/**
 * The first FPDU the kit sends in the exchange, for a framing fault to ride on (its stream offset is 0, so
 * a Marker falls at its start): the client role's source advertisement (taken: the target Reads it), the
 * server role's Read Request of the client's source (taken: a Read Response).
 */
async function firstMessage(
  ctx: CaseContext,
  p: Peer,
): Promise<{ readonly ulpdu: Uint8Array; readonly what: string; readonly actedOn: ActedOn }> {
  if (ctx.role === 'client')
    return {
      ulpdu: p.s.untagged(
        Opcode.Send,
        0,
        encodeInfo({ addr: KIT_SOURCE_TO, rkey: KIT_SOURCE_STAG, size: KIT_PING_SIZE }),
      ),
      what: 'the source advertisement (a Send)',
      actedOn: { opcode: Opcode.RdmaReadRequest, what: 'the Read Request of the source' },
    };
  const src = await serverToSource(p);
  const rr = encodeReadRequest({ sinkStag: 0x2b00, sinkTo: 0n, size: src.size, srcStag: src.rkey, srcTo: src.addr });
  return {
    ulpdu: p.s.untagged(Opcode.RdmaReadRequest, 1, rr),
    what: 'the Read Request of the source',
    actedOn: { opcode: Opcode.RdmaReadResponse, what: 'the Read Response' },
  };
}

/** The one field a Send-borne fault changes (everything else as the exchange expects). */
interface SendFault {
  readonly opcode?: number;
  readonly qn?: number;
  readonly msn?: number;
  readonly mo?: number;
  readonly dv?: number;
  readonly rv?: number;
}

/**
 * An error case whose fault rides on the Send the exchange expects next ({@link nextSend}): the right
 * Terminate must come, and not the answer the Send would have earned had it been taken.
 */
function sendFaultCase(c: {
  name: string;
  clause: string;
  title: string;
  layer: number;
  etype: number;
  codes: readonly number[];
  fault: (p: Peer) => SendFault;
  skipIn?: ConformanceCase['skipIn'];
}): ConformanceCase {
  return {
    name: c.name,
    clause: c.clause,
    title: c.title,
    roles: both,
    error: true,
    ...(c.skipIn ? { skipIn: c.skipIn } : {}),
    async run(ctx) {
      const p = await open(ctx);
      const no = notRdmac(ctx, p);
      if (no) return no;
      const carrier = await nextSend(ctx, p);
      const f = c.fault(p);
      const u = p.s.untagged(f.opcode ?? Opcode.Send, f.qn ?? 0, carrier.payload, {
        msn: f.msn ?? (p.s.nextMsn[0] as number),
        mo: f.mo ?? 0,
        ...(f.dv === undefined ? {} : { dv: f.dv }),
        ...(f.rv === undefined ? {} : { rv: f.rv }),
      });
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, {
        layer: c.layer,
        etype: c.etype,
        codes: c.codes,
        ulpdu: u,
        actedOn: carrier.actedOn,
      });
    },
  };
}

/** An untagged buffer error (RFC 5041 §7.2) carried by the next Send. */
function untaggedCase(
  name: string,
  clause: string,
  title: string,
  codes: number | readonly number[],
  fault: (p: Peer) => SendFault,
): ConformanceCase {
  return sendFaultCase({
    name,
    clause,
    title,
    layer: DDP,
    etype: UNTAGGED,
    codes: typeof codes === 'number' ? [codes] : codes,
    fault,
  });
}

/**
 * A Rev 0 case on a connection that did not come up as RDMAC MPA (the client's Request or the target's
 * Reply was Rev 1/2): there is no RDMAC stream to test, and mpa.rev0.startup / mpa.rev0.reply say why.
 */
function notRdmac(ctx: CaseContext, p: Peer): CaseOutcome | undefined {
  const f = p.s.peerFrame;
  if (ctx.mode.mpaRev !== 0 || f.rev === 0) return undefined;
  p.s.conn.destroy();
  return skip(
    ctx.role === 'server'
      ? `the client sent a Rev ${f.rev} Request: not RDMAC MPA (mpa.rev0.reply checks how it meets a Rev 0 Reply)`
      : `the target answered Rev ${f.rev} to a Rev 0 Request (mpa.rev0.startup reports it)`,
  );
}

function rev0Only(mode: Mode): string | undefined {
  return mode.mpaRev === 0 ? undefined : 'needs --mpa-rev 0 (the RDMAC profile, RFC 5044 Appendix C)';
}

function withCrc(mode: Mode): string | undefined {
  return mode.crc ? undefined : 'CRCs are off in this mode (--crc on checks them)';
}

/** A Send of `n` payload octets in one ULPDU whose length field says `lengthField`. */
function rawFpdu(p: Peer, ulpduLength: number): void {
  const u = p.s.untagged(Opcode.Send, 0, new Uint8Array(Math.max(0, ulpduLength - 18)));
  p.s.sendUlpdu(ulpduLength < 18 ? u.subarray(0, ulpduLength) : u);
}

/** MPA startup: the kit's Request with `request` overrides; checks the target closes or rejects. */
async function startupRefused(ctx: CaseContext, bytes: Uint8Array, what: string): Promise<CaseOutcome> {
  const conn = await ctx.connect();
  conn.write(bytes);
  try {
    const reply = await readMpaFrame(conn, 'reply', ctx.waitMs);
    if (!reply.reject) return fail(`${what}: the target accepted it (MPA Reply, R clear)`);
    const end = await conn.waitClose(ctx.waitMs);
    return end
      ? pass(`${what}: MPA Reply with R set, then ${end.how === 'fin' ? 'FIN' : 'reset'}`)
      : fail(`${what}: rejected, but the connection stays open`);
  } catch (e) {
    if (e instanceof ConformancePeerClosedError)
      return pass(`${what}: the target ${e.reset ? 'reset' : 'closed'} the connection`);
    throw e;
  }
}

function requestBytes(
  mode: Mode,
  o: { key?: string; pd?: number; pdLength?: number; res?: number; rev?: number },
): Uint8Array {
  const rev = o.rev ?? mode.mpaRev;
  const enhanced = rev === 2 ? 4 : 0;
  const pd = new Uint8Array(Math.max(o.pd ?? 0, enhanced));
  const len = o.pdLength ?? pd.length;
  const b = new Uint8Array(20 + pd.length);
  b.set(new TextEncoder().encode(o.key ?? 'MPA ID Req Frame'), 0);
  b[16] = (mode.markers ? 0x80 : 0) | (mode.crc ? 0x40 : 0) | ((o.res ?? (enhanced ? MPA_FLAG_ENHANCED : 0)) & 0x1f);
  b[17] = rev;
  b[18] = len >>> 8;
  b[19] = len & 0xff;
  if (enhanced) b.set([0, KIT_IRD, 0, KIT_IRD], 20);
  b.set(pd.subarray(enhanced), 20 + enhanced);
  return b;
}

const UNGRADED: readonly ConformanceCase[] = [
  // ── MPA startup (RFC 5044 §7.1, RFC 6581) ─────────────────────────────────────────────────────
  {
    name: 'mpa.startup',
    clause: 'RFC 5044 §7.1',
    title:
      'The MPA Reply answers the Request: its key, Rev, C (CRC asked is CRC used), Res zero; RFC 6581 data at Rev 2',
    roles: both,
    async run(ctx) {
      const p = await open(ctx);
      const f = p.s.peerFrame;
      const e = enhancedOf(f);
      const probs = f.violations
        .filter(
          (v) => v.severity === 'reject' || (v.code === 'mpa-res' && (f.rev !== 2 || f.res !== MPA_FLAG_ENHANCED)),
        )
        .filter((v) => v.code !== 'mpa-enhanced-missing' || e !== undefined)
        .map((v) => `${v.clause}: ${v.message}`);
      if (ctx.mode.mpaRev === 0 ? f.rev !== 0 : f.rev < 1 || f.rev > (ctx.role === 'client' ? ctx.mode.mpaRev : 2))
        probs.push(`Rev ${f.rev} in answer to Rev ${ctx.mode.mpaRev}`);
      if (f.rev === 2 && ctx.mode.mpaRev === 2 && !e) probs.push('RFC 6581 §5: Rev 2 without IRD/ORD');
      if (probs.length) return fail(probs.join('; '));
      // RFC 5044 §7.1.2: C is each end's preference; a '1' in either frame means CRCs both ways. A Reply
      // with C clear to a Request with C set is allowed (the target then sends CRCs: mpa.crc checks them).
      const cNote =
        ctx.role === 'client' && ctx.mode.crc && !f.crc
          ? ' (C clear in the Reply: allowed, the Request’s C=1 puts CRCs on both ways)'
          : '';
      return pass(
        `${ctx.role === 'client' ? 'Reply' : 'Request'}: Rev ${f.rev}, M=${+f.markers} C=${+f.crc}${cNote}, ${f.pdLength} octets of private data${e ? `, IRD ${e.ird} ORD ${e.ord}` : ''}`,
      );
    },
  },
  {
    name: 'liveness.rping',
    clause: 'RFC 5040 §5',
    title: 'An honest rping exchange (Send, RDMA Read, RDMA Write) is served and the connection ends cleanly',
    roles: both,
    run: honestRping,
  },
  {
    name: 'mpa.crc',
    clause: 'RFC 5044 §4.4',
    title: 'Every FPDU the target sends carries a good CRC32c when CRCs were agreed',
    roles: both,
    skipIn: withCrc,
    async run(ctx) {
      const r = await honestRping(ctx);
      return r.verdict === 'PASS' ? pass('every FPDU of one ping had a good CRC') : r;
    },
  },
  {
    name: 'mpa.markers',
    clause: 'RFC 5044 §4.3',
    title: 'Markers every 512 octets, each pointing back to its FPDU, in what the target sends when the kit asked (M)',
    roles: both,
    skipIn: (m) => (m.markers ? undefined : 'Markers are off in this mode (--markers on checks them)'),
    async run(ctx) {
      const p = await open(ctx);
      if (ctx.role === 'client') await rpingClient(p.s, p.rx, 1, 2000);
      else await rpingServer(p.s, p.rx);
      return pass('every Marker in the target’s FPDUs sat at a 512-octet position and pointed to its FPDU');
    },
  },
  {
    name: 'mpa.private-data-512',
    clause: 'RFC 5044 §7.1',
    title: 'A Request with 512 octets of Private Data (the most allowed) is accepted',
    roles: clientOnly,
    async run(ctx) {
      const extra = ctx.mode.mpaRev === 2 ? MPA_MAX_PRIVATE_DATA - 4 : MPA_MAX_PRIVATE_DATA;
      const p = await openClient(ctx, { request: { privateData: new Uint8Array(extra).fill(0x61) } });
      await rpingClient(p.s, p.rx);
      return pass(`accepted with PD_Length 512 and one ping served (Reply PD_Length ${p.s.peerFrame.pdLength})`);
    },
  },
  {
    name: 'mpa.private-data-513',
    clause: 'RFC 5044 §7.1',
    title: 'A Request with PD_Length 513 (over 512) is refused: connection closed or Reply with R set',
    roles: clientOnly,
    error: true,
    run: (ctx) => startupRefused(ctx, requestBytes(ctx.mode, { pd: 513 }), 'PD_Length 513'),
  },
  {
    name: 'mpa.bad-key',
    clause: 'RFC 5044 §7.1.2',
    title: 'A Request whose key is not "MPA ID Req Frame" is refused',
    roles: clientOnly,
    error: true,
    run: (ctx) => startupRefused(ctx, requestBytes(ctx.mode, { key: 'MPA ID Rep Frame' }), 'a Reply key in a Request'),
  },
  {
    name: 'mpa.reserved-bits',
    clause: 'RFC 5044 §7.1',
    title: 'Res bits set in the Request are ignored (reserved: zero on send, ignored on receive)',
    roles: clientOnly,
    async run(ctx) {
      const p = await openClient(ctx, { request: { res: 0x1f } });
      await rpingClient(p.s, p.rx);
      return pass('Res = 11111b ignored; one ping served');
    },
  },
  {
    name: 'mpa.rev-unsupported',
    clause: 'RFC 5044 §7.1',
    title: 'A Request of an unknown Rev (3) is answered with a Rev the target supports, or refused',
    roles: clientOnly,
    async run(ctx) {
      const conn = await ctx.connect();
      conn.write(requestBytes({ ...ctx.mode, mpaRev: 1 }, { rev: 3 }));
      try {
        const reply = await readMpaFrame(conn, 'reply', ctx.waitMs);
        if (reply.rev >= 1 && reply.rev <= 2)
          return pass(`answered with Rev ${reply.rev}${reply.reject ? ' (rejected)' : ''}`);
        return fail(`answered a Rev 3 Request with Rev ${reply.rev}`);
      } catch (e) {
        if (e instanceof ConformancePeerClosedError)
          return pass(`the target ${e.reset ? 'reset' : 'closed'} the connection`);
        throw e;
      }
    },
  },
  {
    name: 'mpa.reply-bad-key',
    clause: 'RFC 5044 §7.1.2',
    title: 'An initiator given a Reply with a wrong key closes the connection and sends no FPDU',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const p = await openServer(ctx, { reply: { key: 'MPA ID Req Frame' } });
      return expectLlpRefusal(p.s, [0x04], 'a Request key in the Reply');
    },
  },
  {
    name: 'mpa.reply-reject',
    clause: 'RFC 5044 §7.1.2',
    title: 'An initiator given a Reply with R set closes the connection and sends no FPDU',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const p = await openServer(ctx, { reply: { reject: true } });
      const m = await p.s.nextOrEnd();
      if (m) return fail(`after a rejecting Reply the client sent ${describe(m)}`);
      const end = p.s.conn.ended;
      return end
        ? pass(`the client ${end.how === 'fin' ? 'closed' : 'reset'} the connection`)
        : fail('the connection stays open');
    },
  },
  {
    name: 'mpa.reply-pd-513',
    clause: 'RFC 5044 §7.1',
    title: 'An initiator given a Reply with PD_Length 513 closes the connection',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const conn = await ctx.accept();
      await readMpaFrame(conn, 'request', ctx.waitMs);
      const b = requestBytes(ctx.mode, { key: 'MPA ID Rep Frame', pd: 513 });
      conn.write(b);
      const end = await conn.waitClose(ctx.waitMs);
      return end
        ? pass(`the client ${end.how === 'fin' ? 'closed' : 'reset'} the connection`)
        : fail('the connection stays open');
    },
  },
  {
    name: 'mpa.reply-crc-forced',
    clause: 'RFC 5044 §7.1',
    title: 'An initiator that did not ask for CRCs uses them when the Reply sets C',
    roles: serverOnly,
    skipIn: (m) => (m.crc ? 'the client asks for CRCs in this mode' : undefined),
    async run(ctx) {
      const p = await openServer(ctx, { reply: { crc: true } });
      if (!p.s.crc) return fail('the kit did not set C');
      await rpingServer(p.s, p.rx);
      return pass('the client sent good CRCs after a Reply with C set');
    },
  },
  {
    name: 'mpa.reply-markers',
    clause: 'RFC 5044 §7.1',
    title: 'An initiator puts Markers in its FPDUs when the Reply sets M',
    roles: serverOnly,
    async run(ctx) {
      const p = await openServer(ctx, { reply: { markers: true } });
      const n = await rpingServer(p.s, p.rx);
      return pass(`the client's FPDUs carried correct Markers (${n.length}-octet ping)`);
    },
  },
  {
    name: 'mpa.responder-fpdu-first',
    clause: 'RFC 5044 §7.1.2',
    title: 'An initiator given an FPDU before its own first FPDU (data right behind the Reply) refuses it',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      // The early FPDU leaves in the Reply's segment: the client has it before it can send its first FPDU.
      const p = await openServer(ctx, { withReply: (s) => s.send(new Uint8Array(16)) });
      // RFC 5044 §7.1.2 binds the Responder (here the kit, breaking it on purpose); what the Initiator
      // does with an early FPDU is its choice: refusing it is a PASS, tolerating it is reported (INFO).
      for (let i = 0; i < 4; i++) {
        const m = await p.s.nextOrEnd();
        if (!m) break;
        const t = terminateOf(m);
        if (t) return pass(`Terminate ${t.name}`);
        if (m.opcode === Opcode.RdmaReadRequest || m.opcode === Opcode.RdmaWrite)
          return info(`the client tolerates an early FPDU from the Responder and went on with ${describe(m)}`);
      }
      const end = p.s.conn.ended;
      return end
        ? pass(`the client ${end.how === 'fin' ? 'closed' : 'reset'} the connection`)
        : info('the client tolerates an early FPDU from the Responder (no Terminate, no close)');
    },
  },
  {
    name: 'mpa.responder-waits',
    clause: 'RFC 5044 §7.1.2',
    title: 'The target as Responder sends no FPDU before it has received one (the kit waits before its first FPDU)',
    roles: clientOnly,
    async run(ctx) {
      const p = await openClient(ctx);
      const m = await p.s.nextOrEnd(Math.min(ctx.waitMs, 1000));
      if (m) return fail(`the Responder sent ${describe(m)} before the kit's first FPDU`);
      const end = p.s.conn.ended;
      if (end) return fail(`the Responder ${end.how === 'fin' ? 'closed' : 'reset'} the connection after its Reply`);
      await rpingClient(p.s, p.rx);
      return pass('no FPDU from the Responder before the kit’s first; then one ping served');
    },
  },
  {
    name: 'mpa.rev2.ird-ord',
    clause: 'RFC 6581 §5',
    title: 'At Rev 2 the answer carries IRD and ORD, and the peer-to-peer bit only when asked',
    roles: both,
    skipIn: (m) => (m.mpaRev === 2 ? undefined : 'needs --mpa-rev 2'),
    async run(ctx) {
      const p = await open(ctx);
      if (p.s.peerFrame.rev !== 2) return notRev2(p);
      const e = enhancedOf(p.s.peerFrame);
      if (!e) return fail('no RFC 6581 data');
      if (ctx.role === 'client' && e.peerToPeer) return fail('P set in a Reply to a Request without P');
      await (ctx.role === 'client' ? rpingClient(p.s, p.rx) : rpingServer(p.s, p.rx));
      return pass(`IRD ${e.ird}, ORD ${e.ord}, P=${+e.peerToPeer}; one ping served`);
    },
  },
  ...(['write', 'read', 'send'] as const).map(
    (rtr): ConformanceCase => ({
      name: `mpa.rev2.rtr-${rtr}`,
      clause: 'RFC 6581 §7',
      title: `Peer-to-peer mode with only the ${rtr} RTR offered: the Reply chooses it, the RTR is taken, the ULP runs`,
      roles: clientOnly,
      skipIn: (m) => (m.mpaRev === 2 ? undefined : 'needs --mpa-rev 2'),
      async run(ctx) {
        const p = await openClient(ctx, {
          enhanced: { peerToPeer: true, writeRtr: rtr === 'write', readRtr: rtr === 'read', sendRtr: rtr === 'send' },
        });
        if (p.s.peerFrame.rev !== 2) return notRev2(p);
        const e = enhancedOf(p.s.peerFrame);
        const chosen = e?.writeRtr ? 'write' : e?.readRtr ? 'read' : e?.sendRtr ? 'send' : 'none';
        if (!e?.peerToPeer || chosen !== rtr)
          return fail(`the Reply chose ${e?.peerToPeer ? chosen : 'no peer-to-peer mode'}`);
        if (rtr === 'send') p.s.nextMsn[0] = 2;
        await rpingClient(p.s, p.rx);
        return pass(`Reply chose the ${rtr} RTR; RTR sent; one ping served`);
      },
    }),
  ),
  // ── MPA Rev 0: the RDMA Consortium profile (RFC 5044 Appendix C) ──────────────────────────────
  {
    name: 'mpa.rev0.startup',
    clause: 'RFC 5044 Appendix C',
    title: 'At Rev 0 (RDMAC MPA) the answer is Rev 0 with M and C set, and an rping at DDP/RDMAP version 0 runs',
    roles: both,
    skipIn: rev0Only,
    async run(ctx) {
      const p = await open(ctx);
      const f = p.s.peerFrame;
      const what = ctx.role === 'client' ? 'Reply' : 'Request';
      // The Initiator picks the revision: a client's Rev 1/2 Request is its choice, not a fault (how it
      // meets the kit's Rev 0 Reply is mpa.rev0.reply's question). A Responder answering Rev 0 with another
      // Rev is at fault.
      if (f.rev !== 0 && ctx.role === 'server')
        return skip(
          `the client sent a Rev ${f.rev} Request: it was not started in RDMAC (Rev 0) mode; mpa.rev0.reply checks how it meets a Rev 0 Reply`,
        );
      if (f.rev !== 0)
        return fail(
          `the target answered the kit's Rev 0 Request with a Rev ${f.rev} Reply (RFC 5044 §7.1: a Responder that cannot interoperate with the Rev closes)`,
        );
      if (!f.markers || !f.crc) return fail(`a Rev 0 ${what} with M=${+f.markers} C=${+f.crc}: RDMAC MPA has both on`);
      await (ctx.role === 'client' ? rpingClient(p.s, p.rx) : rpingServer(p.s, p.rx));
      return pass(`${what}: Rev 0, M=1 C=1, ${f.pdLength} octets of private data; one ping served at DV 0, RV 0`);
    },
  },
  {
    name: 'mpa.rev0.crc-markers',
    clause: 'RFC 5044 Appendix C, §4.3, §4.4',
    title: 'At Rev 0 every FPDU carries a good CRC32c and Markers every 512 octets, both ways, without negotiation',
    roles: both,
    skipIn: rev0Only,
    async run(ctx) {
      const p = await open(ctx);
      const no = notRdmac(ctx, p);
      if (no) return no;
      // A ping large enough for several Markers in each FPDU of data.
      if (ctx.role === 'client') await rpingClient(p.s, p.rx, 2, 2000);
      else await rpingServer(p.s, p.rx);
      return pass('every FPDU of the exchange had a good CRC and Markers pointing to its FPDU, in both directions');
    },
  },
  {
    name: 'mpa.rev0.request',
    clause: 'RFC 5044 §7.1, Appendix C',
    title:
      'A Rev 0 Request to a Rev 1/2 responder: a Rev 0 Reply (permissive; then RDMAC at version 0) or a close (non-permissive), never a Rev 1/2 acceptance',
    roles: clientOnly,
    skipIn: (m) => (m.mpaRev === 0 ? 'the Rev 0 mode opens every connection this way (mpa.rev0.startup)' : undefined),
    async run(ctx) {
      const rdmac: Mode = { mpaRev: 0, crc: true, markers: true };
      let p: Peer;
      try {
        p = await openClient({ ...ctx, mode: rdmac });
      } catch (e) {
        if (e instanceof ConformancePeerClosedError)
          return pass(`the target ${e.reset ? 'reset' : 'closed'} the connection (a non-permissive IETF responder)`);
        if (e instanceof ConformanceRejectedError) return pass('the target refused it with an MPA Reply with R set');
        throw e;
      }
      const f = p.s.peerFrame;
      if (f.rev !== 0)
        return fail(
          `an accepting Rev ${f.rev} Reply to a Rev 0 Request (RFC 5044 §7.1: a Rev it cannot interoperate with ends the connection)`,
        );
      if (!f.markers || !f.crc) return fail(`a Rev 0 Reply with M=${+f.markers} C=${+f.crc}: RDMAC MPA has both on`);
      await rpingClient(p.s, p.rx);
      return pass('a Rev 0 Reply (M=1 C=1), then one ping served at DDP and RDMAP version 0 (a permissive responder)');
    },
  },
  {
    name: 'mpa.rev0.reply',
    clause: 'RFC 5044 §7.1, Appendix C',
    title:
      'A Rev 0 Reply to a Rev 1/2 initiator: it closes (non-permissive) or goes on in RDMAC mode at version 0 (permissive), never at version 1',
    roles: serverOnly,
    skipIn: (m) => (m.mpaRev === 0 ? 'the Rev 0 mode answers every connection this way (mpa.rev0.startup)' : undefined),
    async run(ctx) {
      const p = await openServer(ctx, { reply: { rev: 0, markers: true, crc: true } });
      if (p.s.peerFrame.rev === 0) return skip('the client asked for Rev 0 itself');
      const m = await p.s.nextOrEnd();
      if (!m) {
        const end = p.s.conn.ended;
        return end
          ? pass(`the client ${end.how === 'fin' ? 'closed' : 'reset'} the connection (a non-permissive initiator)`)
          : fail('the client neither closed nor sent an FPDU');
      }
      const bad = m.fpdu.violations.find((v) => v.severity === 'reject');
      if (bad) return fail(`${bad.clause}: ${bad.message} (the client did not switch to RDMAC MPA: CRCs and Markers)`);
      if (m.ddp?.dv !== 0 || m.rv !== 0)
        return fail(
          `after a Rev 0 Reply the client sent ${describe(m)} at DDP version ${m.ddp?.dv}, RDMAP version ${m.rv} (0 due)`,
        );
      return pass(`the client went on in RDMAC mode: ${describe(m)} at DDP and RDMAP version 0`);
    },
  },
  {
    name: 'ddp.rev0.tagged-version-1',
    clause: 'RFC 5041 §7.2, RDMAC DDP 1.0 §6.1',
    title:
      'At Rev 0 a tagged segment with DDP Version 1 (the IETF one): Tagged Buffer Error / Invalid DDP version (0x04)',
    roles: both,
    error: true,
    skipIn: rev0Only,
    async run(ctx) {
      const p = await open(ctx);
      const no = notRdmac(ctx, p);
      if (no) return no;
      if (ctx.role === 'server') await serverToSource(p);
      const u = p.s.tagged(Opcode.RdmaWrite, UNKNOWN_STAG, 0n, new Uint8Array(16), { dv: 1 });
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, { layer: DDP, etype: TAGGED, codes: [0x04], ulpdu: u });
    },
  },
  sendFaultCase({
    name: 'ddp.rev0.untagged-version-1',
    clause: 'RFC 5041 §7.2, RDMAC DDP 1.0 §6.1',
    title:
      'At Rev 0 the next Send with DDP Version 1 (the IETF one): Untagged Buffer Error / Invalid DDP version (0x06)',
    layer: DDP,
    etype: UNTAGGED,
    codes: [0x06],
    fault: () => ({ dv: 1 }),
    skipIn: rev0Only,
  }),
  sendFaultCase({
    name: 'rdmap.rev0.version-1',
    clause: 'RFC 5040 §7.2',
    title:
      'At Rev 0 the next Send with RDMAP Version 1 (the IETF one): Remote Operation Error / Invalid RDMAP version (0x05)',
    layer: RDMA,
    etype: OPERATION,
    codes: [0x05],
    fault: () => ({ rv: 1 }),
    skipIn: rev0Only,
  }),
  // ── RFC 5041 §7.2: tagged buffer errors ───────────────────────────────────────────────────────
  {
    name: 'ddp.tagged.invalid-stag',
    clause: 'RFC 5041 §7.2',
    title:
      'An RDMA Write to an STag the target never advertised: Terminate DDP / Tagged Buffer Error / Invalid STag (0x00)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      const u = p.s.tagged(Opcode.RdmaWrite, UNKNOWN_STAG, 0x1000n, pingText(0, 32));
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, { layer: DDP, etype: TAGGED, codes: [0x00], ulpdu: u });
    },
  },
  {
    name: 'ddp.tagged.base-bounds',
    clause: 'RFC 5041 §7.2',
    title:
      'A tagged segment past the end of an advertised buffer: Tagged Buffer Error / Base or bounds violation (0x01)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      let u: Uint8Array;
      if (ctx.role === 'client') {
        const rr = await clientToReadRequest(p);
        u = p.s.tagged(Opcode.RdmaReadResponse, rr.sinkStag, rr.sinkTo + BigInt(rr.size), new Uint8Array(16));
      } else {
        const { dst } = await serverToSink(p);
        u = p.s.tagged(Opcode.RdmaWrite, dst.rkey, dst.addr + BigInt(dst.size), new Uint8Array(16));
      }
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, { layer: DDP, etype: TAGGED, codes: [0x01], ulpdu: u, ...readResponseAlso(ctx) });
    },
  },
  {
    name: 'ddp.tagged.to-wrap',
    clause: 'RFC 5041 §7.2',
    title: 'A tagged segment whose TO + length wraps 2^64: Tagged Buffer Error / TO wrap (0x03; 0x01 accepted)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      let u: Uint8Array;
      const to = 0xffff_ffff_ffff_fff8n;
      if (ctx.role === 'client') {
        const rr = await clientToReadRequest(p);
        u = p.s.tagged(Opcode.RdmaReadResponse, rr.sinkStag, to, new Uint8Array(16));
      } else {
        const { dst } = await serverToSink(p);
        u = p.s.tagged(Opcode.RdmaWrite, dst.rkey, to, new Uint8Array(16));
      }
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, {
        layer: DDP,
        etype: TAGGED,
        codes: [0x03, 0x01],
        ulpdu: u,
        ...readResponseAlso(ctx),
      });
    },
  },
  {
    name: 'ddp.tagged.stag-not-associated',
    clause: 'RFC 5041 §7.2',
    title:
      "Another connection's STag used on this one: Tagged Buffer Error / STag not associated (0x02; 0x00 accepted)",
    roles: clientOnly,
    error: true,
    async run(ctx) {
      const a = await openClient(ctx);
      const rr = await clientToReadRequest(a);
      const b = await openClient(ctx);
      const u = b.s.tagged(Opcode.RdmaWrite, rr.sinkStag, rr.sinkTo, new Uint8Array(16));
      b.s.sendUlpdu(u);
      const r = await expectTerminate(b.s, { layer: DDP, etype: TAGGED, codes: [0x02, 0x00], ulpdu: u });
      a.s.conn.destroy();
      return r;
    },
  },
  {
    name: 'ddp.tagged.invalid-version',
    clause: 'RFC 5041 §7.2',
    title: 'A tagged segment with DDP Version 2: Tagged Buffer Error / Invalid DDP version (0x04)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      const u = p.s.tagged(Opcode.RdmaWrite, UNKNOWN_STAG, 0n, new Uint8Array(16), { dv: 2 });
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, { layer: DDP, etype: TAGGED, codes: [0x04], ulpdu: u });
    },
  },
  // ── RFC 5041 §7.2: untagged buffer errors ─────────────────────────────────────────────────────
  untaggedCase(
    'ddp.untagged.invalid-qn',
    'RFC 5041 §7.2',
    'The next Send on QN 7 (no such queue): Untagged Buffer Error / Invalid QN (0x01)',
    0x01,
    () => ({ qn: 7 }),
  ),
  untaggedCase(
    'ddp.untagged.msn-no-buffer',
    'RFC 5041 §7.2',
    'The next Send with an MSN 1024 past the expected one (more receive buffers than rping posts): Invalid MSN - no buffer available (0x02) or MSN range not valid (0x03)',
    // RFC 5041 §7.1: no associated buffer (check 2, 0x02) and outside first-to-last available buffer
    // (check 5, 0x03) both hold; Linux siw answers any MSN mismatch with 0x03. One past the expected MSN
    // would be a valid message for a target with two buffers posted (held until the first comes).
    [0x02, 0x03],
    (p) => ({ msn: (p.s.nextMsn[0] as number) + 1024 }),
  ),
  untaggedCase(
    'ddp.untagged.msn-range',
    'RFC 5041 §7.2',
    'The next Send with its MSN 2^31 away from the expected one: Invalid MSN - MSN range is not valid (0x03)',
    0x03,
    (p) => ({ msn: ((p.s.nextMsn[0] as number) + 0x8000_0000) >>> 0 }),
  ),
  untaggedCase(
    'ddp.untagged.invalid-mo',
    'RFC 5041 §7.2',
    'The next Send at MO 2^31 (past any receive buffer): Invalid MO (0x04)',
    0x04,
    () => ({ mo: 0x8000_0000 }),
  ),
  {
    name: 'ddp.untagged.too-long',
    clause: 'RFC 5041 §7.2',
    title: `A ${TOO_LONG}-octet Send (longer than any rping message buffer): DDP Message too long for available buffer (0x05)`,
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      // No rping target advertises its receive buffers' size: the Send is far longer than the 16-octet
      // rping messages, and a target whose buffer held it all is a SKIP, not a FAIL.
      const u = p.s.untagged(Opcode.Send, 0, new Uint8Array(TOO_LONG));
      p.s.sendUlpdu(u);
      const m = await p.s.nextOrEnd();
      if (m && !terminateOf(m) && m.ddp && m.fpdu.violations.every((v) => v.severity !== 'reject'))
        return skip(
          `the target took a ${TOO_LONG}-octet Send and went on (${describe(m)}): its receive buffer is that large, nothing too long to provoke`,
        );
      return expectTerminate(p.s, { layer: DDP, etype: UNTAGGED, codes: [0x05], ulpdu: u }, 8, m);
    },
  },
  untaggedCase(
    'ddp.untagged.invalid-version',
    'RFC 5041 §7.2',
    'The next Send with DDP Version 2: Untagged Buffer Error / Invalid DDP version (0x06)',
    0x06,
    () => ({ dv: 2 }),
  ),
  // ── RFC 5040 §7: RDMAP errors ─────────────────────────────────────────────────────────────────
  {
    name: 'rdmap.read.invalid-stag',
    clause: 'RFC 5040 §7.1',
    title:
      'An RDMA Read Request of an unknown Data Source STag: Remote Protection Error / Invalid STag, DDP and Read Request headers copied (M D R)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      // Server role: the Read of the client's source with only its STag changed. Client role: an rping
      // server advertises nothing to Read; the Request is otherwise well formed.
      const src = ctx.role === 'server' ? await serverToSource(p) : { addr: 0n, size: 16 };
      const rr = encodeReadRequest({
        sinkStag: 0x2b00,
        sinkTo: 0n,
        size: src.size,
        srcStag: UNKNOWN_STAG,
        srcTo: src.addr,
      });
      const u = p.s.untagged(Opcode.RdmaReadRequest, 1, rr);
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, {
        layer: RDMA,
        etype: PROTECTION,
        codes: [0x00],
        ulpdu: u,
        rdmaHeader: rr,
        actedOn: READ_ANSWERED,
      });
    },
  },
  {
    name: 'rdmap.read.base-bounds',
    clause: 'RFC 5040 §7.1',
    title:
      'An RDMA Read Request past the end of the advertised source buffer: Remote Protection Error / Base or bounds violation (0x01), R set',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      const src = await serverToSource(p);
      const rr = encodeReadRequest({
        sinkStag: 0x2b00,
        sinkTo: 0n,
        size: src.size + 16,
        srcStag: src.rkey,
        srcTo: src.addr,
      });
      const u = p.s.untagged(Opcode.RdmaReadRequest, 1, rr);
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, {
        layer: RDMA,
        etype: PROTECTION,
        codes: [0x01],
        ulpdu: u,
        rdmaHeader: rr,
        actedOn: READ_ANSWERED,
      });
    },
  },
  {
    name: 'rdmap.read.access',
    clause: 'RFC 5040 §7.1',
    title:
      'An RDMA Read Request of the sink the client advertised for the Write: Remote Protection Error / Access rights violation (0x02), R set; a readable sink is a SKIP',
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      const { dst } = await serverToSink(p);
      const rr = encodeReadRequest({
        sinkStag: 0x2b00,
        sinkTo: 0n,
        size: dst.size,
        srcStag: dst.rkey,
        srcTo: dst.addr,
      });
      const u = p.s.untagged(Opcode.RdmaReadRequest, 1, rr);
      p.s.sendUlpdu(u);
      // rping advertises an STag, never its access rights: librdmacm rping registers the sink for Reads
      // and Writes. A Read Response is the answer to a readable buffer: nothing to provoke, a SKIP.
      const m = await p.s.nextOrEnd();
      if (m && !terminateOf(m) && m.opcode === Opcode.RdmaReadResponse)
        return skip(
          `the client answered the Read of its sink with ${describe(m)}: the sink is readable, no access violation to provoke`,
        );
      return expectTerminate(p.s, { layer: RDMA, etype: PROTECTION, codes: [0x02], ulpdu: u, rdmaHeader: rr }, 8, m);
    },
  },
  sendFaultCase({
    name: 'rdmap.opcode-reserved',
    clause: 'RFC 5040 §7.2',
    title: 'The next Send with a reserved RDMA OpCode (1100b): Remote Operation Error / Unexpected OpCode (0x06)',
    layer: RDMA,
    etype: OPERATION,
    codes: [0x06],
    fault: () => ({ opcode: 0xc }),
  }),
  sendFaultCase({
    name: 'rdmap.invalid-version',
    clause: 'RFC 5040 §7.2',
    title: 'The next Send with RDMAP Version 2: Remote Operation Error / Invalid RDMAP version (0x05)',
    layer: RDMA,
    etype: OPERATION,
    codes: [0x05],
    fault: () => ({ rv: 2 }),
  }),
  {
    name: 'rdmap.send-invalidate.unknown-stag',
    clause: 'RFC 5040 §5.3',
    title: 'A Send with Invalidate naming an STag not of this stream: Terminate "STag cannot be Invalidated" (0x09)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      const u = p.s.untagged(Opcode.SendWithInvalidate, 0, new Uint8Array(16), { invalidateStag: UNKNOWN_STAG });
      p.s.sendUlpdu(u);
      // §7.2 rule 4 ("The Invalidate STag MUST be valid") also allows Invalid STag for one that does not exist.
      return expectTerminate(p.s, {
        layer: RDMA,
        etype: PROTECTION,
        codes: [0x09, 0x00],
        ulpdu: u,
        also: [{ layer: RDMA, etype: OPERATION, codes: [0x09] }],
      });
    },
  },
  {
    name: 'rdmap.send-invalidate.stag',
    clause: 'RFC 5040 §5.3',
    title:
      "A Send with Invalidate naming the client's sink STag invalidates it: a Write to it afterwards is an Invalid STag",
    roles: serverOnly,
    error: true,
    async run(ctx) {
      const p = await open(ctx);
      const { dst } = await serverToSink(p);
      const inv = p.s.untagged(Opcode.SendWithInvalidate, 0, new Uint8Array(16), { invalidateStag: dst.rkey });
      const u = p.s.tagged(Opcode.RdmaWrite, dst.rkey, dst.addr, pingText(1, 16));
      // One segment: an rping client whose last ping the Send completes must meet the Write before it closes.
      p.s.conn.together(() => {
        p.s.write(dst.rkey, dst.addr, pingText(0, 16));
        p.s.sendUlpdu(inv);
        p.s.sendUlpdu(u);
      });
      const r = await expectTerminate(p.s, { layer: DDP, etype: TAGGED, codes: [0x00], ulpdu: u });
      if (r.verdict === 'PASS') return pass(`Write after the invalidation: ${r.evidence}`);
      // RFC 5040 §5.3: an STag the target will not invalidate is answered with "STag cannot be Invalidated".
      if (/code 0x09/.test(r.evidence) && /etype [12]/.test(r.evidence))
        return pass(`the client refused the invalidation: ${r.evidence}`);
      return r;
    },
  },
  {
    name: 'rdmap.terminate-received',
    clause: 'RFC 5040 §5.4',
    title: 'A Terminate from the kit ends the stream: the target sends nothing more (no Terminate back) and closes',
    roles: both,
    async run(ctx) {
      const p = await ready(ctx);
      const t = encodeTerminate({ layer: RDMA, etype: OPERATION, errorCode: 0xff, m: false, d: false, r: false });
      p.s.sendUlpdu(p.s.untagged(Opcode.Terminate, 2, t));
      const m = await p.s.nextOrEnd();
      if (m) {
        const back = terminateOf(m);
        return fail(
          back
            ? `the target answered a Terminate with a Terminate (${back.name})`
            : `the target went on: ${describe(m)}`,
        );
      }
      const end = p.s.conn.ended;
      return end
        ? pass(`nothing sent after the Terminate; ${end.how === 'fin' ? 'FIN' : 'reset'}`)
        : fail('the connection stays open');
    },
  },
  {
    name: 'rdmap.ordering.read-responses',
    clause: 'RFC 5040 §5.5',
    title: 'Three RDMA Read Requests in a row are answered in order, each Read Response at its own sink TO',
    roles: serverOnly,
    async run(ctx) {
      const p = await open(ctx);
      const src = await serverToSource(p);
      const part = Math.floor(src.size / 3);
      if (part < 1) return skip(`a ${src.size}-octet buffer`);
      for (let i = 0; i < 3; i++)
        p.s.readRequest({
          sinkStag: 0x2b00 + i,
          sinkTo: 0x1000n * BigInt(i + 1),
          size: part,
          srcStag: src.rkey,
          srcTo: src.addr + BigInt(i * part),
        });
      for (let i = 0; i < 3; i++)
        await p.rx.tagged(Opcode.RdmaReadResponse, 0x2b00 + i, 0x1000n * BigInt(i + 1), part, `Read Response ${i + 1}`);
      p.s.conn.destroy();
      return pass(`3 Read Responses of ${part} octets, in request order`);
    },
  },
  {
    name: 'rdmap.ird',
    clause: 'RFC 6581 §5, RFC 5040 §6.1',
    title:
      'IRD + 1 RDMA Read Requests at once: each answered in order, or the stream terminated; never a hang or a lost Read',
    roles: serverOnly,
    error: true,
    skipIn: (m) => (m.mpaRev === 2 ? undefined : 'IRD is announced at Rev 2 only'),
    async run(ctx) {
      const p = await open(ctx);
      if (p.s.peerFrame.rev !== 2) return notRev2(p);
      const ird = enhancedOf(p.s.peerFrame)?.ird;
      if (ird === undefined || ird >= 64) return skip(`the client announced IRD ${ird ?? 'none'}`);
      const src = await serverToSource(p);
      for (let i = 0; i <= ird; i++)
        p.s.readRequest({ sinkStag: 0x2b00, sinkTo: 0n, size: 1, srcStag: src.rkey, srcTo: src.addr });
      return irdOutcome(p, ird);
    },
  },
  // ── FPDU framing (RFC 5044 §4) ────────────────────────────────────────────────────────────────
  {
    name: 'fpdu.bad-crc',
    clause: 'RFC 5044 §4.4',
    title:
      'The next valid rping message with only its CRC wrong is refused (MPA CRC Error 0x02, or a close) and not acted upon',
    roles: both,
    error: true,
    skipIn: withCrc,
    async run(ctx) {
      const p = await open(ctx);
      if (!p.s.crc) return skip('CRCs are not in use on this connection');
      // The message the protocol expects next, right MSN and all: only a CRC check explains a refusal,
      // and the answer it would earn shows it was acted upon.
      const next = await firstMessage(ctx, p);
      p.s.sendUlpdu(next.ulpdu, { crcXor: 0x1 });
      return refusedUnacted(p, [0x02], `${next.what} with a bad CRC`, next.actedOn, 'its CRC was not checked');
    },
  },
  {
    name: 'fpdu.bad-marker',
    clause: 'RFC 5044 §4.3',
    title:
      'The next valid rping message with only its Marker wrong is refused (MPA Marker error 0x03, or a close) and not acted upon',
    roles: both,
    error: true,
    skipIn: (m) => (m.markers ? undefined : 'Markers are off in this mode (--markers asks for them)'),
    async run(ctx) {
      const p = await open(ctx);
      // The kit sends Markers only where the target asked for them (its M bit): without them both ways
      // there is no Marker of the kit's to get wrong.
      if (!p.s.markersTx || !p.s.markersRx)
        return skip(
          `Markers are not in use both ways (the target's ${ctx.role === 'client' ? 'Reply' : 'Request'} has M=${+p.s.peerFrame.markers}): the kit sends no Marker to get wrong`,
        );
      const next = await firstMessage(ctx, p);
      let moved = 0;
      p.s.sendUlpdu(next.ulpdu, {
        markerPtr: (_i, right) => {
          moved++;
          return right + 4;
        },
      });
      if (moved === 0) {
        p.s.conn.destroy();
        return skip(`no Marker position fell inside ${next.what}: nothing to get wrong`);
      }
      return refusedUnacted(
        p,
        [0x03],
        `${next.what} with its Marker pointing 4 octets off`,
        next.actedOn,
        'its Markers were not checked',
      );
    },
  },
  {
    name: 'fpdu.ulpdu-length-0',
    clause: 'RFC 5044 §4.1',
    title: 'An FPDU with ULPDU_Length 0 (no DDP header) is refused, not taken as a message',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      rawFpdu(p, 0);
      return refusedAny(p, 'ULPDU_Length 0');
    },
  },
  {
    name: 'fpdu.ulpdu-length-1',
    clause: 'RFC 5044 §4.1',
    title: 'An FPDU with ULPDU_Length 1 (shorter than a DDP header) is refused',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      rawFpdu(p, 1);
      return refusedAny(p, 'ULPDU_Length 1');
    },
  },
  {
    name: 'fpdu.ulpdu-length-64768',
    clause: 'RFC 5044 §3',
    title:
      'An FPDU of ULPDU_Length 64768 (the largest MULPDU) is framed and handed to DDP: taken, or too long for the receive buffer (DDP 0x05), never refused by MPA',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      const u = p.s.untagged(Opcode.Send, 0, new Uint8Array(64768 - 18));
      p.s.sendUlpdu(u);
      // Receive buffers are not advertised: a target whose buffer holds the Send takes it (MPA framed
      // it, which is the point); one whose buffer does not answers DDP 0x05. MPA may not refuse it.
      const m = await p.s.nextOrEnd();
      if (m && !terminateOf(m) && m.ddp && m.fpdu.violations.every((v) => v.severity !== 'reject'))
        return pass(`framed and taken: the target went on with ${describe(m)} (its receive buffer holds 64750 octets)`);
      return expectTerminate(p.s, { layer: DDP, etype: UNTAGGED, codes: [0x05], ulpdu: u }, 8, m);
    },
  },
  {
    name: 'fpdu.ulpdu-length-64769',
    clause: 'RFC 5044 §3',
    title:
      'An FPDU of ULPDU_Length 64769 (over the largest MULPDU): how the target answers (MPA refusal, DDP 0x05 or acceptance) is reported',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      p.s.sendUlpdu(p.s.untagged(Opcode.Send, 0, new Uint8Array(64769 - 18)));
      // RFC 5044 §3 binds the sending DDP (MUST NOT post more than 64768) and lets MPA not support more
      // than MULPDU: it does not say how a receiver answers. Any orderly answer is reported, never failed.
      const m = await p.s.nextOrEnd();
      if (!m) {
        const end = p.s.conn.ended;
        return end
          ? pass(`refused: the target ${end.how === 'fin' ? 'closed' : 'reset'} the connection`)
          : info(
              'no answer within the wait: the target took the oversize FPDU (RFC 5044 §3 does not require a refusal)',
            );
      }
      const t = terminateOf(m);
      if (!t) return info(`accepted: the target went on with ${describe(m)}`);
      const end = await p.s.conn.waitClose(p.s.waitMs);
      const then = end ? `, then ${end.how === 'fin' ? 'FIN' : 'reset'}` : ', connection left open';
      if (t.layer === TerminateLayer.Llp) return pass(`refused by MPA: Terminate ${t.name}${then}`);
      return info(`handed to DDP: Terminate ${t.name}${then}`);
    },
  },
  // ── RFC 7306 without opt-in ───────────────────────────────────────────────────────────────────
  {
    name: 'rfc7306.not-opted-in',
    clause: 'RFC 7306 §8',
    title: 'Immediate Data (OpCode 1000b) to a target that did not enable RFC 7306: Unexpected OpCode (0x06)',
    roles: both,
    error: true,
    async run(ctx) {
      const p = await ready(ctx);
      const u = p.s.untagged(Opcode.ImmediateData, 0, new Uint8Array(8));
      p.s.sendUlpdu(u);
      return expectTerminate(p.s, { layer: RDMA, etype: OPERATION, codes: [0x06], ulpdu: u });
    },
  },
  ...perfCases,
];

const P = ' [paraphrase: the RFC text was not at hand to quote]';
const KEY = must(
  'RFC 5044 §7.1.2',
  'If a received "Key" does not match the expected value, the TCP/MPA connection MUST be closed, and an error returned to the ULP.',
);
const C_BIT = must(
  'RFC 5044 §7.1.1',
  "When this bit is '1' in either the MPA Request Frame or MPA Reply Frame, CRCs MUST be generated and checked by both endpoints.",
);
const M_BIT = must(
  'RFC 5044 §7.1.1',
  "M: This bit declares an endpoint's REQUIRED Marker usage. When this bit is '1' in an MPA Request Frame, the Initiator declares that Markers are REQUIRED in FPDUs sent from the Responder. When set to '1' in an MPA Reply Frame, this bit declares that Markers are REQUIRED in FPDUs sent from the Initiator. … When '1' Markers MUST be added as described in section 4.3",
);
const PD_OVER = must(
  'RFC 5044 §7.1.1',
  'If the receiver detects that the PD_Length field does not match the length of the Private Data field, or if the length of the Private Data field exceeds 512 octets, the receiver MUST close the connection and report an error locally.',
);
const REV = must(
  'RFC 5044 §7.1.2',
  'MPA receivers … MUST check this field. If the MPA receiver cannot interoperate with the received version, then it MUST close the connection and return an error to the ULP.',
);
const RESPONDER_FIRST =
  'MPA Responder mode implementations MUST receive and validate at least one FPDU before sending any FPDUs or Markers.';
const RDMAC = must(
  'RFC 5044 Appendix C',
  `RDMAC MPA (Rev 0) always uses Markers and CRCs, and DDP and RDMAP version 0${P}`,
);
const DV0 = must(
  'RDMAC DDP 1.0 §6.1',
  'DV - Direct Data Placement Protocol Version: 2 bits. The version of the DDP Protocol in use. This field MUST be set to zero to indicate the version of the specification described in this document. The value of DV MUST be the same for all the DDP Segments transmitted or received on a DDP Stream.',
);
const RV = must(
  'RFC 5040 §4.1, §7.2',
  "For this version of the RDMAP, all RDMA Messages MUST have: * Bits 24-25; RDMA Version field: 01b for an RNIC that complies with this RDMA protocol specification. 00b for an RNIC that complies with the RDMA Consortium's RDMA protocol specification. … 3. The RDMA Version MUST be valid.",
);
const TAGGED_CHECK = must(
  'RFC 5041 §7.1',
  'For non-zero-length Tagged DDP Segments, the segment MUST be validated before Placement … If the DDP layer detects any of the receive errors listed in this Section, it MUST cease placing the remainder of the DDP Segment and report the error(s) to the ULP.',
);
const UNTAGGED_CHECK = must(
  'RFC 5041 §7.1',
  'For non-zero-length Untagged DDP Segments, the DDP Segment MUST be validated before Placement … it MUST cease placing the remainder of the DDP Segment and report the error(s) to the ULP.',
);
const DV = must(
  'RFC 5041 §4.1',
  'DV - Direct Data Placement Protocol Version: 2 bits. The version of the DDP Protocol in use. This field MUST be set to one to indicate the version of the specification described in this document. The value of DV MUST be the same for all the DDP Segments transmitted or received on a DDP Stream.',
);
const READ_SRC = must(
  'RFC 5040 §7.2',
  'For non-zero length RDMA Read Requests: a. The Data Source STag MUST be valid. b. … MUST be associated to this RDMAP Stream. c. … d. The sum of the Data Source Tagged Offset and the RDMA Read Message Size MUST fall in the range of legal offsets associated with the Data Source STag.',
);
const OPCODE = must('RFC 5040 §7.2', '2. The RDMA OpCode MUST be valid.');
const HONEST = must(
  'RFC 5041 §4.3',
  'The initial value for MSN MUST be one. The MSN value MUST wrap to 0 after a value of 0xFFFFFFFF.',
);

/** The RFC words each case checks (RFC 5040/5041 and the MPA drafts quoted; RFC 5044/6581/7306 where reachable). */
const REQUIREMENTS: Readonly<Record<string, Requirement>> = {
  'mpa.startup': must(
    'RFC 5044 §7.1.2',
    'Initiator mode senders MUST set this field to the fixed value "MPA ID Req Frame" … Responder mode senders MUST set this field to the fixed value "MPA ID Rep Frame".',
  ),
  'liveness.rping': HONEST,
  'mpa.crc': C_BIT,
  'mpa.markers': M_BIT,
  'mpa.private-data-512': must('RFC 5044 §7.1.1', 'The Private Data field MUST be between 0 and 512 octets in length.'),
  'mpa.private-data-513': PD_OVER,
  'mpa.bad-key': KEY,
  'mpa.reserved-bits': must(
    'RFC 5044 §7.1.1',
    'Res: This field is reserved for future use. It MUST be set to zero when sending, and not checked on reception.',
  ),
  'mpa.rev-unsupported': REV,
  'mpa.reply-bad-key': KEY,
  'mpa.reply-reject': must(
    'RFC 5044 §7.1.1',
    "In the MPA Reply Frame, this bit is the Rejected Connection bit, set by the Responder's ULP to indicate acceptance '0', or rejection '1' … [not quoted: the kit reads a rejection as the connection's end, with no FPDU sent]",
  ),
  'mpa.reply-pd-513': PD_OVER,
  'mpa.reply-crc-forced': C_BIT,
  'mpa.reply-markers': M_BIT,
  // Binds the Responder (the kit here, breaking it on purpose): the Initiator's answer is its own choice.
  'mpa.responder-fpdu-first': may('RFC 5044 §7.1.2', `${RESPONDER_FIRST} (binds the Responder, not the Initiator)`),
  'mpa.responder-waits': must('RFC 5044 §7.1.2', RESPONDER_FIRST),
  'mpa.rev2.ird-ord': must(
    'RFC 6581 §5',
    `At Rev 2 the MPA Request and Reply carry the IRD and ORD in their Private Data${P}`,
  ),
  'mpa.rev2.rtr-write': must('RFC 6581 §7', `The Responder chooses one of the RTR types the Initiator offers${P}`),
  'mpa.rev2.rtr-read': must('RFC 6581 §7', `The Responder chooses one of the RTR types the Initiator offers${P}`),
  'mpa.rev2.rtr-send': must('RFC 6581 §7', `The Responder chooses one of the RTR types the Initiator offers${P}`),
  'mpa.rev0.startup': RDMAC,
  'mpa.rev0.crc-markers': RDMAC,
  'mpa.rev0.request': REV,
  'mpa.rev0.reply': REV,
  'ddp.rev0.tagged-version-1': DV0,
  'ddp.rev0.untagged-version-1': DV0,
  'rdmap.rev0.version-1': RV,
  'ddp.tagged.invalid-stag': TAGGED_CHECK,
  'ddp.tagged.base-bounds': TAGGED_CHECK,
  'ddp.tagged.to-wrap': TAGGED_CHECK,
  'ddp.tagged.stag-not-associated': must('RFC 5041 §4.2', 'STag … MUST be valid for this DDP Stream.'),
  'ddp.tagged.invalid-version': DV,
  'ddp.untagged.invalid-qn': UNTAGGED_CHECK,
  'ddp.untagged.msn-no-buffer': must(
    'RFC 5041 §7.1',
    'For non-zero-length Untagged DDP Segments, the DDP Segment MUST be validated before Placement by verifying: … 2. The QN and MSN have an associated buffer that allows Placement of the payload. … 5. The Message Sequence Number falls in the range of legal Message Sequence Numbers, for the queue defined by the QN.',
  ),
  'ddp.untagged.msn-range': UNTAGGED_CHECK,
  'ddp.untagged.invalid-mo': UNTAGGED_CHECK,
  'ddp.untagged.too-long': UNTAGGED_CHECK,
  'ddp.untagged.invalid-version': DV,
  'rdmap.read.invalid-stag': READ_SRC,
  'rdmap.read.base-bounds': READ_SRC,
  'rdmap.read.access': must(
    'RFC 5040 §8.1.1',
    'An RNIC MUST ensure that a Remote Peer is not able to access memory outside of the buffer specified when the STag was enabled for remote access.',
  ),
  'rdmap.opcode-reserved': OPCODE,
  'rdmap.invalid-version': must('RFC 5040 §7.2', '3. The RDMA Version MUST be valid.'),
  'rdmap.send-invalidate.unknown-stag': must(
    'RFC 5040 §7.2',
    '4. The Invalidate STag MUST be valid. 5. The STag MUST be associated to this RDMAP Stream.',
  ),
  'rdmap.send-invalidate.stag': must(
    'RFC 5040 §5.3',
    "When the Send with Invalidate and Send with Solicited Event and Invalidate Message are Delivered to the Remote Peer's RDMAP layer, the RDMAP layer MUST: * Verify the STag that is associated with the RDMAP Stream; and * Invalidate the STag if it is associated with the RDMAP Stream; or issue a Terminate Message with the STag Cannot be Invalidated Terminate Error Code, if the STag is not associated with the RDMAP Stream.",
  ),
  'rdmap.terminate-received': must(
    'RFC 5040 §5.4',
    "A Terminate Message MUST be Delivered to the Remote Peer's RDMAP layer. The RDMAP layer MUST Deliver the Terminate Message to the ULP.",
  ),
  'rdmap.ordering.read-responses': must(
    'RFC 5040 §5.5',
    '20. If more than one outstanding RDMA Read Request Messages are supported by both peers, the RDMA Read Response Messages MUST be submitted to the DDP layer on the Remote Peer in the order the RDMA Read Request Messages were Delivered by DDP, but the actual read of the buffer contents MAY take place in any order at the Remote Peer.',
  ),
  'rdmap.ird': must(
    'RFC 5040 §6.1',
    'For inbound RDMA Read Requests, the RDMAP layer MUST NOT exceed the maximum number of outstanding, inbound RDMA Read Requests that were negotiated',
  ),
  'rdmap.ird-perf': must(
    'RFC 5040 §6.1',
    'For inbound RDMA Read Requests, the RDMAP layer MUST NOT exceed the maximum number of outstanding, inbound RDMA Read Requests that were negotiated',
  ),
  'fpdu.bad-crc': { ...C_BIT, clause: 'RFC 5044 §4.4, §7.1.2' },
  'fpdu.bad-marker': must(
    'RFC 5044 §4.3',
    `A receiver using Markers checks that each Marker points to the start of its FPDU; a mismatch is an MPA error${P}`,
  ),
  'fpdu.ulpdu-length-0': must(
    'RFC 5044 §4.1',
    `ULPDU_Length is the length of the ULPDU, which holds at least a DDP header${P}`,
  ),
  'fpdu.ulpdu-length-1': must(
    'RFC 5044 §4.1',
    `ULPDU_Length is the length of the ULPDU, which holds at least a DDP header${P}`,
  ),
  'fpdu.ulpdu-length-64768': must(
    'RFC 5044 §3',
    'The range of MULPDU values MUST be between 128 octets and 64768 octets, inclusive. … On receive, MPA MUST pass each ULPDU with its length to DDP when it has been validated.',
  ),
  'fpdu.ulpdu-length-64769': may(
    'RFC 5044 §3',
    'The sending DDP MUST NOT post a ULPDU larger than 64768 octets to MPA. DDP MAY post a ULPDU of any size between one and 64768 octets, however MPA is not REQUIRED to support a ULPDU Length that is greater than the current MULPDU.',
  ),
  'rfc7306.not-opted-in': { ...OPCODE, clause: 'RFC 7306 §8, RFC 5040 §7.2' },
  'perf.write_bw': HONEST,
  'perf.read_bw': HONEST,
  'rfc7306.atomic-fetch-add': must(
    'RFC 7306 §5',
    `An Atomic Request is answered by an Atomic Response on QN 3 carrying the original data${P}`,
  ),
};

/** Every case with the RFC words it checks: the runner grades a FAIL by their strength. */
export const CASES: readonly ConformanceCase[] = UNGRADED.map((c) => {
  const requirement = REQUIREMENTS[c.name] ?? c.requirement;
  return requirement ? { ...c, requirement } : c;
});

/** After a fault no RFC names one answer for: any Terminate, or the connection's end; never business as usual. */
async function refusedAny(p: Peer, what: string): Promise<CaseOutcome> {
  for (let i = 0; i < 4; i++) {
    const m = await p.s.nextOrEnd();
    if (!m) break;
    const t = terminateOf(m);
    if (t) {
      const end = await p.s.conn.waitClose(p.s.waitMs);
      return end
        ? pass(`${what}: Terminate ${t.name}, then ${end.how === 'fin' ? 'FIN' : 'reset'}`)
        : fail(`${what}: Terminate ${t.name}, but the connection stays open`);
    }
  }
  const end = p.s.conn.ended;
  return end
    ? pass(`${what}: the target ${end.how === 'fin' ? 'closed' : 'reset'} the connection`)
    : fail(`${what}: neither a Terminate nor a close`);
}

/** A Rev 2 case against a target that answered another Rev: the answer rules the case out (RFC 6581 is Rev 2). */
function notRev2(p: Peer): CaseOutcome {
  return skip(`the target answered with MPA Rev ${p.s.peerFrame.rev}: RFC 6581 applies at Rev 2 only`);
}

/**
 * After a message valid in all but its framing: an LLP Terminate with one of `codes`, or a close, and
 * never the answer (`due`) the message would have earned had it been taken — that would prove it acted.
 */
async function refusedUnacted(
  p: Peer,
  codes: readonly number[],
  what: string,
  actedOn: ActedOn,
  because = 'the fault was not detected',
): Promise<CaseOutcome> {
  for (let i = 0; i < 8; i++) {
    const m = await p.s.nextOrEnd();
    if (!m) {
      const end = p.s.conn.ended;
      if (end)
        return pass(
          `${what}: the target ${end.how === 'fin' ? 'closed' : 'reset'} the connection without acting on it`,
        );
      return fail(`${what}: no Terminate, no close and no answer within ${p.s.waitMs} ms`);
    }
    const t = terminateOf(m);
    if (!t) {
      if (m.opcode === actedOn.opcode)
        return fail(`${what}: the target acted on it (${describe(m)}, ${actedOn.what}): ${because}`);
      continue;
    }
    const bad = checkTerminate(m, t, { layer: TerminateLayer.Llp, etype: 0, codes });
    if (bad) return fail(`${what}: ${bad}`);
    const end = await p.s.conn.waitClose(p.s.waitMs);
    if (!end) return fail(`${what}: Terminate ${t.name}, but the connection stays open`);
    return pass(`${what}: Terminate ${t.name}, then ${end.how === 'fin' ? 'FIN' : 'reset'}; not acted upon`);
  }
  return fail(`${what}: the target went on sending FPDUs`);
}
