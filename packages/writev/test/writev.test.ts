/**
 * The binding sends exactly the octets its ranges name, in order, from `skip` on, with MPA Markers where a
 * range asks for them (RFC 5044 §4.2, §4.3) — checked by a TCP peer that collects what arrives. Bad
 * arguments are TypeError / RangeError with nothing sent; a full socket takes part or nothing; a reset
 * one answers -errno. Skipped where the optional build is absent, unless RDDP_REQUIRE_WRITEV=1 (CI).
 */
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOptional } from '../../../test/support/native-child.js';

type WriteRanges = typeof import('../index.cjs').writeRanges;
type CongestionControl = typeof import('../index.cjs').congestionControl;
const binding = loadOptional<{ writeRanges: WriteRanges; congestionControl: CongestionControl; RANGE_FIELDS: number }>(
  import.meta.url,
  '../index.cjs',
);
const required = process.env.RDDP_REQUIRE_WRITEV === '1';
if (!binding && !required) console.warn('@rddp/writev not built here: its tests are skipped');

interface Pair {
  readonly socket: net.Socket;
  readonly fd: number;
  readonly peer: net.Socket;
  /** Everything the peer has received so far. */
  received(): Buffer;
  /** Resolves once the peer has `n` octets. */
  waitFor(n: number): Promise<Buffer>;
}
const open: net.Socket[] = [];
const servers: net.Server[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
});

async function pair(): Promise<Pair> {
  const server = net.createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const peer = await accepted;
  open.push(socket, peer);
  const chunks: Buffer[] = [];
  let waiter: (() => void) | undefined;
  peer.on('data', (c: Buffer) => {
    chunks.push(c);
    waiter?.();
  });
  const received = () => Buffer.concat(chunks);
  const fd = (socket as unknown as { _handle: { fd: number } })._handle.fd;
  return {
    socket,
    fd,
    peer,
    received,
    waitFor: (n) =>
      new Promise((resolve) => {
        const check = () => {
          const b = received();
          if (b.length >= n) resolve(b);
        };
        waiter = check;
        check();
      }),
  };
}

/** Reference: the wire octets of `payload` with a Marker whenever `room` octets have passed, FPDUPTR from `ptr`. */
function marked(payload: Uint8Array, room: number, ptr: number): Uint8Array {
  const out: number[] = [];
  let r = room;
  let p = ptr;
  for (const x of payload) {
    if (r === 0) {
      out.push(0, 0, (p >>> 8) & 0xff, p & 0xff);
      p += 4;
      r = 508;
    }
    out.push(x);
    r--;
    p++;
  }
  return Uint8Array.from(out);
}

function wireLength(len: number, room: number): number {
  return len + 4 * (len > room ? Math.ceil((len - room) / 508) : 0);
}

