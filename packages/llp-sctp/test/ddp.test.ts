/**
 * DDP (RFC 5041) on this LLP: one SCTP association carrying 64 DDP Streams, one per SCTP stream
 * (RFC 5043 §4), all moving tagged and untagged messages both ways at the same time.
 */
import {
  Access,
  DdpStream,
  type DeliveryEvent,
  type MemoryRegion,
  type PlacementEvent,
  StagTable,
  type UntaggedDeliveryEvent,
} from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { type SctpTransportOptions, sctp } from '../src/index.js';
import { PPID_DDP_SEGMENT } from '../src/rfc5043.js';
import { ChunkType, chunks } from '../src/wire.js';
import { pattern, until } from './harness.js';

const STREAMS = 64;
/** Small enough that every message below is several DDP Segments (RFC 5041 §5.2). */
const MULPDU = 4096;
/** Per stream and direction: a tagged region written by two messages, and two untagged messages on QN 0. */
const TAGGED = 12 * 1024;
const UNTAGGED = [5000, 9000] as const;

interface StreamSide {
  readonly ddp: DdpStream;
  /** The region the peer writes into (RemoteWrite, this stream's own protection domain). */
  readonly region: MemoryRegion;
  readonly placements: PlacementEvent[];
  readonly deliveries: DeliveryEvent[];
  readonly errors: unknown[];
}

/** DDP Streams on every LLP stream of a connection; DDP Stream k is in protection domain k + 1. */
function ddpSide(conn: LlpConnection): StreamSide[] {
  const stags = new StagTable();
  return conn.streams.map((llp, k) => {
    const ddp = new DdpStream(llp, { pdId: k + 1, stags, queues: 1, llpCapabilities: conn.capabilities });
    const region = stags.register({ pdId: k + 1, buffer: new Uint8Array(TAGGED), access: Access.RemoteWrite });
    for (const [i, n] of UNTAGGED.entries()) ddp.postReceive(0, new Uint8Array(n), `${k}/${i}`);
    const s: StreamSide = { ddp, region, placements: [], deliveries: [], errors: [] };
    ddp.placement$.subscribe((e) => s.placements.push(e));
    ddp.delivery$.subscribe((e) => s.deliveries.push(e));
    ddp.error$.subscribe((e) => s.errors.push(e));
    return s;
  });
}

