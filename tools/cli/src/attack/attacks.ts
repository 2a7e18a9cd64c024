/**
 * The hostile peers `rddp attack` plays against its target, each from raw sockets (nothing of the stack
 * on the attacking side but frame encoders): what an attacker with a TCP or UDP socket can do.
 */
import dgram from 'node:dgram';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { SHARE_ATTACKS } from './attacks-shares.js';
import { IRD, loops, rawMpa, silentSocket, untagged, ZERO_RESPONSE, zeroRead } from './raw.js';
import type { TargetPorts } from './target.js';

export interface Attack {
  readonly name: string;
  /** The transport it goes through, so the honest client can use the same one. */
  readonly transport: 'tcp' | 'sctp' | 'udp';
  readonly description: string;
  /** Attacks until `signal` aborts; returns how many hostile units (frames, connections, datagrams) went out. */
  run(ports: TargetPorts, signal: AbortSignal): Promise<number>;
  /**
   * Holds what the target lets it (places, octets) and keeps it: its RSS rises until the target's shares
   * and budget stop it, so its growth is judged against the target's --memory-budget, not --budget.
   */
  readonly holds?: boolean;
  /** What the attack saw the target do wrong (a replayed cookie accepted, …); each fails the run. */
  violations?(): readonly string[];
}

export const ATTACKS: readonly Attack[] = [
  {
    name: 'msn-hole',
    transport: 'tcp',
    description: 'zero-length Read Requests on QN 1 from MSN 2 (MSN 1 never sent), IRD-1 per batch, answered',
    run: (ports, signal) =>
      loops(2, signal, async () => {
        const c = await rawMpa(ports.tcp);
        if (!c) return 0;
        let msn = 2;
        let sent = 0;
        while (!signal.aborted) {
          const frames: Buffer[] = [];
          for (let i = 0; i < IRD - 1; i++) frames.push(zeroRead(msn++));
          const want = c.received() + frames.length * ZERO_RESPONSE;
          c.socket.write(Buffer.concat(frames));
          sent += frames.length;
          if (!(await c.until(want))) break;
        }
        c.socket.destroy();
        return sent;
      }),
  },
  {
    name: 'no-read',
    transport: 'tcp',
    description: 'zero-length Read Requests, IRD per batch every 2 ms, from a requester that never reads',
    run: (ports, signal) =>
      loops(2, signal, async () => {
        const c = await rawMpa(ports.tcp);
        if (!c) return 0;
        c.socket.pause();
        let msn = 1;
        let sent = 0;
        while (!signal.aborted && !c.socket.destroyed) {
          const frames: Buffer[] = [];
          for (let i = 0; i < IRD; i++) frames.push(zeroRead(msn++));
          c.socket.write(Buffer.concat(frames));
          sent += frames.length;
          await sleep(2);
        }
        c.socket.destroy();
        return sent;
      }),
  },
  {
    name: 'bad-crc',
    transport: 'tcp',
    description: 'a first FPDU with a bad CRC, then FIN at once (RFC 5044 §8: Terminate, then close)',
    run: (ports, signal) =>
      loops(4, signal, async () => {
        const c = await rawMpa(ports.tcp);
        if (!c) return 0;
        const f = untagged(3, 0, 1, new Uint8Array(16));
        f[f.length - 1] = (f[f.length - 1] as number) ^ 0xff; // the CRC no longer matches
        c.socket.end(f);
        await Promise.race([c.closed, sleep(5000)]);
        c.socket.destroy();
        return 1;
      }),
  },
  {
    name: 'short-advert',
    transport: 'tcp',
    description: "a 4-octet rping advertisement (rping.c: 'bogus data'), then nothing",
    run: (ports, signal) =>
      loops(4, signal, async () => {
        const c = await rawMpa(ports.tcp);
        if (!c) return 0;
        c.socket.write(untagged(3, 0, 1, new Uint8Array(4)));
        await Promise.race([c.closed, sleep(5000)]);
        c.socket.destroy();
        return 1;
      }),
  },
  {
    name: 'slowloris',
    transport: 'tcp',
    description: 'TCP connections from 127.0.0.3 that never send their MPA Request, 30 a second',
    run: async (ports, signal) => {
      let n = 0;
      const open = new Set<net.Socket>();
      while (!signal.aborted) {
        silentSocket(ports.tcp, '127.0.0.3', open);
        n++;
        await sleep(33);
      }
      for (const s of open) s.destroy();
      return n;
    },
  },
  {
    name: 'sctp-garbage',
    transport: 'sctp',
    description: '16-octet datagrams with wrong checksums from 1 200 source ports, every 3 s',
    run: async (ports, signal) => {
      const socks: dgram.Socket[] = [];
      for (let i = 0; i < 1200; i++) {
        const s = dgram.createSocket('udp4');
        s.on('error', () => {});
        await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
        socks.push(s);
      }
      const junk = Buffer.alloc(16);
      junk.writeUInt16BE(5000, 0);
      junk.writeUInt16BE(5000, 2); // SCTP ports, tag 0, checksum 0 (wrong), then 4 octets of chunk
      junk[12] = 1; // INIT type: still garbage (checksum)
      let n = 0;
      while (!signal.aborted) {
        for (const s of socks) {
          s.send(junk, ports.sctp, '127.0.0.1');
          n++;
        }
        await sleep(3000, undefined, { signal }).catch(() => {});
      }
      for (const s of socks) s.close();
      return n;
    },
  },
  {
    name: 'udp-request-flood',
    transport: 'udp',
    description: 'UDP LLP REQUESTs asking for 256 streams, 20 000 a second, never answering (docs/UDP-LLP.md)',
    run: async (ports, signal) => {
      const s = dgram.createSocket('udp4');
      s.on('error', () => {});
      await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
      // Header: Ver 1 | Type 1 (REQUEST), C 0, stream 0, dst 0, src (a new id each), seq 0; setup body:
      // 256 streams, datagram size 1400, window 64, no CRC, no private data.
      const req = Buffer.alloc(16 + 12);
      req[0] = 0x11;
      req.writeUInt16BE(256, 16);
      req.writeUInt16BE(1400, 18);
      req.writeUInt32BE(64, 20);
      let n = 0;
      while (!signal.aborted) {
        for (let i = 0; i < 2000; i++) {
          const d = Buffer.from(req); // dgram sends asynchronously: one buffer per datagram
          d.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, 8);
          s.send(d, ports.udp, '127.0.0.1');
          n++;
        }
        await sleep(100);
      }
      s.close();
      return n;
    },
  },
  ...SHARE_ATTACKS,
];

export function attackNamed(name: string): Attack | undefined {
  return ATTACKS.find((a) => a.name === name);
}
