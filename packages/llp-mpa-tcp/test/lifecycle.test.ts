/**
 * The MPA/TCP stream's life as one state machine (src/lifecycle.ts): (a) the table itself — every state
 * reachable, `closed` terminal, events a state has no transition for refused — and (b) real connections
 * driven through the public API to each way a stream ends: local close first, peer close first, both at
 * once, a peer reset mid-stream, a peer FIN or RST inside an FPDU, a close during startup (RFC 5044
 * §7.1.2). Each must end with `closed$` fired once, the socket gone, and no timer of the stream left, ref'd
 * or not (nothing keeps the process alive, and nothing fires later).
 */

import { setTimeout as sleep } from 'node:timers/promises';
import type { LlpCloseEvent, LlpConnection, LlpError } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  FpduWriter,
  MpaFpduNotSentError,
  type MpaTcpConnection,
  type MpaTcpListener,
  type MpaTcpTransport,
  mpaTcp,
} from '../src/index.js';
import {
  IllegalLifeTransitionError,
  LIFE_EVENTS,
  LIFE_STATES,
  LIFE_TIMERS,
  LIFECYCLE,
  type LifeState,
  nextState,
  STRICT_LIFECYCLE,
  transition,
} from '../src/lifecycle.js';
import { pattern } from './helpers.js';
import { mpaRequest, rawConnect } from './raw.js';

describe('the lifecycle table', () => {
  const initial: LifeState[] = ['startup', 'open']; // the Responder's first state, the Initiator's

  it('names every state and event once, and has a row for every state', () => {
    expect(new Set(LIFE_STATES).size).toBe(LIFE_STATES.length);
    expect(new Set(LIFE_EVENTS).size).toBe(LIFE_EVENTS.length);
    expect(Object.keys(LIFECYCLE).sort()).toEqual([...LIFE_STATES].sort());
    expect(Object.keys(LIFE_TIMERS).sort()).toEqual([...LIFE_STATES].sort());
    for (const s of LIFE_STATES)
      for (const [e, to] of Object.entries(LIFECYCLE[s])) {
        expect(LIFE_EVENTS).toContain(e);
        expect(LIFE_STATES).toContain(to);
      }
  });

  it('every state is reachable from startup or open, and every state reaches closed', () => {
    const seen = new Set<LifeState>(initial);
    const queue = [...initial];
    while (queue.length > 0) {
      const s = queue.shift() as LifeState;
      for (const to of Object.values(LIFECYCLE[s]) as LifeState[])
        if (!seen.has(to)) {
          seen.add(to);
          queue.push(to);
        }
    }
    expect([...seen].sort()).toEqual([...LIFE_STATES].sort());
    for (const s of LIFE_STATES) {
      if (s === 'closed') continue;
      // Whatever the state, an abort, a socket error or a socket close ends it at once.
      for (const e of ['abort', 'socket-error', 'socket-closed'] as const) expect(nextState(s, e)).toBe('closed');
    }
  });

  it('closed is terminal: it has no transition, and runs no timer', () => {
    expect(LIFECYCLE.closed).toEqual({});
    expect(LIFE_TIMERS.closed).toEqual([]);
    for (const e of LIFE_EVENTS) {
      expect(() => transition('closed', e, true)).toThrow(IllegalLifeTransitionError);
      expect(transition('closed', e, false)).toBe('closed');
    }
  });

  it('refuses what a state has no transition for: throws when strict (tests run strict), keeps the state otherwise', () => {
    expect(STRICT_LIFECYCLE).toBe(true);
    const illegal: [LifeState, (typeof LIFE_EVENTS)[number]][] = [
      ['open', 'local-fin-done'], // no FIN of ours was asked for
      ['startup', 'close-timeout'], // no close timer runs
      ['closing', 'local-close'], // the ULP closes once
      ['peer-closed', 'peer-fin'], // one FIN per direction
      ['closing-peer-fin', 'first-fpdu'], // nothing follows the peer's FIN
      ['rx-error', 'first-fpdu'], // nothing is delivered after a receive error
      ['rx-error', 'rx-error'],
    ];
    for (const [s, e] of illegal) {
      expect(nextState(s, e)).toBeUndefined();
      expect(() => transition(s, e)).toThrow(new IllegalLifeTransitionError(s, e).message);
      expect(transition(s, e, false)).toBe(s);
    }
    // And the table answers every pair one way or the other.
    for (const s of LIFE_STATES)
      for (const e of LIFE_EVENTS) {
        const to = nextState(s, e);
        if (to === undefined) expect(() => transition(s, e, true)).toThrow(IllegalLifeTransitionError);
        else expect(transition(s, e, true)).toBe(to);
      }
  });

  it('timers by state: close while a FIN is awaited, grace only after a receive error, the mid-FPDU timer while receiving', () => {
    for (const s of LIFE_STATES) {
      const t = LIFE_TIMERS[s];
      expect(t.includes('close'), s).toBe(s.includes('closing') || s.includes('peer-closed'));
      expect(t.includes('grace'), s).toBe(s.endsWith('rx-error'));
      expect(t.includes('fpdu'), s).toBe(['startup', 'open', 'closing', 'closing-fin-sent'].includes(s));
      expect(t.includes('idle'), s).toBe(s !== 'closed');
    }
  });

  it('the RFC 5044 teardown paths, event by event', () => {
    const walk = (from: LifeState, ...events: (typeof LIFE_EVENTS)[number][]) =>
      events.reduce<LifeState>((s, e) => transition(s, e), from);
    // Local close first: our FIN goes, then the peer's comes.
    expect(walk('open', 'local-close', 'local-fin-done', 'peer-fin')).toBe('closed');
    // The peer's FIN first: answered with ours.
    expect(walk('open', 'peer-fin', 'local-fin-done')).toBe('closed');
    // Both at once.
    expect(walk('open', 'local-close', 'peer-fin', 'local-fin-done')).toBe('closed');
    // A receive error, the ULP's Terminate and close (RFC 5044 §8, RFC 5040 §4.8).
    expect(walk('open', 'rx-error', 'local-close', 'local-fin-done', 'peer-fin')).toBe('closed');
    // The Responder closes before the Initiator's first FPDU, which still arrives.
    expect(walk('startup', 'local-close', 'first-fpdu', 'local-fin-done', 'peer-fin')).toBe('closed');
    expect(walk('startup', 'first-fpdu')).toBe('open');
  });
});

