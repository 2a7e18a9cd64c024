/**
 * Transmit path: one queue per association (docs/SCTP.md "sending").
 *
 * The sctp package keeps a single pending drain callback per association, so concurrent SENDs lose
 * callbacks, and a SEND while flightsize >= cwnd fails (its stream writers swallow that error and drop
 * the data). Everything this plugin sends therefore goes through this queue: it hands the package a
 * batch of user messages only when the congestion and receive windows allow it (RFC 4960 §6.1 rules A
 * and B), waits for the last SEND's callback before the next batch, and reports a message as done only
 * once the peer's cumulative TSN ack covers it (the package may retransmit from the caller's buffers
 * until then).
 */
import { type LlpError, LlpTimeoutError, type SendCallback } from '@rddp/llp';
import type { PartsView } from './parts-view.js';
import { allAcked, lastAssignedTsn, type PkgAssociation, tsnGe } from './pkg.js';

export interface QueueItem {
  readonly streamId: number;
  readonly ppid: number;
  readonly data: Buffer | PartsView;
  readonly length: number;
  /** Runs once the message is acknowledged, or with the error that ended the association. */
  readonly done?: SendCallback | undefined;
  /** Runs when the message leaves the queue for the package (per-stream backpressure accounting). */
  readonly dequeued?: ((length: number) => void) | undefined;
}

export interface SendQueueOptions {
  /** Most octets handed to the package in one go (they share SCTP packets: bundling, RFC 4960 §6.10). */
  readonly maxBatch: number;
  /** Zero window probe delay when the peer's window is too small and nothing is in flight (RFC 4960 §6.1 A). */
  readonly probeMs: number;
  /** No acknowledgement progress for this long while data is outstanding: the peer is gone. 0 = never. */
  readonly deadPeerMs: number;
  /** Called when the queue cannot go on (dead peer, package error): the owner aborts the association. */
  readonly onFatal: (error: LlpError | Error) => void;
}

