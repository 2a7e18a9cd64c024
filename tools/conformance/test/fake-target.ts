/**
 * Fake rping targets for the kit's own tests, built from the kit's session: each answers one way the RFCs
 * allow, or with one fault planted (a broken implementation the kit must catch with the right clause).
 */
import { WireListener } from '../src/conformance/conn.js';
import { decodeInfo, RPING_INFO_LENGTH, RxCheck, rpingServer } from '../src/conformance/rping.js';
import { type FrameOverrides, KitSession, type RxMessage, terminateOf } from '../src/conformance/session.js';
import { encodeTerminate, Opcode, type RunSummary, runKit } from '../src/index.js';

/** `n`: the connection's number (0 the case's own; the liveness check's come after). */
export type Handler = (s: KitSession, n: number) => Promise<void>;

export interface FakeTarget {
  readonly port: number;
  close(): Promise<void>;
}

/** A fake rping target: answers each MPA Request (with `reply` overrides), then runs `handle`. */
export async function fakeTarget(
  handle: Handler,
  o: { reply?: FrameOverrides; mpaRev?: 0 | 1 | 2; markers?: boolean } = {},
): Promise<FakeTarget> {
  const l = await WireListener.listen(0);
  let open = true;
  let count = 0;
  void (async () => {
    while (open) {
      const conn = await l.accept(60_000).catch(() => undefined);
      if (!conn) continue;
      const n = count++;
      void (async () => {
        try {
          const mode = { mpaRev: o.mpaRev ?? 2, crc: true, markers: o.markers ?? false } as const;
          const s = await KitSession.accept(conn, mode, 2000, { reply: o.reply ?? {} });
          await handle(s, n);
        } catch {
          // a case's fault may end the connection any way
        }
        conn.destroy();
      })();
    }
  })();
  return {
    port: l.port,
    close: async () => {
      open = false;
      await l.close();
    },
  };
}

/** Serves honest pings until the client ends the connection. */
export const honest: Handler = async (s) => {
  const rx = new RxCheck(s);
  for (;;) await rpingServer(s, rx);
};

/**
 * An rping server that checks nothing: any untagged message but a Read Request or Terminate is taken as
 * the Send the exchange is at, any Read Response as the one it waits for; Writes are ignored.
 */
export const lax: Handler = async (s) => {
  let state: 'source' | 'read' | 'sink' = 'source';
  let src = { addr: 0n, rkey: 0, size: 16 };
  for (;;) {
    const m: RxMessage = await s.next();
    if (terminateOf(m)) return;
    if (!m.ddp) continue;
    if (!m.ddp.tagged && m.ddp.qn !== 1 && m.ddp.qn !== 2) {
      if (state === 'source') {
        src = decodeInfo(m.payload) ?? src;
        s.readRequest({ sinkStag: 0x77, sinkTo: 0n, size: src.size, srcStag: src.rkey, srcTo: src.addr });
        state = 'read';
      } else if (state === 'sink') {
        const dst = decodeInfo(m.payload) ?? src;
        s.write(dst.rkey, dst.addr, new Uint8Array(Math.min(dst.size, src.size)));
        s.send(new Uint8Array(RPING_INFO_LENGTH));
        state = 'source';
      }
    } else if (m.opcode === Opcode.RdmaReadResponse && m.ddp.last && state === 'read') {
      s.send(new Uint8Array(RPING_INFO_LENGTH));
      state = 'sink';
    }
  }
};

/** A Terminate copying the DDP header (and length) of the segment `m` (RFC 5040 §7.1 rule 2). */
export function terminateFor(s: KitSession, m: RxMessage, layer: number, etype: number, errorCode: number): void {
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
}

export async function kit(
  port: number,
  only: string,
  o: { mpaRev?: string; markers?: boolean } = {},
): Promise<RunSummary> {
  return runKit({ target: `127.0.0.1:${port}`, only, wait: '800', caseTimeout: '8000', ...o });
}

export const verdict = (s: RunSummary, n: string) => s.results.find((r) => r.name === n);
