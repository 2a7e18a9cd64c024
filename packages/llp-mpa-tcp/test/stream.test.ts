/**
 * Full Operation Phase behaviour of the MPA/TCP stream: who may send first (RFC 5044 §7.1.2, RFC 6581),
 * MULPDU changes, teardown (RFC 5044 §7.2), and the DI module.
 */
import net from 'node:net';
import 'reflect-metadata';
import { LLP_LOGGER, LLP_TRANSPORT, LLP_TRANSPORT_OPTIONS, type LlpTransport } from '@rddp/llp';
import { collect } from '@rddp/llp-compliance';
import { Container } from 'inversify';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { MpaTcpTransport, mpaTcp, mpaTcpModule } from '../src/index.js';
import { pattern, tcpPair } from './helpers.js';
import { writevAvailable } from './writev.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('who sends the first FPDU', () => {
  it('RFC 5044 §7.1.2: the responder holds its FPDUs until the initiator’s first FPDU has arrived', async () => {
    const [a, b] = await tcpPair(mpaTcp(), { params: { revision: 1 } });
    const atA = collect(a.stream);
    const atB = collect(b.stream);
    expect(b.stream.send([pattern(10, 1)])).toBe(true);
    await sleep(100);
    expect(atA.ulpdus.length).toBe(0);
    expect(b.stream.fpduCounts.sent).toBe(0);
    a.stream.send([pattern(11, 2)]);
    await Promise.all([atA.wait(1), atB.wait(1)]);
    expect(atA.ulpdus[0]).toEqual(pattern(10, 1));
    await a.close();
  });

  for (const rtr of ['write', 'read', 'send'] as const)
    it(`RFC 6581: in peer-to-peer mode (${rtr} RTR) the responder may send first; the RTR reaches no ULP`, async () => {
      const [a, b] = await tcpPair(mpaTcp(), { params: { revision: 2, rtr } });
      const atA = collect(a.stream);
      const atB = collect(b.stream);
      b.stream.send([pattern(10, 1)]);
      await atA.wait(1);
      expect(atA.ulpdus).toEqual([pattern(10, 1)]);
      a.stream.send([pattern(12, 2)]);
      await atB.wait(1);
      expect(atB.ulpdus).toEqual([pattern(12, 2)]);
      expect(a.stream.fpduCounts.sent).toBe(2); // RTR + one
      expect(b.stream.fpduCounts.received).toBe(2);
      await a.close();
    });
});

describe('MULPDU (RFC 5044 §4.5)', () => {
  it('RFC 5044 §4.5: loopback EMSS gives the §3 maximum; setEmss() recomputes it and mulpdu$ emits', async () => {
    const [a, b] = await tcpPair(mpaTcp(), { params: { markers: true } });
    const seen: number[] = [];
    b.stream.mulpdu$.subscribe((m) => seen.push(m));
    expect(a.stream.mulpdu).toBe(64768);
    b.setEmss(1460); // b sends with Markers (a asked): 1460 - (6 + 12 + 0)
    a.setEmss(1460); // a sends without: 1460 - 6
    expect(seen).toEqual([64768, 1442]);
    expect(a.stream.mulpdu).toBe(1454);
    expect(() => b.stream.send([new Uint8Array(1443)])).toThrow(/MULPDU/);
    a.abort();
  });

  it('a fixed MULPDU option wins over the EMSS policy', async () => {
    const [a, b] = await tcpPair(mpaTcp({ mulpdu: 4096 }));
    expect(a.stream.mulpdu).toBe(4096);
    a.setEmss(1460);
    expect(a.stream.mulpdu).toBe(4096);
    a.abort();
    b.abort();
  });

  it('caller errors are typed: a MULPDU outside [128, 64768] is refused', () => {
    expect(() => mpaTcp({ mulpdu: 70000 })).toThrow(expect.objectContaining({ code: 'ERR_LLP_INVALID_ARGUMENT' }));
  });
});

