import type { Observable } from 'rxjs';
import type { LlpCapabilities } from './capabilities.js';
import type { LlpAddress, LlpConnection, LlpSetupInfo } from './connection.js';
import type { LlpError } from './errors.js';
import type { LlpCloseEvent, LlpStream, LlpStreamState } from './stream.js';
import { OnceSubject, withAbort } from './util.js';

/** What connection setup fixed about a connection: its role, promises, ends and setup outcome. */
export type LlpConnectionSetup = Pick<
  LlpConnection,
  'role' | 'capabilities' | 'localAddress' | 'remoteAddress' | 'setup'
>;

/**
 * The bookkeeping of an LLP connection carrying one or more streams, transport-free: it has ended when
 * every stream has (`closed$` then carries the event of the stream that ended first), `state`, and a
 * graceful `close` of every stream. A plugin extends it, supplies `abort`, and calls `streamClosed` as
 * each of its streams ends.
 */
export abstract class BaseLlpConnection<S extends LlpStream = LlpStream> implements LlpConnection {
  abstract readonly id: string;
  abstract readonly transport: string;
  abstract readonly streams: readonly S[];
  readonly role: 'initiator' | 'responder';
  readonly capabilities: LlpCapabilities;
  readonly localAddress: LlpAddress;
  readonly remoteAddress: LlpAddress;
  readonly setup: LlpSetupInfo;
  private readonly closedSubject = new OnceSubject<LlpCloseEvent>();
  private firstEvent: LlpCloseEvent | undefined;
  private streamsEnded = 0;

  constructor(fixed: LlpConnectionSetup) {
    this.role = fixed.role;
    this.capabilities = fixed.capabilities;
    this.localAddress = fixed.localAddress;
    this.remoteAddress = fixed.remoteAddress;
    this.setup = fixed.setup;
  }

  abstract abort(reason?: LlpError): void;

  get state(): LlpStreamState {
    if (this.closedSubject.fired) return 'closed';
    return this.streams.some((s) => s.state !== 'open') ? 'closing' : 'open';
  }
  get closed$(): Observable<LlpCloseEvent> {
    return this.closedSubject.observable;
  }

  async close(signal?: AbortSignal): Promise<void> {
    await withAbort(
      Promise.all(this.streams.map((s) => s.close())).then(() => undefined),
      signal,
    );
  }

  /** For subclasses: whether every stream has ended (and `closed$` has fired). */
  protected get ended(): boolean {
    return this.closedSubject.fired;
  }

  /** For subclasses: one stream has ended with `event`. Returns true when it was the last: the connection has ended. */
  protected streamClosed(event: LlpCloseEvent): boolean {
    this.firstEvent ??= event;
    if (++this.streamsEnded < this.streams.length) return false;
    this.closedSubject.fire(this.firstEvent);
    return true;
  }
}
