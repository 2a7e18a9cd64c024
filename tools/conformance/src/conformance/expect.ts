/**
 * What the RFCs require after an error: a Terminate with the right Layer, EType and Error Code and the
 * right headers copied (RFC 5040 §4.8, §7.1 Figure 10), sent on the Terminate queue (RFC 5040 §5.4),
 * then the end of the connection (RFC 5040 §6.2.1).
 */
import { describeTerminateCode, Opcode, TerminateLayer } from '../wire/constants.js';
import type { DecodedTerminate } from '../wire/terminate.js';
import { describe, type KitSession, type RxMessage, terminateOf } from './session.js';
import { type CaseOutcome, fail, pass } from './types.js';

/** The target's answer to a faulty message had it been taken: seen before the Terminate, it proves the message was acted upon. */
export interface ActedOn {
  readonly opcode: number;
  readonly what: string;
}

export interface TerminateSpec {
  readonly layer: number;
  readonly etype: number;
  /** Error Codes accepted (the first is the one the clause names). */
  readonly codes: readonly number[];
  /** The ULPDU the kit sent that caused the error: its DDP header and length must be copied (D, M). */
  readonly ulpdu?: Uint8Array;
  /** The 28-octet RDMA Read Request Header that must be copied (R). */
  readonly rdmaHeader?: Uint8Array;
  /** Other answers the RFCs allow for the same fault (e.g. a check of another layer that comes first). */
  readonly also?: readonly { readonly layer: number; readonly etype: number; readonly codes: readonly number[] }[];
  /** The answer that would show the faulty message was acted upon (a FAIL whatever follows). */
  readonly actedOn?: ActedOn;
}

const hex = (n: number) => `0x${n.toString(16).padStart(2, '0')}`;

/** Checks one Terminate against the spec; returns a failure reason or undefined. */
export function checkTerminate(m: RxMessage, t: DecodedTerminate, spec: TerminateSpec): string | undefined {
  if (!m.ddp || m.ddp.tagged) return 'RFC 5040 §5.4: a Terminate is an untagged message';
  if (m.ddp.qn !== 2) return `RFC 5040 §5.4: Terminate on QN ${m.ddp.qn}, not QN 2`;
  if (!m.ddp.last) return 'RFC 5040 §5.4: a Terminate is one DDP segment (L set)';
  const ok = [spec, ...(spec.also ?? [])].some(
    (a) => t.layer === a.layer && t.etype === a.etype && a.codes.includes(t.errorCode),
  );
  if (!ok)
    return `Terminate says ${t.name} (layer ${t.layer}, etype ${t.etype}, code ${hex(t.errorCode)}); due: ${describeTerminateCode(spec.layer, spec.etype, spec.codes[0] as number)}`;
  // RFC 5040 §7.1 Figure 10: DDP errors and RDMAP errors on an incoming message copy its DDP header and
  // length — "Yes, if possible". A segment whose DDP or RDMAP version (or opcode) is not understood may not
  // be parsable, so a Terminate without them is allowed there (Linux siw sends none).
  const wantDdp = t.layer !== TerminateLayer.Llp && spec.ulpdu !== undefined && !(headersOptional(t) && !t.d);
  if (t.layer === TerminateLayer.Llp && (t.d || t.r))
    return 'RFC 5040 Figure 10: an LLP error copies no headers (D, R)';
  if (wantDdp && spec.ulpdu) {
    if (!t.d || !t.ddpHeader) return 'RFC 5040 §7.1 Figure 10: the terminated DDP Header is not included (D clear)';
    const sent = spec.ulpdu.subarray(0, t.ddpHeader.byteLength);
    if (Buffer.compare(Buffer.from(t.ddpHeader), Buffer.from(sent)) !== 0)
      return `RFC 5040 §4.8: the copied DDP Header ${Buffer.from(t.ddpHeader).toString('hex')} is not the one sent (${Buffer.from(sent).toString('hex')})`;
    // "The length handed up by the DDP layer when the error was detected" (RFC 5040 §4.8): the segment's
    // length, or its payload's (what Linux siw writes) — the text allows either reading.
    const payload = spec.ulpdu.byteLength - t.ddpHeader.byteLength;
    if (t.m && t.ddpSegmentLength !== spec.ulpdu.byteLength && t.ddpSegmentLength !== payload)
      return `RFC 5040 §4.8: DDP Segment Length ${t.ddpSegmentLength}, the segment had ${spec.ulpdu.byteLength} octets (${payload} of payload)`;
  }
  if (spec.rdmaHeader) {
    if (!t.r || !t.rdmaHeader)
      return 'RFC 5040 §7.1 rule 3: the terminated RDMA Read Request Header is not included (R clear)';
    if (Buffer.compare(Buffer.from(t.rdmaHeader), Buffer.from(spec.rdmaHeader)) !== 0)
      return 'RFC 5040 §4.8: the copied RDMA Header is not the Read Request Header sent';
  } else if (t.r) return 'RFC 5040 §7.1 rule 2: R set for an error not on an RDMA Read Request';
  return undefined;
}

