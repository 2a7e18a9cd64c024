import { Observable, ReplaySubject, Subject } from 'rxjs';
import { LlpAbortError, UlpduTooLargeError } from './errors.js';

/** Total octets of a ULPDU given as parts. */
export function ulpduLength(parts: readonly Uint8Array[]): number {
  let n = 0;
  for (let i = 0; i < parts.length; i++) n += (parts[i] as Uint8Array).byteLength;
  return n;
}

/** Throws `UlpduTooLargeError` when the parts exceed `mulpdu`; returns their total length otherwise. */
export function assertFitsMulpdu(parts: readonly Uint8Array[], mulpdu: number): number {
  const n = ulpduLength(parts);
  if (n > mulpdu) throw new UlpduTooLargeError(n, mulpdu);
  return n;
}

/** The `LlpAbortError` for a fired signal, keeping its reason as `cause`. */
export function abortError(signal: AbortSignal): LlpAbortError {
  return new LlpAbortError('The operation was aborted', { cause: signal.reason });
}

/** Throws `LlpAbortError` if the signal already fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal);
}

/**
 * Runs `promise` against `signal`: rejects with `LlpAbortError` when it fires first; `onAbort` lets the
 * caller undo its work. The listener is removed either way.
 */
export function withAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined, onAbort?: () => void): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    onAbort?.();
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const fire = () => {
      onAbort?.();
      reject(abortError(signal));
    };
    signal.addEventListener('abort', fire, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', fire);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', fire);
        reject(e);
      },
    );
  });
}

/**
 * A hot stream of values that holds what is emitted before the first subscriber and hands it to that
 * subscriber (so no accepted connection is lost), then behaves as a plain Subject.
 */
export class HeldSubject<T> {
  private readonly held: T[] = [];
  private readonly subject = new Subject<T>();
  private subscribers = 0;
  private ended: { error?: unknown } | undefined;

  readonly observable: Observable<T> = new Observable<T>((subscriber) => {
    this.subscribers++;
    while (this.held.length > 0) subscriber.next(this.held.shift() as T);
    if (this.ended) {
      if (this.ended.error !== undefined) subscriber.error(this.ended.error);
      else subscriber.complete();
      return;
    }
    const sub = this.subject.subscribe(subscriber);
    return () => {
      this.subscribers--;
      sub.unsubscribe();
    };
  });

  next(value: T): void {
    if (this.subscribers === 0) this.held.push(value);
    else this.subject.next(value);
  }
  complete(): void {
    this.ended = {};
    this.subject.complete();
  }
  error(error: unknown): void {
    this.ended = { error };
    this.subject.error(error);
  }
}

/** A `closed$`-style observable: emits one value then completes, replayed to late subscribers. */
export class OnceSubject<T> {
  private readonly subject = new ReplaySubject<T>(1);
  private done = false;
  readonly observable: Observable<T> = this.subject.asObservable();
  get fired(): boolean {
    return this.done;
  }
  /** Emits `value` and completes; later calls are ignored. Returns whether this call fired it. */
  fire(value: T): boolean {
    if (this.done) return false;
    this.done = true;
    this.subject.next(value);
    this.subject.complete();
    return true;
  }
}

/** mulberry32: a small seeded PRNG in [0, 1), so randomised runs (fault injection, fuzzing, tests) are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The `{ Key: value }` object of a protocol's code table, as an `as const` literal of its names would be:
 * each row's `key` names its `field`, in row order. Lets the table's rows be the one source of the codes.
 */
export function codesByKey<
  const F extends string,
  const R extends readonly ({ readonly key: string } & { readonly [P in F]: number })[],
>(rows: R, field: F): { readonly [Row in R[number] as Row['key']]: Row[F] } {
  return Object.freeze(Object.fromEntries(rows.map((r) => [r.key, r[field]]))) as never;
}
