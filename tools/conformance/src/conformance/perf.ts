/**
 * perftest-style runs against a `perf` server (`--app perf`): a HELLO Send (JSON) answered by READY
 * (the server's buffer: addr, rkey) or REFUSED, the measured RDMA Writes, Reads or RFC 7306 atomics,
 * then a RESULT Send after which the server closes. What the server does not offer is a SKIP.
 */
import { Opcode } from '../wire/constants.js';
import { decodeAtomicResponse, encodeAtomicRequest } from '../wire/rdmap.js';
import { ConformanceProtocolError } from './errors.js';
import { openClient, type Peer } from './peer.js';
import { describe, enhancedOf, terminateOf } from './session.js';
import { type CaseContext, type CaseOutcome, type ConformanceCase, fail, pass, skip } from './types.js';

const SIZE = 4096;
const ITERS = 8;
const CONTROL_ADDR = 0x7f00_0020_0000n;
const CONTROL_STAG = 0x3c00;

/**
 * After IRD + 1 one-octet Read Requests sent at once: every one answered by its Read Response in order
 * (the target had freed room in time), or a Terminate; silence or a lost Read is a FAIL.
 */
export async function irdOutcome(p: Peer, ird: number): Promise<CaseOutcome> {
  for (let i = 0; i <= ird; i++) {
    const m = await p.s.nextOrEnd();
    if (!m)
      return fail(
        `Read ${i + 1} of ${ird + 1} (IRD ${ird}) neither answered nor terminated; the connection ${p.s.conn.ended ? 'ended' : 'stays open'}`,
      );
    const t = terminateOf(m);
    if (t) return pass(`IRD ${ird}: after ${i} Read Responses, Terminate ${t.name}`);
    if (m.opcode !== Opcode.RdmaReadResponse) return fail(`${describe(m)} where Read Response ${i + 1} was due`);
  }
  return pass(`IRD ${ird}: all ${ird + 1} Read Requests answered in order`);
}

/** The perf control protocol's version the kit speaks (HELLO, READY and REFUSED name it; `rddp perf`'s is 2). */
const PERF_PROTOCOL_VERSION = 2;

/** HELLO → READY; undefined with the reason when the server refuses this test. */
async function hello(
  p: Peer,
  test: string,
  sizes: number[],
  iters: number,
): Promise<{ addr: bigint; rkey: number } | { refused: string }> {
  const msg = {
    type: 'hello',
    version: PERF_PROTOCOL_VERSION,
    params: { test, sizes, iters, txDepth: 4, verify: false },
    addr: CONTROL_ADDR.toString(),
    rkey: CONTROL_STAG,
  };
  p.s.send(new TextEncoder().encode(JSON.stringify(msg)));
  const m = await p.rx.expect(Opcode.Send, 'READY or REFUSED');
  let r: { type?: unknown; version?: unknown; addr?: unknown; rkey?: unknown; reason?: unknown };
  try {
    r = JSON.parse(new TextDecoder().decode(m.payload));
  } catch {
    throw new ConformanceProtocolError(`the answer to HELLO is not JSON (${m.payload.byteLength} octets)`);
  }
  if (r.version !== PERF_PROTOCOL_VERSION)
    throw new ConformanceProtocolError(
      `the perf server speaks perf protocol ${typeof r.version === 'number' ? r.version : '1 (no version)'}, the kit ${PERF_PROTOCOL_VERSION}`,
    );
  if (r.type === 'refused') return { refused: String(r.reason).slice(0, 120) };
  if (r.type !== 'ready' || typeof r.addr !== 'string' || typeof r.rkey !== 'number')
    throw new ConformanceProtocolError('the answer to HELLO is neither READY nor REFUSED');
  return { addr: BigInt(r.addr), rkey: r.rkey };
}

/** RESULT (one row per size, as the server checks it), then the server's close. */
async function result(p: Peer, rows: number): Promise<string> {
  const row = { bytes: SIZE, iterations: ITERS, peakMBps: 1, avgMBps: 1, msgRateMpps: 0.001 };
  const msg = { type: 'result', results: Array.from({ length: rows }, () => ({ kind: 'bw', verified: false, row })) };
  p.s.send(new TextEncoder().encode(JSON.stringify(msg)));
  const m = await p.s.nextOrEnd();
  if (m) throw new ConformanceProtocolError(`after RESULT the server sent ${describe(m)}`);
  const end = p.s.conn.ended;
  if (!end) throw new ConformanceProtocolError('the server did not close after RESULT');
  return end.how === 'fin' ? 'FIN' : 'reset';
}