/** DDP 0x04 / 0x06 (invalid DDP version, tagged / untagged), RDMAP Remote Operation 0x05 / 0x06 (version, opcode). */
function headersOptional(t: DecodedTerminate): boolean {
  if (t.layer === TerminateLayer.Ddp)
    return (t.etype === 1 && t.errorCode === 0x04) || (t.etype === 2 && t.errorCode === 0x06);
  return t.layer === TerminateLayer.Rdma && t.etype === 2 && (t.errorCode === 0x05 || t.errorCode === 0x06);
}

function flags(t: DecodedTerminate): string {
  const f = [t.m ? 'M' : '', t.d ? 'D' : '', t.r ? 'R' : ''].filter(Boolean).join('');
  return f === '' ? 'no headers' : f;
}

/**
 * Waits for the target's Terminate (skipping up to `skipMax` protocol messages it had in flight), checks
 * it, then waits for the connection to end. PASS only when both happened as the RFCs say.
 */
export async function expectTerminate(
  s: KitSession,
  spec: TerminateSpec,
  skipMax = 8,
  /** A message the case already read (undefined: none, or the end of the connection). */
  first?: RxMessage,
): Promise<CaseOutcome> {
  let skipped = 0;
  let pending = first;
  for (;;) {
    const m = pending ?? (await s.nextOrEnd());
    pending = undefined;
    if (!m) {
      const end = s.conn.ended;
      return fail(
        end
          ? `no Terminate: the target ${end.how === 'fin' ? 'closed' : 'reset'} the connection without one (RFC 5040 §7.1: it MUST send one)`
          : `no Terminate within ${s.waitMs} ms and the connection stays open`,
      );
    }
    const t = terminateOf(m);
    if (!t) {
      if (m.opcode === Opcode.Terminate)
        return fail(`a Terminate the kit cannot decode (${m.payload.byteLength} octets)`);
      if (spec.actedOn && m.opcode === spec.actedOn.opcode)
        return fail(
          `the target acted on the faulty message: ${describe(m)}, ${spec.actedOn.what}, before any Terminate (RFC 5041 §7.1, RFC 5040 §7.1: an errored message is not placed or delivered)`,
        );
      if (++skipped > skipMax) return fail(`no Terminate: ${describe(m)} and more`);
      continue;
    }
    const bad = checkTerminate(m, t, spec);
    if (bad) return fail(bad);
    const end = await s.conn.waitClose(s.waitMs);
    if (!end) return fail(`Terminate ${t.name} (${flags(t)}), but the connection stays open (RFC 5040 §6.2.1)`);
    return pass(`Terminate ${t.name} (${flags(t)}), then ${end.how === 'fin' ? 'FIN' : 'reset'}`);
  }
}

/**
 * For errors the LLP may answer either way (RFC 5044 §8: a Terminate naming the MPA error, or the
 * connection closed): PASS on an LLP-layer Terminate with one of `codes`, or a close with no FPDU
 * processed after the fault.
 */
export async function expectLlpRefusal(s: KitSession, codes: readonly number[], what: string): Promise<CaseOutcome> {
  for (let i = 0; i < 8; i++) {
    const m = await s.nextOrEnd();
    if (!m) {
      const end = s.conn.ended;
      if (end) return pass(`${what}: the target ${end.how === 'fin' ? 'closed' : 'reset'} the connection`);
      return fail(`${what}: no Terminate and no close within ${s.waitMs} ms`);
    }
    const t = terminateOf(m);
    if (!t) continue;
    const bad = checkTerminate(m, t, { layer: TerminateLayer.Llp, etype: 0, codes });
    if (bad) return fail(`${what}: ${bad}`);
    const end = await s.conn.waitClose(s.waitMs);
    if (!end) return fail(`${what}: Terminate ${t.name}, but the connection stays open`);
    return pass(`${what}: Terminate ${t.name}, then ${end.how === 'fin' ? 'FIN' : 'reset'}`);
  }
  return fail(`${what}: the target went on sending FPDUs`);
}
