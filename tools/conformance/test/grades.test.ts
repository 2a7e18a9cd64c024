/**
 * Graded verdicts (issue 35) against fake targets built from the kit's own session: each answers one way
 * the RFCs allow (or one way a broken target does), and the kit grades it PASS / FAIL / INFO / SKIP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WireListener } from '../src/conformance/conn.js';
import { RxCheck, rpingServer } from '../src/conformance/rping.js';
import { type FrameOverrides, KitSession, type RxMessage } from '../src/conformance/session.js';
import { encodeTerminate, Opcode, type RunSummary, runKit } from '../src/index.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** `n`: the connection's number (0 the case's own; the liveness check's come after). */
type Handler = (s: KitSession, n: number) => Promise<void>;

/** A fake rping target: answers each MPA Request (with `reply` overrides), then runs `handle`. */
async function fakeTarget(handle: Handler, reply: FrameOverrides = {}, mpaRev: 0 | 1 | 2 = 2): Promise<number> {
  const l = await WireListener.listen(0);
  let open = true;
  let count = 0;
  stop = async () => {
    open = false;
    await l.close();
  };
  void (async () => {
    while (open) {
      const conn = await l.accept(60_000).catch(() => undefined);
      if (!conn) continue;
      const n = count++;
      void (async () => {
        try {
          const s = await KitSession.accept(conn, { mpaRev, crc: true, markers: false }, 2000, { reply });
          await handle(s, n);
        } catch {
          // a case's fault may end the connection any way
        }
        conn.destroy();
      })();
    }
  })();
  return l.port;
}

/** Serves honest pings until the client ends the connection. */
const honest: Handler = async (s) => {
  const rx = new RxCheck(s);
  for (;;) await rpingServer(s, rx);
};

/** A Terminate copying the DDP header (and length) of the segment `m` (RFC 5040 §7.1 rule 2). */
function terminateFor(s: KitSession, m: RxMessage, layer: number, etype: number, errorCode: number): void {
  const hdr = m.fpdu.ulpdu.subarray(0, m.ddp?.tagged ? 14 : 18);
  const t = encodeTerminate({
    layer,
    etype,
    errorCode,
    m: true,
    d: true,
    r: false,
    ddpSegmentLength: m.fpdu.ulpdu.byteLength,
    ddpHeader: hdr,
  });
  s.sendUlpdu(s.untagged(Opcode.Terminate, 2, t));
  s.conn.end();
}

async function kit(port: number, only: string, o: { mpaRev?: string; markers?: boolean } = {}): Promise<RunSummary> {
  return runKit({ target: `127.0.0.1:${port}`, only, wait: '800', caseTimeout: '8000', ...o });
}
const verdict = (s: RunSummary, n: string) => s.results.find((r) => r.name === n);

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
});
