'use strict';
/*
 * The child process of hostile-args.test.ts: calls @rddp/writev's functions with hostile arguments and
 * judges each outcome against a JavaScript reference, speaking the line protocol of
 * test/support/native-child-harness.cjs (`case`, `fail`, `stats`, `done`; exit 1 when anything failed). A
 * crash shows in the parent as a signal, the last `case` line naming the call.
 *
 *   node hostile-args.child.cjs <mode> [seed] [calls]
 *   mode: attack-enlarge | attack-reindex | attack-detach | fuzz | race | others
 *
 * A correct outcome is a TypeError or RangeError (or the error a getter of ours threw) when an argument is
 * malformed, and otherwise exactly the octets the ranges named when the call began, from each buffer as
 * it was read — once — from `buffers`; the peer must receive nothing else.
 */
const fs = require('node:fs');
const net = require('node:net');
const { types } = require('node:util');
const { Worker } = require('node:worker_threads');
const { childHarness, rng, withMarkers, isInt, taLength } = require('../../../test/support/native-child-harness.cjs');
const w = require('../index.cjs');

/** Outcomes, printed as `stats {...}` at the end: the parent checks the calls were not all of one kind. */
const h = childHarness({ sent: 0, refused: 0, getterRuns: 0, getterThrew: 0 });
const { stats, fail, begin } = h;

const AFTER = 508;
const markersIn = (len, room) => (len > room ? Math.ceil((len - room) / AFTER) : 0);

/** A range's octets as they go on the wire (RFC 5044 §4.3 Markers when mk is not -1). */
function wireOf(bytes, mk) {
  return mk === -1 ? Buffer.from(bytes) : withMarkers(bytes, Math.floor(mk / 65536), mk % 65536);
}

/** The octets of a buffer the binding may take (ArrayBuffer or Uint8Array) now; null for any other value. */
function octetsOf(v) {
  if (types.isProxy(v)) return null;
  if (types.isArrayBuffer(v)) return v.byteLength === 0 ? new Uint8Array(0) : new Uint8Array(v);
  if (types.isUint8Array(v)) return taLength(v) === 0 ? new Uint8Array(0) : v; // detached: no octets
  return null;
}

/** A record's numbers as the binding accepts them (before looking at its buffer). */
function numbersOk(f, nb) {
  const [b, o, l, mk, wire] = f;
  if (!isInt(b, 0, nb - 1) || !isInt(o, 0, 2 ** 53 - 1) || !isInt(l, 0, 2 ** 53 - 1)) return false;
  if (mk === -1) return wire === l;
  if (!isInt(mk, 0, 509 * 65536 - 1)) return false;
  return wire === l + 4 * markersIn(l, Math.floor(mk / 65536));
}

async function connect() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise((r) => server.once('connection', r));
  const socket = net.connect(server.address().port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const peer = await accepted;
  const chunks = [];
  let got = 0;
  let wake = null;
  peer.on('data', (d) => {
    chunks.push(d);
    got += d.length;
    wake?.();
  });
  let expected = 0;
  const want = [];
  return {
    fd: socket._handle.fd,
    /** The binding reported `n` octets of `bytes` sent. */
    expect(bytes, n) {
      want.push(bytes.subarray(0, n));
      expected += n;
    },
    /** Waits until the peer has everything expected so far (or a little more: a leak). */
    async settle() {
      const deadline = Date.now() + 5000;
      while (got < expected && Date.now() < deadline)
        await new Promise((r) => {
          wake = r;
          setTimeout(r, 20);
        });
      wake = null;
      await new Promise((r) => setImmediate(r));
    },
    /** Checks that the peer received exactly the expected octets, in order. */
    verify(what) {
      const all = Buffer.concat(chunks);
      const exp = Buffer.concat(want);
      if (all.length !== exp.length)
        fail(`${what}: the peer received ${all.length} octets, the ranges named ${exp.length}`);
      else if (!all.equals(exp)) fail(`${what}: the peer received octets no range named`);
    },
    close() {
      socket.destroy();
      peer.destroy();
      server.close();
    },
  };
}

