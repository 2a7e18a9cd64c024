import type { Observable } from 'rxjs';
import type { LlpError } from './errors.js';

/**
 * A received ULPDU, handed up only once the LLP has validated it (MPA checks its CRC first).
 * `length` is the exact ULPDU length (RFC 5041 §3: the LLP reports it); `chunks` hold its octets in
 * order and sum to `length`. They are the LLP's own buffers (socket chunks, unsliced where possible)
 * and are valid only for the duration of the call: the receiver copies what it keeps — once, straight
 * into the destination (a registered buffer). This is how the receive path stays at one copy.
 */
export interface Ulpdu {
  readonly length: number;
  readonly chunks: readonly Uint8Array[];
}

/** Receives validated ULPDUs, in the stream's delivery order. Must not throw. */
export type UlpduHandler = (ulpdu: Ulpdu) => void;

/** Called once the LLP holds no more reference to a sent ULPDU's buffers, or with the error that ended the send. */
export type SendCallback = (error?: LlpError) => void;

/** How a stream or connection ended. Emitted once on `closed$`, which then completes. */
export interface LlpCloseEvent {
  /** true: orderly teardown, everything sent before it was delivered (RFC 5041 §6.2). */
  readonly graceful: boolean;
  /** Which side started the teardown. */
  readonly initiator: 'local' | 'remote';
  /** The reason of an abortive teardown (reset, digest error, protocol error, timeout, ...). */
  readonly error?: LlpError;
}

export type LlpStreamState = 'open' | 'closing' | 'closed';

/**
 * A receive-side error after which the LLP delivers nothing more but can still send — MPA's CRC error or
 * Marker/ULPDU_Length mismatch (RFC 5044 §8). The ULP may send one last message (RDMAP: a Terminate with
 * Layer LLP, RFC 5040 §4.8 Figure 9) and then closes or aborts; if it does neither within the LLP's grace
 * period, the LLP aborts the connection itself.
 */
export interface LlpReceiveError {
  readonly error: LlpError;
  /** The LLP's Error Type for a Terminate's Layer LLP (MPA: 0). */
  readonly errorType: number;
  /** The LLP's Error Code (MPA: RFC 5044 §8's code, e.g. 2 = CRC mismatch). */
  readonly errorCode: number;
}

/**
 * One LLP stream: what one DDP Stream runs on (RFC 5041 §1.1 "Stream"). MPA/TCP has exactly one per
 * connection; SCTP maps each DDP Stream to one SCTP stream (RFC 5043).
 */
export interface LlpStream {
  /** Index of this stream within its connection, from 0. */
  readonly id: number;
  /** Current Maximum ULPDU size: the largest ULPDU `send` accepts (RFC 5041 §5.2, RFC 5044 §6.1.4). */
  readonly mulpdu: number;
  /** The MULPDU now and every later change (e.g. an MSS change under MPA). Emits on subscribe. */
  readonly mulpdu$: Observable<number>;
  readonly state: LlpStreamState;

  /**
   * Queue one ULPDU, given as the parts to send back to back (header, payload slices, ...). The LLP
   * never concatenates payload parts: it writes them as they are (writev/cork). The caller must not
   * modify the parts until `done` runs. Throws `UlpduTooLargeError` over MULPDU and `StreamClosedError`
   * once closing. Returns `false` when the LLP's send buffer is above its high-water mark: the caller
   * should stop and wait for `waitForDrain()` (explicit backpressure; the ULPDU was still queued).
   */
  send(ulpdu: readonly Uint8Array[], done?: SendCallback): boolean;
  /** Whether the send buffer is above its high-water mark (the last `send` returned false). */
  readonly needsDrain: boolean;
  /** Resolves when the send buffer has drained below its low-water mark; rejects on close or abort. */
  waitForDrain(signal?: AbortSignal): Promise<void>;

  /**
   * Set the handler for received ULPDUs. ULPDUs that arrive before a handler is set are held (bounded by
   * flow control) and handed over, in order, when it is set. `null` detaches and holds again.
   */
  setReceiver(handler: UlpduHandler | null): void;
  /** Stop reading from the peer (the peer then sees backpressure); `resume` starts again. */
  pause(): void;
  resume(): void;

  /**
   * Graceful teardown (RFC 5041 §6.2): everything sent before it is delivered to the peer, then the peer
   * sees `closed$` with `graceful: true`. On single-stream LLPs this closes the connection.
   */
  close(signal?: AbortSignal): Promise<void>;
  /** Abortive teardown: pending data is dropped, the peer sees `closed$` with an error. Idempotent. */
  abort(reason?: LlpError): void;
  /** Emits one `LlpCloseEvent`, then completes. Replays it to late subscribers. */
  readonly closed$: Observable<LlpCloseEvent>;
  /**
   * Optional: receive-side errors that leave the sending half usable (see `LlpReceiveError`). LLPs without
   * such errors omit it; an LLP that has them but is not watched aborts after its grace period.
   */
  readonly receiveError$?: Observable<LlpReceiveError>;
}
