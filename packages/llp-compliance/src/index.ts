/**
 * @rddp/llp-compliance — the suite every LLP plugin runs (the js-libp2p interface-compliance-tests way):
 *
 *   import { tests } from '@rddp/llp-compliance';
 *   tests({ setup: async () => ({ connect: () => myPair() }), teardown: async () => {} });
 *
 * Each check names the RFC 5041 requirement it stands for. Checks that assume a reliable or ordered LLP,
 * several streams, private data or reject support are skipped, with the reason, where the connection's
 * capabilities or the context say otherwise (DDPP core draft §3 classes).
 *
 * The suite imports `describe`/`it`/hooks from 'vitest' and nothing else of the runner: it sets its own
 * timeouts (`ComplianceFactory.timeoutMs`) and needs no configuration of the project that runs it.
 */
import {
  InvalidArgumentError,
  isLlpError,
  type LlpAddress,
  type LlpCloseEvent,
  type LlpConnection,
  type LlpConnectOptions,
  type LlpListenOptions,
  type LlpStream,
  type LlpTransport,
  StreamClosedError,
  type Ulpdu,
  UlpduTooLargeError,
} from '@rddp/llp';
import { pattern } from '@rddp/llp/testing';
import { firstValueFrom } from 'rxjs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, type TestContext, it as vitestIt } from 'vitest';

export interface ComplianceContext {
  /** A fresh connected pair: [initiator, responder]. `streams` asks for that many LLP streams where supported. */
  connect(options?: { streams?: number; privateData?: Uint8Array }): Promise<[LlpConnection, LlpConnection]>;
  /**
   * Optional: connect through a listener whose responder rejects with `privateData`; must reject with
   * ConnectionRejectedError carrying it. Omit when the transport has no reject.
   */
  connectRejected?(privateData: Uint8Array): Promise<unknown>;
  /** Optional: the largest ULPDU worth testing (defaults to min(MULPDU, 256 KiB)). */
  readonly maxTestedUlpdu?: number;
}

/**
 * The usual context for a transport: each pair is made through a fresh listener on `address` (closed once
 * the pair is up), and `connectRejected` through a listener whose responder refuses. `connect` and
 * `listen` options apply to every attempt (e.g. MPA parameters of each side).
 */
export function transportContext(
  transport: LlpTransport,
  address: LlpAddress,
  options: { readonly connect?: LlpConnectOptions; readonly listen?: LlpListenOptions } = {},
): ComplianceContext {
  return {
    async connect(o) {
      const listener = await transport.listen(address, options.listen);
      try {
        const accepted = firstValueFrom(listener.connections$);
        const a = await transport.connect(listener.address, { ...options.connect, ...o });
        return [a, await accepted];
      } finally {
        await listener.close();
      }
    },
    async connectRejected(privateData) {
      const listener = await transport.listen(address, {
        ...options.listen,
        onConnectRequest: () => ({ accept: false, privateData }),
      });
      try {
        return await transport.connect(listener.address, options.connect);
      } finally {
        await listener.close();
      }
    },
  };
}

export interface ComplianceFactory {
  setup(): Promise<ComplianceContext>;
  teardown(): Promise<void>;
  /** Timeout of each test and hook, in milliseconds (default 30 000: the waits inside go up to 20 s). */
  readonly timeoutMs?: number;
}

/** Whether `x` looks like an LLP connection (what a connect that should have been rejected returns). */
function isConnection(x: unknown): x is LlpConnection {
  return typeof x === 'object' && x !== null && typeof (x as LlpConnection).abort === 'function';
}

/** What a value is, for an assertion message. */
function describeValue(x: unknown): string {
  if (x === undefined) return 'undefined (the connect succeeded)';
  if (x instanceof Error) return `${x.name}${'code' in x ? ` ${String(x.code)}` : ''}: ${x.message}`;
  return typeof x === 'object' && x !== null ? (x.constructor?.name ?? 'object') : String(x);
}