const detach = (ab) => {
  if (ab.byteLength > 0 && !types.isSharedArrayBuffer(ab)) structuredClone(ab, { transfer: [ab] });
};
const pattern = (u, k) => {
  for (let i = 0; i < u.length; i++) u[i] = (i * 31 + k * 101 + 7) & 0xff || 1;
  return u;
};

/** Calls writeRanges and judges the outcome; `state` tells the reference what the getters read. */
function judgeWriteRanges(conn, args, state) {
  const [fd, buffers, ranges, first, count, skip] = args;
  // What the binding sees when the call begins.
  const argsOk =
    args.length >= 6 &&
    isInt(fd, 0, 2 ** 31 - 1) &&
    isInt(first, 0, 2 ** 32 - 1) &&
    isInt(count, 0, 2 ** 32 - 1) &&
    isInt(skip, 0, 2 ** 53 - 1) &&
    Array.isArray(buffers) &&
    !types.isProxy(buffers) &&
    types.isFloat64Array(ranges) &&
    !types.isProxy(ranges) &&
    first + count <= Math.floor(taLength(ranges) / 5);
  const snap = argsOk && count > 0 ? Array.from(ranges.subarray(first * 5, (first + count) * 5)) : [];
  const nb = argsOk ? buffers.length : 0;
  const plain = argsOk && !state.getters ? Array.from({ length: nb }, (_, i) => buffers[i]) : [];
  let result;
  let error;
  try {
    result = w.writeRanges(...args);
  } catch (e) {
    error = e;
  }
  const clean = (e) => e instanceof TypeError || e instanceof RangeError;
  if (state.getters) stats.getterRuns += [...state.reads.values()].some((n) => n > 0) ? 1 : 0;
  const refuse = (why) => {
    stats.refused++;
    if (error === undefined) fail(`${why}, yet it returned ${result}`);
    else if (!clean(error)) fail(`${why}: ${error?.constructor?.name} ${error?.message}, not a TypeError/RangeError`);
    return false;
  };
  if (!argsOk) return refuse('malformed arguments');
  if (count === 0) {
    if (skip !== 0) return refuse('skip with no ranges');
    if (result !== 0) fail(`no ranges, returned ${result} (${error?.message})`);
    return true;
  }
  const recs = [];
  for (let k = 0; k < count; k++) recs.push(snap.slice(5 * k, 5 * k + 5));
  if (!recs.every((f) => numbersOk(f, nb)) || !(skip < recs[0][4])) return refuse('malformed ranges');
  // The getters ran now (in the binding): each index a range names read once, no other index read.
  const named = new Set(recs.map((f) => f[0]));
  let resolved = plain;
  if (state.getters) {
    for (const [i, n] of state.reads)
      if (n > 1) fail(`buffers[${i}] was read ${n} times`);
      else if (!named.has(i) && n > 0) fail(`buffers[${i}] was read but no range names it`);
    if (state.thrown !== undefined) {
      stats.getterThrew++;
      if (error !== state.thrown)
        fail(`a getter threw, the call ${error ? `threw ${error.message}` : `returned ${result}`}`);
      return false;
    }
    resolved = [];
    for (const i of named) {
      if (!state.reads.get(i)) return refuse(`buffers[${i}] was gone when read`);
      resolved[i] = state.first.get(i);
    }
  }
  const pieces = [];
  for (const [b, o, l, mk] of recs) {
    const bytes = octetsOf(resolved[b]);
    if (bytes === null) return refuse(`buffers[${b}] is no ArrayBuffer or Uint8Array`);
    if (o + l > bytes.length) return refuse('a range lies outside its buffer as it is now');
    pieces.push(wireOf(bytes.subarray(o, o + l), mk));
  }
  const expected = Buffer.concat(pieces).subarray(skip);
  if (error !== undefined) {
    fail(`well-formed call threw ${error.constructor?.name} ${error.message}`);
    return false;
  }
  if (fd !== conn.fd) {
    if (!(typeof result === 'number' && result < 0)) fail(`a closed descriptor answered ${result}, not -errno`);
    return true;
  }
  if (!isInt(result, 0, expected.length)) {
    fail(`returned ${result} for ${expected.length} octets named`);
    return false;
  }
  conn.expect(expected, result);
  stats.sent++;
  return true;
}

