/**
 * `rddp attack`'s many-cheap-peers attacks (docs/SECURITY.md "One budget per process, one share per
 * source"): each holds as many places or octets of the target as it can get, from one source or spread
 * over several, and keeps them. The target's per-source shares, its one memory budget and its timeouts
 * must leave the honest client served and its RSS within the budget.
 */
import dgram from 'node:dgram';
import { setMaxListeners } from 'node:events';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LlpConnection } from '@rddp/llp';
import { sctp } from '@rddp/llp-sctp';
import {
  AbortCode,
  DatagramType,
  datagramParts,
  decodeAbortBody,
  encodeCookieEchoBody,
  encodeSetupBody,
  parseDatagram,
} from '@rddp/llp-udp';
import type { Attack } from './attacks.js';
import { loops, type RawMpa, rawMpa, silentSocket, untagged } from './raw.js';
import type { TargetPorts } from './target.js';

/** Keeps `want` silent TCP connections open from `from` (reopening those the target closes). */
async function holdSilent(ports: TargetPorts, from: string, want: number, signal: AbortSignal): Promise<number> {
  const open = new Set<net.Socket>();
  let opened = 0;
  while (!signal.aborted) {
    while (open.size < want && !signal.aborted) {
      silentSocket(ports.tcp, from, open);
      opened++;
    }
    await sleep(100);
  }
  for (const s of open) s.destroy();
  return opened;
}

/** rping.c's advertisement (struct rping_rdma_info, network order): buf, rkey, size. */
function advertisement(size: number): Uint8Array {
  const b = Buffer.alloc(16);
  b.writeBigUInt64BE(0x10000n, 0);
  b.writeUInt32BE(0x12345678, 8);
  b.writeUInt32BE(size, 12);
  return b;
}

/** One UDP LLP socket holding as many connections as the target gives it, replaying used cookies. */
function udpHold(): Attack {
  const seen: string[] = [];
  return {
    name: 'udp-hold',
    holds: true,
    transport: 'udp',
    description:
      'one UDP socket completing 256 UDP LLP handshakes and keeping them alive with KEEPALIVEs; every 2 s one is aborted and its COOKIE_ECHO replayed',
    violations: () => seen,
    run: async (ports, signal) => {
      const s = dgram.createSocket('udp4');
      s.on('error', () => {});
      await new Promise<void>((resolve) => s.bind(0, '127.0.0.6', resolve));
      const setup = encodeSetupBody({
        streams: 1,
        datagramSize: 1400,
        window: 64,
        crc: true,
        privateData: new Uint8Array(0),
      });
      const waiting = new Map<number, (type: number, src: number, body: Uint8Array) => void>();
      s.on('message', (raw) => {
        const r = parseDatagram(raw);
        if (!r.ok) return;
        waiting.get(r.datagram.header.dst)?.(r.datagram.header.type, r.datagram.header.src, r.datagram.body);
      });
      let sent = 0;
      const send = (type: number, streamId: number, dst: number, src: number, body: readonly Uint8Array[]) => {
        sent++;
        s.send(
          Buffer.concat(datagramParts({ type, crc: true, streamId, dst, src, seq: 0 }, body)),
          ports.udp,
          '127.0.0.1',
        );
      };
      const answer = (src: number, types: readonly number[]) =>
        new Promise<{ type: number; src: number; body: Uint8Array } | undefined>((resolve) => {
          const t = setTimeout(() => {
            waiting.delete(src);
            resolve(undefined);
          }, 1000);
          waiting.set(src, (type, from, body) => {
            if (!types.includes(type)) return;
            clearTimeout(t);
            waiting.delete(src);
            resolve({ type, src: from, body: Uint8Array.from(body) });
          });
        });
      /** Our connection id → the target's, and the COOKIE_ECHO that made it. */
      const held = new Map<number, { dst: number; echo: Uint8Array[] }>();
      let nextId = 1;
      const handshake = async () => {
        const src = nextId++;
        const cookie = answer(src, [DatagramType.Cookie, DatagramType.Abort]);
        send(DatagramType.Request, 0, 0, src, [setup]);
        const c = await cookie;
        if (c?.type !== DatagramType.Cookie) return;
        const echo = [encodeCookieEchoBody(c.body, setup)];
        const accept = answer(src, [DatagramType.Accept, DatagramType.Abort, DatagramType.Reject]);
        send(DatagramType.CookieEcho, 0, 0, src, echo);
        const a = await accept;
        if (a?.type === DatagramType.Accept) held.set(src, { dst: a.src, echo });
      };
      let replayAfterMs = 200;
      let lastKeepalive = 0;
      let lastReplay = performance.now();
      while (!signal.aborted) {
        for (let i = 0; held.size < 256 && i < 32 && !signal.aborted; i++) await handshake();
        if (performance.now() - lastKeepalive > 2000) {
          for (const [src, h] of held) send(DatagramType.Keepalive, 0xffff, h.dst, src, []);
          lastKeepalive = performance.now();
        }
        if (performance.now() - lastReplay > 2000 && held.size > 0) {
          lastReplay = performance.now();
          const [src, h] = held.entries().next().value as [number, { dst: number; echo: Uint8Array[] }];
          held.delete(src);
          send(DatagramType.Abort, 0xffff, h.dst, src, [Buffer.of(0, 0)]);
          await sleep(replayAfterMs);
          replayAfterMs = replayAfterMs === 200 ? 5000 : 200; // within the linger, then after it
          const replay = answer(src, [DatagramType.Accept, DatagramType.Abort]);
          send(DatagramType.CookieEcho, 0, 0, src, h.echo);
          const r = await replay;
          // While the ended connection lingers, the listener answers a COOKIE_ECHO of its setup with the
          // same ACCEPT (a retransmission); after, ABORT code 4. A new connection id is a second connection.
          if (r?.type === DatagramType.Accept && r.src !== h.dst) {
            if (seen.length < 5)
              seen.push(
                `a replayed COOKIE_ECHO (connection ${src}) opened a second connection (${r.src}, was ${h.dst})`,
              );
            send(DatagramType.Abort, 0xffff, r.src, src, [Buffer.of(0, 0)]);
          } else if (r?.type === DatagramType.Abort && decodeAbortBody(r.body) !== AbortCode.StaleCookie) {
            if (seen.length < 5) seen.push(`a replayed COOKIE_ECHO got ABORT code ${decodeAbortBody(r.body)}, not 4`);
          }
        }
        await sleep(50);
      }
      for (const [src, h] of held) send(DatagramType.Abort, 0xffff, h.dst, src, [Buffer.of(0, 0)]);
      await sleep(50);
      s.close();
      return sent;
    },
  };
}

