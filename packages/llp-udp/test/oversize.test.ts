/**
 * DATA above the datagram size agreed at setup, played from outside with raw `dgram` sockets speaking the
 * wire format by hand (as test/hostile.test.ts): the ULPDU is longer than the MULPDU, so it is neither held
 * nor handed up — dropped and counted (`stream.stats.oversizeDrops`), no ABORT, the connection stays up
 * (docs/UDP-LLP.md "Data"), as other DATA that breaks what was agreed is. A DATA of exactly the MULPDU is
 * delivered. Checked on both ends: a listener's connection (raw initiator) and an initiator's (raw responder).
 */
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  CRC_LENGTH,
  DatagramType,
  decodeSetupBody,
  encodeSetupBody,
  HEADER_LENGTH,
  mulpduFor,
  type UdpConnection,
  type UdpListener,
  type UdpStream,
  udp,
} from '../src/index.js';
import { collect, fast, hex, outsideTests, pattern, until } from './helpers.js';

const { open, listeners, raw } = outsideTests();

const RAW_ID = 0x5150_0001;

/**
 * A listener of `datagramSize` 1400 (and `crc`), and a raw initiator that completes the handshake asking
 * for `asked` octets: the connection agrees on the smaller, the raw initiator's.
 */
async function rawInitiator(asked: number, crc: boolean) {
  const t = udp({ ...fast, crc });
  const l = (await t.listen({ host: '127.0.0.1', port: 0 })) as UdpListener;
  listeners.push(l);
  const accepted = firstValueFrom(l.connections$);
  const port = l.address.port as number;
  const r = await raw();
  const setup = encodeSetupBody({ streams: 1, datagramSize: asked, window: 64, crc, privateData: new Uint8Array(0) });
  const acc = await r.handshake(port, RAW_ID, setup);
  expect(acc.header.type).toBe(DatagramType.Accept);
  expect(decodeSetupBody(acc.body)).toMatchObject({ datagramSize: asked, crc });
  const conn = (await accepted) as UdpConnection;
  open.push(conn);
  const send = (seq: number, body: Uint8Array) =>
    r.send({ type: DatagramType.Data, crc, streamId: 0, dst: acc.header.src, src: RAW_ID, seq }, [body], port);
  return { r, conn, stream: conn.streams[0] as UdpStream, send };
}

describe('UDP LLP: DATA above the agreed datagram size (docs/UDP-LLP.md "Data")', () => {
  for (const crc of [true, false]) {
    it(`a listener's connection drops and counts a ULPDU over the MULPDU, no ABORT, and delivers one of exactly the MULPDU (CRC32c ${crc ? 'in use' : 'off'})`, async () => {
      const asked = 200; // below the listener's 1400: the agreed size is the raw initiator's
      const { r, conn, stream, send } = await rawInitiator(asked, crc);
      const mulpdu = mulpduFor(asked, crc);
      expect(mulpdu).toBe(asked - HEADER_LENGTH - (crc ? CRC_LENGTH : 0));
      expect(stream.mulpdu).toBe(mulpdu);
      const got = collect(stream);

      await send(1, pattern(mulpdu, 1)); // exactly the MULPDU: a datagram of the agreed size
      await send(2, pattern(mulpdu + 1, 2)); // one octet over
      await send(3, pattern(1400 - HEADER_LENGTH - CRC_LENGTH, 3)); // what the listener's own option would allow
      await send(4, pattern(60_000, 4)); // far over
      await send(5, pattern(7, 5)); // the connection still carries DATA
      await until(() => got.length === 2 && stream.stats.oversizeDrops === 3);

      expect(got.map(hex)).toEqual([hex(pattern(mulpdu, 1)), hex(pattern(7, 5))]);
      expect(got.every((u) => u.byteLength <= mulpdu)).toBe(true);
      expect(stream.stats).toMatchObject({ ulpdusReceived: 2, oversizeDrops: 3, holdOverflows: 0, budgetDrops: 0 });
      // The answer is a drop, not an ABORT or a teardown: nothing came back but window updates.
      await new Promise((res) => setTimeout(res, 50));
      expect(r.drain(DatagramType.Abort)).toEqual([]);
      expect(stream.state).toBe('open');
      expect(conn.stats).toMatchObject({ wrongSource: 0, missingCrc: 0, badStream: 0 });
    });
  }

  it('a paused reader does not hold an oversize DATA (nor charge it to the memory budget), and never hands it up', async () => {
    const { conn, stream, send } = await rawInitiator(300, true);
    const mulpdu = stream.mulpdu;
    const got = collect(stream);
    stream.pause();
    const base = conn.stats.reservedOctets;
    await send(1, pattern(mulpdu, 1));
    await send(2, pattern(mulpdu + 1, 2));
    await send(3, pattern(mulpdu, 3));
    await until(
      () =>
        stream.stats.oversizeDrops === 1 &&
        conn.stats.reservedOctets === base + 2 * (HEADER_LENGTH + mulpdu + CRC_LENGTH),
    );
    expect(got).toHaveLength(0);
    stream.resume();
    expect(got.map(hex)).toEqual([hex(pattern(mulpdu, 1)), hex(pattern(mulpdu, 3))]);
    expect(conn.stats.reservedOctets).toBe(base);
  });

  it("an initiator's connection drops and counts a ULPDU over the MULPDU the responder's ACCEPT agreed to, and delivers one of exactly it", async () => {
    // A raw responder: COOKIE for the REQUEST, ACCEPT for the COOKIE_ECHO with a datagram size below the initiator's.
    const r = await raw();
    const agreed = 128;
    const connecting = udp({ ...fast, datagramSize: 1400 }).connect({ host: '127.0.0.1', port: r.port });
    const req = await r.next(DatagramType.Request);
    const initiatorId = req.d.header.src;
    const initiatorPort = req.from.port;
    await r.send(
      { type: DatagramType.Cookie, crc: true, streamId: 0, dst: initiatorId, src: 0, seq: 0 },
      [pattern(16, 9)],
      initiatorPort,
    );
    await r.next(DatagramType.CookieEcho);
    await r.send(
      { type: DatagramType.Accept, crc: true, streamId: 0, dst: initiatorId, src: RAW_ID, seq: 0 },
      [encodeSetupBody({ streams: 1, datagramSize: agreed, window: 64, crc: true, privateData: new Uint8Array(0) })],
      initiatorPort,
    );
    const conn = (await connecting) as UdpConnection;
    open.push(conn);
    expect(conn.setup.negotiated).toMatchObject({ datagramSize: agreed, crc: true });
    const stream = conn.streams[0] as UdpStream;
    const mulpdu = agreed - HEADER_LENGTH - CRC_LENGTH;
    expect(stream.mulpdu).toBe(mulpdu);
    const got = collect(stream);
    const send = (seq: number, body: Uint8Array) =>
      r.send(
        { type: DatagramType.Data, crc: true, streamId: 0, dst: initiatorId, src: RAW_ID, seq },
        [body],
        initiatorPort,
      );

    await send(1, pattern(mulpdu + 1, 1));
    await send(2, pattern(mulpdu, 2));
    await send(3, pattern(4000, 3));
    await send(4, pattern(mulpdu, 4));
    await until(() => got.length === 2 && stream.stats.oversizeDrops === 2);
    expect(got.map(hex)).toEqual([hex(pattern(mulpdu, 2)), hex(pattern(mulpdu, 4))]);
    await new Promise((res) => setTimeout(res, 50));
    expect(r.drain(DatagramType.Abort)).toEqual([]);
    expect(stream.state).toBe('open');
  });
});
