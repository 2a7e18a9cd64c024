import {
  AddressInUseError,
  assertFitsMulpdu,
  BaseLlpStream,
  CapabilityError,
  ConnectionAbortedError,
  ConnectionRefusedError,
  ConnectionRejectedError,
  DigestError,
  HeldSubject,
  InvalidArgumentError,
  isLlpError,
  isLlpStream,
  isLlpTransport,
  LlpAbortError,
  LlpProtocolError,
  LlpTimeoutError,
  llpClass,
  OnceSubject,
  ResourceLimitError,
  rfc5041Shortfalls,
  type SendCallback,
  StreamClosedError,
  type Ulpdu,
  UlpduTooLargeError,
  ulpduLength,
  withAbort,
} from '@rddp/llp';
import { firstValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';

const full = {
  reliable: true,
  ordered: true,
  preservesMessageBoundaries: true,
  strongDigest: true,
  maxStreams: 1,
  maxPrivateData: 512,
};

describe('capabilities (RFC 5041 §3, DDPP core draft §3)', () => {
  it('RFC 5041 §3: an LLP meeting every requirement has no shortfalls', () => {
    expect(rfc5041Shortfalls(full)).toEqual([]);
  });
  it('RFC 5041 §3: each missing requirement is named', () => {
    const s = rfc5041Shortfalls({
      ...full,
      reliable: false,
      ordered: false,
      preservesMessageBoundaries: false,
      strongDigest: false,
    });
    expect(s).toHaveLength(4);
    expect(s.join(' ')).toMatch(/reliable.*ordered.*boundaries.*CRC32c/);
  });
  it('RFC 5041 §3: the digest requirement can be relaxed on purpose, and only it', () => {
    expect(rfc5041Shortfalls({ ...full, strongDigest: false }, { requireDigest: false })).toEqual([]);
    expect(rfc5041Shortfalls({ ...full, ordered: false }, { requireDigest: false })).toHaveLength(1);
  });
  it('DDPP core draft §3.1–3.4: the four LLP classes', () => {
    expect(llpClass({ reliable: true, ordered: true })).toBe('reliable-ordered');
    expect(llpClass({ reliable: true, ordered: false })).toBe('reliable-unordered');
    expect(llpClass({ reliable: false, ordered: true })).toBe('unreliable-ordered');
    expect(llpClass({ reliable: false, ordered: false })).toBe('unreliable-unordered');
  });
});

describe('errors: one class per condition, stable codes', () => {
  const all = [
    new UlpduTooLargeError(10, 5),
    new StreamClosedError(),
    new ConnectionAbortedError('x'),
    new ConnectionRefusedError('x'),
    new ConnectionRejectedError('x', new Uint8Array([1])),
    new LlpTimeoutError('x'),
    new LlpAbortError('x'),
    new DigestError('x'),
    new LlpProtocolError('x'),
    new InvalidArgumentError('x'),
    new CapabilityError('x'),
    new AddressInUseError('x'),
    new ResourceLimitError('x'),
  ];
  it('every code is distinct and ERR_LLP_ prefixed; name is the class name', () => {
    const codes = all.map((e) => e.code);
    expect(new Set(codes).size).toBe(all.length);
    for (const e of all) {
      expect(e.code).toMatch(/^ERR_LLP_[A-Z_]+$/);
      expect(e.name).toBe(e.constructor.name);
      expect(e).toBeInstanceOf(Error);
      expect(isLlpError(e)).toBe(true);
      expect(isLlpError(e, e.code)).toBe(true);
    }
    expect(isLlpError(new Error('plain'))).toBe(false);
    expect(isLlpError(all[0], 'ERR_LLP_STREAM_CLOSED')).toBe(false);
  });
  it('RFC 5041 §5.2: UlpduTooLargeError says both lengths', () => {
    const e = new UlpduTooLargeError(70000, 65512);
    expect(e.message).toContain('70000');
    expect(e.message).toContain('65512');
    expect(e.length).toBe(70000);
    expect(e.mulpdu).toBe(65512);
  });
  it('RFC 5041 §6.1: a rejection keeps the private data', () => {
    expect([...new ConnectionRejectedError('no', new Uint8Array([7, 8])).privateData]).toEqual([7, 8]);
  });
});

describe('util', () => {
  it('ulpduLength sums the parts; assertFitsMulpdu refuses over MULPDU (RFC 5041 §5.2)', () => {
    const parts = [new Uint8Array(3), new Uint8Array(0), new Uint8Array(4)];
    expect(ulpduLength(parts)).toBe(7);
    expect(assertFitsMulpdu(parts, 7)).toBe(7);
    expect(() => assertFitsMulpdu(parts, 6)).toThrow(UlpduTooLargeError);
  });
  it('withAbort rejects with LlpAbortError carrying the reason, and runs the undo', async () => {
    const ac = new AbortController();
    let undone = false;
    const p = withAbort(new Promise(() => {}), ac.signal, () => {
      undone = true;
    });
    ac.abort('why');
    const e = await p.catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LlpAbortError);
    expect((e as Error).cause).toBe('why');
    expect(undone).toBe(true);
    await expect(withAbort(Promise.resolve(1), AbortSignal.abort())).rejects.toBeInstanceOf(LlpAbortError);
    await expect(withAbort(Promise.resolve(2), new AbortController().signal)).resolves.toBe(2);
  });
  it('HeldSubject holds values until the first subscriber, then passes them through', async () => {
    const h = new HeldSubject<number>();
    h.next(1);
    h.next(2);
    const all = firstValueFrom(h.observable.pipe(toArray()));
    h.next(3);
    h.complete();
    expect(await all).toEqual([1, 2, 3]);
  });
  it('OnceSubject fires once and replays to late subscribers', async () => {
    const o = new OnceSubject<string>();
    expect(o.fire('a')).toBe(true);
    expect(o.fire('b')).toBe(false);
    expect(await firstValueFrom(o.observable.pipe(toArray()))).toEqual(['a']);
  });
});

