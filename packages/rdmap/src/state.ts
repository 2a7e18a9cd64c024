/**
 * RDMAP Stream state (RFC 5040 §6). The RFC names the events, not the states; these are the states
 * Linux siw and the RDMA verbs use for them:
 *
 *   rts ──close()──▶ closing ──(all done, LLP closed)──▶ closed
 *    │                  │
 *    ├──Terminate sent/received (§5.4, §6.2.1)──▶ terminate ──(LLP closed)──▶ error
 *    └──LLP failure (§6.2 LLP Abortive Termination) or abort()──────────────▶ error
 */
import { BehaviorSubject, type Observable } from 'rxjs';

export type RdmapStreamState = 'rts' | 'closing' | 'terminate' | 'error' | 'closed';

const ALLOWED: Readonly<Record<RdmapStreamState, readonly RdmapStreamState[]>> = {
  rts: ['closing', 'terminate', 'error', 'closed'],
  closing: ['closed', 'terminate', 'error'],
  terminate: ['error'],
  error: [],
  closed: [],
};

/** Whether the state machine allows `from → to`. */
export function canTransition(from: RdmapStreamState, to: RdmapStreamState): boolean {
  return ALLOWED[from].includes(to);
}

/** The current state and its changes; refuses transitions the machine does not have. */
export class StreamStateMachine {
  private readonly subject = new BehaviorSubject<RdmapStreamState>('rts');

  get state(): RdmapStreamState {
    return this.subject.value;
  }
  /** Emits the current state on subscribe and every change; completes in `error` or `closed`. */
  get state$(): Observable<RdmapStreamState> {
    return this.subject.asObservable();
  }
  /** Moves to `to`; returns false (and stays) if the machine has no such transition. */
  to(to: RdmapStreamState): boolean {
    const from = this.subject.value;
    if (!canTransition(from, to)) return false;
    this.subject.next(to);
    if (to === 'error' || to === 'closed') this.subject.complete();
    return true;
  }
  /** True while new operations may be posted. */
  get accepting(): boolean {
    return this.subject.value === 'rts';
  }
  /** True while messages may still be transmitted (RTS, or draining during a graceful close). */
  get transmitting(): boolean {
    const s = this.subject.value;
    return s === 'rts' || s === 'closing';
  }
}
