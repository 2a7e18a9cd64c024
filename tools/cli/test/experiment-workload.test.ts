/**
 * `rddp experiment`'s two role processes (workload.ts), run in this process over SCTP through a UDP
 * proxy on 127.0.0.2 that loses chosen packets (no namespaces needed): the initiator's teardown is
 * graceful — its last acknowledgements may be lost and the responder's last Sends still complete — and a
 * channel that fails costs its own flows only: both roles report, naming them and why.
 */
import dgram from 'node:dgram';
import { once } from 'node:events';
import { crc32c } from '@rddp/llp-mpa-tcp';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ClientReport,
  PauseMonitor,
  runClient,
  runServer,
  type ServerReport,
  type WorkloadSpec,
} from '../src/experiment/workload.js';

const SACK = 3;
const ABORT = 6;
const DATA = 0;
const PPID_DDP_SEGMENT = 16;

/** Writes the packet's CRC32c (RFC 4960 §6.8: over the packet with the field zero, stored little-endian). */
function sign(p: Buffer): Buffer {
  p.fill(0, 8, 12);
  p.writeUInt32LE(crc32c(p), 8);
  return p;
}

interface Chunk {
  readonly type: number;
  readonly offset: number;
  readonly length: number;
}

function chunksOf(p: Buffer): Chunk[] {
  const out: Chunk[] = [];
  let off = 12;
  while (off + 4 <= p.length) {
    const length = p.readUInt16BE(off + 2);
    if (length < 4 || off + length > p.length) break;
    out.push({ type: p[off] as number, offset: off, length });
    off += (length + 3) & ~3;
  }
  return out;
}

/** The packet without the chunks `drop` picks (CRC32c signed again), or undefined when nothing is left. */
function without(p: Buffer, drop: (c: Chunk) => boolean): Buffer | undefined {
  const cs = chunksOf(p);
  const kept = cs.filter((c) => !drop(c));
  if (kept.length === cs.length) return p;
  if (kept.length === 0) return undefined;
  const parts = kept.map((c) => p.subarray(c.offset, c.offset + ((c.length + 3) & ~3)));
  return sign(Buffer.concat([p.subarray(0, 12), ...parts]));
}

/** An ABORT (RFC 4960 §3.3.7) in the association of `like`, whose Verification Tag it carries. */
function abortLike(like: Buffer): Buffer {
  const chunk = Buffer.from([ABORT, 0, 0, 4]);
  return sign(Buffer.concat([like.subarray(0, 12), chunk]));
}

/** User data length of each DDP Segment (PPID 16) DATA chunk in `p`. */
function ddpSegments(p: Buffer): number[] {
  return chunksOf(p)
    .filter((c) => c.type === DATA && p.readUInt32BE(c.offset + 12) === PPID_DDP_SEGMENT)
    .map((c) => c.length - 16);
}

type Rule = (dir: 'up' | 'down', p: Buffer, association: number) => Buffer | undefined;

/**
 * A UDP proxy on 127.0.0.2:`port` to the responder on 127.0.0.1:`port` (SCTP packets name the port they
 * were sent to), one upstream socket per initiator source (one per association, numbered as they come).
 * `rule` sees each packet ('up': initiator → responder) and its association, and returns what to forward.
 */
