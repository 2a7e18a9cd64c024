/**
 * The life of one MPA/TCP stream, from Full Operation to the socket's end, as one state machine: the
 * states, the events that move it and the timers each state runs. As Linux siw checks every QP state
 * change in `siw_qp_modify`, `MpaTcpStream` changes state only through `transition`, and an event a
 * state has no transition for is a bug: it throws where `NODE_ENV` is 'development' or 'test', and is
 * ignored (the state kept) elsewhere.
 *
 *   startup ──first-fpdu──▶ open                                  (the Initiator starts in open)
 *   startup | open ──rx-error──▶ startup-rx-error | rx-error       (grace for the ULP's Terminate)
 *   startup | startup-rx-error ──peer-fin──▶ startup-peer-closed    (FIN answered; sends still held)
 *   open | rx-error ──peer-fin──▶ peer-closed                        (FIN answered)
 *   startup-peer-closed | peer-closed ──local-fin-done──▶ closed     (orderly, the peer first)
 *   startup | open | *rx-error ──local-close──▶ closing;  *peer-closed ──local-close──▶ closing-peer-fin
 *   closing ──local-fin-done──▶ closing-fin-sent ──peer-fin──▶ closed           (orderly, we first)
 *   closing ──peer-fin──▶ closing-peer-fin ──local-fin-done──▶ closed           (FINs crossed)
 *   any but closed ──abort | socket-error | socket-closed──▶ closed;  *closing*, *peer-closed ──close-timeout──▶ closed
 *
 * Reading paused (the ULP's `pause()`, or no receiver) is back-pressure, not life: it is not here. A FIN
 * that arrives while reading is paused waits behind the octets not yet delivered, like them, and becomes
 * the `peer-fin` event only when reading resumes.
 */

export type LifeState =
  /** Responder before the Initiator's first FPDU arrived and was validated: what it sends is held (RFC 5044 §7.1.2). */
  | 'startup'
  /** Full Operation: FPDUs both ways (RFC 5044 §7.1.2 onwards; the Initiator starts here). */
  | 'open'
  /** A receive error ended reception (RFC 5044 §8); the sending half waits for the ULP's Terminate (RFC 5040 §4.8, Figure 9). */
  | 'rx-error'
  /** The same before the Initiator's first FPDU: the Terminate is held and cannot go out (RFC 5044 §7.1.2, §8). */
  | 'startup-rx-error'
  /** The peer's FIN came at an FPDU boundary and was answered with ours (RFC 5044 §7.2, RFC 5041 §6.2); the ULP has not closed. */
  | 'peer-closed'
  /** The same before the Initiator's first FPDU: sends are still held (RFC 5044 §7.1.2). */
  | 'startup-peer-closed'
  /** The ULP closed: everything queued, then our FIN (RFC 5044 §7.2); neither FIN is through. */
  | 'closing'
  /** The ULP closed and our FIN is through; the peer's is awaited (RFC 5044 §7.2). */
  | 'closing-fin-sent'
  /** The ULP closed and the peer's FIN came; ours is not through yet (RFC 5044 §7.2). */
  | 'closing-peer-fin'
  /** Terminal: `closed$` has fired (or is firing), the socket is gone or going (RFC 5044 §7.2 orderly, §8 abortive). */
  | 'closed';

export type LifeEvent =
  /** The Responder received and validated the Initiator's first FPDU (RFC 5044 §7.1.2; after RFC 6581's RTR, its check). */
  | 'first-fpdu'
  /** An RFC 5044 §8 receive error (CRC, Marker, ULPDU_Length) with a ULP watching `receiveError$`. */
  | 'rx-error'
  /** The ULP's `close()` (graceful: RFC 5041 §6.2, RFC 5044 §7.2). */
  | 'local-close'
  /** The peer's FIN, acted on at an FPDU boundary (a FIN inside an FPDU is an `abort`: RFC 5044 §8 code 1). */
  | 'peer-fin'
  /** Our FIN has been handed to TCP (the socket's 'finish'). */
  | 'local-fin-done'
  /** `closeTimeoutMs` passed in a state that waits for a FIN. */
  | 'close-timeout'
  /** `abort()`: the ULP's, or ours on bad input (RFC 5044 §8), the idle, mid-FPDU or receive-error grace timer. */
  | 'abort'
  /** The socket failed (ECONNRESET, EPIPE, ...: RFC 5044 §8 code 1). */
  | 'socket-error'
  /** The socket closed without the orderly exchange of FINs (RFC 5044 §8 code 1). */
  | 'socket-closed';

export const LIFE_STATES: readonly LifeState[] = [
  'startup',
  'open',
  'rx-error',
  'startup-rx-error',
  'peer-closed',
  'startup-peer-closed',
  'closing',
  'closing-fin-sent',
  'closing-peer-fin',
  'closed',
];

export const LIFE_EVENTS: readonly LifeEvent[] = [
  'first-fpdu',
  'rx-error',
  'local-close',
  'peer-fin',
  'local-fin-done',
  'close-timeout',
  'abort',
  'socket-error',
  'socket-closed',
];

/** What ends every state but `closed` at once. */
const ENDS = { abort: 'closed', 'socket-error': 'closed', 'socket-closed': 'closed' } as const;