/** Collects every ULPDU a stream receives, copying it (the chunks are only valid during the call). */
export function collect(stream: LlpStream): {
  readonly ulpdus: Uint8Array[];
  wait(n: number, ms?: number): Promise<void>;
} {
  const ulpdus: Uint8Array[] = [];
  let waiters: { n: number; resolve(): void }[] = [];
  stream.setReceiver((u: Ulpdu) => {
    const copy = new Uint8Array(u.length);
    let off = 0;
    for (const c of u.chunks) {
      copy.set(c, off);
      off += c.byteLength;
    }
    if (off !== u.length) throw new Error(`chunks sum to ${off}, length says ${u.length}`);
    ulpdus.push(copy);
    waiters = waiters.filter((w) => {
      if (ulpdus.length >= w.n) w.resolve();
      return ulpdus.length < w.n;
    });
  });
  return {
    ulpdus,
    wait(n, ms = 20_000) {
      if (ulpdus.length >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out: ${ulpdus.length}/${n} ULPDUs received`)), ms);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
        });
      });
    },
  };
}

/** Equal in order on an ordered LLP; equal as multisets on an unordered one (DDPP core draft §3.2). */
function expectSame(got: readonly Uint8Array[], sent: readonly Uint8Array[], ordered: boolean): void {
  if (ordered) {
    expect(got).toEqual(sent);
    return;
  }
  const key = (u: Uint8Array) => Buffer.from(u).toString('hex');
  expect(got.map(key).sort()).toEqual(sent.map(key).sort());
}

async function sendAll(stream: LlpStream, ulpdus: readonly Uint8Array[]): Promise<void> {
  for (const u of ulpdus) if (!stream.send([u])) await stream.waitForDrain();
}

function s0(c: LlpConnection): LlpStream {
  return c.streams[0] as LlpStream;
}

/**
 * Declares the suite (vitest's `describe`/`it`) for the LLP that `factory` sets up; call it at the top level
 * of a test file. Each check names the RFC 5041 requirement it stands for.
 *
 * @example The suite over the loopback LLP, each pair through a fresh listener (a vitest spec)
 * ```ts
 * import { tests, transportContext } from '@rddp/llp-compliance';
 * import { loopback } from '@rddp/llp-loopback';
 *
 * tests({
 *   setup: async () => transportContext(loopback(), { host: 'compliance', port: 0 }),
 *   teardown: async () => {},
 * });
 * ```
 */
export function tests(factory: ComplianceFactory): void {
  const timeout = factory.timeoutMs ?? 30_000;
  /** vitest's `it`, with the suite's own timeout. */
  const it = (name: string, fn: (t: TestContext) => Promise<void>) => vitestIt(name, fn, timeout);
  describe('LLP compliance (RFC 5041 §3, §6)', () => {
    let ctx: ComplianceContext;
    const open: LlpConnection[] = [];
    const escaped: unknown[] = [];
    const onEscape = (e: unknown) => escaped.push(e);

    beforeAll(async () => {
      ctx = await factory.setup();
    }, timeout);
    afterAll(async () => {
      await factory.teardown();
    }, timeout);
    beforeEach(() => {
      escaped.length = 0;
      process.on('uncaughtException', onEscape);
      process.on('unhandledRejection', onEscape);
    });
    afterEach(async () => {
      for (const c of open.splice(0)) c.abort();
      // Let pending callbacks run, then check nothing was thrown into the void.
      await new Promise((r) => setTimeout(r, 20));
      process.off('uncaughtException', onEscape);
      process.off('unhandledRejection', onEscape);
      expect(escaped, 'errors thrown into the void').toEqual([]);
    }, timeout);
    const unreliable = 'the LLP declares itself unreliable (capabilities.reliable false): nothing to wait for';
    const unordered = 'the LLP declares itself unreliable or unordered: no order to check';

    async function pair(options?: { streams?: number; privateData?: Uint8Array }) {
      const p = await ctx.connect(options);
      open.push(...p);
      return p;
    }

    it('RFC 5041 §3: every stream reports a positive MULPDU, also on mulpdu$', async () => {
      const [a, b] = await pair();
      for (const c of [a, b]) {
        expect(c.streams.length).toBeGreaterThanOrEqual(1);
        const s = s0(c);
        expect(s.mulpdu).toBeGreaterThan(0);
        expect(await firstValueFrom(s.mulpdu$)).toBe(s.mulpdu);
      }
      expect(a.role).toBe('initiator');
      expect(b.role).toBe('responder');
    });

    it('RFC 5041 §4.1: an empty ULPDU (never produced by DDP) is delivered as length 0 or refused with InvalidArgumentError', async () => {
      const [a, b] = await pair();
      const got = collect(s0(b));
      let refused = false;
      try {
        s0(a).send([new Uint8Array(0)]);
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidArgumentError);
        refused = true;
      }
      const marker = pattern(9, 1);
      await sendAll(s0(a), [marker]);
      if (!a.capabilities.reliable) return;
      await got.wait(refused ? 1 : 2);
      expect(got.ulpdus.map((u) => u.length)).toEqual(
        refused ? [9] : a.capabilities.ordered ? [0, 9] : expect.arrayContaining([0, 9]),
      );
    });

    it('RFC 5041 §3: ULPDUs of length 1, MULPDU-1 and MULPDU arrive with their exact length and octets', async () => {
      const [a, b] = await pair();
      const max = Math.min(s0(a).mulpdu, ctx.maxTestedUlpdu ?? 256 * 1024);
      const lengths = [1, 2, 3, 4, 5, 7, 100, max - 1, max];
      const sent = lengths.map((n, i) => pattern(n, i));
      const got = collect(s0(b));
      await sendAll(s0(a), sent);
      const caps = a.capabilities;
      if (!caps.reliable) return; // unreliable LLPs may lose any of them (DDPP core draft §3.3/§3.4)
      await got.wait(sent.length);
      const expected = caps.ordered ? sent : [...sent].sort((x, y) => x.length - y.length);
      const actual = caps.ordered ? got.ulpdus : [...got.ulpdus].sort((x, y) => x.length - y.length);
      expect(actual.map((u) => u.length)).toEqual(expected.map((u) => u.length));
      for (let i = 0; i < expected.length; i++) expect(actual[i]).toEqual(expected[i]);
    });

    it('RFC 5041 §5.2: a ULPDU over MULPDU is refused with UlpduTooLargeError and nothing is sent', async () => {
      const [a, b] = await pair();
      const got = collect(s0(b));
      const s = s0(a);
      expect(() => s.send([new Uint8Array(s.mulpdu + 1)])).toThrow(UlpduTooLargeError);
      // Also when the excess comes from several parts.
      expect(() => s.send([new Uint8Array(s.mulpdu), new Uint8Array(1)])).toThrow(UlpduTooLargeError);
      try {
        s.send([new Uint8Array(s.mulpdu + 1)]);
      } catch (e) {
        expect(isLlpError(e, 'ERR_LLP_ULPDU_TOO_LARGE')).toBe(true);
      }
      s.send([pattern(3, 3)]);
      if (!a.capabilities.reliable) return;
      await got.wait(1);
      await new Promise((r) => setTimeout(r, 20));
      expect(got.ulpdus).toEqual([pattern(3, 3)]);
    });

    it('RFC 5041 §3: many small and a few large ULPDUs arrive in order', async (t) => {
      const [a, b] = await pair();
      if (!a.capabilities.reliable || !a.capabilities.ordered) return t.skip(unordered);
      const max = Math.min(s0(a).mulpdu, ctx.maxTestedUlpdu ?? 256 * 1024);
      const sent: Uint8Array[] = [];
      for (let i = 0; i < 2000; i++) sent.push(pattern(1 + (i % 61), i));
      for (let i = 0; i < 8; i++) sent.splice(i * 250, 0, pattern(max - i, 10_000 + i));
      const got = collect(s0(b));
      await sendAll(s0(a), sent);
      await got.wait(sent.length);
      expect(got.ulpdus.length).toBe(sent.length);
      // Compared octet for octet by Buffer.compare: toEqual walks a Uint8Array one element at a time.
      const differ = sent.findIndex((s, i) => {
        const g = got.ulpdus[i] as Uint8Array;
        return (
          Buffer.compare(
            Buffer.from(g.buffer, g.byteOffset, g.byteLength),
            Buffer.from(s.buffer, s.byteOffset, s.byteLength),
          ) !== 0
        );
      });
      expect(differ, `ULPDU ${differ} arrived changed`).toBe(-1);
    });

    it('RFC 5041 §3: traffic flows both ways at once', async (t) => {
      const [a, b] = await pair();
      if (!a.capabilities.reliable) return t.skip(unreliable);
      const fromA = Array.from({ length: 200 }, (_, i) => pattern(64 + i, i));
      const fromB = Array.from({ length: 200 }, (_, i) => pattern(32 + i, 500 + i));
      const atB = collect(s0(b));
      const atA = collect(s0(a));
      await Promise.all([sendAll(s0(a), fromA), sendAll(s0(b), fromB)]);
      await Promise.all([atB.wait(200), atA.wait(200)]);
      if (a.capabilities.ordered) {
        expect(atB.ulpdus).toEqual(fromA);
        expect(atA.ulpdus).toEqual(fromB);
      }
    });

    it('RFC 5043 / RFC 5041 §3: several streams of one connection are independent', async (t) => {
      const [a, b] = await pair({ streams: 4 });
      if (a.streams.length < 2) return t.skip('a single-stream LLP (e.g. MPA/TCP): one stream per connection');
      if (!a.capabilities.reliable) return t.skip(unreliable);
      const n = a.streams.length;
      const sets = a.streams.map((_, k) => Array.from({ length: 50 }, (_, i) => pattern(10 + k + i, k * 1000 + i)));
      const gots = b.streams.map((s) => collect(s));
      // Stream 0's reader is paused: the others must still flow.
      (b.streams[0] as LlpStream).pause();
      await Promise.all(a.streams.slice(1).map((s, k) => sendAll(s, sets[k + 1] as Uint8Array[])));
      await Promise.all(gots.slice(1).map((g) => g.wait(50)));
      for (let k = 1; k < n; k++) expectSame(gots[k]?.ulpdus ?? [], sets[k] ?? [], a.capabilities.ordered);
      (b.streams[0] as LlpStream).resume();
      await sendAll(a.streams[0] as LlpStream, sets[0] as Uint8Array[]);
      await gots[0]?.wait(50);
      expectSame(gots[0]?.ulpdus ?? [], sets[0] ?? [], a.capabilities.ordered);
    });

    it('backpressure: facing a reader that does not read, send() returns false and waitForDrain resolves after resume', async () => {
      const [a, b] = await pair();
      const got = collect(s0(b));
      s0(b).pause();
      const s = s0(a);
      const size = Math.min(s.mulpdu, 16 * 1024);
      let accepted = 0;
      let sawFalse = false;
      // Offer up to 256 MiB: a conforming LLP says stop long before.
      for (let i = 0; i < (256 << 20) / size; i++) {
        accepted++;
        if (!s.send([pattern(size, i)])) {
          sawFalse = true;
          break;
        }
        if (i % 64 === 0) await new Promise((r) => setImmediate(r));
      }
      expect(sawFalse).toBe(true);
      expect(s.needsDrain).toBe(true);
      const drained = s.waitForDrain();
      s0(b).resume();
      await drained;
      if (a.capabilities.reliable) await got.wait(accepted);
    });

    it('RFC 5041 §6.2: graceful teardown delivers everything sent before it, then closes both sides', async (t) => {
      const [a, b] = await pair();
      if (!a.capabilities.reliable) return t.skip(unreliable);
      const sent = Array.from({ length: 300 }, (_, i) => pattern(100 + i, i));
      const got = collect(s0(b));
      for (const u of sent) s0(a).send([u]);
      const bClosed = firstValueFrom(b.closed$);
      const aClosed = firstValueFrom(a.closed$);
      await a.close();
      const [ea, eb] = await Promise.all([aClosed, bClosed]);
      expect(got.ulpdus.length).toBe(sent.length);
      if (a.capabilities.ordered) expect(got.ulpdus).toEqual(sent);
      expect(ea.graceful).toBe(true);
      expect(eb.graceful).toBe(true);
      expect(eb.initiator).toBe('remote');
      expect(a.state).toBe('closed');
    });

    it('RFC 5041 §6.2: abortive teardown surfaces an error on the peer', async () => {
      const [a, b] = await pair();
      collect(s0(b));
      const bClosed = firstValueFrom(b.closed$);
      a.abort();
      const e: LlpCloseEvent = await bClosed;
      expect(e.graceful).toBe(false);
      expect(e.initiator).toBe('remote');
      expect(isLlpError(e.error)).toBe(true);
      const ea = await firstValueFrom(a.closed$);
      expect(ea.graceful).toBe(false);
      expect(ea.initiator).toBe('local');
    });

    it('send after close throws StreamClosedError; closed$ replays to late subscribers', async () => {
      const [a, b] = await pair();
      collect(s0(b));
      await a.close();
      expect(() => s0(a).send([new Uint8Array(1)])).toThrow(StreamClosedError);
      const late = await firstValueFrom(a.closed$);
      expect(late.graceful).toBe(true);
      await firstValueFrom(b.closed$);
      expect(() => s0(b).send([new Uint8Array(1)])).toThrow(StreamClosedError);
    });

    it('waitForDrain honours AbortSignal', async () => {
      const [a, b] = await pair();
      collect(s0(b));
      s0(b).pause();
      const s = s0(a);
      const size = Math.min(s.mulpdu, 16 * 1024);
      for (let i = 0; i < (256 << 20) / size && s.send([new Uint8Array(size)]); i++) {
        if (i % 64 === 0) await new Promise((r) => setImmediate(r));
      }
      expect(s.needsDrain).toBe(true);
      const ac = new AbortController();
      const p = s.waitForDrain(ac.signal);
      ac.abort();
      await expect(p).rejects.toMatchObject({ code: 'ERR_LLP_ABORTED' });
      s0(b).resume();
    });

    it('ULPDUs arriving before a receiver is set are held and handed over in order', async (t) => {
      const [a, b] = await pair();
      if (!a.capabilities.reliable || !a.capabilities.ordered) return t.skip(unordered);
      const sent = Array.from({ length: 20 }, (_, i) => pattern(50, i));
      await sendAll(s0(a), sent);
      await new Promise((r) => setTimeout(r, 30));
      const got = collect(s0(b));
      await got.wait(20);
      expect(got.ulpdus).toEqual(sent);
    });

    it('RFC 5041 §6.1: private data passes both ways at setup', async (t) => {
      const [probe] = await pair();
      const max = probe.capabilities.maxPrivateData;
      if (max === 0) return t.skip('the LLP carries no private data (capabilities.maxPrivateData is 0)');
      const pd = pattern(Math.min(40, max), 77);
      const [a, b] = await pair({ privateData: pd });
      expect(b.setup.remotePrivateData).toEqual(pd);
      expect(a.setup.localPrivateData).toEqual(pd);
      expect(b.setup.localPrivateData).toEqual(a.setup.remotePrivateData);
    });

    it('a rejected connection carries the responder private data', async (t) => {
      if (!ctx.connectRejected)
        return t.skip('the context has no connectRejected: the transport does not support rejecting a connection');
      const pd = pattern(12, 5);
      const err = await ctx.connectRejected(pd).then(
        (made: unknown) => {
          for (const c of Array.isArray(made) ? made : [made]) if (isConnection(c)) open.push(c);
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(
        isLlpError(err, 'ERR_LLP_CONNECTION_REJECTED'),
        `the responder rejected (onConnectRequest answered { accept: false }) but connectRejected ended with ${describeValue(err)}: ` +
          'a transport that supports reject must fail the connect with ConnectionRejectedError (ERR_LLP_CONNECTION_REJECTED) ' +
          "carrying the responder's private data; a transport without reject support must leave connectRejected out of its context",
      ).toBe(true);
      expect((err as { privateData: Uint8Array }).privateData).toEqual(pd);
    });
  });
}
