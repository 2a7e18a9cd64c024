import {
  type LlpAddress,
  type LlpCapabilities,
  type LlpCloseEvent,
  type LlpConnection,
  type LlpError,
  type LlpSetupInfo,
  type LlpStreamState,
  OnceSubject,
  withAbort,
} from '@rddp/llp';
import type { Observable } from 'rxjs';
import type { LoopbackStream } from './stream.js';

let nextId = 1;

/** One end of an in-process LLP connection. */
export class LoopbackConnection implements LlpConnection {
  readonly id = `loopback-${nextId++}`;
  readonly transport = 'loopback';
  private readonly closedSubject = new OnceSubject<LlpCloseEvent>();
  private firstEvent: LlpCloseEvent | undefined;
  private open: number;

  constructor(
    readonly role: 'initiator' | 'responder',
    readonly capabilities: LlpCapabilities,
    readonly streams: readonly LoopbackStream[],
    readonly localAddress: LlpAddress,
    readonly remoteAddress: LlpAddress,
    readonly setup: LlpSetupInfo,
  ) {
    this.open = streams.length;
    for (const s of streams) {
      s.closed$.subscribe((e) => {
        this.firstEvent ??= e;
      });
      s.onClosed = () => {
        if (--this.open === 0) this.closedSubject.fire(this.firstEvent as LlpCloseEvent);
      };
    }
  }

  get state(): LlpStreamState {
    if (this.closedSubject.fired) return 'closed';
    return this.streams.some((s) => s.state !== 'open') ? 'closing' : 'open';
  }
  get closed$(): Observable<LlpCloseEvent> {
    return this.closedSubject.observable;
  }

  /** Sets the MULPDU of every stream, both directions (fault injection / MSS-change tests). */
  setMulpdu(mulpdu: number): void {
    for (const s of this.streams) {
      s.setMulpdu(mulpdu);
      s.peer.setMulpdu(mulpdu);
    }
  }

  /** Fault injection: stall or restart this side's reading on every stream. */
  stallReader(on: boolean): void {
    for (const s of this.streams) s.stall(on);
  }

  async close(signal?: AbortSignal): Promise<void> {
    await withAbort(
      Promise.all(this.streams.map((s) => s.close())).then(() => undefined),
      signal,
    );
  }

  abort(reason?: LlpError): void {
    for (const s of this.streams) s.abort(reason);
  }
}
