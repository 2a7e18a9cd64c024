/**
 * DDP transmit path: the stream's four send calls (`DdpStream.sendTagged…`, which are this file's), the
 * caller's input checked where it enters, and segmentation (RFC 5041 §5.2): each ULP message is cut into
 * segments that fit the LLP's MULPDU, each self-describing (tagged: STag + TO advancing per segment;
 * untagged: QN, MSN, MO), L set only on the last. A segment goes down as [header, payload slices...] —
 * payload octets are never copied or concatenated here. Messages go out whole and in the order given.
 */
import { Fifo, type LlpError, type LlpStream } from '@rddp/llp';
import {
  DDP_TAGGED_HEADER_LENGTH,
  DDP_UNTAGGED_HEADER_LENGTH,
  type DdpSendSink,
  type DdpStreamState,
  type DdpVersion,
  type UntaggedSend,
} from './api.js';
import {
  DdpAbortError,
  DdpInvalidArgumentError,
  DdpLlpUnsuitableError,
  DdpSendQueueFullError,
  DdpStreamClosedError,
} from './errors.js';
import {
  encodeUntaggedHeader,
  MAX_SAFE_TO,
  MAX_U64,
  MAX_UNTAGGED_RSVDULP,
  TWO_32,
  TWO_64,
  writeTagged,
} from './header.js';

/** At or below 2^63 no message (< 2^53 octets) can wrap the TO space: the exact check is skipped. */
const TO_NO_WRAP = 1n << 63n;

/** Caller input of a send: a 32-bit value (RFC 5041 §4.2 STag, §4.3 QN). */
function checkU32(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff)
    throw new DdpInvalidArgumentError(`${name} ${v} is not a 32-bit unsigned integer`);
}

/** Checks the payload parts and returns their total length (one pass: this runs on every send). */
function checkPayload(parts: readonly Uint8Array[]): number {
  let n = 0;
  for (const p of parts) {
    if (!(p instanceof Uint8Array)) throw new DdpInvalidArgumentError('payload parts must be Uint8Arrays');
    n += p.byteLength;
  }
  return n;
}

/** Caller input of a tagged send (RFC 5041 §4.2, §7.1), checked where it enters; returns the payload length. */
function checkTaggedSend(stag: number, to: bigint, rsvdUlp: number, payload: readonly Uint8Array[]): number {
  checkU32('STag', stag);
  if (typeof to !== 'bigint' || to < 0n || to > MAX_U64)
    throw new DdpInvalidArgumentError(`TO ${String(to)} is not a 64-bit unsigned bigint`);
  if (!Number.isInteger(rsvdUlp) || rsvdUlp < 0 || rsvdUlp > 0xff)
    throw new DdpInvalidArgumentError(`tagged RsvdULP ${rsvdUlp} is not 8 bits (RFC 5041 §4.2)`);
  const n = checkPayload(payload);
  if (to > TO_NO_WRAP && to + BigInt(n) > TWO_64)
    throw new DdpInvalidArgumentError(`TO 0x${to.toString(16)} + ${n} octets wraps 2^64 (RFC 5041 §7.1)`);
  return n;
}

/** Caller input of an untagged send (RFC 5041 §4.3): QN, RsvdULP, a message the 32-bit MO can address; returns its length. */
function checkUntaggedSend(qn: number, rsvdUlp: number, payload: readonly Uint8Array[]): number {
  checkU32('QN', qn);
  if (!Number.isInteger(rsvdUlp) || rsvdUlp < 0 || rsvdUlp > MAX_UNTAGGED_RSVDULP)
    throw new DdpInvalidArgumentError(`untagged RsvdULP ${rsvdUlp} is not 40 bits (RFC 5041 §4.3)`);
  const n = checkPayload(payload);
  if (n > 0xffff_ffff) throw new DdpInvalidArgumentError(`message of ${n} octets exceeds the 32-bit MO space`);
  return n;
}

/** The DDP Stream's one lifecycle state, shared by its transmit half (this file) and the stream. */
export interface StreamLife {
  state: DdpStreamState;
}

interface Job {
  readonly tagged: boolean;
  readonly stag: number;
  /** TO as 32-bit halves: segments advance the low half with carry, no bigint per segment. */
  readonly toHi: number;
  readonly toLo: number;
  readonly qn: number;
  readonly msn: number;
  readonly rsvdUlp: number;
  readonly parts: readonly Uint8Array[];
  readonly total: number;
  /** Payload octets already handed to the LLP. */
  sent: number;
  started: boolean;
  part: number;
  partOffset: number;
  readonly signal: AbortSignal | undefined;
  /** Told once how the message ended (no promise per message: RDMAP's send-queue entry is the sink). */
  readonly sink: DdpSendSink;
  /** Runs once the last segment is handed to the LLP. */
  readonly handed: (() => void) | undefined;
}

