/**
 * RFC 5044 §4.3 + §8 + RFC 5040 §4.8 Figure 9 (Layer LLP): an FPDU whose Marker's FPDUPTR does not point
 * back at the FPDU's ULPDU_Length field is never delivered; `rddp rping -s -P --markers` answers it with a
 * Terminate of Layer 2 (LLP), Error Type 0 (MPA), Error Code 3 ("MPA Marker and ULPDU pointers don't
 * match"), no copied headers, then closes the connection gracefully — as Linux siw does
 * (TERM_ERROR_LAYER_LLP / LLP_ETYPE_MPA / LLP_ECODE_FPDU_START). A bad Marker in the client's very first
 * FPDU gets no Terminate: a Responder sends no FPDU before it validated one (§7.1.2); it resets.
 * Driven from a raw socket; wire-checked with tshark.
 */
import { encodeUntaggedHeader } from '@rddp/ddp';
import { crc32cRange, FpduWriter, MARKER_INTERVAL, MPA_FLAG_M, padLength, readCrc, writeCrc } from '@rddp/llp-mpa-tcp';
import { describe, expect, it } from 'vitest';
import { type RawPeer, rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { startCapture, summarize, tsharkAvailable, unexpected } from '../../../packages/llp-mpa-tcp/test/wire.js';
import { endsWithin, freePort, startedProcesses, stderrMatches } from './procs.js';
import { closedWithin } from './raw-rdmap.js';
import { rpingInfo } from './rping-wire.js';

const procs = startedProcesses();

/** A Send (RDMAP opcode 0x3, QN 0) ULPDU carrying `payload`. */
function send(msn: number, payload: Uint8Array): Uint8Array {
  const seg = new Uint8Array(18 + payload.byteLength);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | 0x3) * 2 ** 32, qn: 0, msn, mo: 0 }, seg);
  seg.set(payload, 18);
  return seg;
}

/**
 * The raw client's FPDUs with Markers (RFC 5044 §4.3: one every 512 octets of the stream, the first at
 * offset 0): a good first FPDU (rping's buffer advertisement, so the responder may send, §7.1.2), then a
 * Send of 600 octets whose Marker at stream offset 512 says `ptr` instead of pointing back at its
 * ULPDU_Length field; its CRC (which covers the Markers, §4.4) is good: the Marker is the only fault.
 */
function badMarkerStream(ptr: number): Buffer {
  const w = new FpduWriter({ crc: true, markers: true });
  const first: Uint8Array[] = [];
  const adv = send(1, rpingInfo(0x1000n, 0x1234, 64));
  w.frame([adv], adv.byteLength, first);
  const second: Uint8Array[] = [];
  const big = send(2, new Uint8Array(600).fill(0x5a));
  w.frame([big], big.byteLength, second);
  const a = Buffer.concat(first.map((p) => Buffer.from(p)));
  const b = Buffer.concat(second.map((p) => Buffer.from(p)));
  const at = 512 - a.byteLength; // the Marker's offset in the second FPDU
  const end = b.byteLength - 4;
  expect(readCrc(b, end)).toBe(crc32cRange(b, 0, end, 0)); // the CRC covers the Marker
  expect(b.readUInt16BE(at)).toBe(0); // the Marker's reserved half
  expect(b.readUInt16BE(at + 2)).toBe(at); // FPDUPTR: back to ULPDU_Length
  expect(ptr).not.toBe(at);
  b.writeUInt16BE(ptr, at + 2);
  writeCrc(b, end, crc32cRange(b, 0, end, 0));
  return Buffer.concat([a, b]);
}

/**
 * Connects, sends an MPA Rev 1 Request (CRC; Markers in what the server sends when `markers`), resolves
 * after the whole Reply.
 */
async function mpaPeer(
  port: number,
  markers: boolean,
): Promise<{ raw: RawPeer; replyLength: number; replyFlags: number }> {
  const raw = await rawConnect(port);
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40 | (markers ? MPA_FLAG_M : 0); // C: CRC, M: Markers
  req[17] = 1;
  raw.socket.write(req);
  const head = await raw.waitFor(20);
  const replyLength = 20 + head.readUInt16BE(18);
  await raw.waitFor(replyLength);
  return { raw, replyLength, replyFlags: head[16] as number };
}

/** The FPDU stream without its Markers (4 octets at every 512th, RFC 5044 §4.3). */
function withoutMarkers(rx: Buffer): Buffer {
  const pieces: Buffer[] = [];
  for (let o = 0; o < rx.byteLength; o += MARKER_INTERVAL) pieces.push(rx.subarray(o + 4, o + MARKER_INTERVAL));
  return Buffer.concat(pieces);
}

/**
 * `tools/rddp rping -s -P --markers` and a raw client that sends `fpdu`; `capture`: with tshark on, and
 * the client asking for Markers too (Wireshark decodes a connection with Markers one way only partly).
 */