// ----- real connections -----

const CLOSE_TIMEOUT_MS = 5000;

/** Node's Timeout objects say whether they were cleared or ran (`_destroyed`): internal, long stable. */
type Timer = NodeJS.Timeout & { _destroyed?: boolean };

/** Every timer armed through the global `setTimeout` (the stream's, the transport's) while a test runs. */
let armed: { timer: Timer; ms: number | undefined }[] = [];
beforeEach(() => {
  armed = [];
  const real = globalThis.setTimeout;
  vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms?: number, ...args: unknown[]) => {
    const timer = real(fn, ms, ...args) as Timer;
    armed.push({ timer, ms });
    return timer;
  }) as unknown as typeof setTimeout);
});
afterEach(() => {
  vi.restoreAllMocks();
});

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}
function activeSockets(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
}

interface Watched {
  readonly conn: MpaTcpConnection;
  readonly closed: Promise<LlpCloseEvent>;
  /** closed$ emissions so far. */
  count(): number;
  /** Socket 'close' events so far. */
  socketCloses(): number;
  /** Debug events the transport logged for this connection. */
  readonly events: string[];
}

const log = new Map<string, string[]>();
function logger() {
  return {
    debug(event: string, fields?: Readonly<Record<string, unknown>>) {
      const id = fields?.['connection'];
      if (typeof id !== 'string') return;
      let l = log.get(id);
      if (!l) log.set(id, (l = []));
      l.push(event);
    },
  };
}

function watch(conn: LlpConnection): Watched {
  const c = conn as MpaTcpConnection;
  let n = 0;
  let closes = 0;
  c.closed$.subscribe(() => n++);
  c.stream.socket.on('close', () => closes++);
  if (!log.has(c.id)) log.set(c.id, []);
  return {
    conn: c,
    closed: firstValueFrom(c.closed$),
    count: () => n,
    socketCloses: () => closes,
    events: log.get(c.id) as string[],
  };
}

async function pair(t: MpaTcpTransport): Promise<[Watched, Watched]> {
  const listener = (await t.listen({ host: '127.0.0.1', port: 0 })) as MpaTcpListener;
  try {
    const accepted = firstValueFrom(listener.connections$);
    const a = await t.connect(listener.address);
    return [watch(a), watch(await accepted)];
  } finally {
    await listener.close();
  }
}

function transport(): MpaTcpTransport {
  return mpaTcp({ closeTimeoutMs: CLOSE_TIMEOUT_MS, logger: logger() });
}

