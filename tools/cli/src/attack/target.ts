/**
 * The long-running server `rddp attack` puts under attack, in a process of its own: librdmacm's rping
 * server protocol on every connection (concurrently, as `rping -P`) over MPA/TCP and SCTP, and an echo
 * over the UDP LLP. It answers the parent's `stats` messages with its RSS, heap and active handles.
 */
import type { LlpConnection, LlpListener } from '@rddp/llp';
import { udp } from '@rddp/llp-udp';
import { rpingServe } from '../commands/rping.js';
import { type ToolTransport, toolTransport } from '../transports.js';

export interface TargetStats {
  readonly rss: number;
  readonly heapUsed: number;
  /** `process._getActiveHandles().length`: sockets, servers and timers alive in the server process. */
  readonly handles: number;
  readonly served: number;
  readonly failed: number;
}

export interface TargetPorts {
  readonly tcp: number;
  readonly sctp: number;
  readonly udp: number;
}

const quiet = { log: () => {}, debug: () => {} };

/** Runs until the parent disconnects; posts `{ ready: TargetPorts }` once listening. */
export async function runAttackTarget(): Promise<void> {
  let served = 0;
  let failed = 0;
  const listeners: LlpListener[] = [];
  const serveRping = async (tt: ToolTransport) => {
    const l = await tt.transport.listen({ host: '127.0.0.1', port: 0 }, { params: tt.listenParams });
    l.connections$.subscribe((c: LlpConnection) => {
      rpingServe(c, tt, { size: 64, verbose: false }, quiet).then(
        () => served++,
        () => {
          failed++;
          c.abort();
        },
      );
    });
    l.errors$.subscribe(() => failed++);
    listeners.push(l);
    return l.address.port as number;
  };
  const tcp = await serveRping(toolTransport({ transport: 'tcp', crc: true }));
  const sctp = await serveRping(toolTransport({ transport: 'sctp' }));
  // UDP LLP: every message on stream 0 is sent back (the honest client checks what returns).
  const u = await udp().listen({ host: '127.0.0.1', port: 0 }, {});
  u.connections$.subscribe((c: LlpConnection) => {
    const s = c.streams[0];
    if (!s) return;
    s.setReceiver((ulpdu) => {
      const copy = new Uint8Array(ulpdu.length);
      let off = 0;
      for (const ch of ulpdu.chunks) {
        copy.set(ch, off);
        off += ch.length;
      }
      s.send([copy]);
    });
  });
  listeners.push(u);
  const ports: TargetPorts = { tcp, sctp, udp: u.address.port as number };
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on('message', (m: unknown) => {
    if (m !== 'stats') return;
    gc?.();
    const stats: TargetStats = {
      rss: process.memoryUsage().rss,
      heapUsed: process.memoryUsage().heapUsed,
      handles: (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length,
      served,
      failed,
    };
    process.send?.({ stats });
  });
  process.on('disconnect', () => {
    for (const l of listeners) void l.close().catch(() => {});
    setTimeout(() => process.exit(0), 500).unref();
  });
  process.send?.({ ready: ports });
}