export const SHARE_ATTACKS: readonly Attack[] = [
  {
    name: 'slowloris-spread',
    holds: true,
    transport: 'tcp',
    description: '17 addresses (127.0.0.10–26) × 16 silent MPA startups each, reopened as the target closes them',
    run: async (ports, signal) => {
      const counts = await Promise.all(
        Array.from({ length: 17 }, (_, i) => holdSilent(ports, `127.0.0.${10 + i}`, 16, signal)),
      );
      return counts.reduce((a, b) => a + b, 0);
    },
  },
  {
    name: 'idle-fpdu',
    holds: true,
    transport: 'tcp',
    description: 'up to 1 000 MPA connections from 127.0.0.5, each idle after 60 000 octets of a 64 KiB FPDU',
    run: async (ports, signal) => {
      const head = untagged(3, 0, 1, new Uint8Array(64768 - 18)).subarray(0, 60_000);
      const held = new Set<RawMpa>();
      let opened = 0;
      while (!signal.aborted) {
        const batch: Promise<void>[] = [];
        for (let i = 0; i < 50 && held.size + batch.length < 1000; i++)
          batch.push(
            rawMpa(ports.tcp, '127.0.0.5').then((c) => {
              opened++;
              if (!c) return;
              c.socket.write(head);
              held.add(c);
              void c.closed.then(() => held.delete(c));
            }),
          );
        await Promise.all(batch);
        await sleep(batch.length > 0 ? 20 : 500);
      }
      for (const c of held) c.socket.destroy();
      return opened;
    },
  },
  {
    name: 'rping-hold',
    holds: true,
    transport: 'tcp',
    description: '4 rping clients from 127.0.0.8 advertising 64 MiB and never answering the RDMA Read',
    run: (ports, signal) =>
      loops(4, signal, async () => {
        const c = await rawMpa(ports.tcp, '127.0.0.8');
        if (!c) return 0;
        c.socket.write(untagged(3, 0, 1, advertisement(64 * 1024 * 1024)));
        // Held until the target closes it or the attack stops; the abort listener goes with the connection.
        let stop = () => {};
        const stopped = new Promise<void>((resolve) => (stop = resolve));
        signal.addEventListener('abort', stop, { once: true });
        if (signal.aborted) stop(); // stopped while this connection was being made
        const cap = setTimeout(stop, 60_000);
        await Promise.race([c.closed, stopped]);
        clearTimeout(cap);
        signal.removeEventListener('abort', stop);
        c.socket.destroy();
        return 1;
      }),
  },
  udpHold(),
  {
    name: 'sctp-peers',
    holds: true,
    transport: 'sctp',
    description: 'SCTP associations from 127.0.0.7, each from a UDP port of its own, held open (20 set up at a time)',
    run: async (ports, signal) => {
      const t = sctp({ localHost: '127.0.0.7', handshakeTimeoutMs: 3000, idleTimeoutMs: 0 });
      setMaxListeners(64, signal); // 20 connects at a time share it
      const held = new Set<LlpConnection>();
      let tried = 0;
      while (!signal.aborted) {
        const batch = Array.from({ length: 20 }, async () => {
          tried++;
          try {
            const c = await t.connect({ host: '127.0.0.1', port: ports.sctp }, { timeoutMs: 3000, signal });
            held.add(c);
            c.closed$.subscribe(() => held.delete(c));
          } catch {
            // refused, timed out (its COOKIE ECHO discarded), or the attack ended
          }
        });
        await Promise.all(batch);
        await sleep(100);
      }
      for (const c of held) c.abort();
      return tried;
    },
  },
];
