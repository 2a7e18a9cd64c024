/**
 * The kit's server role (`rddp conformance --listen`) against clients that connect in numbers and send
 * much: at most MAX_QUEUED_CLIENTS wait, unread (their octets stay in the client: TCP flow control);
 * more are refused with one note; a client a case takes is read into one receive log kept once (the
 * capture records are ranges of it), grown by doubling, never re-concatenated per read.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_QUEUED_CLIENTS, MAX_RECEIVED_PER_CONNECTION, WireListener } from '../src/conformance/conn.js';

const open: net.Socket[] = [];
let listener: WireListener | undefined;
afterEach(async () => {
  for (const s of open.splice(0)) s.destroy();
  await listener?.close();
  listener = undefined;
});

/** A client that sends `total` octets (byte i is i mod 251) as fast as it is let. */
function flood(port: number, total: number): { socket: net.Socket; closed: Promise<void> } {
  const socket = net.connect(port, '127.0.0.1');
  open.push(socket);
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const chunk = Buffer.alloc(1 << 20);
  let sent = 0;
  const pump = () => {
    while (sent < total && !socket.destroyed) {
      const n = Math.min(chunk.length, total - sent);
      for (let i = 0; i < n; i++) chunk[i] = (sent + i) % 251;
      sent += n;
      if (!socket.write(n === chunk.length ? Buffer.from(chunk) : Buffer.from(chunk.subarray(0, n)))) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  socket.once('connect', pump);
  return { socket, closed };
}

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('rddp conformance --listen: the queue of clients', () => {
  it(`${MAX_QUEUED_CLIENTS} clients wait unread, one more is refused with one note; each waiting one costs no more than a socket`, async () => {
    const l = await WireListener.listen(0);
    listener = l;
    const notes: string[] = [];
    l.onNote = (line) => notes.push(line);
    const total = 8 << 20;
    const clients = Array.from({ length: MAX_QUEUED_CLIENTS + 4 }, () => flood(l.port, total));
    await until(() => l.queued.length === MAX_QUEUED_CLIENTS && l.refused === 4, 10_000, 'the queue full');
    // The 4 beyond the bound are closed.
    await Promise.race([
      Promise.all(clients.slice(MAX_QUEUED_CLIENTS).map((c) => c.closed)),
      new Promise((_, rej) => setTimeout(() => rej(new Error('refused clients not closed')), 10_000)),
    ]);
    // Give the waiting clients time to push what they can: the kit reads none of it.
    await new Promise((r) => setTimeout(r, 500));
    for (const c of l.queued) {
      expect(c.receivedOctets).toBeLessThanOrEqual(256 << 10);
      expect(c.heldOctets).toBeLessThanOrEqual(256 << 10);
    }
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(
      new RegExp(`^a client from 127\\.0\\.0\\.1:\\d+ refused: ${MAX_QUEUED_CLIENTS} clients already wait for a case`),
    );
    // A case takes one: it is read to the end, every octet once.
    const c = await l.accept(1000);
    await c.until((b) => (b.length === total ? true : undefined), 20_000, 'all octets');
    expect(c.receivedOctets).toBe(total);
    expect(c.heldOctets).toBeLessThanOrEqual(2 * total);
    // Growth by doubling: all copies together less than twice the octets (was: the whole buffer per chunk).
    expect(c.copiedOctets).toBeLessThan(2 * total);
    const head = c.consume(1000);
    expect([...head.subarray(0, 5)]).toEqual([0, 1, 2, 3, 4]);
    expect(c.pending.length).toBe(total - 1000);
    expect(c.pending[0]).toBe(1000 % 251);
    // The capture records are views of the same octets, in order.
    const recorded = c.records.filter((r) => r.dir === 'rx').reduce((n, r) => n + r.bytes.byteLength, 0);
    expect(recorded).toBe(total);
    const last = c.records.at(-1);
    expect(last?.bytes.buffer).toBe(c.pending.buffer);
    c.destroy();
    await l.close();
    listener = undefined;
    expect(notes).toEqual([notes[0], `4 clients refused in all (more than ${MAX_QUEUED_CLIENTS} waiting)`]);
  }, 60_000);

  it('a taken client sending 63 MiB is read at once (no re-concatenation per read), into one log of at most 64 MiB', async () => {
    const l = await WireListener.listen(0);
    listener = l;
    const total = 63 << 20;
    const accepted = l.accept(5000);
    flood(l.port, total);
    const c = await accepted;
    const t0 = Date.now();
    let wakes = 0;
    await c.until(
      (b) => {
        wakes++;
        return b.length === total ? true : undefined;
      },
      60_000,
      '63 MiB',
    );
    const ms = Date.now() - t0;
    expect(c.receivedOctets).toBe(total);
    expect(c.heldOctets).toBe(MAX_RECEIVED_PER_CONNECTION);
    expect(c.copiedOctets).toBeLessThan(2 * total);
    expect(wakes).toBeGreaterThan(1);
    // Reading was not quadratic: well under the minute the old concatenation took for this.
    expect(ms).toBeLessThan(30_000);
  }, 120_000);

  it('a client past MAX_RECEIVED_PER_CONNECTION is cut off with the reason', async () => {
    const l = await WireListener.listen(0);
    listener = l;
    const accepted = l.accept(5000);
    flood(l.port, MAX_RECEIVED_PER_CONNECTION + (1 << 20));
    const c = await accepted;
    const how = await c.closed;
    expect(how).toEqual({ how: 'reset', error: `over ${MAX_RECEIVED_PER_CONNECTION} octets received` });
    expect(c.receivedOctets).toBeLessThanOrEqual(MAX_RECEIVED_PER_CONNECTION);
    expect(c.heldOctets).toBeLessThanOrEqual(MAX_RECEIVED_PER_CONNECTION);
  }, 120_000);
});

describe('the listener closing while a case waits for a client', () => {
  it('ends the wait with ERR_CONFORMANCE_LISTENER_CLOSED at once, and no timer outlives the listener', async () => {
    const l = await WireListener.listen(0);
    const escaped: unknown[] = [];
    const onEscape = (e: unknown) => escaped.push(e);
    process.on('uncaughtException', onEscape);
    try {
      const waiting = l.accept(150);
      await l.close();
      await expect(waiting).rejects.toMatchObject({ code: 'ERR_CONFORMANCE_LISTENER_CLOSED' });
      // Past the wait's bound: a timer left behind would fire now, on a server with no address.
      await new Promise((r) => setTimeout(r, 300));
      expect(escaped).toEqual([]);
      expect(l.port).toBeGreaterThan(0);
    } finally {
      process.off('uncaughtException', onEscape);
    }
  });
});
