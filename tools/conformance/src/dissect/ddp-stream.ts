/**
 * One DDP Stream seen from the wire, both directions: decodes each DDP segment (RFC 5041) and the RDMAP
 * message it carries (RFC 5040, RFC 7306), reassembles messages, and checks the rules that span
 * segments: MSN sequence per untagged queue (RFC 5041 §4.4, §5.3), MO continuity within a message,
 * Read Responses against the Read Requests they answer (RFC 5040 §4.4), nothing after a Terminate
 * (RFC 5040 §5.4). Every table here has a bound.
 */
import { Opcode, opcodeName } from '../wire/constants.js';
import { type DecodedSegment, decodeUlpdu, IETF_VERSIONS, RDMAC_VERSIONS } from '../wire/rdmap.js';
import { note, reject, type Violation, warn } from '../wire/violation.js';
import { STATE_COST, StateMeter } from './meter.js';
import type { ConnectionSummary } from './model.js';
import type { Recorder } from './recorder.js';

/** Most messages held open (not yet L) per direction; most outstanding RDMA Read Requests tracked. */
export const MAX_OPEN_MESSAGES = 1024;
export const MAX_OUTSTANDING_READS = 4096;
/** Most DDP Streams followed per SCTP association or UDP LLP connection (one per stream id). */
export const MAX_DDP_STREAMS = 1024;

/** An STag as Wireshark prints `iwarp_ddp.stag` (FT_UINT32, BASE_HEX): 0x0000abcd. */
export const hexStag = (n: number) => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
/** A Tagged Offset as Wireshark prints `iwarp_ddp.tagged_offset` (FT_UINT64, BASE_HEX): 0x0000000000001000. */
export const hexTo = (n: bigint) => `0x${BigInt.asUintN(64, n).toString(16).padStart(16, '0')}`;

interface OpenMessage {
  readonly opcode: number;
  readonly firstFrame: number;
  segments: number;
  bytes: number;
  nextOffset: bigint;
  readonly key: string;
}

interface OutstandingRead {
  readonly sinkStag: number;
  readonly sinkTo: bigint;
  readonly size: number;
  received: number;
}

class Direction {
  /** Last MSN seen per untagged queue. */
  readonly lastMsn = new Map<number, number>();
  readonly open = new Map<string, OpenMessage>();
  /** Read Requests this direction sent, answered by the other direction's Read Responses. */
  readonly reads: OutstandingRead[] = [];
  terminated = false;
  /** Mid-stream: a Read Response of this direction has matched a Read Request seen (the queue is in step). */
  readsMatched = false;
  constructor(readonly label: string) {}
}

export interface DdpStreamOptions {
  /** The LLP delivers in order, without loss (MPA/TCP, SCTP ordered): MSN and MO sequence are checked. */
  readonly ordered: boolean;
  /** Label of the DDP Stream inside its connection (e.g. "SCTP stream 1"), for summaries. */
  readonly name?: string;
  /** MPA Rev 0: the RDMA Consortium profile, DDP and RDMAP version 0 (not RFC 5041/5040's 1). */
  readonly rdmac?: boolean;
  /** Whether the capture lost octets of the direction opposite to `direction` so far (a TCP gap). */
  readonly gapBefore?: (direction: string) => boolean;
  /** Where the state this stream holds is counted (DissectOptions.maxStateOctets). */
  readonly meter?: StateMeter;
  /**
   * The capture started mid-stream: the first MSN of each queue is taken as it comes, and Read Responses
   * before one matches a Read Request seen may answer Requests the capture missed (notes, not rejects).
   */
  readonly midStream?: boolean;
}

export class DdpStream {
  private readonly dirs = new Map<string, Direction>();
  private readonly meter: StateMeter;

  constructor(
    private readonly rec: Recorder,
    private readonly conn: ConnectionSummary,
    private readonly options: DdpStreamOptions,
  ) {
    this.meter = options.meter ?? new StateMeter();
    this.meter.add(STATE_COST.stream);
  }

  private dir(label: string): Direction {
    let d = this.dirs.get(label);
    if (!d) {
      d = new Direction(label);
      this.dirs.set(label, d);
      this.meter.add(STATE_COST.direction);
    }
    return d;
  }

  private other(label: string): Direction | undefined {
    for (const [k, d] of this.dirs) if (k !== label) return d;
    return undefined;
  }

  /**
   * One DDP segment (a ULPDU) sent in `direction`; `extra` are findings of the framing that carried it.
   * Records the segment event and, when it ends a message, the message event.
   */
  segment(
    frame: number,
    direction: string,
    ulpdu: Uint8Array,
    extra: readonly Violation[] = [],
    prefix = '',
    kind: 'segment' | 'fpdu' = 'segment',
  ): void {
    const d = this.dir(direction);
    const decoded = decodeUlpdu(ulpdu, this.options.rdmac ? RDMAC_VERSIONS : IETF_VERSIONS);
    if ('error' in decoded) {
      this.rec.event(this.conn, frame, direction, kind, `${prefix}${decoded.error.message}`, [...extra, decoded.error]);
      return;
    }
    const v: Violation[] = [...extra, ...decoded.violations];
    if (d.terminated)
      v.push(warn('rdmap-after-terminate', 'RFC 5040 §5.4', 'a DDP segment after this side sent a Terminate'));
    this.sequence(d, decoded, v);
    const summary = `${prefix}${segmentSummary(decoded)}`;
    this.rec.event(this.conn, frame, direction, kind, summary, v, segmentDetail(decoded));
    this.conn.bytes[direction] = (this.conn.bytes[direction] ?? 0) + decoded.payload.byteLength;
    this.message(frame, d, decoded);
  }

