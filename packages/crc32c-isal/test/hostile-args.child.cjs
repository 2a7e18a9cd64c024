'use strict';
/*
 * The child process of hostile-args.test.ts: calls @rddp/crc32c-isal's functions with hostile arguments
 * and judges each outcome against a JavaScript reference, speaking the line protocol of
 * test/support/native-child-harness.cjs (`case`, `fail`, `stats`, `done`; exit 1 when anything failed). A
 * crash shows in the parent as a signal, the last `case` line naming the call.
 *
 *   node hostile-args.child.cjs <mode> [seed] [calls]
 *   mode: attack-spans-alias | fuzz | race
 *
 * A correct outcome is a TypeError or RangeError when an argument is malformed, and otherwise the CRC32c
 * the reference computes; every array lives inside a larger ArrayBuffer whose other octets (guards) must
 * be unchanged afterwards, and what a call writes must be exactly what the reference writes.
 */
const { types } = require('node:util');
const { Worker } = require('node:worker_threads');
const {
  childHarness,
  rng,
  withMarkers: marked,
  isInt,
  taLength,
} = require('../../../test/support/native-child-harness.cjs');
const isal = require('../index.cjs');

const { stats, fail, begin, run } = childHarness({ computed: 0, refused: 0 });

const TABLE = new Int32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  return c;
});
/** CRC32c of `bytes` continuing from `crc` (a finished CRC of what came before, or 0). */
function crcRef(bytes, crc) {
  let c = ~crc;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** v[s, e), or nothing for a detached array (whose subarray would throw). */
const sub = (v, s, e) => (taLength(v) === 0 ? new Uint8Array(0) : v.subarray(s, e));
const GUARD = 64;

/** An array argument: its value, and (for views we made) the ArrayBuffer around it with its guard octets. */
function makeArray(r, size, k, good) {
  const kind = r.pick(
    good
      ? ['u8', 'u8', 'u8', 'sab', 'buffer', 'rab', 'detached']
      : [
          'u8',
          'u8',
          'sab',
          'buffer',
          'rab',
          'detached',
          'u16',
          'clamped',
          'i8',
          'dataview',
          'proxy',
          'fake',
          'ab',
          'array',
          'string',
          'null',
        ],
  );
  const guarded = (Ctor) => {
    const whole = new Uint8Array(new Ctor(size + 2 * GUARD));
    for (let i = 0; i < whole.length; i++) whole[i] = (i * 29 + k * 13 + 3) & 0xff;
    return { v: whole.subarray(GUARD, GUARD + size), whole, before: Uint8Array.from(whole) };
  };
  switch (kind) {
    case 'u8':
      return guarded(ArrayBuffer);
    case 'sab':
      return guarded(SharedArrayBuffer);
    case 'buffer': {
      const b = Buffer.alloc(size);
      for (let i = 0; i < size; i++) b[i] = (i * 7 + k) & 0xff;
      return { v: b };
    }
    case 'rab': {
      // A length-tracking view of a resizable buffer, shrunk before the call.
      const ab = new ArrayBuffer(size + 64, { maxByteLength: size + 128 });
      const v = new Uint8Array(ab);
      for (let i = 0; i < v.length; i++) v[i] = (i * 11 + k) & 0xff;
      ab.resize(size);
      return { v };
    }
    case 'detached': {
      const v = new Uint8Array(size);
      structuredClone(v.buffer, { transfer: [v.buffer] });
      return { v };
    }
    case 'u16':
      return { v: new Uint16Array(size) };
    case 'clamped':
      return { v: new Uint8ClampedArray(size) };
    case 'i8':
      return { v: new Int8Array(size) };
    case 'dataview':
      return { v: new DataView(new ArrayBuffer(size)) };
    case 'proxy':
      return { v: new Proxy(new Uint8Array(size), {}) };
    case 'fake':
      return { v: Object.create(Uint8Array.prototype) };
    case 'ab':
      return { v: new ArrayBuffer(size) };
    case 'array':
      return { v: Array.from({ length: size }, () => 1) };
    case 'string':
      return { v: 'x'.repeat(size) };
    default:
      return { v: null };
  }
}

const isBytes = (v) => types.isUint8Array(v) && !types.isProxy(v);
const bytesLength = (v) => (isBytes(v) ? taLength(v) : -1);

/** Whether views a[ao, ao + an) and b[bo, bo + bn) share memory (both views of one buffer). */
function sharesMemory(a, ao, an, b, bo, bn) {
  if (an <= 0 || bn <= 0 || a.buffer !== b.buffer) return false;
  const x = a.byteOffset + ao;
  const y = b.byteOffset + bo;
  return x < y + bn && y < x + an;
}

const HOSTILE = [NaN, -1, -0.5, 0.5, 1.5, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e300, -1e300, Infinity, -Infinity];
const NOT_NUMBERS = ['0', null, undefined, {}, 1n, { valueOf: () => 0 }, [0], true];

/** Calls `f`, and judges: `expect` is null (must refuse) or a function checking the result. */
function judge(f, expect, guards) {
  let result;
  let error;
  try {
    result = f();
  } catch (e) {
    error = e;
  }
  for (const g of guards) {
    if (!g.whole) continue;
    const w = g.whole;
    const b = g.before;
    for (let i = 0; i < w.length; i++)
      if ((i < GUARD || i >= w.length - GUARD || !g.writes?.(i - GUARD)) && w[i] !== b[i]) {
        fail(`octet ${i - GUARD} of an array changed (${b[i]} → ${w[i]}): a write where none was due`);
        break;
      }
  }
  if (expect === null) {
    stats.refused++;
    if (error === undefined) fail(`malformed arguments, yet it returned ${result}`);
    else if (!(error instanceof TypeError || error instanceof RangeError))
      fail(`${error?.constructor?.name} ${error?.message}, not a TypeError/RangeError`);
    return;
  }
  if (error !== undefined) {
    fail(`well-formed call threw ${error.constructor?.name} ${error.message}`);
    return;
  }
  stats.computed++;
  expect(result);
}

const num = (r, v, p) => (r.chance(p) ? r.pick(r.chance(0.7) ? HOSTILE : NOT_NUMBERS) : v);

function fuzzOne(r, i, seed) {
  const good = r.chance(0.5);
  const p = good ? 0 : 0.15;
  const size = r.pick([0, 1, 7, 40, 600, 1100, 3000]);
  const fn = r.pick(['calculate', 'calculateMarked', 'copyMarked', 'crcFrames']);
  begin(`${fn} seed ${seed} #${i}`);
  const a = makeArray(r, size, 1, good);
  const len = bytesLength(a.v);
  const max = Math.max(len, 0);
  const start = num(r, r.int(max + 1), p);
  const end = num(r, isInt(start, 0, max) ? start + r.int(max - start + 1) : r.int(max + 1), p);
  const crc = num(r, r.chance(0.2) ? -r.int(2 ** 31) : r.int(2 ** 32), p);
  const room = num(r, r.int(509), p);
  const ptr = num(r, r.int(2 ** 32), p);
  const rangeOk = len >= 0 && isInt(start, 0, 2 ** 53 - 1) && isInt(end, 0, 2 ** 53 - 1) && start <= end && end <= len;
  const crcOk = isInt(crc, -(2 ** 31), 2 ** 32 - 1);
  const markOk = isInt(room, 0, 508) && isInt(ptr, 0, 2 ** 32 - 1);
  if (fn === 'calculate') {
    const args = r.chance(p / 3) ? [a.v, start, end] : [a.v, start, end, crc];
    judge(
      () => isal.calculate(...args),
      args.length === 4 && rangeOk && crcOk
        ? (got) => {
            const want = crcRef(sub(a.v, start, end), crc >>> 0);
            if (got !== want) fail(`CRC ${got} instead of ${want}`);
          }
        : null,
      [a],
    );
  } else if (fn === 'calculateMarked') {
    judge(
      () => isal.calculateMarked(a.v, start, end, crc, room, ptr),
      rangeOk && crcOk && markOk
        ? (got) => {
            const want = crcRef(marked(sub(a.v, start, end), room, ptr), crc >>> 0);
            if (got !== want) fail(`CRC ${got} instead of ${want}`);
          }
        : null,
      [a],
    );
  } else if (fn === 'copyMarked') {
    // dst: its own array, or a view of the same memory as src (overlapping or not).
    let d;
    if (len > 0 && r.chance(0.3)) {
      const o = r.int(len);
      d = { v: sub(a.v, o), whole: a.whole, before: a.before };
    } else d = makeArray(r, r.pick([0, 8, 700, 1200, 3200]), 2, good);
    const dlen = bytesLength(d.v);
    const n = rangeOk ? end - start : 0;
    const need = markOk && rangeOk ? n + 4 * (n > room ? Math.ceil((n - room) / 508) : 0) : 0;
    const dstOff = num(r, dlen > 0 ? r.int(Math.max(dlen - need, 0) + 1) : 0, p);
    const ok =
      rangeOk &&
      crcOk &&
      markOk &&
      dlen >= 0 &&
      isInt(dstOff, 0, 2 ** 53 - 1) &&
      dstOff + need <= dlen &&
      !sharesMemory(d.v, dstOff, need, a.v, start, n);
    const want = ok ? marked(Buffer.from(sub(a.v, start, end)), room, ptr) : null;
    if (ok) d.writes = (j) => j >= d.v.byteOffset - GUARD + dstOff && j < d.v.byteOffset - GUARD + dstOff + need;
    judge(
      () => isal.copyMarked(d.v, dstOff, a.v, start, end, crc, room, ptr),
      ok
        ? (got) => {
            if (!Buffer.from(sub(d.v, dstOff, dstOff + need)).equals(want)) fail('dst does not hold the copy');
            const c = crcRef(want, crc >>> 0);
            if (got !== c) fail(`CRC ${got} instead of ${c}`);
          }
        : null,
      d.whole === a.whole ? [d] : [a, d],
    );
  } else {
    // spans: an Int32Array of their own, or a view of bytes' memory (refused when they overlap).
    const count = num(r, r.int(6), p);
    const nspans = isInt(count, 0, 64) ? count + r.int(2) : 4;
    let spans;
    const spansKind = r.pick(
      good
        ? ['own', 'own', 'own', 'sab', 'alias', 'beside']
        : ['own', 'sab', 'alias', 'beside', 'u32', 'array', 'proxy', 'detached'],
    );
    const values = [];
    for (let k = 0; k < nspans; k++) {
      const s = r.int(max + 1);
      const e = s + r.int(Math.max(max - s - 3, 0) + 1);
      const h = () => (r.chance(p / 2) ? r.pick(HOSTILE) | 0 : null); // as an Int32Array holds it
      values.push(h() ?? s, h() ?? e);
      if (!good && r.chance(0.1)) values[values.length - 1] = r.pick([max, max - 3, -1, 2 ** 31 - 1, -(2 ** 31)]);
    }
    if (spansKind === 'alias' && a.whole && len >= 8 * nspans + 4) {
      const o = r.int(Math.floor((len - 8 * nspans) / 4) + 1) * 4;
      spans = new Int32Array(a.v.buffer, a.v.byteOffset + o, 2 * nspans);
    } else if (spansKind === 'beside' && a.whole) {
      // In the same ArrayBuffer as bytes, after its view: allowed.
      const o = (a.whole.length - 8 * nspans) & ~3;
      spans = new Int32Array(a.whole.buffer, o, 2 * nspans);
    } else if (spansKind === 'sab') spans = new Int32Array(new SharedArrayBuffer(8 * nspans));
    else if (spansKind === 'u32') spans = new Uint32Array(2 * nspans);
    else if (spansKind === 'array') spans = values;
    else if (spansKind === 'proxy') spans = new Proxy(new Int32Array(2 * nspans), {});
    else spans = new Int32Array(2 * nspans);
    if (types.isTypedArray(spans) && !types.isProxy(spans)) spans.set(values.map((v) => v | 0));
    if (spansKind === 'detached') structuredClone(spans.buffer, { transfer: [spans.buffer] });
    if (a.whole) a.before = Uint8Array.from(a.whole); // spans written into bytes' memory are part of it now
    const spansOk = types.isInt32Array(spans) && !types.isProxy(spans);
    const sl = spansOk ? taLength(spans) : 0;
    let ok = len >= 0 && spansOk && isInt(count, 0, 2 ** 32 - 1) && 2 * count <= sl;
    if (ok && count > 0 && sharesMemory(spans, 0, 4 * sl, a.v, 0, len)) ok = false;
    const copy = ok && count > 0 ? Array.from(spans.subarray(0, 2 * count)) : [];
    for (let k = 0; ok && k < count; k++)
      if (!(copy[2 * k] >= 0 && copy[2 * k + 1] >= copy[2 * k] && copy[2 * k + 1] + 4 <= len)) ok = false;
    let want = null;
    if (ok) {
      want = Uint8Array.from(sub(a.v));
      for (let k = 0; k < count; k++) {
        const c = crcRef(sub(want, copy[2 * k], copy[2 * k + 1]), 0);
        want.set([c & 0xff, (c >>> 8) & 0xff, (c >>> 16) & 0xff, c >>> 24], copy[2 * k + 1]);
      }
      a.writes = () => true; // checked against `want` below
    }
    judge(
      () => isal.crcFrames(a.v, spans, count),
      ok
        ? (got) => {
            if (got !== undefined) fail(`returned ${got}`);
            if (!Buffer.from(sub(a.v)).equals(Buffer.from(want)))
              fail('bytes differ from the reference after the CRCs');
          }
        : null,
      [a],
    );
  }
}

/** The second attack of issue 34: spans a view of bytes, frame 0's CRC landing on frame 1's end after the check. */
function attackSpansAlias() {
  const whole = new Uint8Array(64 + 2 * GUARD);
  const bytes = whole.subarray(GUARD, GUARD + 64);
  const spans = new Int32Array(bytes.buffer, bytes.byteOffset, 4);
  // Frame 0 = [0, 12): its CRC goes to bytes[12, 16), which is spans[3], frame 1's end. Frame 1's start is
  // chosen so that CRC, read as frame 1's end, lies 2 GB away.
  let s1 = 16;
  for (; s1 < 48; s1++) {
    spans.set([0, 12, s1, 40]);
    if ((crcRef(bytes.subarray(0, 12), 0) | 0) > 1 << 29) break;
  }
  const g = { whole, before: Uint8Array.from(whole) };
  const copy = Array.from(spans);
  const want = Uint8Array.from(bytes);
  for (let k = 0; k < 2; k++) {
    const c = crcRef(sub(want, copy[2 * k], copy[2 * k + 1]), 0);
    want.set([c & 0xff, (c >>> 8) & 0xff, (c >>> 16) & 0xff, c >>> 24], copy[2 * k + 1]);
  }
  begin("attack: crcFrames with spans a view of bytes; frame 0's CRC overwrites frame 1's end after the check");
  let error;
  try {
    isal.crcFrames(bytes, spans, 2);
  } catch (e) {
    error = e;
  }
  if (error !== undefined) {
    if (!(error instanceof TypeError || error instanceof RangeError))
      fail(`${error.constructor?.name} ${error.message}`);
    if (!Buffer.from(whole).equals(Buffer.from(g.before))) fail('refused, yet something was written');
  } else if (!Buffer.from(bytes).equals(Buffer.from(want)))
    fail('accepted, and bytes differ from the CRCs of the spans as they were when the call began');
}

/**
 * Another thread rewrites shared spans while crcFrames reads them: 256 frames [0, 12), the last one's end
 * flipping between 12 and 2^30 (a binding that checked the spans in place and used them after 255 CRCs
 * would read and write 1 GiB away).
 */
async function race(n) {
  const FRAMES = 256;
  const sab = new SharedArrayBuffer(8 * FRAMES + 8);
  const spans = new Int32Array(sab, 0, 2 * FRAMES);
  const stop = new Int32Array(sab, 8 * FRAMES, 1);
  for (let k = 0; k < FRAMES; k++) spans.set([0, 12], 2 * k);
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     const s = new Int32Array(workerData, 0, ${2 * FRAMES}), stop = new Int32Array(workerData, ${8 * FRAMES}, 1);
     for (let i = 0; Atomics.load(stop, 0) === 0; i++) s[${2 * FRAMES - 1}] = i & 1 ? 1 << 30 : 12;`,
    { eval: true, workerData: sab },
  );
  await new Promise((r) => worker.once('online', r));
  const whole = new Uint8Array(16 + 2 * GUARD).fill(0x5a);
  const bytes = whole.subarray(GUARD, GUARD + 16);
  bytes.fill(0);
  const want = Uint8Array.from(bytes);
  const c = crcRef(want.subarray(0, 12), 0);
  want.set([c & 0xff, (c >>> 8) & 0xff, (c >>> 16) & 0xff, c >>> 24], 12);
  const before = Uint8Array.from(whole);
  let done = 0;
  let refused = 0;
  for (let i = 0; i < n; i++) {
    begin(`race #${i}: spans in a SharedArrayBuffer another thread rewrites`);
    try {
      isal.crcFrames(bytes, spans, FRAMES);
      done++;
      if (!Buffer.from(bytes).equals(Buffer.from(want))) fail('bytes hold something else than frame [0, 12)’s CRC');
    } catch (e) {
      refused++;
      if (!(e instanceof RangeError)) fail(`${e.constructor?.name} ${e.message}`);
    }
    for (let j = 0; j < GUARD; j++)
      if (whole[j] !== before[j] || whole[whole.length - 1 - j] !== before[whole.length - 1 - j]) {
        fail('a write outside bytes');
        break;
      }
  }
  Atomics.store(stop, 0, 1);
  await worker.terminate();
  stats.computed = done;
  stats.refused = refused;
}

run('600', async (mode, seed, n) => {
  if (mode === 'attack-spans-alias') attackSpansAlias();
  else if (mode === 'fuzz') {
    const r = rng(Number(seed));
    for (let i = 0; i < Number(n); i++) fuzzOne(r, i, seed);
  } else if (mode === 'race') await race(Number(n));
  else throw new Error(`unknown mode ${mode}`);
});
