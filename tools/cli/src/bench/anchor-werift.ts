/**
 * The bench's werift-sctp anchor, one side of it per process: `werift-sctp` (SCTP in TypeScript, after
 * aiortc's, the SCTP of the werift WebRTC stack) moving `size`-octet messages on SCTP stream 0, ordered
 * and reliable, over a pair of UDP sockets on 127.0.0.1 — plain UDP encapsulation like rddp's SCTP, no
 * DTLS.
 *
 *   node anchor-werift.js recv <size> <total octets> <warm-up octets>  — binds, prints {"port"}, serves
 *   node anchor-werift.js send <size> <total octets> <warm-up octets> <receiver's UDP port>
 *
 * The sender awaits each `send()` before the next, as werift's own data channel does (a send resolves
 * once its chunks have left the outbound queue for the network, within the congestion and receive
 * windows), prints `{"sent":…}` and waits for its stdin to end. The receiver counts and prints
 * `{"result":{"MBps","octets","ms","messages","warm"}}`: MB/s (10^6 octets/s), timed from the message that
 * completes the warm-up (or from the first, without one) to the last, as raw-tcp.ts times, then waits for
 * its stdin to end. Each line also carries `cpuMs`, the process's own user + system CPU since it started.
 */
import dgram from 'node:dgram';
import { pathToFileURL } from 'node:url';
import { ReceiveMeter } from './receive-meter.js';

/** The SCTP port both ends use (inside the UDP encapsulation; any will do). */
const SCTP_PORT = 5000;
/** werift-sctp's PPID for binary WebRTC messages (RFC 8831 §8: 53). */
const PPID_BINARY = 53;

function say(o: object): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Resolves when stdin ends (the parent's word to go), or at once if there is none. */
function stdinEnd(): Promise<void> {
  return new Promise((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.on('error', () => resolve());
    process.stdin.resume();
  });
}

function bound(): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    s.once('error', reject);
    s.bind(0, '127.0.0.1', () => resolve(s));
  });
}

export async function main(argv: readonly string[]): Promise<void> {
  const [role, sizeArg, totalArg, warmArg, portArg] = argv;
  const size = Number(sizeArg);
  const total = Number(totalArg);
  const warm = Number(warmArg ?? 0);
  const port = Number(portArg);
  if (
    (role !== 'send' && role !== 'recv') ||
    !(size > 0) ||
    !(total > 0) ||
    !(warm >= 0) ||
    (role === 'send' && !(port > 0))
  ) {
    console.error('usage: anchor-werift.js recv|send <size> <total octets> <warm-up octets> [receiver UDP port]');
    process.exit(2);
  }
  const { SCTP, createUdpTransport } = await import('werift-sctp');
  const sock = await bound();
  const ended = stdinEnd();

  if (role === 'recv') {
    const sctp = SCTP.server(createUdpTransport(sock), SCTP_PORT);
    const meter = new ReceiveMeter(total, warm);
    const done = new Promise<void>((resolve) => {
      sctp.onReceive.subscribe((_stream: number, _ppid: number, data: Buffer) => {
        const r = meter.add(data.length);
        if (!r) return;
        say({ result: { ...r, warm }, cpuMs: cpuMs() });
        resolve();
      });
    });
    await sctp.start(SCTP_PORT);
    say({ port: sock.address().port });
    await done;
    await ended;
    await sctp.stop().catch(() => {});
    sock.close();
    process.exit(0);
  }

  const sctp = SCTP.client(createUdpTransport(sock, { port, address: '127.0.0.1' }), SCTP_PORT);
  const connected = sctp.stateChanged.connected.asPromise();
  await sctp.start(SCTP_PORT);
  const timer = setTimeout(() => {
    console.error('anchor-werift send: no association within 10 s');
    process.exit(1);
  }, 10_000);
  await connected;
  clearTimeout(timer);
  const payload = Buffer.alloc(size, 0x5a);
  const all = total + warm;
  let sent = 0;
  while (sent < all) {
    const n = Math.min(size, all - sent);
    await sctp.send(0, PPID_BINARY, n === size ? payload : payload.subarray(0, n));
    sent += n;
  }
  say({ sent, cpuMs: cpuMs() });
  await ended;
  await sctp.stop().catch(() => {});
  sock.close();
  process.exit(0);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  main(process.argv.slice(2)).catch((e: unknown) => {
    console.error(`anchor-werift: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
