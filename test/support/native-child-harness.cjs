'use strict';
/*
 * The shared half of the hostile-argument child processes of the optional native bindings (each package's
 * test/hostile-args.child.cjs): the line protocol the parent reads (test/support/native-child.ts) and
 * the seeded generator. The child prints, synchronously, `case <name>` before each call and
 * `fail <name>: <why>` for each wrong outcome, then `stats {...}` and `done <calls>`, and exits 1 when
 * anything failed. A crash shows in the parent as a signal, the last `case` line naming the call.
 * Test-only: no package ships it.
 */
const fs = require('node:fs');

const pause = new Int32Array(new SharedArrayBuffer(4));
/**
 * Writes a line to stdout before going on, so that a crash cannot lose it; the pipe may be non-blocking
 * (a Worker makes it so), so a full one is waited for.
 */
function out(line) {
  const b = Buffer.from(`${line}\n`);
  for (let o = 0; o < b.length; )
    try {
      o += fs.writeSync(1, b, o);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
}

/**
 * The protocol's state for one child: `begin(name)` before each call, `fail(why)` for a wrong outcome of
 * the call named `current` (which a child may also set itself, for a check after the calls), and
 * `run(defaultCalls, main)`, which calls `main(mode, seed, calls)` with the command line's
 * `<mode> [seed] [calls]` and then prints `stats` (the object given here) and `done`.
 */
function childHarness(stats) {
  let failed = 0;
  let calls = 0;
  const h = {
    stats,
    current: '',
    fail(why) {
      failed++;
      out(`fail ${h.current}: ${why}`);
    },
    begin(name) {
      h.current = name;
      calls++;
      out(`case ${name}`);
    },
    async run(defaultCalls, main) {
      const [mode, seed = '1', n = defaultCalls] = process.argv.slice(2);
      await main(mode, seed, n);
      out(`stats ${JSON.stringify(stats)}`);
      out(`done ${calls}`);
      process.exitCode = failed > 0 ? 1 : 0;
    },
  };
  return h;
}

/** mulberry32: a small seeded generator, so every run makes the same calls. */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r = {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (a) => a[r.int(a.length)],
    chance: (p) => next() < p,
  };
  return r;
}

/**
 * `bytes` as MPA sends them: a Marker (16 zero bits, then FPDUPTR `ptr` as it stands there) once `room`
 * octets have passed and every 508 octets after that (RFC 5044 §4.3).
 */
function withMarkers(bytes, room, ptr) {
  const parts = [];
  let po = 0;
  while (po < bytes.length) {
    if (room === 0) {
      parts.push(Uint8Array.of(0, 0, (ptr >>> 8) & 0xff, ptr & 0xff));
      ptr += 4;
      room = 508;
    }
    const n = Math.min(room, bytes.length - po);
    parts.push(bytes.subarray(po, po + n));
    po += n;
    ptr += n;
    room -= n;
  }
  return Buffer.concat(parts);
}

const isInt = (v, lo, hi) => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
const TA_LENGTH = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'length').get;
/** A typed array's internal length, whatever an own `length` property says (0 once detached). */
const taLength = (t) => TA_LENGTH.call(t);

module.exports = { out, childHarness, rng, withMarkers, isInt, taLength };