/** Both ends closed once, sockets gone, no timer of theirs left: checked a moment after, so nothing came late. */
async function settled(baseline: { timers: number; sockets: number }, ...ends: Watched[]): Promise<void> {
  for (let i = 0; i < 100 && activeSockets() > baseline.sockets; i++) await sleep(10);
  await sleep(50);
  for (const w of ends) {
    expect(w.count(), `${w.conn.id}: closed$ fired once`).toBe(1);
    expect(w.conn.state).toBe('closed');
    expect(w.conn.stream.socket.destroyed).toBe(true);
    expect(w.socketCloses(), `${w.conn.id}: the socket closed once`).toBe(1);
    expect(w.events).not.toContain('mpa.lifecycle.illegal');
  }
  expect(activeSockets(), 'no TCP handle left').toBe(baseline.sockets);
  expect(activeTimers(), "no ref'd timer left").toBeLessThanOrEqual(baseline.timers);
  const pending = armed.filter((a) => !a.timer._destroyed);
  expect(
    pending.map((a) => a.ms),
    'every timer armed was cleared or ran',
  ).toEqual([]);
}

function baseline() {
  return { timers: activeTimers(), sockets: activeSockets() };
}

const count = (events: string[], e: string) => events.filter((x) => x === e).length;

describe('real connections end once, with no timer left', () => {
  it('local close first: the Initiator closes after traffic both ways; both sides close gracefully', async () => {
    const base = baseline();
    const started = Date.now();
    const [a, b] = await pair(transport());
    const got: Uint8Array[] = [];
    b.conn.stream.setReceiver((u) => {
      got.push(u.chunks[0] as Uint8Array);
      b.conn.stream.send([pattern(200, got.length)]);
    });
    a.conn.stream.setReceiver(() => {});
    for (let i = 1; i <= 5; i++) a.conn.stream.send([pattern(1000, i)]);
    await a.conn.close();
    expect(await a.closed).toMatchObject({ graceful: true, initiator: 'local' });
    expect(await b.closed).toMatchObject({ graceful: true, initiator: 'remote' });
    expect(got.length).toBe(5);
    await settled(base, a, b);
    expect(count(a.events, 'mpa.close')).toBe(1);
    expect(count(b.events, 'mpa.close')).toBe(1);
    expect([...a.events, ...b.events]).not.toContain('mpa.abort');
    expect(Date.now() - started, 'no close waited for a timer').toBeLessThan(CLOSE_TIMEOUT_MS / 2);
  });

  it('peer close first: the Responder closes; the Initiator answers its FIN; both graceful', async () => {
    const base = baseline();
    const started = Date.now();
    const [a, b] = await pair(transport());
    b.conn.stream.setReceiver(() => {});
    a.conn.stream.setReceiver(() => {});
    a.conn.stream.send([pattern(64, 1)]);
    b.conn.stream.send([pattern(64, 2)]);
    await sleep(20);
    await b.conn.close();
    expect(await b.closed).toMatchObject({ graceful: true, initiator: 'local' });
    expect(await a.closed).toMatchObject({ graceful: true, initiator: 'remote' });
    // A close after the stream closed resolves at once; it changes nothing.
    await a.conn.close();
    await settled(base, a, b);
    expect(Date.now() - started).toBeLessThan(CLOSE_TIMEOUT_MS / 2);
  });

  it('both close at once: each FIN crosses the other; both graceful, local', async () => {
    const base = baseline();
    const [a, b] = await pair(transport());
    b.conn.stream.setReceiver(() => {});
    a.conn.stream.setReceiver(() => {});
    a.conn.stream.send([pattern(64, 1)]);
    await sleep(20);
    await Promise.all([a.conn.close(), b.conn.close()]);
    expect(await a.closed).toMatchObject({ graceful: true });
    expect(await b.closed).toMatchObject({ graceful: true });
    await settled(base, a, b);
  });

  it('peer reset mid-stream: the Responder aborts while FPDUs flow; the Initiator closes once, not graceful, every send settled', async () => {
    const base = baseline();
    const [a, b] = await pair(transport());
    let received = 0;
    b.conn.stream.setReceiver(() => {
      received++;
      if (received === 20) b.conn.abort(); // RST, with more FPDUs on their way
    });
    const outcomes: (LlpError | undefined)[] = [];
    const n = 400;
    const chunk = pattern(16 * 1024, 3);
    let sent = 0;
    const pump = async () => {
      while (sent < n && a.conn.state === 'open') {
        if (!a.conn.stream.send([chunk], (e) => outcomes.push(e))) await a.conn.stream.waitForDrain().catch(() => {});
        sent++;
      }
    };
    await pump();
    const ev = await a.closed;
    expect(ev).toMatchObject({ graceful: false, initiator: 'remote' });
    expect(ev.error?.code).toBe('ERR_LLP_CONNECTION_ABORTED');
    expect(await b.closed).toMatchObject({ graceful: false, initiator: 'local' });
    await settled(base, a, b);
    expect(outcomes.length, 'every send heard how it ended').toBe(sent);
  });

  it('peer reset inside an FPDU (raw Initiator): the Responder closes once with a lost-connection error', async () => {
    const { base, raw, b } = await rawInitiator();
    raw.socket.write(fpdu(100).subarray(0, 50));
    await sleep(20);
    raw.socket.resetAndDestroy();
    const ev = await b.closed;
    expect(ev).toMatchObject({ graceful: false, initiator: 'remote' });
    expect(ev.error?.code).toBe('ERR_LLP_CONNECTION_ABORTED');
    await raw.closed;
    await settled(base, b);
  });

  it('peer FIN inside an FPDU (raw Initiator): RFC 5044 §8 code 1, the Responder resets and closes once', async () => {
    const { base, raw, b } = await rawInitiator();
    raw.socket.write(fpdu(100));
    raw.socket.end(fpdu(100).subarray(0, 30));
    const ev = await b.closed;
    expect(ev).toMatchObject({ graceful: false, initiator: 'local' });
    expect(ev.error).toMatchObject({ code: 'ERR_LLP_PROTOCOL', violation: 'stream-ended' });
    expect(await raw.closed).toMatchObject({ reset: true });
    await settled(base, b);
  });

  it('close during startup: the Responder closes before the Initiator’s first FPDU; its held send is failed, never sent; both graceful', async () => {
    const base = baseline();
    const started = Date.now();
    const [a, b] = await pair(transport());
    const got: Uint8Array[] = [];
    a.conn.stream.setReceiver((u) => got.push(u.chunks[0] as Uint8Array));
    b.conn.stream.setReceiver(() => {});
    // RFC 5044 §7.1.2: held until the Initiator's first FPDU, which never comes.
    const done = new Promise<LlpError | undefined>((r) => b.conn.stream.send([pattern(32, 1)], r));
    await b.conn.close();
    expect(await done).toBeInstanceOf(MpaFpduNotSentError);
    expect(await b.closed).toMatchObject({ graceful: true, initiator: 'local' });
    expect(await a.closed).toMatchObject({ graceful: true, initiator: 'remote' });
    expect(got.length).toBe(0);
    await settled(base, a, b);
    expect(Date.now() - started).toBeLessThan(CLOSE_TIMEOUT_MS / 2);
  });

  it('close during startup: the Responder closes, and the Initiator’s first FPDU still arrives before its FIN', async () => {
    const base = baseline();
    const [a, b] = await pair(transport());
    const got: Uint8Array[] = [];
    b.conn.stream.setReceiver((u) => got.push(u.chunks[0] as Uint8Array));
    a.conn.stream.setReceiver(() => {});
    const closing = b.conn.close();
    a.conn.stream.send([pattern(40, 7)]); // crosses the Responder's FIN
    await closing;
    expect(await a.closed).toMatchObject({ graceful: true, initiator: 'remote' });
    expect(got.length, 'delivered in closing: the FIN follows it').toBe(1);
    await settled(base, a, b);
  });

  it('close during startup: the Initiator closes right after connecting, before any FPDU', async () => {
    const base = baseline();
    const [a, b] = await pair(transport());
    b.conn.stream.setReceiver(() => {});
    await a.conn.close();
    expect(await a.closed).toMatchObject({ graceful: true, initiator: 'local' });
    expect(await b.closed).toMatchObject({ graceful: true, initiator: 'remote' });
    await settled(base, a, b);
  });

  it('abort during startup: the Responder aborts with a held send; the Initiator sees a reset', async () => {
    const base = baseline();
    const [a, b] = await pair(transport());
    a.conn.stream.setReceiver(() => {});
    const done = new Promise<LlpError | undefined>((r) => b.conn.stream.send([pattern(32, 1)], r));
    b.conn.abort();
    expect(await done).toBeInstanceOf(MpaFpduNotSentError);
    expect(await b.closed).toMatchObject({ graceful: false, initiator: 'local' });
    expect(await a.closed).toMatchObject({ graceful: false, initiator: 'remote' });
    await settled(base, a, b);
  });
});

/** A Responder whose Initiator is a raw socket: the MPA Request sent, the Reply read, a receiver set. */
async function rawInitiator() {
  const base = baseline();
  const listener = (await transport().listen({ host: '127.0.0.1', port: 0 })) as MpaTcpListener;
  const accepted = firstValueFrom(listener.connections$);
  const raw = await rawConnect(listener.address.port as number);
  raw.socket.write(mpaRequest());
  await raw.waitFor(20);
  const b = watch(await accepted);
  await listener.close();
  b.conn.stream.setReceiver(() => {});
  return { base, raw, b };
}

/** One FPDU carrying `length` octets (RFC 5044 §4.1). */
function fpdu(length: number): Buffer {
  const parts: Uint8Array[] = [];
  new FpduWriter({ crc: true, markers: false }).frame([pattern(length, 9)], length, parts);
  return Buffer.concat(parts.map((p) => Buffer.from(p)));
}
