/**
 * One LLP stream = one DDP Stream = one SCTP stream of the association (RFC 5043 §4).
 * Receive: DDP Segments (PPID 16) are handed up whole, one per SCTP user message; while the reader is
 * paused they are held and their octets stay debited from the association's receive window, so the
 * peer sees the window close (RFC 4960 §6.2) instead of this side buffering without bound.
 * Send: through the association's queue for this stream; a send completes when its DATA is handed to the
 * wire (the association keeps the copy it retransmits from). Graceful close: Session Terminate on this stream (RFC 5043).
 */
import { BaseLlpStream, InvalidArgumentError, type LlpCloseEvent, type LlpError, type SendCallback } from '@rddp/llp';
import { PartsView } from './parts-view.js';
import { PPID_DDP_SEGMENT } from './rfc5043.js';
import type { QueueItem } from './send-queue.js';

/** What a stream needs from its connection. */
export interface StreamHost {
  enqueue(item: QueueItem): void;
  /** Send Session Terminate on this stream (after what it queued before). */
  terminate(stream: SctpLlpStream): void;
  abort(reason?: LlpError): void;
  /**
   * Adjusts the association's receive window by `delta` octets: negative while a paused reader's
   * segments are held, positive when they are handed over (the peer then gets a window update).
   */
  adjustWindow(delta: number): void;
  streamEnded(stream: SctpLlpStream): void;
}

export class SctpLlpStream extends BaseLlpStream {
  private readingPaused = false;
  private waiting: Buffer[] = [];
  private heldOctets = 0;
  private queued = 0;
  /** Sends whose `done` has not run yet (their DATA is not handed to the wire). */
  private unacked = 0;
  /** A graceful end that waits for `unacked` to reach 0 (RFC 5041 §6.2: what was sent before it is delivered). */
  private pendingEnd: LlpCloseEvent | undefined;
  /** How this stream ended, once it has. */
  closeEvent: LlpCloseEvent | undefined;

  constructor(
    id: number,
    mulpdu: number,
    private readonly host: StreamHost,
    private readonly highWaterMark: number,
  ) {
    super(id, mulpdu);
  }

  /** Octets of DDP Segments held because the reader is paused (debited from the receive window). */
  get heldBytes(): number {
    return this.heldOctets;
  }

  protected transmit(parts: readonly Uint8Array[], length: number, done?: SendCallback): boolean {
    if (length === 0) {
      // RFC 4960 §3.3.1: a DATA chunk carries at least one octet of user data; DDP Segments never are empty.
      throw new InvalidArgumentError(
        'SCTP cannot carry an empty ULPDU (RFC 4960 §3.3.1: user data of at least one octet)',
      );
    }
    this.queued += length;
    this.unacked++;
    this.host.enqueue({
      streamId: this.id,
      ppid: PPID_DDP_SEGMENT,
      data: PartsView.of(parts),
      length,
      done: (error) => {
        this.dequeued(length);
        this.unacked--;
        done?.(error);
        if (this.unacked === 0 && this.pendingEnd) {
          const ev = this.pendingEnd;
          this.pendingEnd = undefined;
          this.finish(ev);
        }
      },
    });
    return this.queued < this.highWaterMark;
  }

  private dequeued(octets: number): void {
    this.queued -= octets;
    if (this.queued <= this.highWaterMark / 2) this.drained();
  }

  protected setReading(paused: boolean): void {
    this.readingPaused = paused;
    if (!paused) this.flush();
  }

  protected startClose(): void {
    this.host.terminate(this);
  }

  protected startAbort(reason?: LlpError): void {
    this.host.abort(reason);
  }

  protected override finish(event: LlpCloseEvent): void {
    if (this.state === 'closed') return;
    this.closeEvent = event;
    if (this.heldOctets > 0) {
      const octets = this.heldOctets;
      this.waiting = [];
      this.heldOctets = 0;
      this.host.adjustWindow(octets);
    }
    super.finish(event);
    this.host.streamEnded(this);
  }

  /**
   * Ends the stream from the connection's side. A graceful end (the peer's Session Terminate, or the answer
   * to ours) first lets this side's DATA still awaiting acknowledgement complete: the peer may answer a
   * message before our SACK timer has acknowledged it, and those sends did arrive.
   */
  end(event: LlpCloseEvent): void {
    if (event.graceful && this.unacked > 0 && this.state !== 'closed') {
      this.pendingEnd = event;
      return;
    }
    this.finish(event);
  }

  /** One DDP Segment from the peer (called while the package delivers it). */
  segment(message: Buffer): void {
    if (this.state === 'closed') return;
    if (this.readingPaused || this.waiting.length > 0) {
      this.waiting.push(message);
      this.heldOctets += message.length;
      // Keep the octets debited once the package credits its window back after this call.
      this.host.adjustWindow(-message.length);
      return;
    }
    this.deliver({ length: message.length, chunks: [message] });
  }

  private flush(): void {
    let released = 0;
    while (!this.readingPaused && this.waiting.length > 0 && this.state !== 'closed') {
      const m = this.waiting.shift() as Buffer;
      this.heldOctets -= m.length;
      released += m.length;
      this.deliver({ length: m.length, chunks: [m] });
    }
    if (released > 0) this.host.adjustWindow(released);
  }
}