/** Takes up to `n` octets from the job's cursor as subarrays (no copy). */
function take(job: Job, n: number, out: Uint8Array[]): void {
  let left = n;
  while (left > 0) {
    const p = job.parts[job.part] as Uint8Array;
    const avail = p.length - job.partOffset;
    if (avail === 0) {
      job.part++;
      job.partOffset = 0;
      continue;
    }
    const k = Math.min(avail, left);
    out.push(k === p.length ? p : p.subarray(job.partOffset, job.partOffset + k));
    job.partOffset += k;
    left -= k;
  }
}

/**
 * The next `n` payload octets as one slice when the current part holds them all (the usual case), else
 * undefined (then `take` gathers the slices).
 */
function takeOne(job: Job, n: number): Uint8Array | undefined {
  let p = job.parts[job.part];
  while (p !== undefined && p.length === job.partOffset) {
    job.part++;
    job.partOffset = 0;
    p = job.parts[job.part];
  }
  if (p === undefined || p.length - job.partOffset < n) return undefined;
  const o = job.partOffset;
  job.partOffset += n;
  return o === 0 && n === p.length ? p : p.subarray(o, o + n);
}

/** Headers are views into slabs that are never reused, so a header stays valid while an LLP holds it. */
const HEADER_SLAB = 8192;

export class Transmitter {
  private readonly jobs = new Fifo<Job>();
  private pumping = false;
  private closedError: Error | undefined;
  private slab = new ArrayBuffer(HEADER_SLAB);
  private slabOff = 0;
  /** Segments handed to the LLP (for statistics and tests). */
  segmentsSent = 0;

  constructor(
    private readonly llp: LlpStream,
    private readonly dv: DdpVersion,
    /** Bound on queued messages: the queue pushes back instead of growing (the LLP may stall for ever). */
    private readonly maxQueue: number,
    private readonly life: StreamLife,
    /** The next MSN of each untagged queue this side sends on (RFC 5041 §5.1.2). */
    private readonly nextMsn: number[],
  ) {}

  /** Messages not yet handed to the LLP in full. */
  get queued(): number {
    return this.jobs.length;
  }

  // The stream's send calls (`DdpStreamApi`): bound, so `DdpStream` hands them out as they are.

