/**
 * Graded verdicts (issue 35) against fake targets built from the kit's own session: each answers one way
 * the RFCs allow (or one way a broken target does), and the kit grades it PASS / FAIL / INFO / SKIP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FrameOverrides, KitSession, RxMessage } from '../src/conformance/session.js';
import { encodeTerminate, Opcode } from '../src/index.js';
import {
  fakeTarget as fake,
  type Handler,
  honest,
  kit,
  terminateFor as terminateOnly,
  verdict,
} from './fake-target.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function fakeTarget(handle: Handler, reply: FrameOverrides = {}, mpaRev: 0 | 1 | 2 = 2): Promise<number> {
  const t = await fake(handle, { reply, mpaRev });
  stop = () => t.close();
  return t.port;
}

/** The Terminate for `m`, then the end of the connection. */
function terminateFor(s: KitSession, m: RxMessage, layer: number, etype: number, errorCode: number): void {
  terminateOnly(s, m, layer, etype, errorCode);
  s.conn.end();
}

describe('graded verdicts against fake targets', () => {
  it('mpa.startup: a Reply with C clear to a Request with C set PASSes (CRCs still both ways)', async () => {
    const port = await fakeTarget(honest, { crc: false });
    const s = await kit(port, 'mpa.startup,mpa.crc');
    expect(verdict(s, 'mpa.startup')?.verdict).toBe('PASS');
    expect(verdict(s, 'mpa.startup')?.evidence).toContain('C clear in the Reply: allowed');
    expect(verdict(s, 'mpa.crc')?.verdict).toBe('PASS');
    expect(s.failed).toBe(0);
    expect(verdict(s, 'mpa.startup')?.strength).toBe('MUST');
    expect(verdict(s, 'mpa.startup')?.quote).toMatch(/^RFC 5044 §7\.1\.2: ".*MPA ID Rep Frame/);
  }, 20_000);

  it('version and opcode errors: a Terminate without copied headers PASSes (RFC 5040 Figure 10: "Yes, if possible"; Linux siw copies none)', async () => {
    const port = await fakeTarget(async (s, n) => {
      if (n > 0) return honest(s, n);
      await s.next();
      const t = encodeTerminate({ layer: 1, etype: 2, errorCode: 0x06, m: false, d: false, r: false });
      s.sendUlpdu(s.untagged(Opcode.Terminate, 2, t));
      s.conn.end();
    });
    const s = await kit(port, 'ddp.untagged.invalid-version');
    const r = verdict(s, 'ddp.untagged.invalid-version');
    expect(r?.verdict, r?.evidence).toBe('PASS');
  }, 20_000);

  it('ddp.untagged.msn-no-buffer: Invalid MSN 0x03 (as Linux siw answers) PASSes', async () => {
    const port = await fakeTarget(async (s, n) => {
      if (n > 0) return honest(s, n);
      terminateFor(s, await s.next(), 1, 2, 0x03);
    });
    const s = await kit(port, 'ddp.untagged.msn-no-buffer');
    expect(verdict(s, 'ddp.untagged.msn-no-buffer')?.verdict, verdict(s, 'ddp.untagged.msn-no-buffer')?.evidence).toBe(
      'PASS',
    );
  }, 20_000);

  it('fpdu.ulpdu-length-64769: a DDP 0x05 answer is INFO, not a FAIL; exit status from FAILs only', async () => {
    const port = await fakeTarget(async (s, n) => {
      if (n > 0) return honest(s, n);
      terminateFor(s, await s.next(), 1, 2, 0x05);
    });
    const s = await kit(port, 'fpdu.ulpdu-length-64769');
    const r = verdict(s, 'fpdu.ulpdu-length-64769');
    expect(r?.verdict, r?.evidence).toBe('INFO');
    expect(r?.strength).toBe('MAY');
    expect(s.failed).toBe(0);
    expect(s.informational).toBe(1);
  }, 20_000);

  it('fpdu.bad-crc: a target that ignores CRCs and acts on the message FAILs; one that closes PASSes', async () => {
    // Ignores the CRC: takes the source advertisement and Reads it.
    const careless = await fakeTarget(async (s) => {
      const m = await s.next();
      if (m.opcode === Opcode.Send)
        s.readRequest({ sinkStag: 0x99, sinkTo: 0n, size: 64, srcStag: 0x1a00, srcTo: 0x7f00_0000_0000n });
      await new Promise((r) => setTimeout(r, 1500));
    });
    const a = await kit(careless, 'fpdu.bad-crc');
    expect(verdict(a, 'fpdu.bad-crc')?.verdict).toBe('FAIL');
    expect(verdict(a, 'fpdu.bad-crc')?.evidence).toContain('acted on it');
    await stop?.();
    // Checks the CRC: the first FPDU it reads is refused with a close.
    const careful = await fakeTarget(async (s, n) => {
      if (n > 0) return honest(s, n);
      const m = await s.next();
      expect(m.fpdu.violations.some((v) => v.severity === 'reject')).toBe(true);
    });
    const b = await kit(careful, 'fpdu.bad-crc');
    expect(verdict(b, 'fpdu.bad-crc')?.verdict, verdict(b, 'fpdu.bad-crc')?.evidence).toBe('PASS');
  }, 30_000);

  it('fpdu.bad-marker: a target that did not ask for Markers is a SKIP saying why', async () => {
    const port = await fakeTarget(honest, { markers: false }, 1);
    const s = await kit(port, 'fpdu.bad-marker', { mpaRev: '1', markers: true });
    const r = verdict(s, 'fpdu.bad-marker');
    expect(r?.verdict).toBe('SKIP');
    expect(r?.evidence).toContain('Markers are not in use both ways');
  }, 20_000);

  it('Rev 2 cases against a target answering Rev 1 are SKIPs', async () => {
    const port = await fakeTarget(honest, {}, 1);
    const s = await kit(port, 'mpa.rev2', { mpaRev: '2' });
    expect(s.failed).toBe(0);
    for (const r of s.results) {
      expect(r.verdict, r.name).toBe('SKIP');
      expect(r.evidence, r.name).toContain('Rev 1');
    }
  }, 20_000);

  it('ddp.untagged.too-long: a target whose receive buffer holds the Send and goes on is a SKIP', async () => {
    const port = await fakeTarget(async (s) => {
      await s.next();
      s.send(new Uint8Array(16));
      await new Promise((r) => setTimeout(r, 1500));
    });
    const s = await kit(port, 'ddp.untagged.too-long');
    expect(verdict(s, 'ddp.untagged.too-long')?.verdict).toBe('SKIP');
  }, 20_000);

  it('mpa.responder-waits: a Responder that sends an FPDU first FAILs', async () => {
    const port = await fakeTarget(async (s) => {
      s.send(new Uint8Array(16));
      await new Promise((r) => setTimeout(r, 1500));
    });
    const s = await kit(port, 'mpa.responder-waits');
    expect(verdict(s, 'mpa.responder-waits')?.verdict).toBe('FAIL');
    expect(s.failed).toBe(1);
  }, 20_000);

  it('Rev 0 mode against a target answering Rev 1: the startup case blames the Reply, the Rev 0 error cases SKIP', async () => {
    const port = await fakeTarget(honest, { rev: 1 }, 1);
    const s = await kit(
      port,
      'mpa.rev0.startup,mpa.rev0.crc-markers,ddp.rev0.untagged-version-1,rdmap.rev0.version-1',
      {
        mpaRev: '0',
      },
    );
    const st = verdict(s, 'mpa.rev0.startup');
    expect(st?.verdict).toBe('FAIL');
    expect(st?.evidence).toContain("answered the kit's Rev 0 Request with a Rev 1 Reply");
    for (const n of ['mpa.rev0.crc-markers', 'ddp.rev0.untagged-version-1', 'rdmap.rev0.version-1']) {
      expect(verdict(s, n)?.verdict, n).toBe('SKIP');
      expect(verdict(s, n)?.evidence, n).toContain('answered Rev 1 to a Rev 0 Request');
    }
  }, 30_000);
});
