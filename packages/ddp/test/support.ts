/** Transport-free test support for the DDP package: a hand-fed LLP stream and a payload pattern. */
import type { LlpStream, Ulpdu } from '@rddp/llp';
import { BehaviorSubject, Subject } from 'rxjs';

export function pattern(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** A minimal LLP stream fed by hand, to look at the receive path alone. */
export class HandFedLlp implements LlpStream {
  readonly id = 0;
  mulpdu = 65_512;
  readonly state = 'open' as const;
  readonly needsDrain = false;
  private rx: ((u: Ulpdu) => void) | null = null;
  readonly sent: Uint8Array[][] = [];
  readonly mulpdu$ = new BehaviorSubject(65_512);
  readonly closed$ = new Subject<never>();
  send(parts: readonly Uint8Array[], done?: () => void): boolean {
    this.sent.push([...parts]);
    done?.();
    return true;
  }
  async waitForDrain(): Promise<void> {}
  setReceiver(h: ((u: Ulpdu) => void) | null): void {
    this.rx = h;
  }
  pause(): void {}
  resume(): void {}
  async close(): Promise<void> {}
  abort(): void {}
  feed(u: Ulpdu): void {
    this.rx?.(u);
  }
}
