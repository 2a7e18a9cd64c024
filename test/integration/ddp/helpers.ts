import type { LlpConnection, LlpStream, Ulpdu } from '@rddp/llp';
import { createLoopbackPair, type LoopbackOptions } from '@rddp/llp-loopback';
import { BehaviorSubject, firstValueFrom, type Observable, Subject, take, toArray } from 'rxjs';
import {
  type DdpErrorEvent,
  type DdpProfile,
  DdpStream,
  type DeliveryEvent,
  type PlacementEvent,
  StagTable,
  type UlpSegmentCheck,
} from '../src/index.js';

export interface Side {
  conn: LlpConnection;
  llp: LlpStream;
  stags: StagTable;
  ddp: DdpStream;
  placements: PlacementEvent[];
  deliveries: DeliveryEvent[];
  errors: DdpErrorEvent[];
}

export interface PairOptions extends LoopbackOptions {
  profile?: DdpProfile;
  queues?: number;
  pdId?: number;
  ulpCheck?: UlpSegmentCheck;
}

function side(conn: LlpConnection, o: PairOptions): Side {
  const stags = new StagTable();
  const llp = conn.streams[0] as LlpStream;
  const ddp = new DdpStream(llp, {
    profile: o.profile ?? 'ietf',
    pdId: o.pdId ?? 1,
    stags,
    queues: o.queues ?? 3,
    ulpCheck: o.ulpCheck,
    llpCapabilities: conn.capabilities,
  });
  const s: Side = { conn, llp, stags, ddp, placements: [], deliveries: [], errors: [] };
  ddp.placement$.subscribe((e) => s.placements.push(e));
  ddp.delivery$.subscribe((e) => s.deliveries.push(e));
  ddp.error$.subscribe((e) => s.errors.push(e));
  return s;
}

/** Two DDP streams over a loopback pair. */
export async function ddpPair(o: PairOptions = {}): Promise<[Side, Side]> {
  const [a, b] = await createLoopbackPair(o);
  return [side(a, o), side(b, o)];
}

/** A DDP stream on the responder and the raw LLP stream of the initiator, to inject hand-made segments. */
export async function rawPeer(o: PairOptions = {}): Promise<{ raw: LlpStream; sink: Side }> {
  const [a, b] = await createLoopbackPair(o);
  return { raw: a.streams[0] as LlpStream, sink: side(b, o) };
}

export function pattern(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

export function nextN<T>(o: Observable<T>, n: number): Promise<T[]> {
  return firstValueFrom(o.pipe(take(n), toArray()));
}

export async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 1));
  }
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
