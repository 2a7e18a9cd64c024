/**
 * Captures that start late (issue 35): the MPA Request missed (decoded from the Reply, roles from it),
 * mid-stream (FPDUs recognised by framing and CRC after a resync, no MSN or startup finding the capture
 * cannot know), `mpaPorts` (decode-as), and STags and TOs printed in hex as Wireshark prints them.
 * The captures are whole MPA connections written with the pcap writer, then cut.
 */
import { describe, expect, it } from 'vitest';
import {
  type DissectReport,
  dissectBytes,
  encodeFpdu,
  encodeMpaReply,
  encodeMpaRequest,
  encodeReadRequest,
  type FlowRecord,
  formatDissectText,
  Opcode,
  PcapWriter,
  streamCaptureBytes,
  taggedSegment,
  tcpFlowPcap,
  untaggedSegment,
} from '../src/index.js';

const fpdu = (u: Uint8Array, crc = true) => encodeFpdu(u, { crc, markers: false });
const send = (msn: number, n: number, crc = true) =>
  fpdu(untaggedSegment({ opcode: Opcode.Send, msn }, new Uint8Array(n).fill(msn)), crc);

/** A whole connection: Request, Reply, then Sends both ways, a Read and a Write; one FPDU split over segments. */
function connection(crc = true): Uint8Array {
  const r: FlowRecord[] = [
    { from: 'client', bytes: encodeMpaRequest({ markers: false, crc, rev: 1 }) },
    { from: 'server', bytes: encodeMpaReply({ markers: false, crc, rev: 1 }) },
    { from: 'client', bytes: send(1, 100, crc) },
    { from: 'server', bytes: send(1, 60, crc) },
    {
      from: 'server',
      bytes: fpdu(
        untaggedSegment(
          { opcode: Opcode.RdmaReadRequest, msn: 1 },
          encodeReadRequest({ sinkStag: 0xabcd, sinkTo: 0x1000n, size: 64, srcStag: 0x1234, srcTo: 0n }),
        ),
        crc,
      ),
    },
    {
      from: 'client',
      bytes: fpdu(
        taggedSegment({ opcode: Opcode.RdmaReadResponse, stag: 0xabcd, to: 0x1000n }, new Uint8Array(64)),
        crc,
      ),
    },
  ];
  for (let msn = 2; msn <= 8; msn++) {
    // The client's FPDU of MSN 4 is split: 37 octets, then the rest (where the mid-stream cut starts).
    r.push({ from: 'client', bytes: send(msn, 200 + msn, crc), ...(msn === 4 ? { segments: [37] } : {}) });
    r.push({ from: 'server', bytes: send(msn, 40 + msn, crc) });
  }
  r.push({
    from: 'client',
    bytes: fpdu(taggedSegment({ opcode: Opcode.RdmaWrite, stag: 0x5678, to: 0x2000n }, new Uint8Array(32)), crc),
  });
  return tcpFlowPcap(r, { close: false });
}

/** The capture with only the packets `keep` says (frames renumbered from 1, as a later capture would be). */
function cut(pcap: Uint8Array, keep: (frame: number, tcpPayload: number) => boolean): Uint8Array {
  const w = new PcapWriter();
  streamCaptureBytes(pcap, (p) => {
    // Ethernet 14 + IPv4 20 + TCP 20: the test's frames carry no options.
    if (keep(p.frame, p.data.byteLength - 54)) w.add(p.data, p.timeMicros);
  });
  return w.bytes();
}

const rejects = (r: DissectReport) => r.findings.filter((f) => f.severity === 'reject');
const sends = (r: DissectReport) => r.connections[0]?.operations.Send ?? 0;

