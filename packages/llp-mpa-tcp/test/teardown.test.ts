/**
 * RFC 5044 §8 teardown after a framing error in the first FPDU, played from a raw TCP peer: the peer's FIN
 * or RST arrives inside the receive-error grace (RFC 5040 §4.8 Figure 9: the ULP's Terminate, then close).
 * Each path must end the socket exactly once: no TCP handle survives the connection, closed$ fires, and it
 * reports the framing error.
 */
import type { LlpCloseEvent, LlpConnection } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FpduWriter, type MpaTcpListener, mpaTcp } from '../src/index.js';
import { mpaRequest, type RawPeer, rawConnect } from './raw.js';

const ROUNDS = 50;

function activeHandles(): number {
  return (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length;
}

/** RFC 5044 §8 code 2: an FPDU whose CRC does not match. */
function badCrcFpdu(): Buffer {
  const parts: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([new Uint8Array(30).fill(0x11)], 30, parts);
  const b = Buffer.concat(parts.map((p) => Buffer.from(p)));
  b[b.byteLength - 1] ^= 0x5a;
  return b;
}

/** RFC 5044 §3: ULPDU_Length 64769, over the 64768 limit. */
function oversizedFpdu(): Buffer {
  const b = Buffer.alloc(64);
  b.writeUInt16BE(64769, 0);
  return b;
}

type Ulp = 'terminate' | 'watch';
interface Accepted {
  conn: LlpConnection;
  receiveError: Promise<void>;
  closed: Promise<LlpCloseEvent>;
}

let listener: MpaTcpListener;
let port = 0;
let ulp: Ulp = 'terminate';
const accepted: Accepted[] = [];
const waiting: ((a: Accepted) => void)[] = [];

beforeAll(async () => {
  listener = await mpaTcp({ params: { revision: 1, crc: true } }).listen({ host: '127.0.0.1', port: 0 });
  port = listener.address.port as number;
  listener.connections$.subscribe((conn) => {
    const stream = conn.streams[0]!;
    const mode = ulp;
    const receiveError = new Promise<void>((resolve) =>
      stream.receiveError$?.subscribe(() => {
        resolve();
        if (mode === 'watch') return; // a ULP that watches and never answers: the grace timer decides
        // As RDMAP does (RFC 5040 §4.8 Figure 9, Layer LLP): a Terminate, then close; if it cannot go out, abort.
        new Promise<void>((ok, fail) => stream.send([new Uint8Array(22)], (e) => (e ? fail(e) : ok()))).then(
          () => void conn.close().catch(() => {}),
          () => conn.abort(),
        );
      }),
    );
    const a = { conn, receiveError, closed: firstValueFrom(conn.closed$) };
    const w = waiting.shift();
    if (w) w(a);
    else accepted.push(a);
  });
});

afterAll(async () => {
  await listener.close();
});

function nextAccepted(): Promise<Accepted> {
  const a = accepted.shift();
  return a ? Promise.resolve(a) : new Promise((r) => waiting.push(r));
}

async function handshake(): Promise<{ raw: RawPeer; server: Accepted }> {
  const raw = await rawConnect(port);
  raw.socket.write(mpaRequest());
  await raw.waitFor(20);
  return { raw, server: await nextAccepted() };
}

async function settle(baseline: number): Promise<number> {
  // Handles close on the next turns of the event loop; give them a moment, no more.
  for (let i = 0; i < 50 && activeHandles() > baseline; i++) await new Promise((r) => setTimeout(r, 20));
  return activeHandles();
}

const cases: [string, () => Buffer, string][] = [
  ['a bad CRC (RFC 5044 §8 code 2)', badCrcFpdu, 'ERR_LLP_DIGEST'],
  ['ULPDU_Length 64769 (RFC 5044 §3, §8 code 3)', oversizedFpdu, 'ERR_LLP_PROTOCOL'],
];

describe('RFC 5044 §8: a framing error in the first FPDU, then the peer closes inside the grace', () => {
  for (const [name, frame, code] of cases)
    for (const mode of ['terminate', 'watch'] as const)
      for (const end of ['FIN', 'RST'] as const)
        it(`${name}, ULP ${mode === 'terminate' ? 'sends a Terminate' : 'only watches'}, peer ${end}: ${ROUNDS} times, no handle left, closed$ fired${mode === 'terminate' && end === 'FIN' ? '' : ` with ${code}`}`, async () => {
          ulp = mode;
          const baseline = activeHandles();
          for (let i = 0; i < ROUNDS; i++) {
            const { raw, server } = await handshake();
            raw.socket.write(frame());
            await server.receiveError;
            if (end === 'FIN') raw.socket.end();
            else raw.socket.resetAndDestroy();
            const ev = await server.closed;
            expect(ev.graceful).toBe(false);
            // The ULP's own abort (its Terminate could not go out, §7.1.2) carries no reason of ours.
            if (mode === 'watch' || end === 'RST') expect(ev.error).toMatchObject({ code });
            await raw.closed;
          }
          // Nothing of the 50 connections is left in the event loop (the listener's own handle is in the baseline).
          expect(await settle(baseline)).toBe(baseline);
        }, 60_000);
});
