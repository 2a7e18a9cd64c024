/**
 * `rddp rping`'s interop deviations (docs/MPA.md) reach the MPA/TCP transport, as `rddp perf`'s do:
 * `--max-ulpdu` lets a server take a ULPDU longer than RFC 5044 §3's 64768 octets (without it: a Terminate
 * of Layer LLP, MPA, code 0x03, then FIN), and `--tolerate-early-fpdu` lets a client take the responder's
 * FPDU sent before its own first one (without it: RFC 5044 §7.1.2, the client fails with `early-data`).
 * Driven from raw sockets against `tools/rddp` processes.
 */
import { encodeTaggedHeader } from '@rddp/ddp';
import { FpduWriter } from '@rddp/llp-mpa-tcp';
import { describe, expect, it } from 'vitest';
import { type RawPeer, rawServer } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { endsWithin, freePort, startedProcesses, stderrMatches } from './procs.js';
import { closedWithin, type RxUlpdu, rawMpaPeer, sendFpdu, ulpdus } from './raw-rdmap.js';
import { rpingInfo } from './rping-wire.js';

const procs = startedProcesses();

/** RFC 5044 §3: the longest ULPDU a receiver must take (MULPDU for the largest EMSS). */
const MULPDU_MAX = 64768;
/** The ULPDU the raw client sends: an RDMA Read Response of one DDP segment, 260 octets past the limit. */
const LONG_ULPDU = 65028;
const READ_PAYLOAD = LONG_ULPDU - 14; // a tagged DDP header

/** Resolves with the first ULPDU after the MPA Reply that `pick` takes, or rejects after `ms`. */
function nextUlpdu(raw: RawPeer, pick: (u: RxUlpdu) => boolean, ms = 5000): Promise<RxUlpdu> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const poll = () => {
      const rx = raw.received();
      const u = rx.byteLength >= 20 ? ulpdus(rx).find(pick) : undefined;
      if (u) return resolve(u);
      if (Date.now() - t0 > ms) return reject(new Error(`no such ULPDU in ${ms} ms: ${rx.byteLength} octets in`));
      setTimeout(poll, 10);
    };
    poll();
  });
}

/** One RDMA Read Response (RFC 5040 §4.5, opcode 0x2) of `payload` as one tagged DDP segment, one FPDU. */
function readResponseFpdu(stag: number, to: bigint, payload: Uint8Array): Buffer {
  const seg = new Uint8Array(14 + payload.byteLength);
  encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x40 | 0x2, stag, to }, seg);
  seg.set(payload, 14);
  const parts: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([seg], seg.byteLength, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}

/**
 * `rping -s` (one client) and a raw client that advertises a source buffer of READ_PAYLOAD octets and
 * answers the server's RDMA Read Request with one Read Response of ULPDU_Length 65028.
 */
async function longReadResponse(extra: string[]) {
  const port = await freePort();
  const server = procs.run(['rping', '-s', '-d', '-a', '127.0.0.1', '-p', String(port), ...extra]);
  await stderrMatches(server.child, /listening on/);
  const raw = await rawMpaPeer(port);
  raw.socket.write(sendFpdu(1, rpingInfo(0x1000n, 0x1234, READ_PAYLOAD)));
  const rr = await nextUlpdu(raw, (u) => u.opcode === 0x1); // RDMA Read Request (RFC 5040 §4.4)
  const sinkStag = rr.payload.readUInt32BE(0);
  const sinkTo = rr.payload.readBigUInt64BE(4);
  expect(rr.payload.readUInt32BE(12)).toBe(READ_PAYLOAD);
  const data = new Uint8Array(READ_PAYLOAD).fill(0x61);
  data[READ_PAYLOAD - 1] = 0;
  const fpdu = readResponseFpdu(sinkStag, sinkTo, data);
  expect(fpdu.readUInt16BE(0)).toBe(LONG_ULPDU);
  raw.socket.write(fpdu);
  return { server, raw };
}