function perfCase(
  name: string,
  clause: string,
  title: string,
  test: string,
  body: (ctx: CaseContext, p: Peer, region: { addr: bigint; rkey: number }) => Promise<CaseOutcome | number>,
  skipIn?: ConformanceCase['skipIn'],
): ConformanceCase {
  return {
    name,
    clause,
    title,
    roles: ['client'],
    apps: ['perf'],
    ...(skipIn ? { skipIn } : {}),
    async run(ctx) {
      const p = await openClient(ctx);
      const r = await hello(p, test, [test.startsWith('atomic') ? 8 : SIZE], ITERS);
      if ('refused' in r) return skip(`the server does not run ${test}: ${r.refused}`);
      const out = await body(ctx, p, r);
      if (typeof out !== 'number') return out;
      const how = await result(p, out);
      return pass(
        `${test}: ${ITERS} operations of ${test.startsWith('atomic') ? 8 : SIZE} octets, RESULT, then ${how}`,
      );
    },
  };
}

export const perfCases: readonly ConformanceCase[] = [
  perfCase(
    'perf.write_bw',
    'RFC 5040 §5.1',
    'perftest write_bw: RDMA Writes into the server’s advertised buffer are placed silently; the run ends cleanly',
    'write_bw',
    async (_ctx, p, region) => {
      for (let i = 0; i < ITERS; i++) p.s.write(region.rkey, region.addr, new Uint8Array(SIZE).fill(i));
      return 1;
    },
  ),
  perfCase(
    'perf.read_bw',
    'RFC 5040 §5.2, §5.5',
    'perftest read_bw: RDMA Read Requests are answered by Read Responses in order, each whole, at its own sink TO',
    'read_bw',
    async (_ctx, p, region) => {
      const depth = Math.min(4, enhancedOf(p.s.peerFrame)?.ird ?? 4) || 1;
      let asked = 0;
      let done = 0;
      while (done < ITERS) {
        while (asked < ITERS && asked - done < depth) {
          p.s.readRequest({
            sinkStag: CONTROL_STAG,
            sinkTo: CONTROL_ADDR + BigInt(asked * SIZE),
            size: SIZE,
            srcStag: region.rkey,
            srcTo: region.addr,
          });
          asked++;
        }
        await p.rx.tagged(
          Opcode.RdmaReadResponse,
          CONTROL_STAG,
          CONTROL_ADDR + BigInt(done * SIZE),
          SIZE,
          `Read Response ${done + 1}`,
        );
        done++;
      }
      return 1;
    },
  ),
  perfCase(
    'rdmap.ird-perf',
    'RFC 6581 §5, RFC 5040 §6.1',
    'More outstanding RDMA Read Requests than the server announced as IRD: a Terminate, not a hang',
    'read_bw',
    async (_ctx, p, region) => {
      const ird = enhancedOf(p.s.peerFrame)?.ird;
      if (ird === undefined || ird > 64) return skip(`the server announced IRD ${ird ?? 'none'}`);
      for (let i = 0; i <= ird; i++)
        p.s.readRequest({
          sinkStag: CONTROL_STAG,
          sinkTo: CONTROL_ADDR,
          size: 1,
          srcStag: region.rkey,
          srcTo: region.addr,
        });
      return irdOutcome(p, ird);
    },
    (m) => (m.mpaRev === 2 ? undefined : 'IRD is announced at Rev 2 only'),
  ),
  perfCase(
    'rfc7306.atomic-fetch-add',
    'RFC 7306 §5',
    'RFC 7306 opted in (atomic_bw): Fetch-and-Add answered by an Atomic Response on QN 3 with the original data',
    'atomic_bw',
    async (_ctx, p, region) => {
      let expect = -1n;
      for (let i = 0; i < ITERS; i++) {
        p.s.sendUlpdu(
          p.s.untagged(
            Opcode.AtomicRequest,
            1,
            encodeAtomicRequest({
              atomicOpcode: 0,
              requestId: 100 + i,
              remoteStag: region.rkey,
              remoteTo: region.addr,
              addOrSwapData: 3n,
              addOrSwapMask: 0n,
              compareData: 0n,
              compareMask: 0n,
            }),
          ),
        );
        const m = await p.rx.expect(Opcode.AtomicResponse, `Atomic Response ${i + 1}`);
        if (m.ddp?.tagged !== false || m.ddp.qn !== 3)
          return fail(`RFC 7306 §5: ${describe(m)}: an Atomic Response goes on QN 3`);
        const r = decodeAtomicResponse(m.payload);
        if (!r || r.originalRequestId !== 100 + i)
          return fail(`Atomic Response ${i + 1} does not name Request ID ${100 + i}`);
        if (expect >= 0n && r.originalRemoteData !== expect)
          return fail(`Fetch-and-Add ${i + 1} returned ${r.originalRemoteData}, the previous add left ${expect}`);
        expect = r.originalRemoteData + 3n;
      }
      return 1;
    },
  ),
];
