/**
 * Progress of a long run, on stderr: a cli-progress bar on a terminal, plain one-line updates otherwise
 * (a line per tenth done, at most one every few seconds, so short runs and pipes stay quiet).
 */
import type { RdmapStreamBuilder } from '@rddp/stack';
import { SingleBar } from 'cli-progress';

/** Where progress goes: a terminal gets a bar, anything else plain lines. */
export interface ProgressOutput {
  readonly isTTY?: boolean;
  write(s: string): unknown;
}

/** Where a command's progress goes and how often plain lines come (tests: `{ out, everyMs: 0 }`). */
export interface ProgressSink {
  /** Default: process.stderr. */
  readonly out?: ProgressOutput;
  /** Plain lines: at most one per this many ms, the first no sooner (default 5000; 0: every tenth). */
  readonly everyMs?: number;
}

export interface ProgressOptions extends ProgressSink {
  /** What is running, e.g. "write_bw sweep". */
  readonly label: string;
  /** Units of the whole run (octets, operations, seconds). */
  readonly total: number;
  /** How an amount of units is printed (default: the number). */
  readonly format?: (units: number) => string;
}

export interface Progress {
  /** Units done so far (kept within 0..total). */
  update(done: number): void;
  /** Adds to the units done. */
  add(units: number): void;
  /** Prints through the bar: on a terminal the bar steps aside for `print`'s lines and comes back below. */
  interrupt(print: () => void): void;
  /** Ends the bar; later updates are ignored. */
  stop(): void;
}

/** Default pause between two plain progress lines, and before the first one. */
export const PROGRESS_EVERY_MS = 5000;

export function startProgress(o: ProgressOptions): Progress {
  const out = o.out ?? process.stderr;
  const fmt = o.format ?? String;
  const total = Math.max(1, o.total);
  const t0 = performance.now();
  let done = 0;
  let stopped = false;
  if (out.isTTY) {
    // cli-progress returns the cursor to where the bar began when it stops: a line printed meanwhile
    // would be overwritten, so `interrupt` stops the bar, prints, and starts a new one below.
    const begin = () => {
      const b = new SingleBar({
        format: `${o.label} [{bar}] {percentage}% | {amount} of {whole} | ETA {eta_formatted}`,
        clearOnComplete: true,
        // The cursor stays visible: a Ctrl-C in mid-run leaves the terminal as it was.
        hideCursor: false,
        stream: out as NodeJS.WritableStream,
      });
      b.start(total, done, { amount: fmt(done), whole: fmt(total) });
      return b;
    };
    let bar: SingleBar | undefined = begin();
    return {
      update(n) {
        if (!bar) return;
        done = Math.min(total, Math.max(0, n));
        bar.update(done, { amount: fmt(done) });
      },
      add(units) {
        this.update(done + units);
      },
      interrupt(print) {
        if (!bar) return print();
        bar.stop();
        print();
        bar = begin();
      },
      stop() {
        bar?.stop();
        bar = undefined;
      },
    };
  }
  const everyMs = o.everyMs ?? PROGRESS_EVERY_MS;
  let lastTenth = 0;
  let lastAt = t0;
  return {
    update(n) {
      if (stopped) return;
      done = Math.min(total, Math.max(0, n));
      const tenth = Math.floor((done * 10) / total);
      const now = performance.now();
      if (tenth <= lastTenth || now - lastAt < everyMs) return;
      lastTenth = tenth;
      lastAt = now;
      out.write(`${o.label}: ${tenth * 10}% (${fmt(done)} of ${fmt(total)}, ${((now - t0) / 1000).toFixed(1)} s)\n`);
    },
    add(units) {
      this.update(done + units);
    },
    interrupt(print) {
      print();
    },
    stop() {
      stopped = true;
    },
  };
}

/** Octets as people read them: 512 B, 4.0 KiB, 1.5 MiB, 20.0 GiB. */
export function octets(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[u]}`;
}

/**
 * The same builder, with `onMoved(octets)` called for each of the stream's completed operations whose
 * work request is of type `opType` (RFC 5040 §5: the completion carries the octets it moved).
 */
export function tapCompletions(
  build: RdmapStreamBuilder,
  opType: string,
  onMoved: (octets: number) => void,
): RdmapStreamBuilder {
  return (llp, request) => {
    const s = build(llp, request);
    s.completions$.subscribe((c) => {
      if (c.kind === 'send' && c.status === 'success' && c.request.op.type === opType) onMoved(c.byteLength);
    });
    return s;
  };
}