/** A minimal stream over an in-memory "wire", to test BaseLlpStream's bookkeeping alone. */
class MemStream extends BaseLlpStream {
  sent: Uint8Array[][] = [];
  reading = true;
  full = false;
  closing = false;
  aborted = false;
  constructor() {
    super(0, 16);
  }
  protected transmit(parts: readonly Uint8Array[], _n: number, done?: SendCallback): boolean {
    this.sent.push([...parts]);
    done?.();
    return !this.full;
  }
  protected setReading(paused: boolean): void {
    this.reading = !paused;
  }
  protected startClose(): void {
    this.closing = true;
  }
  protected startAbort(): void {
    this.aborted = true;
  }
  arrive(u: Ulpdu): void {
    this.deliver(u);
  }
  drain(): void {
    this.full = false;
    this.drained();
  }
  end(): void {
    this.finish({ graceful: true, initiator: 'remote' });
  }
  mss(n: number): void {
    this.setMulpdu(n);
  }
}

describe('BaseLlpStream bookkeeping', () => {
  it('is an LlpStream; guards recognise streams and reject look-alikes', () => {
    expect(isLlpStream(new MemStream())).toBe(true);
    expect(isLlpStream({ send() {} })).toBe(false);
    expect(isLlpTransport({})).toBe(false);
  });
  it('RFC 5041 §5.2: send refuses over MULPDU without transmitting, and follows MULPDU changes', () => {
    const s = new MemStream();
    expect(() => s.send([new Uint8Array(17)])).toThrow(UlpduTooLargeError);
    expect(s.sent).toHaveLength(0);
    const seen: number[] = [];
    const sub = s.mulpdu$.subscribe((m) => seen.push(m));
    s.mss(8);
    expect(seen).toEqual([16, 8]);
    sub.unsubscribe();
    expect(() => s.send([new Uint8Array(9)])).toThrow(UlpduTooLargeError);
    expect(s.send([new Uint8Array(4), new Uint8Array(4)])).toBe(true);
    expect(s.sent[0]).toHaveLength(2); // parts are handed down as they are, never concatenated
  });
  it('holds ULPDUs until a receiver is set, then hands them over in order', () => {
    const s = new MemStream();
    s.arrive({ length: 1, chunks: [new Uint8Array([1])] });
    s.arrive({ length: 1, chunks: [new Uint8Array([2])] });
    const got: number[] = [];
    s.setReceiver((u) => got.push((u.chunks[0] as Uint8Array)[0] as number));
    s.arrive({ length: 1, chunks: [new Uint8Array([3])] });
    expect(got).toEqual([1, 2, 3]);
  });
  it('backpressure: needsDrain after a false send, waitForDrain resolves on drain, honours AbortSignal', async () => {
    const s = new MemStream();
    s.full = true;
    expect(s.send([new Uint8Array(1)])).toBe(false);
    expect(s.needsDrain).toBe(true);
    await expect(s.waitForDrain(AbortSignal.abort())).rejects.toBeInstanceOf(LlpAbortError);
    const w = s.waitForDrain();
    s.drain();
    await w;
    expect(s.needsDrain).toBe(false);
  });
  it('pause/resume reach the transport', () => {
    const s = new MemStream();
    s.pause();
    expect(s.reading).toBe(false);
    s.resume();
    expect(s.reading).toBe(true);
  });
  it('RFC 5041 §6.2: close starts a graceful close; send after it throws StreamClosedError', async () => {
    const s = new MemStream();
    const closed = s.close();
    expect(s.closing).toBe(true);
    expect(s.state).toBe('closing');
    expect(() => s.send([new Uint8Array(1)])).toThrow(StreamClosedError);
    s.end();
    await closed;
    expect(s.state).toBe('closed');
    expect((await firstValueFrom(s.closed$)).graceful).toBe(true);
  });
  it('RFC 5041 §6.2: abort tears down with an error on closed$, rejects drain waiters', async () => {
    const s = new MemStream();
    s.full = true;
    s.send([new Uint8Array(1)]);
    const w = s.waitForDrain().catch((e: unknown) => e);
    s.abort(new ConnectionAbortedError('test'));
    expect(s.aborted).toBe(true);
    expect(await w).toBeInstanceOf(Error);
    const ev = await firstValueFrom(s.closed$);
    expect(ev.graceful).toBe(false);
    expect(ev.initiator).toBe('local');
    s.abort(); // idempotent
  });
});