/** buffers[i] as an accessor (on the array or on its prototype) that counts its reads and runs `act` on the first. */
function getterArray(values, acts, onProto, state) {
  state.getters = true;
  state.reads = new Map();
  state.first = new Map();
  state.thrown = undefined;
  const current = [...values];
  const arr = new Array(values.length);
  const holder = onProto ? Object.create(Array.prototype) : arr;
  if (onProto) Object.setPrototypeOf(arr, holder);
  for (let i = 0; i < values.length; i++)
    Object.defineProperty(holder, i, {
      configurable: true,
      enumerable: true,
      get() {
        const n = (state.reads.get(i) ?? 0) + 1;
        state.reads.set(i, n);
        const v = n === 1 ? (acts[i]?.(current, arr) ?? current[i]) : state.later(i);
        if (n === 1) state.first.set(i, v);
        return v;
      },
    });
  return arr;
}

/** The first attack of issue 34: a range checked at 16 octets, then enlarged to 4097 by a getter. */
async function attackEnlarge(reindex) {
  const conn = await connect();
  const small = new Uint8Array(16).fill(0x41);
  const ranges = new Float64Array([0, 0, 16, -1, 16]);
  const state = { later: () => new Uint8Array(1 << 16) };
  const act = () => {
    if (reindex)
      ranges[0] = 1e9; // a buffer index far outside any array
    else {
      ranges[2] = 4097; // 4 097 octets from a 16-octet buffer
      ranges[4] = 4097;
    }
    return small;
  };
  const buffers = getterArray([small], [act], false, state);
  begin(
    reindex
      ? 'attack: a getter on buffers moves a checked range to buffer 1e9'
      : 'attack: a getter on buffers enlarges a checked 16-octet range to 4097',
  );
  judgeWriteRanges(conn, [conn.fd, buffers, ranges, 0, 1, 0], state);
  await conn.settle();
  conn.verify(h.current);
  conn.close();
}

/** A getter detaches a buffer read (and located, in the old binding) before it. */
async function attackDetach() {
  const conn = await connect();
  const a = pattern(new Uint8Array(new ArrayBuffer(1 << 16)), 1);
  const b = pattern(new Uint8Array(16), 2);
  const ranges = new Float64Array([0, 0, 1 << 16, -1, 1 << 16, 1, 0, 16, -1, 16]);
  const state = { later: () => b };
  const buffers = getterArray(
    [a, b],
    [
      undefined,
      (cur) => {
        detach(a.buffer); // buffers[0]'s memory is freed after its range was checked
        return cur[1];
      },
    ],
    false,
    state,
  );
  begin('attack: a getter on buffers[1] detaches buffers[0] after its range was checked');
  judgeWriteRanges(conn, [conn.fd, buffers, ranges, 0, 2, 0], state);
  await conn.settle();
  conn.verify(h.current);
  conn.close();
}

const HOSTILE_NUMBERS = [NaN, -1, -0.5, 0.5, 1.5, 2 ** 31, 2 ** 32, 2 ** 32 + 1, 2 ** 53, 2 ** 53 + 2, 1e300, -1e300];
const HOSTILE_VALUES = [Infinity, -Infinity, '0', '1', null, undefined, {}, 1n, { valueOf: () => 0 }, [0], true];