async function sctpProxy(port: number, rule: Rule) {
  const front = dgram.createSocket('udp4');
  const assocs: { initiatorPort: number; up: dgram.Socket }[] = [];
  front.on('message', (m, from) => {
    let index = assocs.findIndex((a) => a.initiatorPort === from.port);
    if (index < 0) {
      const up = dgram.createSocket('udp4');
      const i = assocs.push({ initiatorPort: from.port, up }) - 1;
      up.on('message', (back) => {
        const out = rule('down', back, i);
        if (out) front.send(out, from.port, '127.0.0.1');
      });
      up.bind(0, '127.0.0.1');
      index = i;
    }
    const out = rule('up', m, index);
    if (out) assocs[index]?.up.send(out, port, '127.0.0.1');
  });
  front.bind(port, '127.0.0.2');
  await once(front, 'listening');
  const proxy = {
    /** Sends `p` on association `index`: to its initiator ('down') or to the responder ('up'). */
    inject(dir: 'up' | 'down', index: number, p: Buffer): void {
      const a = assocs[index];
      if (!a) return;
      if (dir === 'down') front.send(p, a.initiatorPort, '127.0.0.1');
      else a.up.send(p, port, '127.0.0.1');
    },
    close(): void {
      for (const a of assocs) a.up.close();
      front.close();
    },
  };
  cleanups.push(() => proxy.close());
  return proxy;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** The responder and the initiator of `spec`, through a proxy with `rule`; `proxyReady` gets the proxy first. */
async function run(
  spec: Omit<WorkloadSpec, 'host' | 'port'>,
  rule: Rule,
  proxyReady?: (proxy: Awaited<ReturnType<typeof sctpProxy>>) => void,
) {
  const port = 40_000 + Math.floor(Math.random() * 20_000);
  const proxy = await sctpProxy(port, rule);
  proxyReady?.(proxy);
  let ready: () => void = () => {};
  const listening = new Promise<void>((r) => {
    ready = r;
  });
  const server = runServer({ ...spec, host: '127.0.0.1', port }, () => ready());
  server.catch(() => {});
  await listening;
  const client = await runClient({ ...spec, host: '127.0.0.2', port });
  return { client, server: await server };
}

function expectPauses(r: ClientReport | ServerReport): void {
  expect(Array.isArray(r.pauses)).toBe(true);
  expect(typeof r.pausesDropped).toBe('number');
  for (const [expected, actual] of r.pauses) expect(actual - expected).toBeGreaterThan(2000);
}

describe('experiment workload over SCTP', () => {
  it.each([
    'sctp-streams',
    'sctp-assocs',
  ] as const)('%s: the initiator closes gracefully (SHUTDOWN) and never aborts: the responder’s FIN answer completes though every SACK after it was lost', async (mapping) => {
    // From the responder's answer to the FIN (a 3-octet Send: a 21-octet DDP Segment) on, every SACK the
    // initiator sends on that association is lost: only its SHUTDOWN can acknowledge that answer.
    const finAnswered = new Set<number>();
    let sacksLost = 0;
    let aborts = 0;
    const { client, server } = await run(
      { mapping, flows: 2, size: 256, rate: 100, durationS: 0.3, seed: 7, credits: 8 },
      (dir, p, assoc) => {
        if (dir === 'down') {
          if (ddpSegments(p).includes(21)) finAnswered.add(assoc);
          return p;
        }
        if (chunksOf(p).some((c) => c.type === ABORT)) aborts++;
        if (!finAnswered.has(assoc) || !chunksOf(p).some((c) => c.type === SACK)) return p;
        sacksLost++;
        return without(p, (c) => c.type === SACK);
      },
    );
    expect(sacksLost).toBeGreaterThan(0);
    expect(aborts).toBe(0);
    expect(server.problems).toEqual([]);
    expect(client.problems).toEqual([]);
    expect(Object.values(server.flows).map((f) => f.verified)).toEqual([true, true]);
    expect(client.flows.map((f) => [f.verified, f.answered.length])).toEqual([
      [true, 30],
      [true, 30],
    ]);
    expectPauses(client);
    expectPauses(server);
  });

  it('sctp-assocs: an association aborted mid-run costs its own flow only; both roles report it and why', async () => {
    // Association 1's 20th DDP Segment from the initiator is lost, and an ABORT goes each way instead.
    let proxy: Awaited<ReturnType<typeof sctpProxy>> | undefined;
    let lastDown: Buffer | undefined;
    let segmentsUp = 0;
    const { client, server } = await run(
      { mapping: 'sctp-assocs', flows: 2, size: 256, rate: 100, durationS: 0.5, seed: 9, credits: 8 },
      (dir, p, assoc) => {
        if (assoc !== 1) return p;
        if (dir === 'down') {
          lastDown = p;
          return p;
        }
        if (ddpSegments(p).length === 0 || ++segmentsUp !== 20) return p;
        if (lastDown) proxy?.inject('down', 1, abortLike(lastDown));
        proxy?.inject('up', 1, abortLike(p));
        return undefined;
      },
      (p) => {
        proxy = p;
      },
    );
    expect(segmentsUp).toBeGreaterThanOrEqual(20);
    expect(client.flows.map((f) => f.verified)).toEqual([true, false]);
    expect(client.flows[0]?.answered).toHaveLength(50);
    expect(client.problems.join('\n')).toMatch(/^flow 1 \(connection 1, stream 0\): .*(reset|abort)/m);
    expect(client.problems.some((p) => p.startsWith('flow 0'))).toBe(false);
    expect(server.flows['0']?.verified).toBe(true);
    expect(server.flows['1']?.verified).toBe(false);
    expect(server.problems.join('\n')).toMatch(/^flow 1\b.*(reset|abort)/m);
    expect(server.problems.some((p) => p.startsWith('flow 0'))).toBe(false);
    expectPauses(client);
    expectPauses(server);
  });
});

describe('PauseMonitor', () => {
  it('records [expected, actual] for each tick more than 2 ms late, and only counts those past its bound', async () => {
    const busy = async () => {
      for (let i = 0; i < 4; i++) {
        const t = performance.now();
        while (performance.now() - t < 15) {
          // synchronous work: the event loop does not run
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const all = new PauseMonitor().start();
    const bounded = new PauseMonitor(2).start();
    await new Promise((r) => setTimeout(r, 5));
    await busy();
    const a = all.stop();
    const b = bounded.stop();
    // Each 15 ms of synchronous work is one tick 13 ms or more late (the rest of the pauses are the runner's).
    expect(a.pauses.filter(([e, t]) => t - e >= 12_000).length).toBeGreaterThanOrEqual(4);
    for (const [e, t] of a.pauses) expect(t - e).toBeGreaterThan(2000);
    expect(a.pausesDropped).toBe(0);
    expect(b.pauses).toHaveLength(2);
    expect(b.pausesDropped).toBeGreaterThanOrEqual(2);
  });
});
