/**
 * `rddp dissect` on real traffic of the project's own tools, captured on lo with tshark: rping and perf
 * over MPA/TCP with and without CRCs and with Markers, MPA Rev 2 peer-to-peer, rping over SCTP (UDP
 * encapsulation) and the UDP LLP. Where tshark decodes the same capture, both agree FPDU for FPDU.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { udp } from '../../../packages/llp-udp/src/index.js';
import { type DissectReport, dissectFile, encodeTerminate, Opcode, untaggedSegment } from '../src/index.js';
import { freePort, haveTshark, rddp, startCapture, tempDir, tsharkFpdus } from './dissect-helpers.js';

const tmp = tempDir();
afterAll(() => tmp.dispose());
const tsharkHere = haveTshark();

/** Starts a server with `args`, waits for its "listening" line (rping -d, perf), runs the client, stops both. */
async function serve(server: string[], client: string[]): Promise<void> {
  const s = rddp(server);
  let seen = '';
  await new Promise<void>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`server did not listen: ${seen}`)), 60_000);
    const on = (d: Buffer) => {
      seen += d.toString();
      if (/listening on/.test(seen)) {
        clearTimeout(t);
        res();
      }
    };
    s.child.stdout?.on('data', on);
    s.child.stderr?.on('data', on);
    s.child.once('exit', () => rej(new Error(`server exited: ${seen}`)));
  });
  const c = await rddp(client).done;
  if (c.code !== 0) throw new Error(`client failed (${c.code}): ${c.err}`);
  if (s.child.exitCode === null) s.child.kill('SIGINT');
  await s.done;
}

/**
 * Captures `traffic` and dissects it. A capture that lost segments (dissect notes a TCP gap: the kernel
 * dropped packets for tshark) is taken again, up to three times.
 */
async function captured(
  name: string,
  filter: string,
  traffic: () => Promise<void>,
): Promise<{ file: string; report: DissectReport }> {
  for (let attempt = 1; ; attempt++) {
    const file = join(tmp.dir, `${name}-${attempt}.pcapng`);
    const cap = await startCapture(file, filter);
    try {
      await traffic();
    } finally {
      await cap.stop();
    }
    const report = await dissectFile(file);
    if (attempt === 3 || !report.findings.some((f) => f.code === 'tcp-gap')) return { file, report };
  }
}
const rejects = (r: DissectReport) =>
  r.findings.filter((f) => f.severity === 'reject').map((f) => `${f.code} ${f.clause}: ${f.message}`);

/** Dissect's FPDUs as tshark lists them: frame, ULPDU_Length, CRC field, opcode. */
function ourFpdus(r: DissectReport) {
  return r.events
    .filter((e) => e.kind === 'fpdu')
    .map((e) => {
      const d = e.detail as { rdmap?: { opcode: number } } | undefined;
      return {
        frame: e.frame,
        ulpduLength: Number(/ULPDU_Length (\d+)/.exec(e.summary)?.[1]),
        opcode: d?.rdmap?.opcode,
      };
    });
}

const rpingOps = (pings: number) => ({
  Send: pings * 4,
  'RDMA Read Request': pings,
  'RDMA Read Response': pings,
  'RDMA Write': pings,
});