  private sequence(d: Direction, s: DecodedSegment, v: Violation[]): void {
    const op = s.rdmap.opcode;
    if (s.ddp.tagged) {
      if (op === Opcode.RdmaReadResponse) {
        const peer = this.other(d.label);
        const r = peer?.reads[0];
        const unsure = this.options.midStream && !d.readsMatched;
        if (unsure && (!r || s.ddp.stag !== r.sinkStag)) {
          v.push(
            note(
              'rdmap-read-response-unmatched',
              'RFC 5040 §4.4',
              'Read Response to a Read Request the capture may have missed (it started mid-stream)',
            ),
          );
          return;
        }
        if (r && s.ddp.stag === r.sinkStag) d.readsMatched = true;
        if (!r && this.options.gapBefore?.(d.label))
          // The Read Request may be in octets the capture lost: nothing to say for sure.
          v.push(
            note(
              'rdmap-read-response-unmatched',
              'RFC 5040 §4.4',
              'no Read Request seen (the capture lost octets before)',
            ),
          );
        else if (!r)
          v.push(
            reject(
              'rdmap-unexpected-read-response',
              'RFC 5040 §4.4',
              'RDMA Read Response with no Read Request outstanding',
            ),
          );
        else {
          const end = s.ddp.to + BigInt(s.payload.byteLength);
          if (s.ddp.stag !== r.sinkStag)
            v.push(
              reject(
                'rdmap-read-response-stag',
                'RFC 5040 §4.4',
                `Read Response to STag ${hexStag(s.ddp.stag)}, the Read Request named Data Sink STag ${hexStag(r.sinkStag)}`,
              ),
            );
          else if (s.ddp.to < r.sinkTo || end > r.sinkTo + BigInt(r.size))
            v.push(
              reject(
                'rdmap-read-response-beyond',
                'RFC 5040 §4.4',
                `Read Response octets ${hexTo(s.ddp.to)}..${hexTo(end)} outside the requested ${hexTo(r.sinkTo)}..${hexTo(r.sinkTo + BigInt(r.size))}`,
              ),
            );
          r.received += s.payload.byteLength;
          if (s.ddp.last && peer) {
            if (r.received !== r.size)
              v.push(
                reject(
                  'rdmap-read-response-size',
                  'RFC 5040 §4.4',
                  `Read Response carried ${r.received} octets, the Read Request asked for ${r.size}`,
                ),
              );
            peer.reads.shift();
            this.meter.add(-STATE_COST.read);
          }
        }
      }
      return;
    }
    const qn = s.ddp.qn;
    const msn = s.ddp.msn;
    const key = `u${qn}:${msn}`;
    const open = d.open.get(key);
    if (open) {
      if (this.options.ordered && BigInt(s.ddp.mo) !== open.nextOffset)
        v.push(
          note('ddp-mo-gap', 'RFC 5041 §4.4', `MO ${s.ddp.mo}, the message's octets so far end at ${open.nextOffset}`),
        );
    } else if (qn <= 3) {
      // Mid-stream, the first MSN of a queue is where the capture starts, not a finding.
      const baseline = this.options.midStream && !d.lastMsn.has(qn);
      const last = d.lastMsn.get(qn) ?? 0;
      const expected = (last + 1) >>> 0;
      if (this.options.ordered && !baseline && msn !== expected)
        v.push(
          reject(
            'ddp-msn',
            'RFC 5041 §4.4, §7.2',
            `MSN ${msn} on QN ${qn}, expected ${expected} (Terminate: Invalid MSN - MSN range is not valid)`,
          ),
        );
      if (this.options.ordered && !baseline && s.ddp.mo !== 0)
        v.push(note('ddp-mo-gap', 'RFC 5041 §4.4', `a message's first segment with MO ${s.ddp.mo}`));
      d.lastMsn.set(qn, msn);
    }
    if (op === Opcode.RdmaReadRequest && s.readRequest) {
      if (d.reads.length >= MAX_OUTSTANDING_READS) d.reads.shift();
      else this.meter.add(STATE_COST.read);
      d.reads.push({
        sinkStag: s.readRequest.sinkStag,
        sinkTo: s.readRequest.sinkTo,
        size: s.readRequest.size,
        received: 0,
      });
    }
    if (op === Opcode.Terminate) d.terminated = true;
  }