/** A buffer for `buffers`: mostly one the binding takes, sometimes one it must refuse. */
const GOOD_BUFFERS = ['u8', 'u8', 'view', 'ab', 'ab', 'buffer', 'sab-view', 'rab', 'rab-view', 'detached'];
function makeBuffer(r, k, wellFormed) {
  const size = r.pick([0, 1, 16, 100, 600, 1500, 4096]);
  const kind = r.pick([
    ...GOOD_BUFFERS,
    ...(wellFormed ? GOOD_BUFFERS : []),
    'u16',
    'clamped',
    'dataview',
    'sab',
    'proxy',
    'fake',
    'string',
    'null',
  ]);
  switch (kind) {
    case 'u8':
      return { v: pattern(new Uint8Array(size), k), len: size };
    case 'view': {
      const u = pattern(new Uint8Array(size + 64), k + 50); // the octets around the view are foreign
      return { v: u.subarray(32, 32 + size), len: size };
    }
    case 'ab': {
      const ab = new ArrayBuffer(size);
      pattern(new Uint8Array(ab), k);
      return { v: ab, len: size, ab };
    }
    case 'buffer':
      return { v: pattern(Buffer.alloc(size), k), len: size };
    case 'sab-view':
      return { v: pattern(new Uint8Array(new SharedArrayBuffer(size)), k), len: size };
    case 'rab':
    case 'rab-view': {
      const ab = new ArrayBuffer(size, { maxByteLength: size * 2 + 8 });
      pattern(new Uint8Array(ab), k);
      return { v: kind === 'rab' ? ab : new Uint8Array(ab), len: size, ab, resizable: true };
    }
    case 'detached': {
      const u = pattern(new Uint8Array(size), k);
      detach(u.buffer);
      return { v: u, len: 0 };
    }
    case 'u16':
      return { v: new Uint16Array(size), len: size, bad: true };
    case 'clamped':
      return { v: new Uint8ClampedArray(size), len: size, bad: true };
    case 'dataview':
      return { v: new DataView(new ArrayBuffer(size)), len: size, bad: true };
    case 'sab':
      return { v: new SharedArrayBuffer(size), len: size, bad: true };
    case 'proxy':
      return { v: new Proxy(new Uint8Array(size), {}), len: size, bad: true };
    case 'fake':
      return { v: Object.create(Uint8Array.prototype), len: size, bad: true };
    case 'string':
      return { v: 'x'.repeat(size), len: size, bad: true };
    default:
      return { v: null, len: size, bad: true };
  }
}

/**
 * One generated writeRanges call: about half are well-formed when they begin (the getters of `buffers`
 * may still turn on them), the others have something malformed as well.
 */
