/**
 * The one LLP stream of an MPA/TCP connection in Full Operation Phase (RFC 5044 §4–§7): FPDUs out
 * through an `FpduWriter`, FPDUs in through an `FpduReader`, the startup rules about who sends the
 * first FPDU (§7.1.2), the RFC 6581 RTR exchange, and TCP teardown (§7.2: FIN; abort: RST).
 */
import type { Socket } from 'node:net';
import {
  BaseLlpStream,
  ConnectionAbortedError,
  Fifo,
  type LlpError,
  type LlpLogger,
  type LlpReceiveError,
  LlpTimeoutError,
  type SendCallback,
  StreamClosedError,
} from '@rddp/llp';
import { type Observable, Subject } from 'rxjs';
import { type MpaCrcError, MpaErrorCode, MpaFpduNotSentError, MpaProtocolError } from './errors.js';
import { FpduReader, FpduWriter, type MarkerFraming } from './fpdu.js';
import {
  holdsSends,
  type LifeEvent,
  type LifeState,
  nextState,
  peerFinSeen,
  runsTimer,
  transition,
  ulpClosed,
} from './lifecycle.js';
import { mulpduForEmss } from './markers.js';
import type { MpaNegotiated, RtrType } from './negotiation.js';
import { DEFAULT_HIGH_WATER_MARK, MARKERS_HIGH_WATER_MARK } from './options.js';
import { checkReadResponse, checkRtr, encodeReadResponse, encodeRtr } from './rtr.js';
import type { SocketReceiver } from './socket-rx.js';
import { TxBatch } from './tx-batch.js';
import { DirectTx, socketFd, writeRanges } from './tx-direct.js';

export interface MpaStreamInit {
  readonly socket: Socket;
  /** The socket's reads (socket-rx.ts): into an arena, or from `'data'` where the socket cannot. */
  readonly rx: SocketReceiver;
  readonly role: 'initiator' | 'responder';
  readonly negotiated: MpaNegotiated;
  /** EMSS the MULPDU is derived from (RFC 5044 §4.5), unless `mulpdu` fixes it. */
  readonly emss: number;
  readonly mulpdu?: number;
  /** Octets queued for the socket above which `send` returns false (unset: the defaults in options.ts). */
  readonly highWaterMark?: number;
  /** How long a graceful close waits for the peer's FIN before resetting. */
  readonly closeTimeoutMs: number;
  /** ULPDUs up to this size are framed inline, one socket chunk (default `INLINE_DEFAULT`). */
  readonly inlineThreshold?: number;
  /** FPDUs with Markers: gathered from the payload in place (default) or copied whole (`MarkerFraming`). */
  readonly markerFraming?: MarkerFraming;
  /** Send straight to the socket's descriptor where `@rddp/writev` is installed (default true; `DirectTx`). */
  readonly directSend?: boolean;
  /** TCP keepalive initial delay (ms); 0 or absent: off. */
  readonly keepAliveMs?: number;
  /** Reset after this long with no octet in either direction (ms); 0 or absent: off. */
  readonly idleTimeoutMs?: number;
  /** Largest ULPDU_Length accepted (RFC 5044 §3: 64768; up to 65535 to interoperate). */
  readonly maxUlpduLength?: number;
  /** Initiator: accept an FPDU from the Responder before this side sent its first (not RFC 5044 §7.1.2). */
  readonly tolerateEarlyResponderFpdu?: boolean;
  /** Reset when an FPDU begun by the peer is not complete this long after its first octet (ms); 0 or absent: off. */
  readonly fpduTimeoutMs?: number;
  readonly logger: LlpLogger;
  readonly connectionId: string;
}

interface HeldSend {
  readonly parts: readonly Uint8Array[];
  readonly length: number;
  readonly done: SendCallback | undefined;
}

type FirstFpduHook = (ulpdu: Uint8Array) => void;