export class SendQueue {
  private readonly waiting: QueueItem[] = [];
  private readonly unacked: { lastTsn: number; items: QueueItem[] }[] = [];
  private busy = false;
  /** The batch handed to the package whose last SEND callback is awaited. */
  private current: QueueItem[] | undefined;
  private ended: LlpError | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private probeArmed = false;
  private deadTimer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly association: PkgAssociation,
    private readonly options: SendQueueOptions,
  ) {}

  /** Messages queued or unacknowledged. */
  get pending(): number {
    let n = this.waiting.length + (this.busy ? 1 : 0);
    for (const u of this.unacked) n += u.items.length;
    return n;
  }

  push(item: QueueItem): void {
    if (this.ended) {
      item.dequeued?.(item.length);
      item.done?.(this.ended);
      return;
    }
    this.waiting.push(item);
    this.pump();
  }

  /** Resolves once everything queued so far is acknowledged (or the queue ended). */
  whenIdle(): Promise<void> {
    if (this.ended || (this.pending === 0 && allAcked(this.association))) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** A SACK was processed by the package: settle what it acknowledged, send what now fits. */
  onSack(): void {
    // The package calls the last SEND's callback only from a SACK that leaves room for another message
    // (flightsize < cwnd, message < peer_rwnd); a peer holding its window shut may never send one. Once
    // nothing is in flight, the batch was sent and acknowledged anyway.
    const batch = this.current;
    const bundlingQueue = (this.association as unknown as { queue?: unknown[] }).queue;
    if (this.busy && batch && allAcked(this.association) && (bundlingQueue?.length ?? 0) === 0) this.sent(batch);
    this.settle();
    this.pump();
  }

  /**
   * The association is over: fail what never reached the package with `error`. What the package sent
   * and the peer has not acknowledged yet fails too — unless the association ended in a graceful
   * SHUTDOWN (`delivered`), which RFC 4960 §9.2 completes only once all outstanding DATA is acknowledged.
   */
  end(error: LlpError, delivered = false): void {
    if (this.ended) return;
    this.ended = error;
    this.clearTimers();
    const waiting = [...this.waiting];
    const unacked = this.unacked.flatMap((u) => u.items);
    this.waiting.length = 0;
    this.unacked.length = 0;
    for (const it of waiting) {
      it.dequeued?.(it.length);
      it.done?.(error);
    }
    for (const it of unacked) it.done?.(delivered ? undefined : error);
    this.wakeIdle();
  }

  /** The peer started SHUTDOWN (RFC 4960 §9.2): nothing new is sent; what is in flight is still acknowledged. */
  stopNew(error: LlpError): void {
    const waiting = [...this.waiting];
    this.waiting.length = 0;
    for (const it of waiting) {
      it.dequeued?.(it.length);
      it.done?.(error);
    }
  }

  pump(): void {
    if (this.busy || this.ended || this.waiting.length === 0) return;
    const a = this.association;
    if (a.state !== 'ESTABLISHED') return;
    // RFC 4960 §6.1 B: nothing new while cwnd or more is outstanding.
    if (a.flightsize >= a.cwnd) {
      this.watch();
      return;
    }
    const probe = this.probeArmed && allAcked(a);
    const batch: QueueItem[] = [];
    let bytes = 0;
    while (this.waiting.length > 0) {
      const it = this.waiting[0] as QueueItem;
      if (batch.length > 0 && bytes + it.length > this.options.maxBatch) break;
      // RFC 4960 §6.1 A: stay inside the peer's receive window; the package would wait forever for a
      // message that never fits (docs/SCTP.md, defect "window").
      if (a.flightsize + bytes + it.length >= a.peer_rwnd && !(probe && batch.length === 0)) break;
      batch.push(this.waiting.shift() as QueueItem);
      bytes += it.length;
    }
    if (batch.length === 0) {
      if (allAcked(a)) this.armProbe();
      this.watch();
      return;
    }
    this.probeArmed = false;
    this.busy = true;
    this.current = batch;
    for (const it of batch) it.dequeued?.(it.length);
    const last = batch.length - 1;
    for (let i = 0; i <= last; i++) {
      const it = batch[i] as QueueItem;
      let failed: Error | undefined;
      // Only the last SEND's callback is waited for: earlier ones may be overwritten by the package.
      a.SEND(it.data, { stream_id: it.streamId, ppid: it.ppid }, (error) => {
        if (error) {
          failed = error;
          return;
        }
        if (i === last) this.sent(batch);
      });
      if (failed) {
        this.busy = false;
        this.options.onFatal(failed);
        return;
      }
    }
    this.watch();
  }

  private sent(batch: QueueItem[]): void {
    if (this.ended || this.current !== batch) return;
    this.current = undefined;
    this.busy = false;
    this.unacked.push({ lastTsn: lastAssignedTsn(this.association), items: batch });
    this.settle();
    this.pump();
  }

  private settle(): void {
    const ack = this.association.c_tsn_ack?.number;
    let progressed = false;
    if (ack !== undefined) {
      while (this.unacked.length > 0 && tsnGe(ack, (this.unacked[0] as { lastTsn: number }).lastTsn)) {
        const u = this.unacked.shift() as { items: QueueItem[] };
        progressed = true;
        for (const it of u.items) it.done?.();
      }
    }
    if (progressed) this.resetDead();
    if (this.pending === 0 && allAcked(this.association)) {
      this.clearTimers();
      this.wakeIdle();
    }
  }

  private wakeIdle(): void {
    const ws = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of ws) w();
  }

  private armProbe(): void {
    if (this.probeTimer || this.probeArmed) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      this.probeArmed = true;
      this.pump();
    }, this.options.probeMs);
    this.probeTimer.unref();
  }

  /** Arms the dead-peer watchdog while anything is outstanding. */
  private watch(): void {
    if (this.options.deadPeerMs <= 0 || this.deadTimer || this.pending === 0) return;
    this.deadTimer = setTimeout(() => {
      this.deadTimer = undefined;
      if (this.pending > 0 && !this.ended) {
        this.options.onFatal(
          new LlpTimeoutError(`no acknowledgement from the peer for ${this.options.deadPeerMs} ms (RFC 4960 §8.1)`),
        );
      }
    }, this.options.deadPeerMs);
    this.deadTimer.unref();
  }

  private resetDead(): void {
    if (this.deadTimer) clearTimeout(this.deadTimer);
    this.deadTimer = undefined;
    this.watch();
  }

  private clearTimers(): void {
    if (this.probeTimer) clearTimeout(this.probeTimer);
    if (this.deadTimer) clearTimeout(this.deadTimer);
    this.probeTimer = undefined;
    this.deadTimer = undefined;
  }
}
