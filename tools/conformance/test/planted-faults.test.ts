/**
 * Faults planted one at a time in an otherwise working rping target (issue 35): the kit must catch each
 * with a FAIL of the case whose clause the fault breaks, saying what happened — and must not blame a fault
 * on a clause it does not break (a wrong pad is RFC 5044 §4.1, a byte-swapped Read Request byte order).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WireListener } from '../src/conformance/conn.js';
import { decodeInfo, RxCheck } from '../src/conformance/rping.js';
import { encodeMpaReply, encodeReadRequest, Opcode, padLength, type RunSummary } from '../src/index.js';
import { type FakeTarget, fakeTarget, type Handler, honest, kit, lax, terminateFor, verdict } from './fake-target.js';

let target: FakeTarget | undefined;
afterEach(async () => {
  await target?.close();
  target = undefined;
});

async function run(handle: Handler, only: string, o: { markers?: boolean } = {}): Promise<RunSummary> {
  target = await fakeTarget(handle, o.markers ? { mpaRev: 1, markers: true } : {});
  return kit(target.port, only, o.markers ? { mpaRev: '1', markers: true } : {});
}

/** The case `name` FAILed, with evidence matching `why`. */
function caught(s: RunSummary, name: string, why: RegExp): void {
  const r = verdict(s, name);
  expect(r?.verdict, `${name}: ${r?.evidence}`).toBe('FAIL');
  expect(r?.strength).toBe('MUST');
  expect(r?.evidence).toMatch(why);
}

/** After the case's own connection: honest pings (the kit's liveness check after an error case). */
const then =
  (first: Handler): Handler =>
  (s, n) =>
    n === 0 ? first(s, n) : honest(s, n);

const swap32 = (n: number) => Buffer.from(Uint32Array.of(n).buffer).readUInt32BE(0);
const swap64 = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n);
  return b.readBigUInt64BE(0);
};

