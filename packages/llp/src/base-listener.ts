import type { Observable } from 'rxjs';
import { Subject } from 'rxjs';
import type { LlpAddress, LlpConnection, LlpListener, LlpListenOptions } from './connection.js';
import type { LlpError } from './errors.js';
import { HeldSubject } from './util.js';

/**
 * The bookkeeping every LLP listener needs, transport-free: `connections$` (held for the first
 * subscriber, so none is lost), `errors$`, the closed flag, `close()` once, and the listen signal.
 * A plugin extends it, supplies `stopListening`, hands connections to `accept` and failures to `reportError`.
 */
export abstract class BaseLlpListener implements LlpListener {
  abstract readonly address: LlpAddress;
  private readonly connections = new HeldSubject<LlpConnection>();
  private readonly errors = new Subject<LlpError>();
  private _closed = false;

  /** Stop taking connection requests and end setups in progress; established connections stay up. */
  protected abstract stopListening(): void;

  get connections$(): Observable<LlpConnection> {
    return this.connections.observable;
  }
  get errors$(): Observable<LlpError> {
    return this.errors.asObservable();
  }
  /** Whether `close()` was called (or the listen signal fired). */
  protected get closed(): boolean {
    return this._closed;
  }

  /** Stops accepting; established connections stay up. Idempotent. */
  async close(): Promise<void> {
    if (this._closed) return;
    this._closed = true;
    this.stopListening();
    this.connections.complete();
    this.errors.complete();
  }

  /** Closes the listener when `options.signal` fires. */
  protected closeOnAbort(options: LlpListenOptions): void {
    options.signal?.addEventListener('abort', () => void this.close(), { once: true });
  }
  /** Hands an established connection to the ULP. */
  protected accept(connection: LlpConnection): void {
    this.connections.next(connection);
  }
  /** Surfaces a failed incoming attempt on `errors$` (after close: dropped). */
  protected reportError(error: LlpError): void {
    if (!this._closed) this.errors.next(error);
  }
}
