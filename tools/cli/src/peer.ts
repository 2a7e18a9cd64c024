/**
 * What the tools report when a run fails because its peer ended the connection: the peer's Terminate
 * (RFC 5040 §6.2.1), a reset, or a close in mid-run — rather than the flushed operation it left behind.
 */
import { codedError, type LlpCloseEvent, type LlpConnection, RddpError } from '@rddp/llp';
import type { RdmapTerminateEvent } from '@rddp/rdmap';
import type { Observable } from 'rxjs';

/** Base class of why a run ended with its peer; an `RddpError` like every rddp error. */
export abstract class PeerEndedError extends RddpError {}

/** The peer sent a Terminate (RFC 5040 §5.4): its description says why. */
export class PeerTerminatedError extends codedError(PeerEndedError, 'ERR_RDDP_PEER_TERMINATED') {
  constructor(description: string, options?: { cause?: unknown }) {
    super(`the peer terminated the connection: ${description}`, options);
  }
}

/** The peer reset the connection (TCP RST, SCTP ABORT): it failed or was killed. */
export class PeerResetError extends codedError(PeerEndedError, 'ERR_RDDP_PEER_RESET') {
  constructor(options?: { cause?: unknown }) {
    super('the peer reset the connection in mid-run', options);
  }
}

/** The peer closed the connection with work outstanding: it was stopped or vanished. */
export class PeerClosedError extends codedError(PeerEndedError, 'ERR_RDDP_PEER_CLOSED') {
  constructor(options?: { cause?: unknown }) {
    super('the peer closed the connection in mid-run (it was stopped or vanished)', options);
  }
}

/**
 * Failures that only say the stream ended under an operation (RDMAP's flush, LLP failure), or that a post
 * came after it had ended (the verbs QP already in the error state: a run posting while its peer is killed).
 */
const ENDED_CODES = new Set(['ERR_RDMAP_FLUSHED', 'ERR_RDMAP_LLP_FAILED', 'ERR_VERBS_QP_STATE']);

/**
 * The error in `e`'s cause chain (a few levels) whose code only says the stream ended under an operation
 * (one of the codes `PeerWatch.explain` names the peer's end for), or undefined.
 */
export function streamEnded(e: unknown): unknown {
  for (let x = e, depth = 0; x !== undefined && x !== null && depth < 4; depth++) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === 'string' && ENDED_CODES.has(code)) return x;
    x = (x as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Watches one connection from its start; `explain` turns a failed operation into why the run ended. */
export class PeerWatch {
  private terminate: RdmapTerminateEvent | undefined;
  private closed: LlpCloseEvent | undefined;

  constructor(
    private readonly connection: LlpConnection,
    terminate$?: Observable<RdmapTerminateEvent>,
  ) {
    terminate$?.subscribe((t) => {
      if (t.direction === 'received') this.terminate ??= t;
    });
    connection.closed$.subscribe((ev) => {
      this.closed = ev;
    });
  }

  /** The error to report for `e`; waits up to `ms` for the connection's end to be known. */
  async explain(e: unknown, ms = 1000): Promise<unknown> {
    if (e instanceof PeerEndedError) return e;
    if (this.terminate) return new PeerTerminatedError(this.terminate.description, { cause: e });
    const code = (e as { code?: unknown } | undefined)?.code;
    if (typeof code !== 'string' || !ENDED_CODES.has(code)) return e;
    const ev = this.closed ?? (await this.closedWithin(ms));
    if (!ev || ev.initiator !== 'remote') return e;
    return ev.graceful ? new PeerClosedError({ cause: e }) : new PeerResetError({ cause: e });
  }

  private closedWithin(ms: number): Promise<LlpCloseEvent | undefined> {
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(undefined), ms);
      this.connection.closed$.subscribe((ev) => {
        clearTimeout(t);
        resolve(ev);
      });
    });
  }
}

/**
 * Resolves once `closed$` emits (the stream ended) or, past `ms`, after aborting `connection`: a
 * graceful termination that cannot hang (RFC 5040 §6.2, then LLP Abortive Termination).
 */
export function endWithin(connection: LlpConnection, closed$: Observable<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      connection.abort();
      resolve();
    }, ms);
    closed$.subscribe(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** One `--debug` line per Terminate sent, received, or dropped unsent (RFC 5040 §7.1, RFC 5044 §7.1.2). */
export function describeTerminateEvent(t: RdmapTerminateEvent): string {
  return t.direction === 'not-sent'
    ? `Terminate not sent (${t.notSentReason}): ${t.description}`
    : `Terminate ${t.direction}: ${t.description}`;
}

/**
 * `p`, or the error `timedOut()` makes once `ms` pass before `p` settles (a protocol step's bound). The
 * promise that loses the race is left to settle on its own, its rejection handled.
 */
export function withinMs<T>(p: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => {
      p.catch(() => {});
      reject(timedOut());
    }, ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
