/** A completion queue (ibv_cq) as an RxJS stream of work completions. */
import { HeldSubject } from '@rddp/llp';
import { type Observable, Subject } from 'rxjs';
import type { WorkCompletion } from './types.js';

export class CompletionQueue {
  private readonly subject = new HeldSubject<WorkCompletion>();
  private readonly events = new Subject<WorkCompletion>();
  private count = 0;
  /**
   * Every completion reported to this queue, in the order the queue pairs report them (RFC 5040 §5.5:
   * send-queue work in submission order, receives in Delivery order). Completions reported before
   * anyone subscribed are held and handed to the first subscriber, so none is lost.
   */
  readonly completions$: Observable<WorkCompletion> = this.subject.observable;
  /**
   * The Solicited Events (RFC 5040 §5.3): successful receives of a Send with Solicited Event (and
   * Invalidate), also reported on `completions$`. An event stream, like an armed ibv_req_notify_cq:
   * only current subscribers see it.
   */
  readonly solicited$: Observable<WorkCompletion> = this.events.asObservable();

  /** Completions reported so far. */
  get reported(): number {
    return this.count;
  }

  /** @internal Called by queue pairs. */
  push(wc: WorkCompletion): void {
    this.count++;
    this.subject.next(wc);
    if (wc.opcode === 'recv' && wc.solicited && wc.status === 'success') this.events.next(wc);
  }
}
