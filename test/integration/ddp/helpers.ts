import {
  type DdpErrorEvent,
  type DdpProfile,
  DdpStream,
  type DeliveryEvent,
  type PlacementEvent,
  StagTable,
  type UlpSegmentCheck,
} from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import { createLoopbackPair, type LoopbackOptions } from '@rddp/llp-loopback';
import { firstValueFrom, type Observable, take, toArray } from 'rxjs';

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

export { pattern } from '@rddp/llp/testing';