/** The data stream k sends in one direction: distinct per stream and direction, so a misrouted octet shows. */
function payloads(dir: number, k: number): { tagged: Buffer; untagged: Buffer[] } {
  return {
    tagged: pattern(TAGGED, 1000 * dir + k),
    untagged: UNTAGGED.map((n, i) => pattern(n, 1000 * dir + 100 * (i + 1) + k)),
  };
}

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe('DDP over SCTP, many DDP Streams on one association', () => {
  it('RFC 5043 §4, RFC 5041 §5: 64 DDP Streams (one per SCTP stream) move tagged and untagged messages both ways at once', async () => {
    /** DDP headers (RFC 5041 §4) at the start of each DDP Segment the initiator sent, by SCTP stream. */
    const segmentsOut = new Map<number, Buffer[]>();
    const trace: SctpTransportOptions['trace'] = (packet, dir) => {
      if (dir !== 'out') return;
      const p = Buffer.from(packet);
      for (const c of chunks(p)) {
        const beginning = (c.flags & 0x02) !== 0;
        if (c.type !== ChunkType.DATA || !beginning || p.readUInt32BE(c.offset + 12) !== PPID_DDP_SEGMENT) continue;
        const sid = p.readUInt16BE(c.offset + 8);
        const list = segmentsOut.get(sid) ?? [];
        list.push(Buffer.from(p.subarray(c.offset + 16, c.offset + 16 + 18)));
        segmentsOut.set(sid, list);
      }
    };
    const options: SctpTransportOptions = { mulpdu: MULPDU, receiveWindow: 256 * 1024 };
    const ti = sctp({ ...options, trace });
    const tr = sctp(options);
    const listener = await tr.listen({ host: '127.0.0.1', port: 0 });
    cleanup.push(() => listener.close());
    const accepted = firstValueFrom(listener.connections$);
    const a = await ti.connect({ host: '127.0.0.1', port: listener.address.port as number }, { streams: STREAMS });
    const b = await accepted;
    cleanup.push(() => {
      a.abort();
      b.abort();
    });
    expect(a.streams.map((s) => s.mulpdu)).toEqual(Array(STREAMS).fill(MULPDU));
    const sides = [ddpSide(a), ddpSide(b)] as const;

    // Every stream of both sides starts its four messages before any completes: rounds across the
    // streams, so the SCTP association interleaves all 128 senders.
    const half = TAGGED / 2;
    const sends: Promise<unknown>[] = [];
    const round = (f: (from: StreamSide, to: StreamSide, data: ReturnType<typeof payloads>) => Promise<unknown>) => {
      for (const dir of [0, 1]) {
        for (let k = 0; k < STREAMS; k++) {
          sends.push(f(sides[dir]?.[k] as StreamSide, sides[1 - dir]?.[k] as StreamSide, payloads(dir, k)));
        }
      }
    };
    // RFC 5041 §5.1.1 tagged: the peer's STag and a TO; payload handed over as parts, never concatenated.
    round((from, to, d) =>
      from.ddp.sendTagged(to.region.stag, 0n, [d.tagged.subarray(0, 100), d.tagged.subarray(100, half)], 0),
    );
    // RFC 5041 §5.1.2 untagged: QN 0, MSN 1 then 2.
    round((from, _to, d) => from.ddp.sendUntagged(0, [d.untagged[0] as Buffer], 0));
    round((from, to, d) => from.ddp.sendTagged(to.region.stag, BigInt(half), [d.tagged.subarray(half)], 0));
    round((from, _to, d) => from.ddp.sendUntagged(0, [d.untagged[1] as Buffer], 0));
    await Promise.all(sends);
    const all = [...sides[0], ...sides[1]];
    // A DDP error (a segment on the wrong stream names a foreign STag or PD) ends the wait early, and
    // the checks below then show it.
    await until(
      () => all.every((s) => s.deliveries.length === 4) || all.some((s) => s.errors.length > 0),
      'every message delivered on every stream',
      20_000,
    );

    for (const dir of [0, 1]) {
      for (let k = 0; k < STREAMS; k++) {
        const rx = sides[1 - dir]?.[k] as StreamSide;
        const want = payloads(dir, k);
        const where = `direction ${dir}, DDP Stream ${k}`;
        expect(rx.errors, where).toEqual([]);
        expect(rx.ddp.stats.dropped, where).toBe(0);
        // Tagged: every placement named this stream's region; the region holds exactly what was sent.
        expect(new Set(rx.placements.map((p) => p.stag)), where).toEqual(new Set([rx.region.stag]));
        expect(
          rx.placements.reduce((n, p) => n + p.length, 0),
          where,
        ).toBe(TAGGED);
        expect(Buffer.from(rx.region.buffer).equals(want.tagged), where).toBe(true);
        const tagged = rx.deliveries.filter((d) => d.tagged);
        expect(
          tagged.map((d) => [d.stag, d.length]),
          where,
        ).toEqual([
          [rx.region.stag, half],
          [rx.region.stag, half],
        ]);
        // Untagged: MSN 1 and 2 on QN 0, in order, each in the buffer posted for it.
        const untagged = rx.deliveries.filter((d): d is UntaggedDeliveryEvent => !d.tagged);
        expect(
          untagged.map((d) => [d.qn, d.msn, d.length, d.receiveId]),
          where,
        ).toEqual(UNTAGGED.map((n, i) => [0, i + 1, n, `${k}/${i}`]));
        for (const [i, d] of untagged.entries()) {
          expect(Buffer.from(d.buffer.subarray(0, d.length)).equals(want.untagged[i] as Buffer), where).toBe(true);
        }
      }
    }

    // On the wire (initiator → responder): DDP Stream k's segments travel on SCTP stream k, and every
    // tagged one names the STag of the region of DDP Stream k.
    expect([...segmentsOut.keys()].sort((x, y) => x - y)).toEqual(Array.from({ length: STREAMS }, (_, k) => k));
    for (const [sid, headers] of segmentsOut) {
      const stags = headers.filter((h) => ((h[0] as number) & 0x80) !== 0).map((h) => h.readUInt32BE(2));
      expect(stags.length).toBeGreaterThanOrEqual(4); // two tagged messages of several segments each
      expect(new Set(stags)).toEqual(new Set([sides[1][sid]?.region.stag]));
      const qns = headers.filter((h) => ((h[0] as number) & 0x80) === 0).map((h) => h.readUInt32BE(6));
      expect(qns.length).toBeGreaterThanOrEqual(4);
      expect(new Set(qns)).toEqual(new Set([0]));
    }

    // RFC 5043: the graceful close ends all 64 DDP Streams (Session Terminate on each), then SHUTDOWN.
    const bClosed = firstValueFrom(b.closed$);
    await a.close();
    expect(await bClosed).toEqual({ graceful: true, initiator: 'remote' });
  });
});
