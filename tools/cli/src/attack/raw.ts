/**
 * The raw-socket pieces `rddp attack`'s hostile peers are built from: an MPA/TCP Initiator that stops
 * after the Reply (RFC 5044 §7.1), FPDUs framed by the frame encoder alone, and attacker loops.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { encodeUntaggedHeader } from '@rddp/ddp';
import { FpduWriter } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest } from '@rddp/rdmap';

export const MPA_REQUEST = (() => {
  const b = Buffer.alloc(20);
  b.write('MPA ID Req Frame');
  b[16] = 0x40; // C: CRC
  b[17] = 1; // Rev 1
  return b;
})();

/** A raw TCP connection that has sent an MPA Request and seen the Reply (RFC 5044 §7.1). */
export interface RawMpa {
  readonly socket: net.Socket;
  readonly closed: Promise<void>;
  /** Octets received after the Reply. */
  received(): number;
  /** Resolves when at least `n` octets arrived after the Reply, or the socket closed. */
  until(n: number): Promise<boolean>;
}

export async function rawMpa(port: number, localAddress?: string): Promise<RawMpa | undefined> {
  const socket = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
  socket.on('error', () => {});
  let got = -20; // the Reply first
  let waiter: { n: number; resolve(ok: boolean): void } | undefined;
  socket.on('data', (c: Buffer) => {
    got += c.length;
    if (waiter && got >= waiter.n) {
      const w = waiter;
      waiter = undefined;
      w.resolve(true);
    }
  });
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      waiter?.resolve(false);
      waiter = undefined;
      resolve();
    }),
  );
  const conn: RawMpa = {
    socket,
    closed,
    received: () => got,
    until: (n) =>
      got >= n || socket.destroyed
        ? Promise.resolve(got >= n)
        : new Promise<boolean>((resolve) => {
            waiter = { n, resolve };
          }),
  };
  const ok = await new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('close', () => resolve(false));
  });
  if (!ok) return undefined;
  socket.write(MPA_REQUEST);
  return (await conn.until(0)) ? conn : undefined;
}

const writer = new FpduWriter({ crc: true, markers: false });
export function fpdu(seg: Uint8Array): Buffer {
  const parts: Uint8Array[] = [];
  writer.frame([seg], seg.length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}
export function untagged(opcode: number, qn: number, msn: number, payload: Uint8Array): Buffer {
  const seg = new Uint8Array(18 + payload.length);
  encodeUntaggedHeader({ last: true, dv: 1, rsvdUlp: (0x40 | opcode) * 2 ** 32, qn, msn, mo: 0 }, seg);
  seg.set(payload, 18);
  return fpdu(seg);
}
/** A zero-length RDMA Read Request needs no valid STag (RFC 5040 §5.2.1). */
export function zeroRead(msn: number): Buffer {
  return untagged(1, 1, msn, encodeReadRequest({ sinkStag: 0x1234, sinkTo: 0n, size: 0, srcStag: 0, srcTo: 0n }));
}
/** A zero-length Read Response's FPDU: MPA header 2 + tagged DDP header 14 + CRC 4. */
export const ZERO_RESPONSE = 20;
/** rping's IRD (librdmacm's default of the server here). */
export const IRD = 8;

/** Keeps `n` attacker loops going until `signal` aborts; each loop reconnects when its connection ends. */
export async function loops(n: number, signal: AbortSignal, one: () => Promise<number>): Promise<number> {
  let total = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (!signal.aborted) {
        total += await one().catch(() => 0);
        if (!signal.aborted) await sleep(10);
      }
    }),
  );
  return total;
}

/** A TCP connection from `from` that never sends anything, kept in `open` until it closes. */
export function silentSocket(port: number, from: string, open: Set<net.Socket>): net.Socket {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
  s.on('error', () => {});
  open.add(s);
  s.once('close', () => open.delete(s));
  return s;
}