  private message(frame: number, d: Direction, s: DecodedSegment): void {
    const key = s.ddp.tagged ? `t${s.rdmap.opcode}:${s.ddp.stag}` : `u${s.ddp.qn}:${s.ddp.msn}`;
    let m = d.open.get(key);
    if (!m) {
      if (d.open.size >= MAX_OPEN_MESSAGES) {
        const oldest = d.open.keys().next().value as string;
        d.open.delete(oldest);
        this.meter.add(-STATE_COST.message);
      }
      m = {
        opcode: s.rdmap.opcode,
        firstFrame: frame,
        segments: 0,
        bytes: 0,
        nextOffset: s.ddp.tagged ? s.ddp.to : BigInt(s.ddp.mo),
        key,
      };
      d.open.set(key, m);
      this.meter.add(STATE_COST.message);
    }
    m.segments++;
    m.bytes += s.payload.byteLength;
    m.nextOffset = (s.ddp.tagged ? s.ddp.to : BigInt(s.ddp.mo)) + BigInt(s.payload.byteLength);
    if (!s.ddp.last) return;
    d.open.delete(key);
    this.meter.add(-STATE_COST.message);
    const name = opcodeName(m.opcode);
    this.conn.operations[name] = (this.conn.operations[name] ?? 0) + 1;
    if (s.terminate) this.rec.terminate(this.conn, { frame, direction: d.label, name: s.terminate.name });
    // One-segment messages are told by their segment's event already.
    if (m.segments === 1) return;
    const where = s.ddp.tagged ? `STag ${hexStag(s.ddp.stag)}` : `QN ${s.ddp.qn} MSN ${s.ddp.msn}`;
    const stream = this.options.name ? `${this.options.name}: ` : '';
    this.rec.event(
      this.conn,
      frame,
      d.label,
      'message',
      `${stream}message ${name} (${where}): ${m.bytes} octets in ${m.segments} segment${m.segments === 1 ? '' : 's'} (frames ${m.firstFrame}–${frame})`,
      [],
      { opcode: m.opcode, name, octets: m.bytes, segments: m.segments, firstFrame: m.firstFrame },
    );
  }

  /** Findings for messages left open when the capture (or, `closed`, the connection) ends. */
  end(frame: number, closed = false): void {
    for (const d of this.dirs.values())
      for (const m of d.open.values())
        this.rec.event(
          this.conn,
          frame,
          d.label,
          'message',
          `${opcodeName(m.opcode)} not finished at the end of the ${closed ? 'connection' : 'capture'}`,
          [
            note(
              'ddp-incomplete-message',
              'RFC 5041 §5.2',
              `${opcodeName(m.opcode)} (${m.key}): ${m.bytes} octets, no segment with L=1`,
            ),
          ],
        );
  }
}

export function segmentSummary(s: DecodedSegment): string {
  const h = s.ddp;
  const flags = `${h.last ? 'L' : '-'}${h.dv !== 1 ? ` DV=${h.dv}` : ''}`;
  const ddp = h.tagged
    ? `DDP tagged STag ${hexStag(h.stag)} TO ${hexTo(h.to)} ${flags}`
    : `DDP untagged QN ${h.qn} MSN ${h.msn} MO ${h.mo} ${flags}`;
  let rdmap = `RDMAP ${s.rdmap.name}${s.rdmap.rv !== 1 ? ` RV=${s.rdmap.rv}` : ''}`;
  if (s.invalidateStag !== undefined) rdmap += ` (invalidate STag ${hexStag(s.invalidateStag)})`;
  if (s.readRequest) {
    const r = s.readRequest;
    rdmap += ` of ${r.size} octets: sink ${hexStag(r.sinkStag)}@${hexTo(r.sinkTo)} ← source ${hexStag(r.srcStag)}@${hexTo(r.srcTo)}`;
  }
  if (s.terminate) {
    const t = s.terminate;
    rdmap += `: ${t.name} [${t.m ? 'M' : ''}${t.d ? 'D' : ''}${t.r ? 'R' : ''}]`;
  }
  if (s.immediateData !== undefined) rdmap += ` 0x${s.immediateData.toString(16).padStart(16, '0')}`;
  if (s.atomicRequest)
    rdmap += ` ${s.atomicRequest.atomicOpcodeName} id ${s.atomicRequest.requestId} on ${hexStag(s.atomicRequest.remoteStag)}@${hexTo(s.atomicRequest.remoteTo)}`;
  if (s.atomicResponse)
    rdmap += ` id ${s.atomicResponse.originalRequestId} was 0x${s.atomicResponse.originalRemoteData.toString(16)}`;
  return `${ddp} · ${rdmap} · payload ${s.payload.byteLength} octets`;
}

function segmentDetail(s: DecodedSegment): Record<string, unknown> {
  const { payload, violations, ...rest } = s;
  void violations;
  const out: Record<string, unknown> = { ...rest, payloadLength: payload.byteLength };
  if (s.terminate) {
    const { violations: tv, ...t } = s.terminate;
    void tv;
    out.terminate = t;
  }
  return out;
}
