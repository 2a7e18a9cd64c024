/**
 * @rddp/llp/testing — helpers for tests of DDP, RDMAP and LLP plugins: a hand-fed LLP stream, a seeded
 * PRNG and a seeded payload pattern. Not part of the protocol surface.
 */
import { BehaviorSubject, ReplaySubject } from 'rxjs';
import type { LlpError } from './errors.js';
import type { LlpCloseEvent, LlpStream, LlpStreamState, SendCallback, Ulpdu, UlpduHandler } from './stream.js';

/**
 * An LLP stream fed by hand (RFC 5041 §3's LLP service, no transport): what the ULP sends is recorded
 * in `sent`; `feed` hands a ULPDU to the receiver; close and abort end it at once.
 */
export class FakeLlpStream implements LlpStream {
  readonly id: number;
  readonly mulpdu: number;
  readonly mulpdu$: BehaviorSubject<number>;
  state: LlpStreamState = 'open';
  readonly needsDrain = false;
  readonly closed$ = new ReplaySubject<LlpCloseEvent>(1);
  /** Every ULPDU sent, as its parts. */
  readonly sent: Uint8Array[][] = [];
  private rx: UlpduHandler | null = null;

  constructor(options: { id?: number; mulpdu?: number } = {}) {
    this.id = options.id ?? 0;
    this.mulpdu = options.mulpdu ?? 65_512;
    this.mulpdu$ = new BehaviorSubject(this.mulpdu);
  }

  send(parts: readonly Uint8Array[], done?: SendCallback): boolean {
    if (this.state !== 'open') throw new Error('send on a closed stream');
    this.sent.push([...parts]);
    done?.();
    return true;
  }
  async waitForDrain(): Promise<void> {}
  setReceiver(handler: UlpduHandler | null): void {
    this.rx = handler;
  }
  pause(): void {}
  resume(): void {}
  async close(): Promise<void> {
    this.end(true);
  }
  abort(reason?: LlpError): void {
    this.end(false, reason);
  }
  /** Hands one ULPDU to the receiver, as the LLP would after validating it. */
  feed(ulpdu: Ulpdu): void {
    this.rx?.(ulpdu);
  }
  /** Hands the given chunks to the receiver as one ULPDU. */
  feedChunks(chunks: readonly Uint8Array[]): void {
    this.feed({ length: chunks.reduce((a, c) => a + c.length, 0), chunks });
  }
  private end(graceful: boolean, error?: LlpError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closed$.next(error === undefined ? { graceful, initiator: 'local' } : { graceful, initiator: 'local', error });
    this.closed$.complete();
  }
}

export { seededRandom } from './util.js';

/** `length` seeded pseudo-random octets, to tell one payload from another on receipt. */
export function pattern(length: number, seed = 1): Uint8Array {
  const b = new Uint8Array(length);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}