function gather(length: number, chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(length);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

/** Ceiling on a ULPDU copied for an RTR check: the largest RTR is a 46-octet Read Request. */
const RTR_MAX = 64;

export class MpaTcpStream extends BaseLlpStream {
  readonly socket: Socket;
  readonly role: 'initiator' | 'responder';
  readonly negotiated: MpaNegotiated;
  private readonly writer: FpduWriter;
  /** FPDUs with Markers are copied into the writer's copy slabs (`markerFraming: 'copy'`). */
  private readonly copyFraming: boolean;
  private readonly reader: FpduReader;
  private readonly rx: SocketReceiver;
  private readonly hwm: number;
  private readonly closeTimeoutMs: number;
  private readonly logger: LlpLogger;
  private readonly connectionId: string;
  private readonly fixedMulpdu: number | undefined;
  /**
   * The transmit queue: `direct` where it sends straight to the socket's descriptor (`directSend`), else a
   * `TxBatch` of this turn's FPDUs, written together at its end (one writev).
   */
  private readonly tx: TxBatch | DirectTx;
  private readonly direct: DirectTx | undefined;
  /** `done` callbacks of FPDUs framed, in order: the socket calls write callbacks in order. */
  private readonly written = new Fifo<SendCallback>();
  private flushScheduled = false;
  /** FPDUs framed in this turn, and in the last turn that framed any (`writeFpdu`'s at-once rule). */
  private turnFpdus = 0;
  private lastTurnFpdus = 0;
  /**
   * Where the stream is in its life (lifecycle.ts): startup (RFC 5044 §7.1.2), Full Operation, a receive
   * error's grace, the FINs of a close, closed. Changed only by `fire`; its timers only by `enter`.
   */
  private life: LifeState;
  /** What a Responder's ULP sent in `startup` (RFC 5044 §7.1.2): written at `first-fpdu`, else failed. */
  private heldSends: HeldSend[] = [];
  private heldOctets = 0;
  private sentFpdus = 0;
  private receivedFpdus = 0;
  private firstFpduHook: FirstFpduHook | null = null;
  /**
   * Back-pressure, not lifecycle: the ULP paused reception, or has no receiver (`BaseLlpStream`). The
   * socket and the reader stop; a FIN that arrives meanwhile waits behind the octets not yet delivered
   * (the socket keeps it: `readableEnded`) and is acted on when reading resumes.
   */
  private readingPaused = false;
  private closeTimer: NodeJS.Timeout | undefined;
  private readonly receiveErrors = new Subject<LlpReceiveError>();
  private graceTimer: NodeJS.Timeout | undefined;
  /** The RFC 5044 §8 error that ended reception, if one did: what `closed$` reports unless the ULP closed. */
  private receiveFailure: MpaProtocolError | MpaCrcError | undefined;
  /** How long a watched receive error leaves the sending half for the ULP's Terminate (ms). */
  static receiveErrorGraceMs = 2000;
  private readonly tolerateEarly: boolean;
  private readonly fpduTimeoutMs: number;
  private fpduTimer: NodeJS.Timeout | undefined;
  private readonly idleTimeoutMs: number;
  /** When the FPDU now partly received began (ms), and how many FPDUs had completed before it. */
  private partialSince = 0;
  private partialSeq = -1;

  constructor(init: MpaStreamInit) {
    const n = init.negotiated;
    const mulpdu = init.mulpdu ?? mulpduForEmss(init.emss, n.markersTx);
    super(0, mulpdu);
    this.fixedMulpdu = init.mulpdu;
    this.socket = init.socket;
    this.role = init.role;
    this.negotiated = n;
    this.copyFraming = n.markersTx && init.markerFraming === 'copy';
    const fd = init.directSend !== false && writeRanges !== undefined ? socketFd(init.socket) : -1;
    // Gathered Markers through Node's socket make ~256 chunks per FPDU: those streams keep the smaller mark
    // (sent directly, an FPDU with Markers is a few ranges).
    const gathered = n.markersTx && !this.copyFraming && fd < 0;
    const hwm = init.highWaterMark ?? (gathered ? MARKERS_HIGH_WATER_MARK : DEFAULT_HIGH_WATER_MARK);
    this.hwm = Math.max(hwm, init.socket.writableHighWaterMark);
    this.closeTimeoutMs = init.closeTimeoutMs;
    this.logger = init.logger;
    this.connectionId = init.connectionId;
    this.life = init.role === 'initiator' ? 'open' : 'startup';
    this.tolerateEarly = init.role === 'initiator' && init.tolerateEarlyResponderFpdu === true;
    this.fpduTimeoutMs = init.fpduTimeoutMs ?? 0;
    this.writer = new FpduWriter({
      crc: n.crc,
      markers: n.markersTx,
      deferCrc: true, // sealed once per batch (flushBatch)
      ...(init.inlineThreshold !== undefined ? { inline: init.inlineThreshold } : {}),
      ...(init.markerFraming !== undefined ? { markerFraming: init.markerFraming } : {}),
    });
    this.reader = new FpduReader(
      {
        crc: n.crc,
        markers: n.markersRx,
        ...(init.maxUlpduLength !== undefined ? { maxUlpduLength: init.maxUlpduLength } : {}),
      },
      (length, chunks) => this.onFpdu(length, chunks),
      (error) => this.onFramingError(error),
    );
    const s = this.socket;
    this.direct =
      fd >= 0 && writeRanges !== undefined
        ? new DirectTx(s, fd, writeRanges, this.onWritten, () => {
            if (this.queuedOctets < this.hwm) this.drained();
          })
        : undefined;
    this.tx = this.direct ?? new TxBatch();
    this.rx = init.rx;
    // The arena is read into again once the reader no longer holds a view of it (a partial FPDU).
    this.rx.held = () => this.reader.firstHeld;
    this.rx.onChunk = (chunk: Buffer) => this.onData(chunk);
    s.on('drain', () => this.drained());
    s.on('end', () => this.onPeerFin());
    s.on('finish', () => this.onLocalFinDone());
    s.on('error', (e: NodeJS.ErrnoException) => this.onSocketError(e));
    s.on('close', () => this.onSocketClose());
    if (init.keepAliveMs) s.setKeepAlive(true, init.keepAliveMs);
    this.idleTimeoutMs = init.idleTimeoutMs ?? 0;
    this.enter(undefined, this.life, undefined);
  }

  // ----- lifecycle (lifecycle.ts) -----

  /** In `closed`; a getter, as `fire` (or a callback it runs) may have changed `life` since a caller looked. */
  private get isClosed(): boolean {
    return this.life === 'closed';
  }

  /** The one way the stream changes state: by `event`, as the table allows; its timers follow. */
  private fire(event: LifeEvent): LifeState {
    const from = this.life;
    const to = transition(from, event);
    if (to === from) {
      if (nextState(from, event) === undefined)
        this.logger.debug('mpa.lifecycle.illegal', { connection: this.connectionId, state: from, event });
      return to;
    }
    this.life = to;
    this.enter(from, to, event);
    return to;
  }

  /**
   * The one place timers are armed and cleared by state (`LIFE_TIMERS`): a state's timers start as it is
   * entered (the close timer keeps running across the states that wait for a FIN; the ULP's close restarts
   * it), the timers it does not run are cleared. The mid-FPDU timer is armed by `watchPartial`, only in
   * states that run it.
   */
  private enter(from: LifeState | undefined, to: LifeState, event: LifeEvent | undefined): void {
    if (!runsTimer(to, 'close')) {
      if (this.closeTimer) clearTimeout(this.closeTimer);
      this.closeTimer = undefined;
    } else if (!this.closeTimer || event === 'local-close') {
      if (this.closeTimer) clearTimeout(this.closeTimer);
      // After our FIN: the peer's must follow (and ours go through) within closeTimeoutMs, else the socket goes.
      this.closeTimer = setTimeout(this.onCloseTimeout, this.closeTimeoutMs);
    }
    if (!runsTimer(to, 'grace')) {
      if (this.graceTimer) clearTimeout(this.graceTimer);
      this.graceTimer = undefined;
    } else if (!this.graceTimer) {
      // A receive error with a ULP watching: its Terminate, then its close; if it never closes, reset.
      this.graceTimer = setTimeout(() => this.fail(this.receiveFailure as LlpError), MpaTcpStream.receiveErrorGraceMs);
      this.graceTimer.unref?.();
    }
    if (!runsTimer(to, 'fpdu')) {
      if (this.fpduTimer) clearTimeout(this.fpduTimer);
      this.fpduTimer = undefined;
    }
    const ms = this.idleTimeoutMs;
    if (ms > 0 && from === undefined && runsTimer(to, 'idle'))
      this.socket.setTimeout(ms, () => {
        this.logger.debug('mpa.idle', { connection: this.connectionId, ms });
        this.fail(new LlpTimeoutError(`no octet received or sent for ${ms} ms (idleTimeoutMs)`));
      });
    else if (ms > 0 && !runsTimer(to, 'idle')) this.socket.setTimeout(0);
  }

  private onData(chunk: Buffer): void {
    this.reader.push(chunk);
    if (this.fpduTimeoutMs > 0) this.watchPartial();
  }

  /**
   * Octets that arrived in the same TCP segment as the MPA Reply (Initiator, `tolerateEarlyResponderFpdu`):
   * parsed as the start of the Responder's FPDU stream, ahead of everything the socket delivers next.
   */
  receiveEarly(chunk: Buffer): void {
    if (chunk.byteLength > 0) this.onData(chunk);
  }

  /**
   * Mid-FPDU timer: an FPDU the peer has begun must be complete within `fpduTimeoutMs` of its first
   * octet, so a peer that stops (or drips) inside one cannot hold the connection and its octets forever.
   * One timer, armed only while an FPDU is partly received; time spent paused by the ULP does not count.
   */
  private watchPartial(): void {
    const r = this.reader;
    if (r.atBoundary || r.failed || !runsTimer(this.life, 'fpdu')) {
      this.partialSince = 0;
      return;
    }
    if (this.partialSince === 0 || this.partialSeq !== r.delivered) {
      this.partialSince = Date.now();
      this.partialSeq = r.delivered;
    }
    if (!this.fpduTimer && !this.readingPaused) this.armFpduTimer(this.fpduTimeoutMs);
  }

  private armFpduTimer(ms: number): void {
    this.fpduTimer = setTimeout(this.onFpduTimer, ms);
    this.fpduTimer.unref?.();
  }

  private readonly onFpduTimer = (): void => {
    this.fpduTimer = undefined;
    const r = this.reader;
    if (!runsTimer(this.life, 'fpdu') || this.readingPaused || this.partialSince === 0 || r.atBoundary || r.failed)
      return;
    const ms = this.fpduTimeoutMs;
    const left = this.partialSince + ms - Date.now();
    if (left > 0) {
      this.armFpduTimer(left);
      return;
    }
    this.logger.debug('mpa.fpdu.timeout', { connection: this.connectionId, ms });
    // A stalled peer would not read a Terminate either: reset (RFC 5044 §8 leaves the close to us).
    this.fail(
      new LlpTimeoutError(
        `the peer stopped in the middle of an FPDU: not complete ${ms} ms after its first octet (fpduTimeoutMs)`,
      ),
    );
  };

  /** FPDUs this side has written and received (RTRs included). */
  get fpduCounts(): { readonly sent: number; readonly received: number } {
    return { sent: this.sentFpdus, received: this.receivedFpdus };
  }

  /**
   * How the socket has been read: reads into receive arenas, and arenas taken for them (socket-rx.ts; a
   * few per connection, however many reads; none where the socket is read from `'data'`).
   */
  get readStats(): {
    readonly reads: number;
    readonly arenas: number;
    readonly arenaSize: number;
    readonly shrinks: number;
    readonly growthRefused: number;
  } {
    const rx = this.rx;
    return {
      reads: rx.reads,
      arenas: rx.arenas,
      arenaSize: rx.arenaSize,
      shrinks: rx.shrinks,
      growthRefused: rx.growthRefused,
    };
  }

  /**
   * A new EMSS (e.g. after a path MTU change): MULPDU follows RFC 5044 §4.5 and `mulpdu$` emits.
   * Ignored when the MULPDU was fixed by option.
   */
  setEmss(emss: number): void {
    if (this.fixedMulpdu !== undefined) return;
    this.setMulpdu(mulpduForEmss(emss, this.negotiated.markersTx));
  }

  // ----- RFC 6581 RTR -----

  /** Initiator, peer-to-peer mode: send the RTR as the first FPDU; a Read RTR's response is consumed. */
  sendRtr(type: RtrType): void {
    if (type === 'read')
      this.firstFpduHook = (u) => {
        const c = checkReadResponse(u);
        if (!c.ok) this.fail(new MpaProtocolError('no-matching-rtr', MpaErrorCode.noMatchingRtr, c.reason));
      };
    const rtr = encodeRtr(type);
    this.writeFpdu([rtr], rtr.byteLength, undefined);
    this.logger.debug('mpa.rtr.sent', { connection: this.connectionId, type });
  }

  /** Responder, peer-to-peer mode: the first FPDU must be the RTR of `type`; it is consumed, never delivered. */
  expectRtr(type: RtrType, onReady: () => void): void {
    this.firstFpduHook = (u) => {
      const c = checkRtr(u, type);
      if (!c.ok) {
        this.fail(new MpaProtocolError('no-matching-rtr', MpaErrorCode.noMatchingRtr, c.reason));
        return;
      }
      this.logger.debug('mpa.rtr.received', { connection: this.connectionId, type });
      // The Read Response goes out before anything else: the Initiator expects it as our first FPDU.
      if (type === 'read' && c.sinkStag !== undefined && c.sinkTo) {
        const rsp = encodeReadResponse(c.sinkStag, c.sinkTo);
        this.writeFpdu([rsp], rsp.byteLength, undefined);
      }
      this.openTx();
      onReady();
    };
  }

  // ----- transmit -----

  protected transmit(parts: readonly Uint8Array[], length: number, done?: SendCallback): boolean {
    if (this.life !== 'open' && holdsSends(this.life)) {
      this.heldSends.push({ parts, length, done });
      this.heldOctets += length;
      return this.heldOctets + this.queuedOctets < this.hwm;
    }
    return this.writeFpdu(parts, length, done);
  }

  private readonly flushBatch = (): void => {
    this.flushScheduled = false;
    this.lastTurnFpdus = this.turnFpdus;
    this.turnFpdus = 0;
    if (!this.tx.empty) this.flushNow();
    // A sender told to wait for the batch (or for an FPDU written at once) hears now when the socket took it
    // all ('drain' will not fire).
    if (!this.socket.writableNeedDrain && this.queuedOctets < this.hwm) this.drained();
  };

  /** Octets framed and not yet taken by the kernel: Node's socket buffer and the direct queue's backlog. */
  get queuedOctets(): number {
    return this.socket.writableLength + (this.direct?.octets ?? 0);
  }

  /** Octets written to the socket so far (Node's count and the direct sends'). */
  get bytesWritten(): number {
    return this.socket.bytesWritten + (this.direct?.sent ?? 0);
  }

  /** Whether FPDUs go straight to the socket's descriptor (`directSend` with `@rddp/writev` installed). */
  get sendsDirect(): boolean {
    return this.direct !== undefined;
  }

  /** Seals the batch and gives it to the socket. */
  private flushNow(): void {
    this.writer.seal();
    // Copy slabs are reused once the socket has written the batches framed into them.
    let flushed: (() => void) | undefined;
    if (this.copyFraming) {
      const w = this.writer;
      const n = w.batch++;
      flushed = () => w.written(n);
    }
    const tx = this.tx;
    if (tx instanceof DirectTx) tx.flush(flushed);
    else tx.flush(this.socket, this.onWritten, flushed);
  }

  /**
   * Frames one ULPDU into this turn's batch; the batch goes to the socket at the end of the turn (the first
   * FPDU at once when the socket is idle and the last turn framed only one).
   */
  private writeFpdu(parts: readonly Uint8Array[], length: number, done: SendCallback | undefined): boolean {
    const batch = this.tx;
    this.writer.frame(parts, length, batch);
    if (done) {
      this.written.push(done);
      batch.endFpdu();
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // Request and response (the last turn framed one FPDU): this turn's first goes out at once when the
      // socket is idle, as siw transmits from the post when its send queue is idle, so the peer can answer
      // while this turn finishes. After a turn of several, a turn's FPDUs leave together at its end (one
      // system call per turn, not two).
      if (this.lastTurnFpdus <= 1 && this.socket.writableLength === 0) this.flushNow();
      process.nextTick(this.flushBatch);
    }
    this.turnFpdus++;
    this.sentFpdus++;
    return this.socket.writableLength + batch.octets < this.hwm;
  }

  /** One shared write callback: settles the oldest `fpdus` `done`s. */
  private readonly onWritten = (err: Error | null | undefined, fpdus: number): void => {
    for (let i = 0; i < fpdus; i++) {
      const done = this.written.shift();
      done?.(err ? new StreamClosedError('the FPDU was not written', { cause: err }) : undefined);
    }
  };

  /** RFC 5044 §7.1.2: the Responder's first FPDU was received; what it held may go out now. */
  private openTx(): void {
    const from = this.life;
    this.fire('first-fpdu');
    if (from !== 'startup') return; // the Initiator's were never held; a ULP that closed has had them failed
    const held = this.heldSends;
    this.heldSends = [];
    this.heldOctets = 0;
    for (const h of held) this.writeFpdu(h.parts, h.length, h.done);
    if (this.queuedOctets < this.hwm) this.drained();
  }

  /** RFC 5044 §7.1.2: what the Responder held can never go out now; each `done` learns it was not sent. */
  private failHeld(reason: LlpError): void {
    const held = this.heldSends;
    if (held.length === 0) return;
    this.heldSends = [];
    this.heldOctets = 0;
    this.logger.debug('mpa.held.discarded', {
      connection: this.connectionId,
      fpdus: held.length,
      reason: reason.message,
    });
    const error = new MpaFpduNotSentError(reason);
    for (const h of held) h.done?.(error);
  }

  // ----- receive -----

  private onFpdu(length: number, chunks: Uint8Array[]): void {
    if (this.life === 'closed') return;
    this.receivedFpdus++;
    if (this.receivedFpdus === 1) {
      // RFC 5044 §7.1.2: the Initiator sends the first FPDU (in peer-to-peer mode, the RTR).
      if (this.role === 'initiator' && this.sentFpdus === 0) {
        if (this.tolerateEarly)
          // Interoperability (off by default): some Responders send before our first FPDU arrives.
          this.logger.debug('mpa.early-fpdu.tolerated', { connection: this.connectionId, length });
        else {
          this.fail(
            new MpaProtocolError(
              'early-data',
              MpaErrorCode.invalidRequestReply,
              'the responder sent an FPDU before receiving the initiator’s first FPDU (RFC 5044 §7.1.2)',
            ),
          );
          return;
        }
      }
      const hook = this.firstFpduHook;
      if (hook) {
        this.firstFpduHook = null;
        if (length > RTR_MAX)
          this.fail(
            new MpaProtocolError(
              'no-matching-rtr',
              MpaErrorCode.noMatchingRtr,
              `the first FPDU carries ${length} octets: not the RTR exchange negotiated (RFC 6581)`,
            ),
          );
        else hook(gather(length, chunks));
        return;
      }
      this.openTx();
    }
    this.deliver({ length, chunks });
  }

  protected setReading(paused: boolean): void {
    if (this.readingPaused === paused) return;
    this.readingPaused = paused;
    const s = this.socket;
    if (paused) {
      s.pause();
      this.reader.setStopped(true);
      return;
    }
    if (!s.destroyed) s.resume();
    this.reader.setStopped(false);
    // The mid-FPDU timer restarts: the pause was ours, not the peer's.
    if (this.fpduTimeoutMs > 0) {
      this.partialSince = 0;
      this.watchPartial();
    }
    // A FIN that came while paused: its turn, now that what came before it has been delivered.
    if (!this.readingPaused && this.socket.readableEnded) this.onPeerFin();
  }

  // ----- errors and teardown -----

  /** RFC 5044 §8 errors (2: CRC, 3: Marker/ULPDU_Length): the ULP may still send its Terminate (RFC 5040 Figure 9, Layer LLP). */
  get receiveError$(): Observable<LlpReceiveError> {
    return this.receiveErrors.asObservable();
  }

  private onFramingError(error: MpaProtocolError | MpaCrcError): void {
    this.logger.debug('mpa.fpdu.error', { connection: this.connectionId, code: error.code, message: error.message });
    this.receiveFailure = error;
    // The reader is dead: nothing more is delivered. With a ULP watching, keep the sending half for its
    // Terminate, then close (`rx-error` runs the grace timer); unwatched, or once the ULP closed, reset.
    const s = this.life;
    if (!this.receiveErrors.observed || (s !== 'open' && s !== 'startup')) {
      this.fail(error);
      return;
    }
    this.fire('rx-error');
    this.receiveErrors.next({ error, errorType: 0, errorCode: error.mpaErrorCode });
  }

  /** Bad input from the peer: RFC 5044 §8 — the connection is closed (here: reset), the error surfaces on closed$. */
  fail(error: LlpError): void {
    if (this.life === 'closed') return;
    this.abort(error);
  }

  /**
   * Ends the socket, once. RST when asked, unless our FIN is pending (libuv refuses a reset during a
   * shutdown, and Node then drops the TCP handle unclosed: it leaks and spins) or TCP is already closed both
   * ways (ours through, the peer's received); then a plain close.
   */
  private dropSocket(reset: boolean): void {
    const s = this.socket;
    // FPDUs framed in this turn, or waiting in the direct queue, never reach the socket: their `done`s learn
    // it now — also when the socket is already destroyed (a reset, a send error), which fails only what
    // Node's socket itself held.
    const unsent = this.tx.discard();
    if (unsent > 0) this.onWritten(new StreamClosedError('the connection was dropped'), unsent);
    if (s.destroyed) return;
    if (reset && (!s.writableEnded || (s.writableFinished && !s.readableEnded))) s.resetAndDestroy();
    else s.destroy();
  }

  /** `close-timeout`: the FIN awaited did not come (or ours did not go) within closeTimeoutMs. */
  private readonly onCloseTimeout = (): void => {
    this.closeTimer = undefined;
    this.fire('close-timeout');
    this.dropSocket(true);
    this.end({
      graceful: false,
      initiator: 'local',
      error: new LlpTimeoutError(`the peer did not close within ${this.closeTimeoutMs} ms of our FIN`),
    });
  };

  /**
   * After the transition into `closed` (which cleared the timers) and the socket's drop: what was held
   * fails, `closed$` fires (once: an abort from a `done` callback meanwhile fired it first).
   */
  private end(event: Parameters<BaseLlpStream['finish']>[0]): void {
    this.failHeld(event.error ?? new StreamClosedError('the connection closed'));
    this.finish(event);
  }

  protected startClose(): void {
    // A close asked for while the stream is entering `closed` (from a `done` callback): that end settles it.
    if (this.life === 'closed') return;
    // RFC 5044 §7.2 / RFC 5041 §6.2: `local-close` ends a receive error's grace (the ULP closes after its
    // Terminate: no reset) and starts the close timer.
    this.fire('local-close');
    // Sends held back by §7.1.2 can never go out now.
    this.failHeld(new StreamClosedError('the ULP closed the connection'));
    // Everything queued is written, then FIN (once: the peer's FIN may have been answered).
    if (!this.isClosed && !this.finQueued) {
      this.flushBatch();
      this.endSocket();
    }
    this.logger.debug('mpa.close', { connection: this.connectionId, initiator: 'local' });
  }

  /** Our FIN is sent or waits behind the direct queue. */
  private get finQueued(): boolean {
    return this.socket.writableEnded || this.direct?.endPending === true;
  }

  /** FIN after everything queued (RFC 5044 §7.2). */
  private endSocket(): void {
    if (this.direct !== undefined) this.direct.end();
    else this.socket.end();
  }

  protected startAbort(reason?: LlpError): void {
    // Already `closed`: an abort from a `done` callback while a close is under way; the socket goes all the same.
    if (this.life !== 'closed') this.fire('abort');
    this.failHeld(reason ?? new StreamClosedError('aborted'));
    this.reader.kill();
    this.dropSocket(true);
    this.logger.debug('mpa.abort', { connection: this.connectionId, reason: reason?.message });
  }

  private onPeerFin(): void {
    const from = this.life;
    // Paused: the FIN waits behind what is not delivered yet (setReading acts on it at resume).
    if (this.readingPaused || from === 'closed' || peerFinSeen(from)) return;
    if (!this.reader.atBoundary && !this.reader.failed) {
      this.fail(
        new MpaProtocolError(
          'stream-ended',
          MpaErrorCode.tcpStreamLost,
          'the peer closed the TCP connection in the middle of an FPDU (RFC 5044 §8 code 1)',
        ),
      );
      return;
    }
    // `peer-fin` ends a receive error's grace and, where our FIN was not asked for, starts the close timer.
    const to = this.fire('peer-fin');
    if (!ulpClosed(from)) {
      // The peer closed first: answer with our FIN behind whatever we already queued (after a receive
      // error: the ULP's Terminate, RFC 5044 §8), bounded by closeTimeoutMs.
      this.logger.debug('mpa.close', { connection: this.connectionId, initiator: 'remote' });
      this.failHeld(new StreamClosedError('the peer closed the connection (FIN)'));
      if (!this.isClosed && !this.finQueued) {
        this.flushBatch();
        this.endSocket();
      }
    }
    if (to === 'closed') this.bothFins(from);
  }

  private onLocalFinDone(): void {
    const from = this.life;
    if (from === 'closed') return;
    if (this.fire('local-fin-done') === 'closed') this.bothFins(from);
  }

  /** Both FINs are through: the close is complete (`from`: the state before `closed`). */
  private bothFins(from: LifeState): void {
    this.dropSocket(false);
    if (ulpClosed(from)) this.end({ graceful: true, initiator: 'local' });
    else if (this.receiveFailure)
      // RFC 5044 §8: reception ended on an error and the ULP never closed: the close is not an orderly one.
      this.end({ graceful: false, initiator: 'local', error: this.receiveFailure });
    else this.end({ graceful: true, initiator: 'remote' });
  }

  private onSocketError(e: NodeJS.ErrnoException): void {
    if (this.life === 'closed') return;
    this.fire('socket-error');
    this.dropSocket(false);
    this.end({
      graceful: false,
      initiator: 'remote',
      error:
        this.receiveFailure ??
        new ConnectionAbortedError(`TCP connection lost: ${e.code ?? e.message} (RFC 5044 §8 code 1)`, { cause: e }),
    });
  }

  private onSocketClose(): void {
    if (this.life === 'closed') return;
    this.fire('socket-closed');
    this.end({
      graceful: false,
      initiator: 'remote',
      error:
        this.receiveFailure ??
        new ConnectionAbortedError('the TCP connection closed without an orderly shutdown (RFC 5044 §8 code 1)'),
    });
  }
}
