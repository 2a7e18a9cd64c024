/**
 * A window of outstanding operations (perftest's tx-depth): `track` one; `full(depth)` says whether to
 * wait (without a promise when there is room), `room(depth)` waits until fewer than `depth` are
 * outstanding, `drain()` until none are. The first failure is thrown by the next of these.
 * A counter and one waiter — not a Promise.race over every outstanding operation, which costs O(depth)
 * per operation.
 */
export class OpWindow {
  private outstanding = 0;
  private waiter: (() => void) | undefined;
  private failure: { error: unknown } | undefined;

  /** `onDone` runs for each operation that succeeds. */
  constructor(private readonly onDone?: () => void) {}

  /** Counts `op` until it settles (two shared callbacks: nothing allocated per operation but the `then`). */
  track(op: Promise<unknown>): void {
    this.outstanding++;
    op.then(this.succeeded, this.failed);
  }

  private readonly succeeded = (): void => {
    this.onDone?.();
    this.settled();
  };

  private readonly failed = (error: unknown): void => {
    this.failure ??= { error };
    this.settled();
  };

  /** True while `depth` or more operations are outstanding; throws the first failure. */
  full(depth: number): boolean {
    if (this.failure) throw this.failure.error;
    return this.outstanding >= depth;
  }

  /** Resolves once fewer than `depth` operations are outstanding; rejects with the first failure. */
  async room(depth: number): Promise<void> {
    while (this.outstanding >= depth) await new Promise<void>((r) => (this.waiter = r));
    if (this.failure) throw this.failure.error;
  }

  /** Resolves once every tracked operation has settled; rejects with the first failure. */
  drain(): Promise<void> {
    return this.room(1);
  }

  private settled(): void {
    this.outstanding--;
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}
