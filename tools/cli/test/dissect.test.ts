/**
 * `rddp dissect` as a separate process: exit 0 on a clean capture, 3 when a finding is one a receiver
 * must reject (with its clause on the terminal and in --json), 1 on unreadable input, 2 on usage.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeFpdu, encodeMpaReply, encodeMpaRequest, Opcode, tcpFlowPcap, untaggedSegment } from '@rddp/conformance';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './procs.js';

const dir = mkdtempSync(join(tmpdir(), 'rddp-dissect-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function capture(name: string, crcXor: number): string {
  const fpdu = encodeFpdu(untaggedSegment({ opcode: Opcode.Send, msn: 1 }, new Uint8Array(40)), {
    crc: true,
    markers: false,
    crcXor,
  });
  const file = join(dir, name);
  writeFileSync(
    file,
    tcpFlowPcap([
      { from: 'client', bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
      { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
      { from: 'client', bytes: fpdu },
    ]),
  );
  return file;
}

describe('rddp dissect', () => {
  it('a clean capture: the frames, the connection summary, exit 0', async () => {
    const r = await run(['dissect', capture('clean.pcap', 0)]).done;
    expect(r.code).toBe(0);
    expect(r.out).toContain('MPA Request Rev 1 M=0 C=1');
    expect(r.out).toContain('FPDU ULPDU_Length 58 (CRC good)');
    expect(r.out).toContain('RDMAP Send · payload 40 octets');
    expect(r.out).toContain('operations: Send ×1');
    expect(r.out).toContain('no finding a receiver must reject');
  }, 120_000);

  it('a bad CRC: flagged with RFC 5044 §4.4, exit 3; --json carries the finding', async () => {
    const file = capture('bad.pcap', 1);
    const r = await run(['dissect', file]).done;
    expect(r.code).toBe(3);
    expect(r.out).toMatch(/!! reject RFC 5044 §4\.4: bad CRC/);
    const j = await run(['dissect', '--json', file]).done;
    expect(j.code).toBe(3);
    const report = JSON.parse(j.out) as { findings: { code: string; clause: string; frame: number }[] };
    expect(report.findings).toEqual([expect.objectContaining({ code: 'mpa-crc', clause: 'RFC 5044 §4.4', frame: 6 })]);
  }, 120_000);

  it('not a capture: exit 1 with one line; no file: usage error, exit 2', async () => {
    const junk = join(dir, 'junk.pcap');
    writeFileSync(junk, 'this is not a capture');
    const r = await run(['dissect', junk]).done;
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^rddp: neither a pcap nor a pcapng file/);
    const u = await run(['dissect']).done;
    expect(u.code).toBe(2);
    const p = await run(['dissect', junk, '--max-ulpdu', 'x']).done;
    expect(p.code).toBe(2);
  }, 120_000);

  it('--max-connections: connections beyond it at once are skipped with one note and their count, exit 0', async () => {
    // Three MPA connections left open (no FIN), one after the other in one capture.
    const flows = [40001, 40002, 40003].map((clientPort) =>
      tcpFlowPcap(
        [
          { from: 'client', bytes: encodeMpaRequest({ markers: false, crc: true, rev: 1 }) },
          { from: 'server', bytes: encodeMpaReply({ markers: false, crc: true, rev: 1 }) },
          {
            from: 'client',
            bytes: encodeFpdu(untaggedSegment({ opcode: Opcode.Send, msn: 1 }, new Uint8Array(8)), {
              crc: true,
              markers: false,
            }),
          },
        ],
        { clientPort, close: false },
      ),
    );
    const file = join(dir, 'three.pcap');
    writeFileSync(file, Buffer.concat([flows[0] as Uint8Array, ...flows.slice(1).map((f) => f.subarray(24))]));
    const r = await run(['dissect', '--max-connections', '2', file]).done;
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^#13 \[capture\] {3}connections beyond 2 at once not decoded: 1$/m);
    expect(r.out).toContain('connection tcp-2 (mpa-tcp): 10.0.0.1:40002 → 10.0.0.2:7174');
    expect(r.out).not.toContain('40003 →');
    const j = await run(['dissect', '--json', '--max-connections', '2', file]).done;
    const report = JSON.parse(j.out) as { connections: unknown[]; findings: { code: string; message: string }[] };
    expect(report.connections).toHaveLength(2);
    expect(report.findings).toEqual([
      expect.objectContaining({
        code: 'dissect-connection-limit',
        message: expect.stringMatching(/: 1 not decoded, 5 packets skipped$/),
      }),
    ]);
    const all = await run(['dissect', file]).done;
    expect(all.out).toContain('connection tcp-3 (mpa-tcp): 10.0.0.1:40003 → 10.0.0.2:7174');
    expect(all.out).not.toContain('not decoded');
    expect((await run(['dissect', '--max-connections', '0', file]).done).code).toBe(2);
  }, 120_000);
});