describe.skipIf(!tsharkHere)('rddp dissect on captures of the project’s own tools', () => {
  it('rping over MPA with CRCs and Markers both ways: every FPDU decoded as tshark does, every CRC good', async () => {
    const port = await freePort();
    const { file, report } = await captured('rping-markers', `tcp port ${port}`, () =>
      serve(
        ['rping', '-s', '-d', '-p', String(port), '--markers'],
        ['rping', '-c', '-p', String(port), '-C', '3', '-S', '700', '--markers'],
      ),
    );
    expect(rejects(report).join('\n')).toBe('');
    expect(report.connections).toHaveLength(1);
    const c = report.connections[0];
    expect(c?.setup).toBe('MPA Rev 1/1, CRC on, Markers to responder on, to initiator on');
    expect(c?.operations).toEqual(rpingOps(3));
    expect(c?.crc).toEqual({ good: c?.segments, bad: 0, off: 0 });
    expect(report.events.some((e) => e.kind === 'fpdu' && /Markers?\)/.test(e.summary))).toBe(true);
    const theirs = await tsharkFpdus(file);
    expect(ourFpdus(report)).toEqual(
      theirs.map((t) => ({ frame: t.frame, ulpduLength: t.ulpduLength, opcode: t.opcode })),
    );
    // tshark's CRC check values are the CRC fields dissect verified.
    const crcs = report.events.filter((e) => e.kind === 'fpdu').length;
    expect(theirs.filter((t) => t.crc !== undefined)).toHaveLength(crcs);
  }, 120_000);

  it('rping over MPA without CRCs: CRC off in both directions, the same FPDUs as tshark', async () => {
    const port = await freePort();
    const { file, report } = await captured('rping-nocrc', `tcp port ${port}`, () =>
      serve(
        ['rping', '-s', '-d', '-p', String(port), '--no-crc'],
        ['rping', '-c', '-p', String(port), '-C', '2', '--no-crc'],
      ),
    );
    expect(rejects(report).join('\n')).toBe('');
    const c = report.connections[0];
    expect(c?.setup).toContain('CRC off');
    expect(c?.crc).toEqual({ good: 0, bad: 0, off: c?.segments });
    expect(c?.operations).toEqual(rpingOps(2));
    const theirs = await tsharkFpdus(file);
    expect(ourFpdus(report)).toEqual(
      theirs.map((t) => ({ frame: t.frame, ulpduLength: t.ulpduLength, opcode: t.opcode })),
    );
  }, 120_000);

  it('rping with MPA Rev 2 peer-to-peer (RFC 6581, Read RTR): IRD/ORD decoded, the zero-length Read opens the connection', async () => {
    const port = await freePort();
    const { report } = await captured('rping-p2p', `tcp port ${port}`, () =>
      serve(
        ['rping', '-s', '-d', '-p', String(port), '--mpa-rev', '2'],
        ['rping', '-c', '-p', String(port), '-C', '1', '--mpa-rev', '2', '--p2p', 'read'],
      ),
    );
    expect(rejects(report).join('\n')).toBe('');
    const req = report.events.find((e) => e.kind === 'mpa-request');
    expect(req?.summary).toMatch(/^MPA Request Rev 2 .* IRD \d+ ORD \d+ peer-to-peer RTR .*Read/);
    const first = report.events.find((e) => e.kind === 'fpdu');
    expect(first?.summary).toMatch(/RDMA Read Request of 0 octets/);
  }, 120_000);

  it('perf write_bw with Markers: 256 KiB Writes reassembled from their DDP segments, several FPDUs per TCP segment', async () => {
    const port = await freePort();
    const { report } = await captured('perf-write', `tcp port ${port}`, () =>
      serve(
        ['perf', 'write_bw', '-p', String(port), '--markers'],
        ['perf', 'write_bw', '127.0.0.1', '-p', String(port), '-s', '262144', '-n', '4', '-t', '2', '--markers'],
      ),
    );
    expect(rejects(report).join('\n')).toBe('');
    const c = report.connections[0];
    expect(c?.crc.bad).toBe(0);
    expect(c?.operations['RDMA Write']).toBeGreaterThanOrEqual(4);
    const writes = report.events.filter((e) => e.kind === 'message' && e.summary.includes('message RDMA Write'));
    expect(writes.some((e) => /262144 octets in \d+ segments/.test(e.summary))).toBe(true);
    // FPDUs that completed in the same frame as another: several per TCP segment.
    const frames = report.events.filter((e) => e.kind === 'fpdu').map((e) => e.frame);
    expect(new Set(frames).size).toBeLessThan(frames.length);
  }, 180_000);

  it('rping over SCTP (UDP-encapsulated): session control (PPID 17) and DDP segments (PPID 16) decoded', async () => {
    const port = await freePort();
    const { report } = await captured('rping-sctp', `udp port ${port}`, () =>
      serve(
        ['rping', '-s', '-d', '-p', String(port), '--transport', 'sctp'],
        ['rping', '-c', '-p', String(port), '-C', '2', '--transport', 'sctp'],
      ),
    );
    expect(rejects(report).join('\n')).toBe('');
    expect(report.connections).toHaveLength(1);
    const c = report.connections[0];
    expect(c?.transport).toBe('sctp-udp');
    expect(c?.setup).toContain('DDP adaptation on');
    expect(c?.operations).toEqual(rpingOps(2));
    const control = report.events.filter((e) => e.kind === 'session-control').map((e) => e.summary);
    expect(control[0]).toContain('Session Initiate');
    expect(control[1]).toContain('Session Accept');
  }, 120_000);

  it('the UDP LLP: REQUEST/COOKIE/ACCEPT, DATA datagrams as DDP segments with their CRC, a Terminate', async () => {
    const t = udp();
    const listener = await t.listen({ host: '127.0.0.1', port: 0 });
    const port = listener.address.port as number;
    const { report } = await captured('udp-llp', `udp port ${port}`, async () => {
      const accepted = firstValueFrom(listener.connections$);
      const a = await t.connect(listener.address, { privateData: Buffer.from('hi') });
      const b = await accepted;
      let got = 0;
      b.streams[0]?.setReceiver(() => got++);
      const s = a.streams[0];
      for (let msn = 1; msn <= 3; msn++) s?.send([untaggedSegment({ opcode: Opcode.Send, msn }, new Uint8Array(100))]);
      s?.send([
        untaggedSegment(
          { opcode: Opcode.Terminate, msn: 1 },
          encodeTerminate({ layer: 0, etype: 2, errorCode: 6, m: false, d: false, r: false }),
        ),
      ]);
      const t0 = Date.now();
      while (got < 4 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
      await a.close();
      await listener.close();
    });
    expect(rejects(report).join('\n')).toBe('');
    const c = report.connections.find((x) => x.transport === 'udp-llp');
    expect(c?.operations).toEqual({ Send: 3, Terminate: 1 });
    expect(c?.terminates.map((x) => x.name)).toContain('RDMAP: Remote Operation Error: Unexpected OpCode');
    expect(c?.crc.bad).toBe(0);
    expect(report.events.some((e) => e.kind === 'udp-llp' && e.summary.startsWith('UDP LLP REQUEST'))).toBe(true);
  }, 60_000);
  it('reads every capture `rddp conformance --pcap` writes, and flags the faults its error cases plant', async () => {
    const port = await freePort();
    const caps = join(tmp.dir, 'kit-caps');
    const server = rddp(['rping', '-s', '-P', '-d', '-p', String(port)]);
    try {
      let seen = '';
      await new Promise<void>((res, rej) => {
        const t = setTimeout(() => rej(new Error(`server did not listen: ${seen}`)), 60_000);
        const on = (d: Buffer) => {
          seen += d.toString();
          if (/listening on/.test(seen)) {
            clearTimeout(t);
            res();
          }
        };
        server.child.stdout?.on('data', on);
        server.child.stderr?.on('data', on);
      });
      const kit = await rddp([
        'conformance',
        '--target',
        `127.0.0.1:${port}`,
        '--pcap',
        caps,
        '--only',
        'liveness,mpa.private-data-513,fpdu.bad-crc,fpdu.ulpdu-length-64769,ddp.untagged.invalid-qn,rdmap.invalid-version',
      ]).done;
      expect(kit.code, kit.err).toBe(0);
    } finally {
      server.child.kill('SIGINT');
      await server.done;
    }
    const files = readdirSync(caps).filter((f) => f.endsWith('.pcap'));
    expect(files.length).toBeGreaterThanOrEqual(6);
    const flagged: Record<string, string[]> = {};
    for (const f of files) {
      const r = await dissectFile(join(caps, f));
      expect(r.connections.length, f).toBeGreaterThan(0);
      flagged[f.replace(/\.pcap$/, '')] = [
        ...new Set(r.findings.filter((x) => x.severity === 'reject').map((x) => x.code)),
      ];
    }
    expect(flagged).toMatchObject({
      'liveness.rping': [],
      'mpa.private-data-513': ['mpa-pd-length'],
      'fpdu.bad-crc': ['mpa-crc'],
      'fpdu.ulpdu-length-64769': ['mpa-ulpdu-too-long'],
      'ddp.untagged.invalid-qn': ['ddp-invalid-qn'],
      'rdmap.invalid-version': ['rdmap-version'],
    });
  }, 180_000);
});