describe('teardown (RFC 5044 §7.2)', () => {
  it('RFC 5044 §7.2: a FIN arriving while the reader is paused is acted on only after everything before it was delivered', async () => {
    const [a, b] = await tcpPair();
    const got = collect(b.stream);
    a.stream.send([pattern(5, 0)]); // the initiator's first FPDU
    await got.wait(1);
    b.stream.pause();
    for (let i = 1; i <= 10; i++) a.stream.send([pattern(1000 + i, i)]);
    const aClosed = a.close();
    await sleep(100);
    expect(b.state).toBe('open');
    b.stream.resume();
    await aClosed;
    const e = await firstValueFrom(b.closed$);
    expect(e).toMatchObject({ graceful: true, initiator: 'remote' });
    expect(got.ulpdus.length).toBe(11);
  });

  it('RFC 5041 §6.2: the responder may close first; both sides see a graceful close', async () => {
    const [a, b] = await tcpPair();
    collect(a.stream);
    await b.close();
    expect(await firstValueFrom(a.closed$)).toMatchObject({ graceful: true, initiator: 'remote' });
    expect(await firstValueFrom(b.closed$)).toMatchObject({ graceful: true, initiator: 'local' });
  });

  it('a peer that never answers our FIN is reset after closeTimeoutMs (LlpTimeoutError)', async () => {
    const t = mpaTcp({ closeTimeoutMs: 200 });
    // A raw responder: answers the Request, then ignores everything (no FIN back).
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      s.once('data', () => {
        const rep = Buffer.alloc(20);
        rep.write('MPA ID Rep Frame');
        rep[17] = 1;
        s.write(rep);
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const a = await t.connect({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port });
    await expect(a.close()).rejects.toMatchObject({ code: 'ERR_LLP_TIMEOUT' });
    expect(await firstValueFrom(a.closed$)).toMatchObject({ graceful: false, initiator: 'local' });
    server.close();
  });

  it('close(signal): an aborted wait rejects with LlpAbortError; the close itself goes on', async () => {
    const [a, b] = await tcpPair();
    collect(b.stream);
    const ac = new AbortController();
    ac.abort();
    await expect(a.close(ac.signal)).rejects.toMatchObject({ code: 'ERR_LLP_ABORTED' });
    expect(await firstValueFrom(a.closed$)).toMatchObject({ graceful: true });
  });
});

describe('inversify module', () => {
  it('mpaTcpModule() binds an MPA/TCP transport under LLP_TRANSPORT, with bound options and logger', async () => {
    const events: string[] = [];
    const c = new Container();
    c.bind(LLP_TRANSPORT_OPTIONS).toConstantValue({ mulpdu: 2048 });
    c.bind(LLP_LOGGER).toConstantValue({ debug: (e: string) => events.push(e) });
    await c.load(mpaTcpModule({ handshakeTimeoutMs: 5000 }));
    const t = c.get<LlpTransport>(LLP_TRANSPORT);
    expect(t).toBeInstanceOf(MpaTcpTransport);
    expect(t.name).toBe('mpa-tcp');
    expect(t).toBe(c.get(LLP_TRANSPORT));
    const [a, b] = await tcpPair(t as MpaTcpTransport);
    expect(a.stream.mulpdu).toBe(2048);
    expect(events).toContain('mpa.established');
    a.abort();
    b.abort();
  });
});

describe.each([
  ['straight to the descriptor', true],
  ["through Node's socket", false],
] as const)('transmit timing, %s', (_path, directSend) => {
  it('the first FPDU of a turn on an idle socket is written at once after a turn of one FPDU; after a turn of several, the whole turn goes as one batch at its end', async () => {
    // Without @rddp/writev (tx-direct.test.ts says so) directSend: true is refused (ERR_MPA_DIRECT_SEND_UNAVAILABLE).
    if (directSend && !writevAvailable) return;
    const [a, b] = await tcpPair(mpaTcp({ directSend }));
    expect(a.stream.sendsDirect).toBe(directSend);
    const atB = collect(b.stream);
    const sock = a.stream;
    const before = sock.bytesWritten;
    a.stream.send([pattern(100, 1)]);
    // 2 (ULPDU_LENGTH) + 100 + 2 (pad) + 4 (CRC): RFC 5044 §4.1
    expect(sock.bytesWritten - before).toBe(108);
    expect(sock.queuedOctets).toBe(0);
    a.stream.send([pattern(100, 2)]);
    a.stream.send([pattern(100, 3)]);
    expect(sock.bytesWritten - before, 'later FPDUs of the turn wait for its end').toBe(108);
    await new Promise((r) => setImmediate(r));
    expect(sock.bytesWritten - before).toBe(3 * 108);
    // The last turn framed three: this turn's FPDUs all wait for its end.
    a.stream.send([pattern(100, 4)]);
    expect(sock.bytesWritten - before, 'after a turn of several FPDUs').toBe(3 * 108);
    await new Promise((r) => setImmediate(r));
    expect(sock.bytesWritten - before).toBe(4 * 108);
    // The last turn framed one: at once again.
    a.stream.send([pattern(100, 5)]);
    expect(sock.bytesWritten - before, 'after a turn of one FPDU').toBe(5 * 108);
    await atB.wait(5);
    expect(atB.ulpdus).toEqual([1, 2, 3, 4, 5].map((k) => pattern(100, k)));
    await a.close();
  });
});

describe('a peer that resets while sends wait', () => {
  it("every send's done is called — written ones without error, the rest with one — on either send path", async () => {
    for (const directSend of writevAvailable ? [true, false] : [false]) {
      const [a, b] = await tcpPair(mpaTcp({ directSend }));
      b.stream.pause(); // the peer stops reading: the kernel's buffers fill, the rest waits in user space
      const outcomes: (Error | undefined)[] = [];
      const chunk = pattern(60 * 1024, 1);
      const n = 220; // 13 MiB: more than loopback's socket buffers and the high-water mark together
      for (let i = 0; i < n; i++) a.stream.send([chunk], (err) => outcomes.push(err));
      await new Promise((r) => setTimeout(r, 100));
      expect(outcomes.length, `directSend ${directSend}: some wait`).toBeLessThan(n);
      const closed = firstValueFrom(a.stream.closed$);
      b.abort(); // RST
      await closed;
      await new Promise((r) => setTimeout(r, 50));
      expect(outcomes.length, `directSend ${directSend}: every done called`).toBe(n);
      expect(outcomes.some((e) => e !== undefined)).toBe(true);
      // In order: once one failed, none after it succeeded.
      const firstFailed = outcomes.findIndex((e) => e !== undefined);
      expect(outcomes.slice(firstFailed).every((e) => e !== undefined)).toBe(true);
    }
  });
});

describe('send backpressure', () => {
  it("send() returns false once highWaterMark octets are queued: 4 MiB by default, 1 MiB when sending Markers gathered through Node's socket, or as configured", async () => {
    // Queued octets are wire octets, Markers included: 4 MiB of them is reached one 32 KiB send early.
    const markedDefault = (4 << 20) - 32 * 1024;
    for (const [transport, markers, hwm] of [
      [mpaTcp(), false, 4 << 20],
      [mpaTcp(), true, writevAvailable ? markedDefault : 1 << 20],
      [mpaTcp({ directSend: false }), true, 1 << 20],
      [mpaTcp({ markerFraming: 'copy' }), true, markedDefault],
      [mpaTcp({ highWaterMark: 1 << 20 }), false, 1 << 20],
      [mpaTcp({ highWaterMark: 2 << 20 }), true, 2 << 20],
    ] as const) {
      const [a, b] = await tcpPair(transport, { params: { revision: 1, markers } }, { params: { markers } });
      expect(a.stream.negotiated.markersTx).toBe(markers);
      const atB = collect(b.stream);
      b.stream.pause();
      const chunk = pattern(32 * 1024, 3);
      let sent = 0;
      // One synchronous run: the first FPDU goes to the idle socket at once, the rest wait for the turn's
      // end, so the queued count is exact from the second send on.
      while (a.stream.send([chunk])) sent += chunk.length;
      sent += chunk.length;
      expect(sent, `hwm ${hwm}`).toBe(hwm + chunk.length);
      b.stream.resume();
      await atB.wait(sent / chunk.length);
      await a.close();
    }
  });
});