async function markerRun(fpdu: Buffer, capture: boolean) {
  const port = await freePort();
  const cap = capture ? await startCapture(port) : undefined;
  const server = procs.run(['rping', '-s', '-P', '-a', '127.0.0.1', '-p', String(port), '--markers']);
  try {
    await stderrMatches(server.child, /listening on/);
    const { raw, replyLength, replyFlags } = await mpaPeer(port, capture);
    expect(replyFlags & MPA_FLAG_M).toBe(MPA_FLAG_M); // the server asks for Markers in what it receives
    const failed = stderrMatches(server.child, /failed:/);
    raw.socket.write(fpdu);
    const closed = await closedWithin(raw, 5000);
    const sent = raw.received().subarray(replyLength);
    const rx = capture ? withoutMarkers(sent) : sent;
    const note = await failed;
    server.child.kill('SIGINT');
    const ended = await endsWithin(server);
    const pcap = cap ? await cap.stop() : undefined;
    return { closed, rx, note, ended, pcap, dispose: () => cap?.dispose() };
  } catch (e) {
    cap?.dispose();
    throw e;
  }
}

/** The Terminate among the FPDUs the server sent (no Markers: the raw peer did not ask for them). */
function expectLlpMarkerTerminate(rx: Buffer): void {
  let o = 0;
  const fpdus: Buffer[] = [];
  while (o + 2 <= rx.byteLength) {
    const len = rx.readUInt16BE(o);
    fpdus.push(rx.subarray(o, o + 2 + len));
    o += 2 + len + padLength(len) + 4;
  }
  const term = fpdus.find((f) => f.byteLength >= 4 && ((f[3] as number) & 0x0f) === 0x7);
  expect(term, `no Terminate in ${rx.toString('hex')}`).toBeDefined();
  const t = term as Buffer;
  expect(t.readUInt16BE(0)).toBe(18 + 4); // ULPDU_Length: an untagged DDP header and the Terminate header
  expect(t[2]).toBe(0x41); // DDP: T=0, L=1, DV=1
  expect(t[3]).toBe(0x47); // RDMAP: RV 1, opcode 0x7 Terminate
  expect(t.readUInt32BE(8)).toBe(2); // QN 2
  expect(t.readUInt32BE(12)).toBe(1); // MSN 1
  // RFC 5040 §4.8: Layer 2 (LLP) | Error Type 0 (MPA) = 0x20, Error Code 0x03 (RFC 5044 §8), Hdrct 0.
  expect(t.subarray(20, 24).toString('hex')).toBe('20030000');
}

describe('RFC 5044 §8 code 3: a Terminate for a bad MPA Marker (rping -s -P --markers)', () => {
  it('a Marker that does not point back at its FPDU: Terminate Layer LLP, EType MPA, code 3, no headers; then FIN', async () => {
    const r = await markerRun(badMarkerStream(500), false);
    try {
      expectLlpMarkerTerminate(r.rx);
      expect(r.closed).toEqual({ reset: false, fin: true });
      expect(r.note).toMatch(/failed:/);
      expect(r.ended.code).toBe(0);
    } finally {
      r.dispose();
    }
  }, 30_000);

  it('a bad Marker in the first FPDU: nothing sent (the Responder never validated an FPDU, RFC 5044 §7.1.2), reset', async () => {
    // The opening Marker of the client's first FPDU says 4 instead of 0: no FPDU of the client's was ever
    // valid, so the Responder may send none, not even the Terminate; it resets the connection.
    const w = new FpduWriter({ crc: true, markers: true });
    const parts: Uint8Array[] = [];
    const adv = send(1, rpingInfo(0x1000n, 0x1234, 64));
    w.frame([adv], adv.byteLength, parts);
    const b = Buffer.concat(parts.map((p) => Buffer.from(p)));
    b.writeUInt16BE(4, 2);
    writeCrc(b, b.byteLength - 4, crc32cRange(b, 0, b.byteLength - 4, 0));
    const r = await markerRun(b, false);
    expect(r.rx.byteLength).toBe(0);
    expect(r.closed.reset).toBe(true);
    expect(r.note).toMatch(/failed:/);
  }, 30_000);

  it.runIf(tsharkAvailable())(
    'tshark decodes the Terminate (Layer LLP, Good CRC), nothing malformed; rddp dissect reads the FPDUs with Markers',
    async () => {
      const r = await markerRun(badMarkerStream(500), true);
      try {
        expectLlpMarkerTerminate(r.rx);
        // Wireshark leaves the client's segment with the bad Marker undecoded (rddp dissect reads its two FPDUs).
        const w = await summarize(r.pcap as string, { tsharkPartial: 'the segment with the bad Marker' });
        expect(w.malformed).toBe(0);
        expect(w.badCrc).toBe(0);
        expect(w.goodCrc).toBeGreaterThanOrEqual(1);
        expect(w.text).toMatch(/OpCode: Terminate \(0x7\)/);
        expect(w.text).toMatch(/Layer: LLP \(0x2\)/);
        expect(unexpected(w.expert)).toEqual([]);
      } finally {
        r.dispose();
      }
    },
    30_000,
  );
});