function genWriteRanges(r, conn) {
  const wellFormed = r.chance(0.5);
  const hostile = (p) => !wellFormed && r.chance(p);
  const nb = 1 + r.int(4);
  const bufs = Array.from({ length: nb }, (_, k) => makeBuffer(r, k, wellFormed));
  const count = wellFormed ? 1 + r.int(6) : r.int(7);
  const before = r.chance(0.3) ? 1 + r.int(3) : 0;
  const after = r.int(2);
  const total = before + count + after;
  let ranges;
  const rangesKind = r.pick(
    wellFormed
      ? ['f64', 'f64', 'f64', 'sab', 'alias', 'lying']
      : ['f64', 'f64', 'f64', 'sab', 'alias', 'lying', 'array', 'f32', 'proxy', 'detached', 'u8'],
  );
  const make = (n) => {
    if (rangesKind === 'sab') return new Float64Array(new SharedArrayBuffer(8 * n));
    if (rangesKind === 'alias') {
      // The ranges live in the memory of a buffer the ranges send from.
      const ab = new ArrayBuffer(8 * n + 64);
      bufs[0] = { v: new Uint8Array(ab), len: ab.byteLength, ab };
      return new Float64Array(ab, 64, n);
    }
    return new Float64Array(n);
  };
  ranges = make(total * 5);
  for (let k = 0; k < total; k++) {
    const b = r.int(nb);
    const len = bufs[b].len;
    const o = r.int(len + 1);
    const l = r.int(len - o + 1);
    const mk = r.chance(0.5) ? -1 : r.int(509) * 65536 + r.int(65536);
    const f = [b, o, l, mk, mk === -1 ? l : l + 4 * markersIn(l, Math.floor(mk / 65536))];
    if (hostile(0.1)) f[r.int(5)] = r.pick(HOSTILE_NUMBERS);
    if (hostile(0.05)) f[4] += r.pick([-1, 1]);
    if (hostile(0.05)) f[3] = r.pick([-2, 509 * 65536, 2 ** 32, 0.5, NaN]);
    if (hostile(0.05)) f[0] = nb;
    ranges.set(f, 5 * k);
  }
  let label = `${rangesKind}`;
  if (rangesKind === 'lying') Object.defineProperty(ranges, 'length', { value: 1e6 });
  else if (rangesKind === 'array') ranges = Array.from(ranges);
  else if (rangesKind === 'f32') ranges = Float32Array.from(ranges);
  else if (rangesKind === 'proxy') ranges = new Proxy(ranges, {});
  else if (rangesKind === 'detached') detach(ranges.buffer);
  else if (rangesKind === 'u8') ranges = new Uint8Array(ranges.buffer);
  const firstWire = ranges[5 * before + 4];
  let skip = count > 0 && isInt(firstWire, 1, 1e9) && r.chance(0.4) ? r.int(firstWire) : 0;
  let fd = conn.fd;
  let first = before;
  let cnt = count;
  const hostileArg = () => r.pick(r.chance(0.5) ? HOSTILE_NUMBERS : HOSTILE_VALUES);
  if (hostile(0.1)) fd = r.chance(0.2) ? 2 ** 31 - 1 : hostileArg(); // 2^31-1: a descriptor, closed
  if (hostile(0.1)) first = hostileArg();
  if (hostile(0.1)) cnt = hostileArg();
  if (hostile(0.1)) skip = hostileArg();
  if (hostile(0.05)) cnt = count + after + 1; // past the end
  // The array and what its getters do on their first read.
  const state = { getters: false, later: (i) => new Uint8Array(4097 + i) };
  const values = bufs.map((b) => b.v);
  const arrayKind = r.pick(
    wellFormed
      ? ['plain', 'getters', 'getters', 'getters', 'proto']
      : ['plain', 'plain', 'getters', 'getters', 'proto', 'proxy', 'arraylike', 'typed'],
  );
  label += ` ${arrayKind}`;
  let buffers = values;
  if (arrayKind === 'getters' || arrayKind === 'proto') {
    const live = () => (types.isFloat64Array(ranges) && !types.isProxy(ranges) ? ranges : null);
    const acts = values.map(() => {
      const act = r.pick([
        ...['none', 'none', 'none', 'none', 'none', 'none', 'none'],
        'enlarge',
        'reindex',
        'detach-other',
        'shrink-other',
        'swap-other',
        'truncate',
        'throw',
        'scribble',
        'detach-ranges',
      ]);
      label += `:${act}`;
      const j = r.int(nb);
      switch (act) {
        case 'enlarge':
          return () => {
            const t = live();
            if (t) for (let k = 0; k + 4 < t.length; k += 5) t[k + 2] = t[k + 4] = r.pick([4097, 1e9, 2 ** 40]);
          };
        case 'reindex':
          return () => {
            const t = live();
            if (t) for (let k = 0; k < t.length; k += 5) t[k] = r.pick([1e9, nb + 7, -1, 0.5]);
          };
        case 'detach-other':
          return () => {
            if (bufs[j].ab) detach(bufs[j].ab);
            else if (types.isUint8Array(bufs[j].v) && !types.isProxy(bufs[j].v) && !Buffer.isBuffer(bufs[j].v))
              detach(bufs[j].v.buffer);
          };
        case 'shrink-other':
          return () => {
            if (bufs[j].resizable && bufs[j].ab.byteLength > 0) bufs[j].ab.resize(r.int(bufs[j].ab.byteLength));
          };
        case 'swap-other':
          return (cur) => {
            cur[j] = r.pick([new Uint8Array(1), new ArrayBuffer(3), 'x', new Uint8Array(9000)]);
          };
        case 'truncate':
          return (_cur, arr) => {
            arr.length = 0;
          };
        case 'throw':
          return () => {
            state.thrown = new Error('thrown by a getter of buffers');
            throw state.thrown;
          };
        case 'scribble':
          return () => {
            const t = live();
            if (t) t.fill(r.pick([NaN, -1, 1e300, 0]));
          };
        case 'detach-ranges':
          return () => {
            const t = live();
            if (t) detach(t.buffer);
          };
        default:
          return undefined;
      }
    });
    buffers = getterArray(values, acts, arrayKind === 'proto', state);
  } else if (arrayKind === 'proxy') buffers = new Proxy(values, {});
  else if (arrayKind === 'arraylike') buffers = { length: values.length, ...values };
  else if (arrayKind === 'typed') buffers = new Uint8Array(4);
  const args = [fd, buffers, ranges, first, cnt, skip];
  if (hostile(0.03)) args.length = r.int(6);
  return { args, state, label };
}

