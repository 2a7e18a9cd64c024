/**
 * RFC 5044 §8 + RFC 5040 §4.8 Figure 9 (Layer LLP): an FPDU with a bad CRC is never delivered; RDMAP over
 * MPA answers it with a Terminate (Layer 2 LLP, Error Type 0 MPA, Error Code 2 CRC) and no copied headers,
 * then closes the connection gracefully. Driven from a raw socket; wire-checked with tshark.
 */
import { encodeTaggedHeader } from '@rddp/ddp';
import { FpduWriter, mpaTcp } from '@rddp/llp-mpa-tcp';
import { Access, Device } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { rawConnect } from '../../../packages/llp-mpa-tcp/test/raw.js';
import { startCapture, summarize, tsharkAvailable, unexpected } from '../../../packages/llp-mpa-tcp/test/wire.js';

function rdmaWrite(stag: number, to: bigint, n: number): Uint8Array {
  const seg = new Uint8Array(14 + n).fill(0x11);
  encodeTaggedHeader({ last: true, dv: 1, rsvdUlp: 0x40, stag, to }, seg); // RDMAP RV 1, opcode Write
  return seg;
}

async function crcErrorRun(capture: boolean) {
  const t = mpaTcp();
  const l = await t.listen({ host: '127.0.0.1', port: 0 }, { params: { revision: 1, crc: true } });
  const cap = capture ? await startCapture(l.address.port as number) : undefined;
  const accepted = firstValueFrom(l.connections$);
  const raw = await rawConnect(l.address.port as number);
  const req = Buffer.alloc(20);
  req.write('MPA ID Req Frame');
  req[16] = 0x40; // C: CRC
  req[17] = 1; // Rev 1
  raw.socket.write(req);
  await raw.waitFor(20);
  const conn = await accepted;
  await l.close();
  // The server: a verbs queue pair on the accepted connection, with a region the raw peer writes into.
  const device = new Device();
  const pd = device.allocPd();
  const cq = device.createCq();
  const qp = pd.createQp({ sendCq: cq, recvCq: cq });
  qp.connect(conn);
  const sink = new Uint8Array(64);
  const region = pd.registerMr(sink, Access.LocalWrite | Access.RemoteWrite);
  const w = new FpduWriter({ crc: true, markers: false });
  const good: Uint8Array[] = [];
  w.frame([rdmaWrite(region.stag, region.remote(0).to, 8)], 22, good);
  const bad: Uint8Array[] = [];
  w.frame([rdmaWrite(region.stag, region.remote(8).to, 16)], 30, bad);
  const badBytes = Buffer.concat(bad);
  badBytes[badBytes.byteLength - 1] ^= 0x5a;
  raw.socket.write(Buffer.concat([...good.map((b) => Buffer.from(b)), badBytes]));
  const term = await firstValueFrom(qp.terminate$);
  const closed = await raw.closed;
  const rx = raw.received();
  const pcap = cap ? await cap.stop() : undefined;
  return { term, closed, rx, region, sink, pcap, dispose: () => cap?.dispose(), qp };
}

describe('RFC 5040 Figure 9 Layer LLP: a Terminate for an MPA CRC error', () => {
  it('RFC 5044 §8 code 2: the bad FPDU is not placed; the Terminate is Layer LLP, EType 0, code 2, no headers; then FIN', async () => {
    const r = await crcErrorRun(false);
    try {
      expect(r.term.direction).toBe('sent');
      expect(r.term.header).toMatchObject({ layer: 2, errorType: 0, errorCode: 2, m: false, d: false, r: false });
      // On the wire after the 20-octet Reply: ULPDU_Length 2 octets, an untagged DDP header on QN 2, the
      // 4-octet Terminate header: Layer 2 | EType 0 = 0x20, Code 0x02, Hdrct 0, reserved — then pad and CRC.
      const fpdu = r.rx.subarray(20);
      expect(fpdu.readUInt16BE(0)).toBe(18 + 4);
      expect(fpdu[2]).toBe(0x41); // DDP: T=0, L=1, DV=1
      expect(fpdu[3]).toBe(0x47); // RDMAP: RV 1, opcode 0x7 Terminate
      expect(fpdu.readUInt32BE(8)).toBe(2); // QN 2
      expect(fpdu.readUInt32BE(12)).toBe(1); // MSN 1
      expect(Buffer.from(fpdu.subarray(20, 24)).toString('hex')).toBe('20020000');
      expect(r.closed).toEqual({ reset: false, fin: true });
      const ended = await firstValueFrom(r.qp.closed$);
      expect(ended.state).toBe('error');
      expect(ended.error?.message).toMatch(/LLP receive error: MPA CRC mismatch/);
      expect(r.sink.subarray(0, 8).every((x) => x === 0x11)).toBe(true); // the good Write was placed
      expect(r.sink.subarray(8).every((x) => x === 0)).toBe(true); // nothing of the bad FPDU was
    } finally {
      r.dispose();
    }
  }, 30_000);

  it.runIf(tsharkAvailable())(
    'tshark decodes the good FPDU, the bad CRC and the Terminate with Layer LLP',
    async () => {
      const r = await crcErrorRun(true);
      try {
        const w = await summarize(r.pcap as string);
        expect(w.badCrc).toBe(1);
        expect(w.goodCrc).toBe(2); // the good Write and our Terminate
        expect(w.malformed).toBe(0);
        expect(unexpected(w.expert)).toEqual([]);
        expect(w.text).toMatch(/OpCode: Terminate \(0x7\)/);
        expect(w.text).toMatch(/Layer: LLP \(0x2\)/);
        // rddp dissect (checked against tshark by summarize): the bad CRC is the one finding to reject,
        // and the Terminate it answered with is Layer LLP, MPA CRC Error.
        expect(w.dissect.rejects.map((f) => `${f.code} ${f.clause}`)).toEqual(['mpa-crc RFC 5044 §4.4']);
        expect(w.dissect.report.connections[0]?.terminates.map((t) => t.name)).toEqual(['MPA: MPA CRC Error']);
      } finally {
        r.dispose();
      }
    },
    30_000,
  );
});