/** The transitions: an event a state does not list is illegal there. */
export const LIFECYCLE: Readonly<Record<LifeState, Readonly<Partial<Record<LifeEvent, LifeState>>>>> = {
  startup: {
    'first-fpdu': 'open',
    'rx-error': 'startup-rx-error',
    'local-close': 'closing',
    'peer-fin': 'startup-peer-closed',
    ...ENDS,
  },
  // The Initiator's first received FPDU: its sends were never held.
  open: { 'first-fpdu': 'open', 'rx-error': 'rx-error', 'local-close': 'closing', 'peer-fin': 'peer-closed', ...ENDS },
  // No FPDU follows a receive error (the reader is dead), nor a second one.
  'rx-error': { 'local-close': 'closing', 'peer-fin': 'peer-closed', ...ENDS },
  'startup-rx-error': { 'local-close': 'closing', 'peer-fin': 'startup-peer-closed', ...ENDS },
  // No FPDU follows the peer's FIN.
  'peer-closed': { 'local-close': 'closing-peer-fin', 'local-fin-done': 'closed', 'close-timeout': 'closed', ...ENDS },
  'startup-peer-closed': {
    'local-close': 'closing-peer-fin',
    'local-fin-done': 'closed',
    'close-timeout': 'closed',
    ...ENDS,
  },
  // A ULP that closed during startup still receives the Initiator's FPDUs until its FIN.
  closing: {
    'first-fpdu': 'closing',
    'local-fin-done': 'closing-fin-sent',
    'peer-fin': 'closing-peer-fin',
    'close-timeout': 'closed',
    ...ENDS,
  },
  'closing-fin-sent': { 'first-fpdu': 'closing-fin-sent', 'peer-fin': 'closed', 'close-timeout': 'closed', ...ENDS },
  'closing-peer-fin': { 'local-fin-done': 'closed', 'close-timeout': 'closed', ...ENDS },
  closed: {},
};

/** The timers a state runs; entering a state clears the others (`MpaTcpStream.enter`, the one place). */
export type LifeTimer =
  /** `closeTimeoutMs`: the wait for a FIN, ours or the peer's, once ours is asked for. */
  | 'close'
  /** `MpaTcpStream.receiveErrorGraceMs`: how long the sending half waits for the ULP's Terminate. */
  | 'grace'
  /** `fpduTimeoutMs`: armed while an FPDU is partly received, in states that still receive. */
  | 'fpdu'
  /** `idleTimeoutMs`: the socket's own timer, until the end. */
  | 'idle';

export const LIFE_TIMERS: Readonly<Record<LifeState, readonly LifeTimer[]>> = {
  startup: ['fpdu', 'idle'],
  open: ['fpdu', 'idle'],
  'rx-error': ['grace', 'idle'],
  'startup-rx-error': ['grace', 'idle'],
  'peer-closed': ['close', 'idle'],
  'startup-peer-closed': ['close', 'idle'],
  closing: ['close', 'fpdu', 'idle'],
  'closing-fin-sent': ['close', 'fpdu', 'idle'],
  'closing-peer-fin': ['close', 'idle'],
  closed: [],
};

/** An event the state machine has no transition for. */
export class IllegalLifeTransitionError extends Error {
  constructor(
    readonly state: LifeState,
    readonly event: LifeEvent,
  ) {
    super(`MPA stream lifecycle: no transition for '${event}' in state '${state}'`);
    this.name = 'IllegalLifeTransitionError';
  }
}

const env = typeof process !== 'undefined' ? process.env.NODE_ENV : undefined;
/** Whether an illegal transition throws (development and tests) or is ignored (elsewhere). */
export const STRICT_LIFECYCLE = env === 'development' || env === 'test';

/** The state `event` leads to from `state`, or undefined where the table has none. */
export function nextState(state: LifeState, event: LifeEvent): LifeState | undefined {
  return LIFECYCLE[state][event];
}

/** The state `event` leads to from `state`; an illegal event throws when `strict`, else keeps `state`. */
export function transition(state: LifeState, event: LifeEvent, strict = STRICT_LIFECYCLE): LifeState {
  const to = LIFECYCLE[state][event];
  if (to !== undefined) return to;
  if (strict) throw new IllegalLifeTransitionError(state, event);
  return state;
}

/** RFC 5044 §7.1.2: the Responder holds what its ULP sends. */
export function holdsSends(s: LifeState): boolean {
  return s === 'startup' || s === 'startup-rx-error' || s === 'startup-peer-closed';
}

/** The peer's FIN has been acted on. */
export function peerFinSeen(s: LifeState): boolean {
  return s === 'peer-closed' || s === 'startup-peer-closed' || s === 'closing-peer-fin';
}

/** The ULP called `close()` (the base stream's 'closing'). */
export function ulpClosed(s: LifeState): boolean {
  return s === 'closing' || s === 'closing-fin-sent' || s === 'closing-peer-fin';
}

/** Whether `s` runs `timer`. */
export function runsTimer(s: LifeState, timer: LifeTimer): boolean {
  return LIFE_TIMERS[s].includes(timer);
}