describe('dissect: captures that start late', () => {
  it('whole: decoded from the Request as before, nothing inferred', async () => {
    const r = await dissectBytes(connection());
    expect(rejects(r)).toEqual([]);
    expect(r.connections[0]?.initiator).toBe('10.0.0.1:40000');
    expect(r.findings.some((f) => f.code === 'mpa-inferred')).toBe(false);
    expect(sends(r)).toBe(16);
  });

  it('(a) no SYN, no MPA Request: decoded from the Reply, its sender the responder; the note says so', async () => {
    // Frames 1–3 are the handshake, 4 the Request.
    const r = await dissectBytes(cut(connection(), (f) => f > 4));
    expect(rejects(r)).toEqual([]);
    const c = r.connections[0];
    expect(c?.initiator).toBe('10.0.0.1:40000');
    expect(c?.responder).toBe('10.0.0.2:7174');
    expect(c?.setup).toMatch(/Request not captured/);
    expect(r.events.some((e) => /^mpa-inferred: the capture starts at the MPA Reply/.test(e.summary))).toBe(true);
    expect(sends(r)).toBe(16);
    expect(c?.operations['RDMA Read Response']).toBe(1);
    expect(c?.crc).toEqual({ good: 19, bad: 0, off: 0 });
  });

  it('(b) mid-stream, the first packet inside an FPDU: resync on the CRC, roles from the ports, no false reject', async () => {
    let at = 0;
    const full = connection();
    streamCaptureBytes(full, (p) => {
      if (at === 0 && p.data.byteLength - 54 === 2 + 18 + 204 + 4 - 37) at = p.frame;
    });
    expect(at).toBeGreaterThan(0);
    const r = await dissectBytes(cut(full, (f) => f >= at));
    expect(rejects(r)).toEqual([]);
    const c = r.connections[0];
    expect(c?.initiator).toBe('10.0.0.1:40000');
    expect(c?.setup).toMatch(/^inferred mid-stream .*CRC on.*roles inferred from the ports/);
    const notes = r.events.filter((e) => e.summary.startsWith('mpa-inferred'));
    expect(notes.some((e) => /framing and CRC recognised mid-stream/.test(e.summary))).toBe(true);
    expect(notes.some((e) => /[1-9]\d* octets before the first FPDU boundary skipped/.test(e.summary))).toBe(true);
    // MSN 4's tail skipped; 5..8 from the client, 4..8 from the server.
    expect(sends(r)).toBe(9);
    expect(c?.crc.bad).toBe(0);
    expect(c?.operations['RDMA Write']).toBe(1);
  });

  it('(b) mid-stream with CRCs off: recognised from several well-formed FPDUs in a row', async () => {
    const r = await dissectBytes(cut(connection(false), (f) => f >= 12));
    expect(rejects(r)).toEqual([]);
    expect(r.connections[0]?.setup).toMatch(/CRC off/);
    expect(r.events.some((e) => /framing recognised mid-stream \(3 well-formed FPDUs/.test(e.summary))).toBe(true);
  });

  it('(b) the mid-stream Read Response to a Read Request not captured is a note, not a reject', async () => {
    // From the server's Read Request on: the client's Response matches; from the Response on: nothing to match.
    const r = await dissectBytes(cut(connection(), (f) => f >= 9));
    expect(rejects(r)).toEqual([]);
    expect(r.findings.some((f) => f.code === 'rdmap-read-response-unmatched')).toBe(true);
  });

  it('not MPA, no SYN: not taken for iWARP, one hint to try --mpa-port', async () => {
    const junk = tcpFlowPcap(
      [
        { from: 'client', bytes: new TextEncoder().encode('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(40)) },
        { from: 'server', bytes: new Uint8Array(3000).map((_, i) => (i * 7919) & 0xff) },
      ],
      { serverPort: 80 },
    );
    const r = await dissectBytes(cut(junk, (f) => f > 3));
    expect(r.connections).toEqual([]);
    expect(r.events.map((e) => e.summary)).toEqual([expect.stringMatching(/try --mpa-port/)]);
  });

  it('(c) mpaPorts: the first FPDUs absent, the port decoded as MPA; the side on it the responder', async () => {
    // Ports both ephemeral: only --mpa-port says who the responder is.
    const full = tcpFlowPcap(
      [
        { from: 'client', bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
        { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
        { from: 'client', bytes: send(1, 10) },
        { from: 'server', bytes: send(1, 10) },
        { from: 'client', bytes: send(2, 10) },
        { from: 'server', bytes: send(2, 10) },
      ],
      { clientPort: 50001, serverPort: 50002, close: false },
    );
    const late = cut(full, (f) => f > 6);
    const without = await dissectBytes(late);
    // Without it: recognised by the CRC, but who connected is not known (the first sender shown as initiator).
    expect(without.connections[0]?.setup).toMatch(/roles unknown/);
    const r = await dissectBytes(late, { mpaPorts: [50002] });
    expect(rejects(r)).toEqual([]);
    expect(r.connections[0]?.responder).toBe('10.0.0.2:50002');
    expect(r.events.some((e) => /decoded as MPA \(--mpa-port\)/.test(e.summary))).toBe(true);
    expect(r.connections[0]?.setup).toMatch(/roles inferred from --mpa-port/);
    expect(sends(r)).toBe(3);
  });

  it('(d) STags and TOs in hex as Wireshark prints them; JSON keeps numbers', async () => {
    const r = await dissectBytes(connection());
    const text = formatDissectText(r);
    expect(text).toContain('DDP tagged STag 0x0000abcd TO 0x0000000000001000 L');
    expect(text).toContain('sink 0x0000abcd@0x0000000000001000 ← source 0x00001234@0x0000000000000000');
    expect(text).toContain('STag 0x00005678 TO 0x0000000000002000');
    const write = r.events.find((e) => e.summary.includes('RDMAP RDMA Write'));
    const ddp = (write?.detail as { ddp: { stag: number; to: bigint } }).ddp;
    expect(ddp.stag).toBe(0x5678);
    expect(ddp.to).toBe(0x2000n);
  });
});