describe('planted faults, one at a time: each caught with the right clause', () => {
  it('CRC unchecked: the bad-CRC source advertisement is acted upon (RFC 5044 §4.4)', async () => {
    const s = await run(lax, 'fpdu.bad-crc');
    caught(s, 'fpdu.bad-crc', /acted on it .*CRC was not checked/);
    expect(verdict(s, 'fpdu.bad-crc')?.clause).toBe('RFC 5044 §4.4');
  }, 30_000);

  it('Markers unchecked: the advertisement with a Marker 4 octets off is acted upon (RFC 5044 §4.3)', async () => {
    const s = await run(lax, 'fpdu.bad-marker', { markers: true });
    caught(s, 'fpdu.bad-marker', /acted on it .*Markers were not checked/);
  }, 30_000);

  it('versions unchecked: a Send of DDP Version 2 / RDMAP Version 2 is taken as the advertisement', async () => {
    const s = await run(lax, 'ddp.untagged.invalid-version,rdmap.invalid-version');
    caught(s, 'ddp.untagged.invalid-version', /acted on the faulty message: .*Read Request/);
    caught(s, 'rdmap.invalid-version', /acted on the faulty message/);
  }, 30_000);

  it('queues, MSNs, MOs and opcodes unchecked: each faulty Send is acted upon', async () => {
    const names = [
      'ddp.untagged.invalid-qn',
      'ddp.untagged.msn-no-buffer',
      'ddp.untagged.msn-range',
      'ddp.untagged.invalid-mo',
      'rdmap.opcode-reserved',
    ];
    const s = await run(lax, names.join(','));
    for (const n of names) caught(s, n, /acted on the faulty message/);
  }, 60_000);

  it('STags and bounds unchecked: the Write to an unknown STag and the Read Response past its sink draw no Terminate', async () => {
    const s = await run(lax, 'ddp.tagged.invalid-stag,ddp.tagged.base-bounds,ddp.tagged.to-wrap');
    for (const n of ['ddp.tagged.invalid-stag', 'ddp.tagged.base-bounds', 'ddp.tagged.to-wrap'])
      caught(s, n, /no Terminate/);
  }, 60_000);

  it('wrong codes: a Terminate naming another error FAILs with what it said and what was due', async () => {
    const s = await run(
      then(async (s) => {
        const m = await s.next();
        terminateFor(s, m, 2, 2, 0xff);
        s.conn.end();
      }),
      'ddp.untagged.invalid-qn',
    );
    caught(s, 'ddp.untagged.invalid-qn', /Terminate says .*code 0xff.*due: .*Invalid QN/);
  }, 30_000);

  it('no Terminate: a target that only closes FAILs (RFC 5040 §7.1: it MUST send one)', async () => {
    const s = await run(
      then(async (s) => {
        await s.next();
        s.conn.end();
      }),
      'ddp.untagged.invalid-qn',
    );
    caught(s, 'ddp.untagged.invalid-qn', /no Terminate: the target closed/);
  }, 30_000);

  it('a Terminate and no close FAILs (RFC 5040 §6.2.1)', async () => {
    const s = await run(
      then(async (s) => {
        terminateFor(s, await s.next(), 1, 2, 0x01);
        await new Promise((r) => setTimeout(r, 3000));
      }),
      'ddp.untagged.invalid-qn',
    );
    caught(s, 'ddp.untagged.invalid-qn', /connection stays open/);
  }, 30_000);

  it('key unchecked: a Request with the Reply key is answered with a Reply (RFC 5044 §7.1.2)', async () => {
    const l = await WireListener.listen(0);
    let open = true;
    target = {
      port: l.port,
      close: async () => {
        open = false;
        await l.close();
      },
    };
    void (async () => {
      while (open) {
        const c = await l.accept(60_000).catch(() => undefined);
        if (!c) continue;
        // Takes any 20-octet header as a Request, whatever its key.
        void c
          .read(20, 5000, 'a Request')
          .then((h) => c.read(h.readUInt16BE(18), 5000, 'private data'))
          .then(() => c.write(encodeMpaReply({ markers: false, crc: true, rev: 1 })))
          .catch(() => c.destroy());
      }
    })();
    const s = await kit(l.port, 'mpa.bad-key');
    caught(s, 'mpa.bad-key', /a Reply key in a Request: the target accepted it \(MPA Reply, R clear\)/);
  }, 30_000);

  it('a wrong pad length is RFC 5044 §4.1 — not a CRC error, a zero-length ULPDU or an ordering timeout', async () => {
    // Pads the ULPDU alone to 4 octets, forgetting the 2-octet ULPDU_Length field.
    const badPad: Handler = async (s) => {
      const send = s.sendUlpdu.bind(s);
      s.sendUlpdu = (u, f = {}) => {
        const wrong = (4 - (u.byteLength % 4)) % 4;
        return send(u, { ...f, ...(wrong === padLength(u.byteLength) ? {} : { padOverride: wrong }) });
      };
      await honest(s, 0);
    };
    const s = await run(badPad, 'liveness.rping,mpa.crc');
    for (const n of ['liveness.rping', 'mpa.crc']) {
      caught(s, n, /RFC 5044 §4\.1: \d pad octet\(s\) after a \d+-octet ULPDU/);
      expect(verdict(s, n)?.evidence).not.toMatch(/§4\.4|RFC 5041 §4:|§5\.5|timed out|within/);
    }
  }, 30_000);

  it('a Read Request in host byte order is named a byte-order fault, not three wrong values', async () => {
    const swapped: Handler = async (s) => {
      const rx = new RxCheck(s);
      const adv = await rx.expect(Opcode.Send, 'the advertisement');
      const src = decodeInfo(adv.payload);
      if (!src) return;
      const rr = encodeReadRequest({
        sinkStag: swap32(0x4400),
        sinkTo: 0n,
        size: swap32(src.size),
        srcStag: swap32(src.rkey),
        srcTo: swap64(src.addr),
      });
      s.sendUlpdu(s.untagged(Opcode.RdmaReadRequest, 1, rr));
      await s.nextOrEnd();
    };
    const s = await run(swapped, 'liveness.rping');
    caught(
      s,
      'liveness.rping',
      /RFC 5040 §4\.4 .*Data Source STag, Data Source Tagged Offset, RDMA Read Message Size are in little-endian/,
    );
  }, 30_000);

  it('controls: the honest fake passes every case these faults break', async () => {
    const s = await run(
      honest,
      'liveness.rping,mpa.crc,fpdu.bad-crc,ddp.untagged.invalid-version,rdmap.invalid-version,ddp.tagged.invalid-stag',
    );
    // The honest fake checks versions, CRCs and STags but sends no Terminate: those error cases end in a
    // reset and FAIL for want of one — never with the attribution the planted faults earn.
    expect(verdict(s, 'liveness.rping')?.verdict).toBe('PASS');
    expect(verdict(s, 'mpa.crc')?.verdict).toBe('PASS');
    for (const r of s.results) expect(r.evidence).not.toMatch(/acted on|pad octet|byte order/);
    expect(verdict(s, 'fpdu.bad-crc')?.verdict).toBe('PASS');
  }, 60_000);
});
