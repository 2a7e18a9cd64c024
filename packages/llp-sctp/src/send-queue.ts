/**
 * Transmit path: what the connection hands the association (docs/SCTP.md "Sending").
 *
 * `@rddp/sctp` keeps a send queue per SCTP stream and a stream scheduler (RFC 8260 §3), packs the
 * chunks into packets once per event-loop turn, and completes a SEND when the message's last fragment
 * is handed to the wire (it keeps the encoded copy for retransmission, RFC 4960 §6.3). So this layer
 * only counts what is not handed over yet (for `whenIdle`), and watches for a peer that stopped
 * acknowledging (RFC 4960 §8.1).
 */
import { type LlpError, LlpProtocolError, LlpTimeoutError, type SendCallback, StreamClosedError } from '@rddp/llp';
import type { PartsView } from './parts-view.js';
import type { PkgAssociation } from './pkg.js';

export interface QueueItem {
  readonly streamId: number;
  readonly ppid: number;
  readonly data: Buffer | PartsView;
  readonly length: number;
  /** Runs once the message is handed to the wire, or with the error that ended the association first. */
  readonly done?: SendCallback | undefined;
}

export interface SendQueueOptions {
  /** No acknowledgement progress for this long while data is outstanding: the peer is gone. 0 = never. */
  readonly deadPeerMs: number;
  /** Called when the queue cannot go on (dead peer, package error): the owner aborts the association. */
  readonly onFatal: (error: LlpError | Error) => void;
}

export class SendQueue {
  /** SENDs whose callback has not run. */
  private inQueue = 0;
  private ended: LlpError | undefined;
  private deadTimer: NodeJS.Timeout | undefined;
  private lastProgress = { sacks: -1, outstanding: -1 };
  private idleWaiters: (() => void)[] = [];
  private readonly onIdle = () => {
    if (this.isIdle()) this.wakeIdle();
  };

  constructor(
    private readonly association: PkgAssociation,
    private readonly options: SendQueueOptions,
  ) {}

  /** Messages not yet handed to the wire. */
  get pending(): number {
    return this.inQueue;
  }

  push(item: QueueItem): void {
    if (this.ended) {
      item.done?.(this.ended);
      return;
    }
    this.inQueue++;
    this.association.SEND(item.data, { stream_id: item.streamId, ppid: item.ppid }, (error) => {
      this.inQueue--;
      if (error && !this.ended && this.association.state !== 'ESTABLISHED') {
        // RFC 4960 §9.2: no new data once either side started SHUTDOWN
        item.done?.(new StreamClosedError(`the association is shutting down (${this.association.state})`));
        return;
      }
      if (error && !this.ended) {
        const e = new LlpProtocolError(`sctp: ${error.message}`, { cause: error });
        item.done?.(e);
        this.options.onFatal(e);
        return;
      }
      item.done?.(this.ended ?? undefined);
    });
    this.watch();
  }

  /** Resolves once everything queued so far is handed over and acknowledged (or the queue ended). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.idleWaiters.length === 0) this.association.on('IDLE', this.onIdle);
      this.idleWaiters.push(resolve);
    });
  }

  /** The association is over: what it had not handed over fails with `error` (through its callbacks). */
  end(error: LlpError): void {
    if (this.ended) return;
    this.ended = error;
    this.association._failQueued(error);
    this.clearTimers();
    this.wakeIdle();
  }

  private isIdle(): boolean {
    return this.ended !== undefined || (this.inQueue === 0 && this.association.idle);
  }

  private wakeIdle(): void {
    this.association.off('IDLE', this.onIdle);
    const ws = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of ws) w();
  }

  /** Arms the dead-peer watchdog while anything is outstanding: it fires when no SACK moved anything. */
  private watch(): void {
    if (this.options.deadPeerMs <= 0 || this.deadTimer || this.ended) return;
    const a0 = this.association;
    if (this.lastProgress.sacks < 0)
      this.lastProgress = { sacks: a0.stats.sacksReceived, outstanding: a0.outstandingCount };
    this.deadTimer = setTimeout(() => {
      this.deadTimer = undefined;
      if (this.ended) return;
      const a = this.association;
      const now = { sacks: a.stats.sacksReceived, outstanding: a.outstandingCount };
      const busy = this.inQueue > 0 || a.outstandingCount > 0;
      if (!busy) {
        this.lastProgress = { sacks: -1, outstanding: -1 };
        return;
      }
      const progressed = now.sacks !== this.lastProgress.sacks || now.outstanding !== this.lastProgress.outstanding;
      this.lastProgress = now;
      if (progressed) {
        this.watch();
        return;
      }
      this.options.onFatal(
        new LlpTimeoutError(`no acknowledgement from the peer for ${this.options.deadPeerMs} ms (RFC 4960 §8.1)`),
      );
    }, this.options.deadPeerMs);
    this.deadTimer.unref();
  }

  private clearTimers(): void {
    if (this.deadTimer) clearTimeout(this.deadTimer);
    this.deadTimer = undefined;
  }
}