  readonly sendTagged = (
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const sink: DdpSendSink = { ddpSent: (e) => (e === undefined ? resolve() : reject(e)) };
      this.sendTaggedWith(stag, to, payload, rsvdUlp, sink, signal, onHanded);
    });

  readonly sendTaggedWith = (
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): void => {
    this.assertCanSend();
    const n = checkTaggedSend(stag, to, rsvdUlp, payload);
    this.enqueue(true, stag, to, 0, -1, rsvdUlp, payload, n, sink, signal, onHanded);
  };

  readonly sendUntagged = (
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): UntaggedSend => {
    let msn = -1;
    // Settles with the MSN itself: no extra promise per message; the MSN rides on the promise.
    const sent = new Promise<number>((resolve, reject) => {
      const sink: DdpSendSink = { ddpSent: (e, m) => (e === undefined ? resolve(m) : reject(e)) };
      msn = this.sendUntaggedWith(qn, payload, rsvdUlp, sink, signal, onHanded);
    }) as Promise<number> & { msn: number };
    sent.msn = msn;
    return sent;
  };

  readonly sendUntaggedWith = (
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): number => {
    this.assertCanSend();
    const n = checkUntaggedSend(qn, rsvdUlp, payload);
    // The peer's queues are the peer's business; MSNs are kept for any QN this side sends on.
    const msn = this.nextMsnFor(qn, true);
    this.enqueue(false, 0, 0n, qn, msn, rsvdUlp, payload, n, sink, signal, onHanded);
    return msn;
  };

  /**
   * Takes queue `qn`'s next MSN (modulo 2^32, RFC 5041 §4.3); with `room`, only if the queue has room
   * for the message (a refused send takes no MSN).
   */
  nextMsnFor(qn: number, room = false): number {
    if (room) this.checkRoom();
    const msn = this.nextMsn[qn] ?? 1;
    this.nextMsn[qn] = msn === 0xffff_ffff ? 0 : msn + 1;
    return msn;
  }

  private assertCanSend(): void {
    const s = this.life.state;
    if (s === 'closed' || s === 'closing' || this.llp.state !== 'open')
      throw new DdpStreamClosedError(
        `the DDP stream is ${s === 'open' ? `on an LLP stream that is ${this.llp.state}` : s}`,
      );
  }

  /** Throws when the queue is at its bound (before the caller takes an MSN for the message). */
  private checkRoom(): void {
    if (this.jobs.length >= this.maxQueue)
      throw new DdpSendQueueFullError(`${this.jobs.length} messages wait for the LLP (maxSendQueue ${this.maxQueue})`);
  }

  /**
   * Queues a message; `sink.ddpSent` hears how it ended. Throws (and never calls the sink) when the
   * stream has failed or `signal` is already aborted.
   */
  private enqueue(
    tagged: boolean,
    stag: number,
    to: bigint,
    qn: number,
    msn: number,
    rsvdUlp: number,
    parts: readonly Uint8Array[],
    total: number,
    sink: DdpSendSink,
    signal: AbortSignal | undefined,
    handed: (() => void) | undefined,
  ): void {
    if (this.jobs.length >= this.maxQueue) this.checkRoom();
    if (this.closedError) throw this.closedError;
    if (signal?.aborted) throw new DdpAbortError('send aborted before it started', { cause: signal.reason });
    let toHi = 0;
    let toLo = 0;
    if (to !== 0n) {
      if (to <= MAX_SAFE_TO) {
        const v = Number(to); // exact below 2^53: no bigint arithmetic per message
        toHi = Math.floor(v / TWO_32);
        toLo = v % TWO_32;
      } else {
        toHi = Number(to >> 32n);
        toLo = Number(to & 0xffff_ffffn);
      }
    }
    this.jobs.push({
      tagged,
      stag,
      toHi,
      toLo,
      qn,
      msn,
      rsvdUlp,
      parts,
      total,
      sent: 0,
      started: false,
      part: 0,
      partOffset: 0,
      signal,
      sink,
      handed,
    });
    if (!this.pumping) this.pump();
  }

  /** Rejects every queued message (the LLP stream ended). */
  fail(error: Error): void {
    this.closedError ??= error;
    for (const j of this.jobs.drain()) j.sink.ddpSent(error, j.msn);
  }

  /**
   * Hands queued messages to the LLP, synchronously, until the queue is empty or the LLP asks to wait;
   * then resumes on its drain (RFC 5041 §5.2: DDP honours the LLP's flow control). `pumping` stays set
   * while waiting, so nothing overtakes the queue.
   */
  private pump(): void {
    this.pumping = true;
    try {
      while (this.jobs.length > 0) {
        const job = this.jobs.peek() as Job;
        if (!job.started && job.signal?.aborted) {
          this.jobs.shift();
          job.sink.ddpSent(new DdpAbortError('send aborted before it started', { cause: job.signal.reason }), job.msn);
          continue;
        }
        const more = this.sendSegments(job);
        if (more === 'error') break;
        if (more === 'done') {
          if (this.jobs.peek() === job) this.jobs.shift();
          if (!this.llp.needsDrain) continue;
        }
        this.llp.waitForDrain().then(this.resume, this.drainFailed);
        return;
      }
    } catch (e) {
      this.fail(e instanceof Error ? e : new DdpStreamClosedError(String(e)));
    }
    this.pumping = false;
  }

  private readonly resume = (): void => this.pump();

  private readonly drainFailed = (e: unknown): void => {
    this.pumping = false;
    this.fail(e instanceof Error ? e : new DdpStreamClosedError('LLP stream ended'));
  };

  /** A header-sized view into the current slab. */
  private header(n: number): Uint8Array {
    if (this.slabOff + n > HEADER_SLAB) {
      this.slab = new ArrayBuffer(HEADER_SLAB);
      this.slabOff = 0;
    }
    const h = new Uint8Array(this.slab, this.slabOff, n);
    this.slabOff += n;
    return h;
  }

  /** Sends segments of `job` until it is finished or the LLP asks to wait. */
  private sendSegments(job: Job): 'done' | 'drain' | 'error' {
    const hdrLen = job.tagged ? DDP_TAGGED_HEADER_LENGTH : DDP_UNTAGGED_HEADER_LENGTH;
    const max = this.llp.mulpdu - hdrLen;
    if (max <= 0) {
      const e = new DdpLlpUnsuitableError(
        `MULPDU ${this.llp.mulpdu} leaves no room for payload after a ${hdrLen}-octet DDP header`,
      );
      this.jobs.shift();
      job.sink.ddpSent(e, job.msn);
      return 'done';
    }
    while (!job.started || job.sent < job.total) {
      const n = Math.min(max, job.total - job.sent);
      const last = job.sent + n === job.total;
      const hdr = this.header(hdrLen);
      if (job.tagged) {
        const lo = job.toLo + job.sent; // < 2^33: exact as a number
        writeTagged(hdr, 0, last, this.dv, job.rsvdUlp, job.stag, (job.toHi + Math.floor(lo / TWO_32)) >>> 0, lo >>> 0);
      } else
        encodeUntaggedHeader({ last, dv: this.dv, rsvdUlp: job.rsvdUlp, qn: job.qn, msn: job.msn, mo: job.sent }, hdr);
      const one = n > 0 ? takeOne(job, n) : undefined;
      let seg: Uint8Array[];
      if (one !== undefined || n === 0) seg = one !== undefined ? [hdr, one] : [hdr];
      else {
        seg = [hdr];
        take(job, n, seg);
      }
      job.started = true;
      job.sent += n;
      let ok: boolean;
      try {
        ok = this.llp.send(seg, last ? (err?: LlpError) => job.sink.ddpSent(err, job.msn) : undefined);
      } catch (e) {
        this.jobs.shift();
        job.sink.ddpSent(e, job.msn);
        this.fail(e instanceof Error ? e : new DdpStreamClosedError('LLP stream ended'));
        return 'error';
      }
      this.segmentsSent++;
      if (last) {
        job.handed?.();
        return 'done';
      }
      if (!ok) return 'drain';
    }
    return 'done';
  }
}
