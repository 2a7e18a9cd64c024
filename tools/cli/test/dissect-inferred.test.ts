/**
 * `rddp dissect` on a real rping capture (tshark on lo) cut as a late capture would be (issue 35):
 * (a) without the TCP handshake and the MPA Request, (b) from a packet in the middle, (c) with
 * `--mpa-port` when the first FPDUs are missing; (d) STags and TOs as tshark prints them.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, haveTshark, rddp, startCapture, TSHARK, tempDir } from '../../conformance/test/dissect-helpers.js';

const tmp = tempDir();
afterAll(() => tmp.dispose());
const here = haveTshark();

interface Report {
  connections: { initiator: string; responder: string; setup: string; operations: Record<string, number> }[];
  events: { frame: number; kind: string; summary: string }[];
  findings: { severity: string; code: string }[];
}

async function dissect(args: string[]): Promise<{ code: number | null; out: string; report: Report }> {
  const t = await rddp(['dissect', ...args]).done;
  const j = await rddp(['dissect', '--json', ...args]).done;
  return { code: t.code, out: t.out, report: JSON.parse(j.out) as Report };
}

/** `tshark -r in -Y filter -w out` (frames renumbered from 1, as a capture started later). */
function cut(file: string, filter: string, name: string): string {
  const out = join(tmp.dir, name);
  execFileSync(TSHARK, ['-r', file, '-Y', filter, '-w', out, '-F', 'pcapng']);
  return out;
}

describe.skipIf(!here)('rddp dissect on a real capture cut late', () => {
  let file = '';
  let port = 0;
  let full: Report;

  it('the whole capture: decoded from the MPA Request, nothing inferred', async () => {
    port = await freePort();
    file = join(tmp.dir, 'rping.pcapng');
    const cap = await startCapture(file, `tcp port ${port}`);
    try {
      const s = rddp(['rping', '-s', '-d', '-p', String(port)]);
      await new Promise((r) => setTimeout(r, 1500));
      const c = await rddp(['rping', '-c', '-p', String(port), '-C', '6', '-S', '300']).done;
      expect(c.code).toBe(0);
      if (s.child.exitCode === null) s.child.kill('SIGINT');
      await s.done;
    } finally {
      await cap.stop();
    }
    const r = await dissect([file]);
    expect(r.code).toBe(0);
    full = r.report;
    expect(full.connections).toHaveLength(1);
    expect(r.out).not.toContain('mpa-inferred');
  }, 120_000);

  it('(a) no handshake, no MPA Request: decoded from the Reply, roles right, the note says inferred, exit 0', async () => {
    const req = full.events.find((e) => e.kind === 'mpa-request')?.frame as number;
    const late = cut(file, `frame.number > ${req}`, 'no-request.pcapng');
    const r = await dissect([late]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/mpa-inferred: the capture starts at the MPA Reply/);
    const c = r.report.connections[0];
    expect(c?.initiator).toBe(full.connections[0]?.initiator);
    expect(c?.responder).toBe(full.connections[0]?.responder);
    expect(c?.operations).toEqual(full.connections[0]?.operations);
  }, 120_000);

  it('(b) from a packet mid-stream: FPDUs recognised after a resync, the note, no false reject, exit 0', async () => {
    const fpdus = full.events.filter((e) => e.kind === 'fpdu');
    const mid = fpdus[Math.floor(fpdus.length / 2)]?.frame as number;
    const late = cut(file, `frame.number >= ${mid}`, 'mid.pcapng');
    const r = await dissect([late]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/mpa-inferred: framing and CRC recognised mid-stream/);
    expect(r.report.findings.filter((f) => f.severity === 'reject')).toEqual([]);
    const c = r.report.connections[0];
    // The server listens on a port below the ephemeral range only sometimes: roles from ports or unknown.
    expect(c?.setup).toMatch(/^inferred mid-stream/);
    expect(r.report.events.filter((e) => e.kind === 'fpdu').length).toBeGreaterThan(0);
  }, 120_000);

  it("(c) --mpa-port: the first FPDUs absent, decoded as MPA with the port's side the responder", async () => {
    const fpdus = full.events.filter((e) => e.kind === 'fpdu');
    const from = fpdus[3]?.frame as number;
    const late = cut(file, `frame.number >= ${from}`, 'mpa-port.pcapng');
    const r = await dissect([late, '--mpa-port', String(port)]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/decoded as MPA \(--mpa-port\)/);
    const c = r.report.connections[0];
    expect(c?.responder).toBe(full.connections[0]?.responder);
    expect(c?.setup).toMatch(/roles inferred from --mpa-port/);
  }, 120_000);

  it('(d) STags and TOs as tshark prints iwarp_ddp.stag and iwarp_ddp.tagged_offset', async () => {
    const theirs = execFileSync(TSHARK, [
      '-r',
      file,
      '-Y',
      'iwarp_ddp.stag',
      '-T',
      'fields',
      '-e',
      'iwarp_ddp.stag',
      '-e',
      'iwarp_ddp.tagged_offset',
    ])
      .toString()
      .trim()
      .split('\n')
      .flatMap((l) => {
        const [s, t] = l.split('\t');
        const ts = (t ?? '').split(',');
        return (s ?? '').split(',').map((x, i) => `STag ${x} TO ${ts[i]}`);
      });
    expect(theirs.length).toBeGreaterThan(0);
    const r = await rddp(['dissect', file]).done;
    const ours = [...r.out.matchAll(/DDP tagged (STag 0x[0-9a-f]{8} TO 0x[0-9a-f]{16})/g)].map((m) => m[1]);
    expect(ours).toEqual(theirs);
  }, 120_000);
});