describe('rping --max-ulpdu (RFC 5044 §3 deviation)', () => {
  it(`without it, a ULPDU of ${LONG_ULPDU} octets (> ${MULPDU_MAX}) is refused: Terminate LLP, MPA, code 0x03; FIN`, async () => {
    const { server, raw } = await longReadResponse([]);
    const term = await nextUlpdu(raw, (u) => u.opcode === 0x7);
    // RFC 5040 §4.8: Layer 2 (LLP) | Error Type 0 (MPA), Error Code 0x03 (RFC 5044 §8), Hdrct 0.
    expect(term.payload.subarray(0, 4).toString('hex')).toBe('20030000');
    expect(await closedWithin(raw, 5000)).toEqual({ reset: false, fin: true });
    expect(ulpdus(raw.received()).some((u) => u.opcode === 0x3)).toBe(false); // no go-ahead Send
    const ended = await endsWithin(server);
    expect(ended.code).not.toBe(0);
    expect(ended.err).toMatch(/Terminate sent: LLP: EType 0, code 0x03/);
  }, 20_000);

  it(`with --max-ulpdu 65535, the ${LONG_ULPDU}-octet Read Response is taken: the server's go-ahead Send follows`, async () => {
    const { server, raw } = await longReadResponse(['--max-ulpdu', '65535']);
    const goAhead = await nextUlpdu(raw, (u) => u.opcode === 0x3);
    expect(goAhead.payload.byteLength).toBe(16);
    expect(ulpdus(raw.received()).some((u) => u.opcode === 0x7)).toBe(false); // no Terminate
    expect(raw.socket.destroyed).toBe(false);
    raw.socket.end(); // leave: the server ends too
    const ended = await endsWithin(server);
    expect(ended.err).not.toMatch(/ULPDU_Length|Terminate sent/);
  }, 20_000);

  it('a value out of 64768..65535 is a usage error', async () => {
    const ended = await endsWithin(procs.run(['rping', '-s', '--max-ulpdu', '70000']));
    expect(ended.code).not.toBe(0);
    expect(ended.err).toMatch(/64768/);
  }, 20_000);
});

/**
 * A raw rping responder that sends its go-ahead Send right behind its MPA Reply, in the same segment (before
 * the client's first FPDU: RFC 5044 §7.1.2 forbids it), then answers the client's two advertisements with
 * its done Send: one ping as far as `rping -c` (no -V) can tell.
 */
async function earlyResponder() {
  const zero = new Uint8Array(16);
  const server = await rawServer(async (p) => {
    try {
      const head = await p.waitFor(20);
      await p.waitFor(20 + head.readUInt16BE(18));
      const reply = Buffer.alloc(20);
      reply.write('MPA ID Rep Frame');
      reply[16] = 0x40; // C: CRC (the client asks for it by default)
      reply[17] = 1;
      p.socket.write(Buffer.concat([reply, sendFpdu(1, zero)])); // the early go-ahead, MSN 1
      // The client's sink advertisement (its second Send) earns the done Send.
      const offset = 20 + head.readUInt16BE(18);
      for (;;) {
        const rx = p.received().subarray(offset);
        let o = 0;
        let sends = 0;
        while (o + 2 <= rx.byteLength) {
          const len = rx.readUInt16BE(o);
          if (o + 2 + len > rx.byteLength) break;
          if (((rx[o + 3] as number) & 0x0f) === 0x3) sends++;
          o += 2 + len + ((4 - ((2 + len) % 4)) % 4) + 4;
        }
        if (sends >= 2) break;
        await new Promise((r) => setTimeout(r, 10));
        if (p.socket.destroyed) return;
      }
      p.socket.write(sendFpdu(2, zero));
    } catch {
      // the client left
    }
  });
  return server;
}

describe('rping --tolerate-early-fpdu (RFC 5044 §7.1.2 deviation)', () => {
  it("without it, the responder's FPDU before the client's first fails the client (early-data)", async () => {
    const srv = await earlyResponder();
    try {
      const ended = await endsWithin(
        procs.run(['rping', '-c', '-a', '127.0.0.1', '-p', String(srv.port), '-C', '1']),
        10_000,
      );
      expect(ended.code).not.toBe(0);
      expect(ended.err).toMatch(/after its MPA Reply, before the initiator's first FPDU \(RFC 5044 §7\.1\.2\)/);
    } finally {
      srv.close();
    }
  }, 20_000);

  it('with it, the client takes the early FPDU and completes its ping', async () => {
    const srv = await earlyResponder();
    try {
      const ended = await endsWithin(
        procs.run(['rping', '-c', '-a', '127.0.0.1', '-p', String(srv.port), '-C', '1', '--tolerate-early-fpdu']),
        10_000,
      );
      expect(ended.err).not.toMatch(/early|7\.1\.2/);
      expect(ended.code).toBe(0);
      expect(ended.out).toMatch(/1 pings of 64 octets/);
    } finally {
      srv.close();
    }
  }, 20_000);
});