async function fuzz(seed, n) {
  const r = rng(seed);
  const conn = await connect();
  for (let i = 0; i < n; i++) {
    const c = genWriteRanges(r, conn);
    begin(`writeRanges seed ${seed} #${i} ${c.label}`);
    judgeWriteRanges(conn, c.args, c.state);
    if (i % 16 === 15) await conn.settle(); // the peer drains what was sent so far
  }
  await conn.settle();
  h.current = `writeRanges seed ${seed}, all calls`;
  conn.verify('all calls');
  conn.close();
}

/**
 * Another thread rewrites shared ranges while the binding reads them: 256 ranges of 8 octets of a 16-octet
 * buffer, the last one's length (and wire length) flipping between 8 and 4097. A binding that checked the
 * ranges in place and read them again to send would send 4 081 octets from beyond the buffer.
 */
async function race(n) {
  const conn = await connect();
  const RANGES = 256;
  const sab = new SharedArrayBuffer(8 * 5 * RANGES + 8);
  const ranges = new Float64Array(sab, 0, 5 * RANGES);
  const stop = new Int32Array(sab, 8 * 5 * RANGES, 1);
  for (let k = 0; k < RANGES; k++) ranges.set([0, 0, 8, -1, 8], 5 * k);
  const last = 5 * (RANGES - 1);
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     const r = new Float64Array(workerData, 0, ${5 * RANGES}), stop = new Int32Array(workerData, ${8 * 5 * RANGES}, 1);
     for (let i = 0; Atomics.load(stop, 0) === 0; i++) { const l = i & 1 ? 4097 : 8; r[${last + 2}] = l; r[${last + 4}] = l; }`,
    { eval: true, workerData: sab },
  );
  await new Promise((r) => worker.once('online', r));
  const small = new Uint8Array(16).fill(0x42);
  const all = new Uint8Array(8 * RANGES).fill(0x42);
  let sent = 0;
  for (let i = 0; i < n; i++) {
    begin(`race #${i}: ranges in a SharedArrayBuffer another thread rewrites`);
    try {
      const got = w.writeRanges(conn.fd, [small], ranges, 0, RANGES, 0);
      if (!isInt(got, 0, all.length)) fail(`returned ${got}: only ${all.length} octets fit the buffer`);
      else {
        conn.expect(all, got);
        sent += got;
        stats.sent++;
      }
    } catch (e) {
      stats.refused++;
      if (!(e instanceof RangeError)) fail(`${e.constructor?.name} ${e.message}`);
    }
    if (sent > 1 << 16) {
      await conn.settle();
      sent = 0;
    }
  }
  Atomics.store(stop, 0, 1);
  await worker.terminate();
  await conn.settle();
  h.current = 'race, all calls';
  conn.verify('race');
  conn.close();
}

