/**
 * The bench's usrsctp anchor, one side of it per process: `node-datachannel` (libdatachannel, whose SCTP
 * is usrsctp, the SCTP of the browsers' data channels) moving `size`-octet messages on one ordered,
 * reliable data channel between two PeerConnections on 127.0.0.1. WebRTC runs SCTP over DTLS over ICE
 * (UDP): the anchor's packets are encrypted and authenticated, where rddp's SCTP runs in plain UDP
 * encapsulation (RFC 6951) — a cost the anchor carries and rddp does not.
 *
 *   node anchor-usrsctp.js send <size> <total octets> <warm-up octets>
 *   node anchor-usrsctp.js recv <size> <total octets> <warm-up octets>
 *
 * Signaling goes through the parent: each side prints `{"signal":…}` lines (its description and ICE
 * candidates, 127.0.0.1 only) on stdout and reads the peer's from stdin. The sender sends warm-up + total
 * octets, keeping at most HIGH_WATER octets in the channel's buffer (bufferedAmount, resumed at
 * bufferedAmountLow), then prints `{"sent":…}`. The receiver counts and prints
 * `{"result":{"MBps","octets","ms","messages","warm"}}`: MB/s (10^6 octets/s), timed from the message that
 * completes the warm-up (or from the first, without one) to the last, as raw-tcp.ts times. Both sides
 * then wait for their stdin to end (the parent reads their CPU first).
 * Each line also carries `cpuMs`, the process's own user + system CPU (all its threads) since it started.
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { ReceiveMeter } from './receive-meter.js';

/** Octets kept in the data channel's send buffer at most; sending resumes below LOW_WATER. */
export const HIGH_WATER = 4 << 20;
export const LOW_WATER = 1 << 20;

interface Signal {
  readonly sdp?: string;
  readonly type?: string;
  readonly candidate?: string;
  readonly mid?: string;
}

type Ndc = typeof import('node-datachannel');

/**
 * The channels, held: node-datachannel drops a channel's callbacks when its JS object is collected, and
 * a receiver whose channel is referenced only from native code stops hearing messages at its first GC
 * (usrsctp's receive window then fills and the association stalls).
 */
const held: unknown[] = [];

function say(o: object): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Only loopback candidates go to the peer (ICE here must not use the machine's other addresses). */
function loopbackOnly(candidate: string): boolean {
  const f = candidate.replace(/^a=/, '').split(' ');
  return f[4] === '127.0.0.1';
}

function withoutForeignCandidates(sdp: string): string {
  return sdp
    .split(/\r?\n/)
    .filter((l) => !l.startsWith('a=candidate:') || loopbackOnly(l))
    .join('\r\n');
}

export async function main(argv: readonly string[]): Promise<void> {
  const [role, sizeArg, totalArg, warmArg] = argv;
  const size = Number(sizeArg);
  const total = Number(totalArg);
  const warm = Number(warmArg ?? 0);
  if ((role !== 'send' && role !== 'recv') || !(size > 0) || !(total > 0) || !(warm >= 0)) {
    console.error('usage: anchor-usrsctp.js send|recv <size> <total octets> <warm-up octets>');
    process.exit(2);
  }
  const ndc: Ndc = await import('node-datachannel');
  ndc.initLogger('Error', (level, message) => console.error(`usrsctp anchor ${role}: [${level}] ${message}`));
  const pc = new ndc.PeerConnection(role, {
    iceServers: [],
    bindAddress: '127.0.0.1',
    enableIceUdpMux: false,
    maxMessageSize: Math.max(size, 65536),
  });
  pc.onLocalDescription((sdp, type) => say({ signal: { sdp: withoutForeignCandidates(sdp), type } }));
  pc.onLocalCandidate((candidate, mid) => {
    if (loopbackOnly(candidate)) say({ signal: { candidate, mid } });
  });
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    let m: { signal?: Signal };
    try {
      m = JSON.parse(line) as { signal?: Signal };
    } catch {
      return;
    }
    const s = m.signal;
    if (!s) return;
    if (s.sdp !== undefined && s.type !== undefined)
      pc.setRemoteDescription(s.sdp, s.type as Parameters<typeof pc.setRemoteDescription>[1]);
    else if (s.candidate !== undefined && s.mid !== undefined) pc.addRemoteCandidate(s.candidate, s.mid);
  });
  const finish = (code: number) => {
    try {
      pc.close();
    } finally {
      ndc.cleanup();
      process.exit(code);
    }
  };
  const fail = (why: string) => {
    console.error(`anchor-usrsctp ${role}: ${why}`);
    finish(1);
  };
  lines.on('close', () => finish(0)); // the parent's word to go (both sides wait for it)
  pc.onStateChange((state) => {
    if (state === 'failed') fail('the PeerConnection failed (ICE or DTLS)');
  });

  if (role === 'send') {
    // Ordered and reliable: neither maxRetransmits nor maxPacketLifeTime.
    const dc = pc.createDataChannel('rddp-bench', { unordered: false });
    held.push(dc);
    const payload = Buffer.alloc(size, 0x5a);
    const all = total + warm;
    let sent = 0;
    dc.setBufferedAmountLowThreshold(LOW_WATER);
    const pump = () => {
      try {
        while (sent < all) {
          if (dc.bufferedAmount() >= HIGH_WATER) return; // resumed by onBufferedAmountLow
          const n = Math.min(size, all - sent);
          dc.sendMessageBinary(n === size ? payload : payload.subarray(0, n));
          sent += n;
        }
      } catch (e) {
        fail(`send: ${String(e)}`);
        return;
      }
      say({ sent, cpuMs: cpuMs() });
    };
    dc.onBufferedAmountLow(() => {
      if (sent < all) pump();
    });
    dc.onOpen(pump);
    dc.onError((e) => fail(`data channel: ${e}`));
    return;
  }

  pc.onDataChannel((dc) => {
    held.push(dc);
    const meter = new ReceiveMeter(total, warm);
    dc.onMessage((msg) => {
      const r = meter.add(typeof msg === 'string' ? Buffer.byteLength(msg) : msg.byteLength);
      if (r) say({ result: { ...r, warm }, cpuMs: cpuMs() });
    });
    dc.onError((e) => fail(`data channel: ${e}`));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  main(process.argv.slice(2)).catch((e: unknown) => {
    console.error(`anchor-usrsctp: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
