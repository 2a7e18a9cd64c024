/**
 * Fuzz targets: each runs one input against a fresh parser/stream and throws `FuzzFailure` when an
 * invariant breaks — an exception escaping, a byte written outside a registered region with the right
 * access, more than one Terminate, a bad input without the RFC's answer.
 */
import { Access, encodeTaggedHeader, encodeUntaggedHeader, StagTable } from '@rddp/ddp';
import {
  codedError,
  isLlpError,
  type LlpCloseEvent,
  type LlpStream,
  RddpError,
  type SendCallback,
  type Ulpdu,
} from '@rddp/llp';
import { decodeFrame, encodeFrame, FpduReader, FpduWriter } from '@rddp/llp-mpa-tcp';
import { encodeReadRequest, RdmapStream } from '@rddp/rdmap';
import { BehaviorSubject, ReplaySubject } from 'rxjs';
import { int, mutate, type Rng, rng, split } from './mutate.js';

/** An invariant a fuzz target checks broke: the input and the seed are in the message. */
export class FuzzFailure extends codedError(RddpError, 'ERR_RDDP_FUZZ') {}

export interface FuzzTarget {
  readonly name: string;
  /** Runs one input; returns the number of frames/segments it fed. */
  run(r: Rng): number;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const n = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** MPA FPDU stream, with and without CRC and Markers (RFC 5044 §4). */
export const mpaFpdu: FuzzTarget = {
  name: 'mpa-fpdu',
  run(r) {
    const crc = int(r, 2) === 1;
    const markers = int(r, 2) === 1;
    const w = new FpduWriter({ crc, markers });
    const originals: Uint8Array[] = [];
    const wire: Uint8Array[] = [];
    const n = 1 + int(r, 6);
    for (let i = 0; i < n; i++) {
      const u = new Uint8Array(int(r, 1500));
      for (let k = 0; k < u.length; k += 97) u[k] = int(r, 256);
      originals.push(u);
      const parts: Uint8Array[] = [];
      w.frame([u], u.length, parts);
      wire.push(concat(parts));
    }
    // Mutate one FPDU of the stream (or none, a third of the time).
    const victim = int(r, 3) === 0 ? -1 : int(r, n);
    if (victim >= 0) wire[victim] = mutate(r, wire[victim] as Uint8Array);
    let errors = 0;
    let afterError = 0;
    const delivered: Uint8Array[] = [];
    const reader = new FpduReader(
      { crc, markers },
      (length, chunks) => {
        if (errors > 0) afterError++;
        delivered.push(concat(chunks).subarray(0, length));
      },
      (e) => {
        errors++;
        if (!isLlpError(e)) throw new FuzzFailure(`untyped error ${String(e)}`);
      },
    );
    try {
      for (const c of split(r, concat(wire))) reader.push(Buffer.from(c.buffer, c.byteOffset, c.byteLength));
    } catch (e) {
      throw new FuzzFailure(`exception escaped the FPDU reader: ${(e as Error).message}`);
    }
    if (errors > 1) throw new FuzzFailure('more than one error reported');
    if (afterError > 0) throw new FuzzFailure('a ULPDU was delivered after the reader failed');
    // With CRC on, every delivered ULPDU before the mutated one is an original, in order (RFC 5044 §8).
    if (crc && victim >= 0)
      for (let i = 0; i < Math.min(delivered.length, victim); i++)
        if (Buffer.compare(delivered[i] as Uint8Array, originals[i] as Uint8Array) !== 0)
          throw new FuzzFailure(`ULPDU ${i} delivered altered`);
    return n;
  },
};

/** MPA Request/Reply frames (RFC 5044 §7.1.1, RFC 6581). */
export const mpaFrames: FuzzTarget = {
  name: 'mpa-frames',
  run(r) {
    const kind = int(r, 2) ? 'request' : 'reply';
    const pd = new Uint8Array(int(r, 40));
    const revision = int(r, 3);
    const frame = encodeFrame({
      kind,
      markers: !!int(r, 2),
      crc: !!int(r, 2),
      enhanced: revision === 2,
      revision,
      privateData: pd,
    });
    const bad = mutate(r, frame);
    try {
      decodeFrame(bad, kind);
    } catch (e) {
      if (!isLlpError(e) && !(e instanceof RangeError))
        throw new FuzzFailure(`untyped exception decoding a frame: ${String(e)}`);
    }
    return 1;
  },
};

/** A hand-fed LLP stream: what RDMAP sends is recorded; close completes at once. */
class FedLlp implements LlpStream {
  readonly id = 0;
  readonly mulpdu = 2048;
  readonly mulpdu$ = new BehaviorSubject(2048);
  state: 'open' | 'closing' | 'closed' = 'open';
  readonly needsDrain = false;
  readonly closed$ = new ReplaySubject<LlpCloseEvent>(1);
  readonly sent: Uint8Array[][] = [];
  private rx: ((u: Ulpdu) => void) | null = null;
  send(parts: readonly Uint8Array[], done?: SendCallback): boolean {
    if (this.state !== 'open') throw new Error('send on a closed stream');
    this.sent.push([...parts]);
    done?.();
    return true;
  }
  async waitForDrain(): Promise<void> {}
  setReceiver(h: ((u: Ulpdu) => void) | null): void {
    this.rx = h;
  }
  pause(): void {}
  resume(): void {}
  async close(): Promise<void> {
    this.end(true);
  }
  abort(): void {
    this.end(false);
  }
  private end(graceful: boolean): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closed$.next({ graceful, initiator: 'local' });
    this.closed$.complete();
  }
  feed(chunks: Uint8Array[]): void {
    const length = chunks.reduce((a, c) => a + c.length, 0);
    this.rx?.({ length, chunks });
  }
}

