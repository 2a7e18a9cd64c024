/**
 * The conformance kit on its own: it imports no @rddp package (its frames come from its own codec), its
 * reports are well-formed, and every frame of an honest case decodes in tshark without malformed or
 * expert errors (the kit's own --pcap output, against a `rping -s -P` process).
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { summarize } from '../../../packages/llp-mpa-tcp/test/wire.js';
import { junitReport, markdownReport, runKit } from '../src/index.js';

const SRC = path.resolve(__dirname, '../src');
const MAIN = path.resolve(__dirname, '../../cli/dist/main.js');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('independence', () => {
  it('no file under tools/conformance/src imports an @rddp package', () => {
    const all = files(SRC);
    expect(all.length).toBeGreaterThan(10);
    const offenders = all.filter((f) =>
      /from\s+['"]@rddp\/|import\(\s*['"]@rddp\/|require\(\s*['"]@rddp\//.test(readFileSync(f, 'utf8')),
    );
    expect(offenders).toEqual([]);
    // The kit's own directory is in the scan.
    expect(all.some((f) => f.includes(`${path.sep}conformance${path.sep}cases.ts`))).toBe(true);
  });
});

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  await once(s, 'close');
  return port;
}

const tshark = spawnSync('tshark', ['--version']).status === 0;

describe('the kit against `rping -s -P`: reports and captures', () => {
  it.skipIf(!tshark)(
    'JUnit and Markdown reports; one pcap per case; honest cases decode in tshark without malformed or expert errors',
    async () => {
      const port = await freePort();
      const server = spawn(process.execPath, [MAIN, 'rping', '-s', '-P', '-p', String(port), '--markers'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      try {
        await new Promise<void>((resolve, reject) => {
          server.stderr?.on('data', (d) => String(d).includes('listening') && resolve());
          server.once('exit', (c) => reject(new Error(`rping exited ${c}`)));
        });
        const dir = mkdtempSync(path.join(os.tmpdir(), 'rddp-conf-'));
        const honest = ['mpa.startup', 'liveness.rping', 'mpa.crc', 'mpa.markers', 'mpa.private-data-512'];
        const s = await runKit({
          target: `127.0.0.1:${port}`,
          markers: true,
          only: [...honest, 'ddp.tagged.invalid-stag', 'ddp.untagged.too-long'].join(','),
          pcap: dir,
        });
        expect(s.failed).toBe(0);
        const xml = junitReport(s);
        expect(xml).toMatch(/^<\?xml version="1.0"/);
        expect(xml).toContain(`tests="${s.results.length}" failures="0"`);
        expect((xml.match(/<testcase /g) ?? []).length).toBe(s.results.length);
        expect(markdownReport(s)).toContain('| `ddp.tagged.invalid-stag` | RFC 5041 §7.2 | PASS |');
        expect(readdirSync(dir).sort()).toEqual(s.results.map((r) => `${r.name}.pcap`).sort());
        // Honest cases: every frame clean; the error cases too (their faults are DDP-level, framing is honest).
        for (const name of [...honest, 'ddp.tagged.invalid-stag', 'ddp.untagged.too-long']) {
          // One tshark run per capture (summarize: -V and the expert table), and rddp dissect on the same file.
          const w = await summarize(path.join(dir, `${name}.pcap`), {
            tsharkPartial: 'Markers towards the kit only: Wireshark 4.0 then decodes that direction alone',
          });
          expect(w.text, name).toMatch(/MPA Request Frame|Marker Protocol/);
          expect(w.malformed, name).toBe(0);
          expect(
            w.expert.filter((i) => i.severity === 'Errors' || i.severity === 'Warns'),
            name,
          ).toEqual([]);
          // Control: the expert table was read (TCP's connection notes are in every capture).
          expect(w.expert.length, name).toBeGreaterThan(0);
          // rddp dissect reads the kit's own capture and agrees with tshark FPDU for FPDU; nothing to reject.
          expect(w.dissect.rejects, name).toEqual([]);
          if (name !== 'mpa.startup') expect(w.dissect.fpdus.length, name).toBeGreaterThan(0);
          if (name.startsWith('ddp.'))
            expect(w.dissect.report.connections[0]?.terminates.map((t) => t.name)[0], name).toMatch(/^DDP: /);
        }
      } finally {
        server.kill('SIGKILL');
      }
    },
    60_000,
  );
});