/** congestionControl, openTun and watchTun: what must be refused is, and cleanly. */
async function others() {
  const conn = await connect();
  const expectThrow = (name, f, classes, code) => {
    begin(name);
    let v;
    try {
      v = f();
    } catch (e) {
      if (!classes.some((c) => e instanceof c)) fail(`threw ${e.constructor?.name} ${e.message}`);
      else if (code && e.constructor === Error && !code.includes(e.code)) fail(`threw code ${e.code}: ${e.message}`);
      return;
    }
    fail(`returned ${String(v)} instead of throwing`);
  };
  const badFds = [...HOSTILE_NUMBERS, ...HOSTILE_VALUES, conn.fd + 2 ** 32, conn.fd + 0.5, -0.5];
  for (const fd of badFds) {
    expectThrow(`congestionControl(${String(fd)})`, () => w.congestionControl(fd), [TypeError]);
    expectThrow(
      `watchTun(${String(fd)}, f, f)`,
      () =>
        w.watchTun(
          fd,
          () => {},
          () => {},
        ),
      [TypeError],
    );
  }
  const badCc = ['', 'a'.repeat(16), `${'a'.repeat(14)}é`, 'cub\0ic', 7, { toString: () => 'reno' }, ['reno'], 1n];
  for (const name of badCc)
    expectThrow(`congestionControl(fd, ${JSON.stringify(String(name))})`, () => w.congestionControl(conn.fd, name), [
      TypeError,
    ]);
  begin('congestionControl(fd) of a socket');
  if (typeof w.congestionControl(conn.fd) !== 'string') fail('no name returned');
  begin('congestionControl(2^31-1)');
  if (w.congestionControl(2 ** 31 - 1) !== -9) fail('a closed descriptor did not answer -EBADF');
  if (process.platform === 'linux') {
    const badNames = ['', 'a'.repeat(16), `${'a'.repeat(14)}é`, `${'a'.repeat(15)}\u{1F600}`, 'a\0b', 'a/b'];
    for (const name of badNames) expectThrow(`openTun(${JSON.stringify(name)})`, () => w.openTun(name), [RangeError]);
    for (const name of [7, null, {}, ['x'], { toString: () => 'tun0' }])
      expectThrow(`openTun(${String(name)})`, () => w.openTun(name), [TypeError]);
    for (const path of ['', 'x'.repeat(5000), '/no/such\0', `${'/x'.repeat(2047)}é`])
      expectThrow(`openTun('rddpnodev0', ${JSON.stringify(path.slice(0, 20))}…)`, () => w.openTun('rddpnodev0', path), [
        RangeError,
      ]);
    expectThrow("openTun('rddpnodev0', 7)", () => w.openTun('rddpnodev0', 7), [TypeError]);
    expectThrow("openTun('rddpnodev0')", () => w.openTun('rddpnodev0'), [Error], ['ENODEV', 'EPERM', 'EACCES']);
    expectThrow(
      "openTun('rddpnodev0', '/no/such/netns')",
      () => w.openTun('rddpnodev0', '/no/such/netns'),
      [Error],
      ['ENOENT', 'EPERM', 'EACCES'],
    );
    for (const cb of [undefined, null, 1, {}, 'f'])
      expectThrow(`watchTun(fd, ${String(cb)}, f)`, () => w.watchTun(conn.fd, cb, () => {}), [TypeError]);
    const devNull = fs.openSync('/dev/null', 'r');
    expectThrow(
      'watchTun(/dev/null)',
      () =>
        w.watchTun(
          devNull,
          () => {},
          () => {},
        ),
      [Error],
      ['EPERM'],
    );
    fs.closeSync(devNull);
    expectThrow(
      'watchTun(2^31-1)',
      () =>
        w.watchTun(
          2 ** 31 - 1,
          () => {},
          () => {},
        ),
      [Error],
      ['EBADF'],
    );
  }
  conn.close();
}

h.run('300', async (mode, seed, n) => {
  if (mode === 'attack-enlarge') await attackEnlarge(false);
  else if (mode === 'attack-reindex') await attackEnlarge(true);
  else if (mode === 'attack-detach') await attackDetach();
  else if (mode === 'fuzz') await fuzz(Number(seed), Number(n));
  else if (mode === 'race') await race(Number(n));
  else if (mode === 'others') await others();
  else throw new Error(`unknown mode ${mode}`);
});