const GUARD = 0xa5;

/** Counters over a run of the rdmap target, to show the inputs reach the error paths. */
export const rdmapStats = { terminates: 0, placedWrites: 0 };

/**
 * RDMAP over DDP: Writes, Sends, Read Requests and Terminates, mutated (RFC 5040 §7, RFC 5041 §7).
 * `mutant` plants a bug (the STag table reports the remote-read-only region as remotely writable) so a
 * test can show the invariants catch it.
 */
export function rdmapTarget(mutant = false): FuzzTarget {
  return { name: 'rdmap', run: (r) => runRdmap(r, mutant) };
}

function runRdmap(r: Rng, mutant: boolean): number {
  {
    // One arena: [guard][R0 remote write][guard][R1 remote read][guard][R2 local only][guard][recv][guard]
    const G = 32;
    const S = 256;
    const arena = new Uint8Array(5 * G + 4 * S).fill(GUARD);
    const at = (i: number) => G + i * (S + G);
    const view = (i: number) => arena.subarray(at(i), at(i) + S);
    for (let i = 0; i < 4; i++) view(i).fill(0);
    const stags = new StagTable();
    const r0 = stags.register({ pdId: 1, buffer: view(0), access: Access.RemoteWrite, baseTo: 0x1000n });
    const r1 = stags.register({ pdId: 1, buffer: view(1), access: Access.RemoteRead, baseTo: 0x2000n });
    const r2 = stags.register({ pdId: 1, buffer: view(2), access: Access.LocalWrite, baseTo: 0x3000n });
    const other = stags.register({ pdId: 2, buffer: new Uint8Array(S), access: Access.RemoteWrite });
    const llp = new FedLlp();
    const table = mutant
      ? {
          lookup: (stag: number) => {
            const m = stags.lookup(stag);
            return m && m.stag === r1.stag ? { ...m, access: m.access | Access.RemoteWrite, valid: m.valid } : m;
          },
          invalidate: (stag: number) => stags.invalidate(stag),
        }
      : stags;
    const stream = new RdmapStream(llp, { pdId: 1, stags: table, role: 'responder', ird: 2 });
    // Terminates counted on the wire: untagged ULPDUs whose RDMAP opcode is Terminate (RFC 5040 §4.8).
    const terminatesSent = () =>
      llp.sent.filter((parts) => {
        const h = parts[0] as Uint8Array;
        return ((h[0] as number) & 0x80) === 0 && ((h[1] as number) & 0x0f) === 0x7;
      }).length;
    stream.ddp.placement$.subscribe((p) => {
      if (p.length > 0) rdmapStats.placedWrites++;
    });
    stream.postReceive(view(3).subarray(0, 128));
    stream.postReceive(view(3).subarray(128));
    stream.start(); // fed synchronously below
    const dv = 1;
    const ctl = (op: number) => 0x40 | op;
    const corpus: (() => Uint8Array)[] = [
      () => {
        const n = int(r, 64);
        const s = new Uint8Array(14 + n).fill(0x11);
        const stag = int(r, 4) ? r0.stag : ([r1.stag, r2.stag, other.stag][int(r, 3)] as number);
        const base = stag === r1.stag ? 0x2000n : stag === r2.stag ? 0x3000n : 0x1000n;
        encodeTaggedHeader({ last: true, dv, rsvdUlp: ctl(0), stag, to: base + BigInt(int(r, 300)) }, s);
        return s;
      },
      () => {
        const n = int(r, 150);
        const s = new Uint8Array(18 + n).fill(0x22);
        encodeUntaggedHeader({ last: true, dv, rsvdUlp: ctl(3) * 2 ** 32, qn: 0, msn: 1 + int(r, 3), mo: 0 }, s);
        return s;
      },
      () => {
        const s = new Uint8Array(18 + 28);
        encodeUntaggedHeader({ last: true, dv, rsvdUlp: ctl(1) * 2 ** 32, qn: 1, msn: 1 + int(r, 3), mo: 0 }, s);
        encodeReadRequest(
          {
            sinkStag: 0x999,
            sinkTo: 0n,
            size: int(r, 300),
            srcStag: int(r, 3) ? r1.stag : r0.stag,
            srcTo: 0x2000n + BigInt(int(r, 64)),
          },
          s.subarray(18),
        );
        return s;
      },
      () => {
        const s = new Uint8Array(14 + 16).fill(0x33);
        encodeTaggedHeader({ last: true, dv, rsvdUlp: ctl(2), stag: r2.stag, to: 0x3000n }, s);
        return s;
      },
      () => {
        const s = new Uint8Array(18 + 4);
        encodeUntaggedHeader({ last: true, dv, rsvdUlp: ctl(7) * 2 ** 32, qn: 2, msn: 1, mo: 0 }, s);
        s[18] = 0x11;
        return s;
      },
    ];
    const before = { r1: Uint8Array.from(view(1)), r2: Uint8Array.from(view(2)) };
    const n = 1 + int(r, 6);
    try {
      for (let i = 0; i < n; i++) {
        const seg = (corpus[int(r, corpus.length)] as () => Uint8Array)();
        llp.feed(split(r, int(r, 3) ? mutate(r, seg) : seg));
      }
    } catch (e) {
      throw new FuzzFailure(`exception escaped the receive path: ${(e as Error).stack}`);
    }
    for (let i = 0; i <= 4; i++) {
      const g = arena.subarray(i === 0 ? 0 : at(i - 1) + S, i === 0 ? G : at(i - 1) + S + G);
      if (g.some((x) => x !== GUARD)) throw new FuzzFailure(`guard band ${i} was written`);
    }
    if (Buffer.compare(view(1), before.r1) !== 0) throw new FuzzFailure('a remote-read-only region was written');
    if (Buffer.compare(view(2), before.r2) !== 0)
      throw new FuzzFailure('a local-only region was written without a Read outstanding');
    const terminates = terminatesSent();
    rdmapStats.terminates += terminates;
    if (terminates > 1) throw new FuzzFailure('more than one Terminate sent (RFC 5040 §5.4)');
    if (stream.state === 'error' && terminates === 0 && llp.state !== 'closed')
      throw new FuzzFailure('the stream is in error but neither terminated nor closed');
    return n;
  }
}

export const rdmap = rdmapTarget();
export const TARGETS: readonly FuzzTarget[] = [mpaFpdu, mpaFrames, rdmap];

export interface FuzzReport {
  readonly target: string;
  readonly inputs: number;
  readonly frames: number;
  readonly ms: number;
  readonly framesPerSecond: number;
}

/** Runs `target` for `ms` milliseconds (or `maxInputs`) from `seed`; a failure names the seed that reproduces it. */
export function fuzz(target: FuzzTarget, seed: number, ms: number, maxInputs = Number.POSITIVE_INFINITY): FuzzReport {
  const t0 = performance.now();
  let inputs = 0;
  let frames = 0;
  while (inputs < maxInputs && performance.now() - t0 < ms) {
    const s = (seed + inputs) >>> 0;
    try {
      frames += target.run(rng(s));
    } catch (e) {
      throw new FuzzFailure(`${target.name}, seed ${s}: ${(e as Error).message}`);
    }
    inputs++;
  }
  const took = performance.now() - t0;
  return { target: target.name, inputs, frames, ms: took, framesPerSecond: (frames * 1000) / took };
}