describe.skipIf(!binding && !required)('@rddp/writev writeRanges', () => {
  const w = binding as NonNullable<typeof binding>;

  it('sends the ranges in order, the first from skip, plain and with MPA Markers (RFC 5044 §4.3)', async () => {
    expect(w.RANGE_FIELDS).toBe(5);
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            buf: fc.nat({ max: 2 }),
            start: fc.nat({ max: 3000 }),
            len: fc.integer({ min: 1, max: 3000 }),
            marks: fc.option(fc.record({ room: fc.integer({ min: 0, max: 508 }), ptr: fc.nat({ max: 0xfff0 }) })),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.nat(),
        async (specs, skipSeed) => {
          const bufs = [0, 1, 2].map((k) => Uint8Array.from({ length: 6000 }, (_, i) => (i * 7 + k * 91) & 0xff));
          // The third buffer as an ArrayBuffer with the offset counted from its start.
          const given: (ArrayBufferLike | Uint8Array)[] = [
            bufs[0] as Uint8Array,
            bufs[1] as Uint8Array,
            (bufs[2] as Uint8Array).buffer,
          ];
          const ranges = new Float64Array(5 * specs.length);
          const expected: Uint8Array[] = [];
          specs.forEach((s, i) => {
            const b = bufs[s.buf] as Uint8Array;
            const piece = b.subarray(s.start, s.start + s.len);
            const wire = s.marks ? marked(piece, s.marks.room, s.marks.ptr) : piece;
            ranges.set([s.buf, s.start, s.len, s.marks ? s.marks.room * 65536 + s.marks.ptr : -1, wire.length], 5 * i);
            expected.push(wire);
          });
          const first = expected[0] as Uint8Array;
          const skip = skipSeed % first.length;
          const all = Buffer.concat(expected).subarray(skip);
          const p = await pair();
          const sent = w.writeRanges(p.fd, given, ranges, 0, specs.length, skip);
          expect(sent).toBe(all.length); // far below the socket buffer: all of it at once
          expect(Buffer.compare(await p.waitFor(all.length), all)).toBe(0);
          p.socket.destroy();
          p.peer.destroy();
        },
      ),
      { numRuns: 40 },
    );
  });

  it('more ranges than one sendmsg takes (IOV_MAX): all of them, in order', async () => {
    const p = await pair();
    const b = Uint8Array.from({ length: 8192 }, (_, i) => i & 0xff);
    const n = 3000; // 3000 one- or two-octet ranges, alternating buffers
    const ranges = new Float64Array(5 * n);
    const expected: number[] = [];
    for (let i = 0; i < n; i++) {
      const len = 1 + (i % 2);
      ranges.set([i % 2, i, len, -1, len], 5 * i);
      for (let k = 0; k < len; k++) expected.push(b[i + k] as number);
    }
    expect(w.writeRanges(p.fd, [b, b.buffer], ranges, 0, n, 0)).toBe(expected.length);
    expect([...(await p.waitFor(expected.length))]).toEqual(expected);
  });

  it('a socket whose peer does not read takes part, then nothing (0); the rest goes once it reads', async () => {
    const p = await pair();
    p.peer.pause();
    const big = new Uint8Array(1 << 20).fill(9);
    const ranges = new Float64Array([0, 0, big.length, -1, big.length]);
    let total = 0;
    let zero = false;
    for (let i = 0; i < 200 && !zero; i++) {
      const sent = w.writeRanges(p.fd, [big], ranges, 0, 1, 0);
      expect(sent).toBeGreaterThanOrEqual(0);
      expect(sent).toBeLessThanOrEqual(big.length);
      zero = sent === 0;
      total += sent;
    }
    expect(zero, 'the kernel buffer fills').toBe(true);
    p.peer.resume();
    const got = await p.waitFor(total);
    expect(got.length).toBe(total);
  });

  it('a socket error answers -errno, nothing thrown: EPIPE after our own FIN', async () => {
    const p = await pair();
    p.socket.end();
    await new Promise((r) => p.socket.once('finish', r)); // shut down for writing; the descriptor stays open
    const b = new Uint8Array(100);
    expect(w.writeRanges(p.fd, [b], new Float64Array([0, 0, 100, -1, 100]), 0, 1, 0)).toBe(-32); // Linux EPIPE
  });

  it('bad arguments: TypeError / RangeError, and nothing is sent', async () => {
    const p = await pair();
    const b = new Uint8Array(64);
    const ok = new Float64Array([0, 0, 64, -1, 64]);
    const bad: [unknown[], ErrorConstructor][] = [
      [[p.fd, [b], ok, 0, 1], TypeError], // too few arguments
      [[-1, [b], ok, 0, 1, 0], RangeError],
      [[p.fd, b, ok, 0, 1, 0], TypeError],
      [[p.fd, [b], new Int32Array(5), 0, 1, 0], TypeError],
      [[p.fd, [new Uint16Array(64)], ok, 0, 1, 0], TypeError],
      [[p.fd, ['x'], ok, 0, 1, 0], TypeError],
      [[p.fd, [b], ok, 0, 2, 0], RangeError], // more ranges than given
      [[p.fd, [b], new Float64Array([1, 0, 64, -1, 64]), 0, 1, 0], RangeError], // no buffer 1
      [[p.fd, [b], new Float64Array([0, 1, 64, -1, 64]), 0, 1, 0], RangeError], // past the end
      [[p.fd, [b], new Float64Array([0, -1, 4, -1, 4]), 0, 1, 0], RangeError],
      [[p.fd, [b], new Float64Array([0, 0.5, 4, -1, 4]), 0, 1, 0], RangeError],
      [[p.fd, [b], new Float64Array([0, 0, 64, -1, 63]), 0, 1, 0], RangeError], // wire length
      [[p.fd, [b], new Float64Array([0, 0, 64, 509 * 65536, wireLength(64, 509)]), 0, 1, 0], RangeError], // room
      [[p.fd, [b], new Float64Array([0, 0, 64, 10 * 65536, 64]), 0, 1, 0], RangeError], // Markers not counted
      [[p.fd, [b], ok, 0, 1, 64], RangeError], // skip
      [[p.fd, [b], ok, 0, 1, -1], RangeError],
      [[p.fd, [b], ok, 0, 0, 1], RangeError],
    ];
    for (const [args, type] of bad)
      expect(() => (w.writeRanges as (...a: unknown[]) => number)(...args), JSON.stringify(args.slice(3))).toThrow(
        type,
      );
    // A range with Markers whose wire length counts them is accepted.
    const m = new Float64Array([0, 0, 64, 10 * 65536 + 8, wireLength(64, 10)]);
    expect(w.writeRanges(p.fd, [b], m, 0, 1, 0)).toBe(68);
    expect((await p.waitFor(68)).length).toBe(68); // only the good call's octets arrived
  });
});

describe.skipIf(!binding && !required)('@rddp/writev congestionControl (Linux TCP_CONGESTION)', () => {
  it.runIf(process.platform === 'linux')('reads, sets, and reports the kernel’s refusal as -errno', async () => {
    const w = binding as NonNullable<typeof binding>;
    const p = await pair();
    const before = w.congestionControl(p.fd);
    expect(typeof before).toBe('string');
    expect(w.congestionControl(p.fd, 'reno')).toBe('reno'); // reno is always built in
    expect(w.congestionControl(p.fd)).toBe('reno');
    expect(w.congestionControl(p.fd, 'nosuchcc')).toBe(-2); // ENOENT: not loaded
    expect(w.congestionControl(p.fd)).toBe('reno'); // unchanged by the refusal
    expect(w.congestionControl(1 << 20)).toBe(-9); // EBADF
    for (const args of [[], ['3'], [-1], [p.fd, ''], [p.fd, 'a'.repeat(16)], [p.fd, 7]])
      expect(() => (w.congestionControl as (...a: unknown[]) => unknown)(...args), JSON.stringify(args)).toThrow(
        TypeError,
      );
  });
});
