/**
 * The peer of the bench (./sctp-hol.ts) and of packages/llp-sctp/test/independence.test.ts, run compiled
 * from dist/ (`node tools/cli/dist/bench/sctp-hol-peer.js '<PeerSpec JSON>'`; `pnpm test` builds first).
 *
 * An SCTP LLP endpoint in a child process: a listener that sinks and checks every message (`rx` lines) or
 * an initiator that posts probe messages on command (`done` lines), JSON lines on stdin and stdout.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import { NODE_FLAGS } from '../node-flags.js';
import { checkProbe, makeProbe, nowMs, type ProbeId } from './sctp-hol-relay.js';

export interface PeerSpec {
  readonly role: 'listen' | 'connect';
  /** connect: the UDP port to connect to (the relay's) on 127.0.0.1. */
  readonly port?: number;
  /** connect: LLP streams of the connection (default 3: stream 0 carries RFC 5043 session control, 1 and 2 data). */
  readonly streams?: number;
  /** connect: octets of each probe message (default 800: one DATA chunk per packet, never two bundled). */
  readonly size?: number;
  /** Options of the sctp transport (`SctpTransportOptions` that JSON can carry: RTO bounds, pmtu, ...). */
  readonly transport?: Readonly<Record<string, number | boolean | string>>;
  /** The child exits after this long whatever happens (default 60 000 ms). */
  readonly lifetimeMs?: number;
}

export type PeerCommand =
  /** Posts one message on each listed stream, in this order, all in one go (no waiting in between). */
  | { readonly cmd: 'post'; readonly streams: readonly number[] }
  /** Posts `count` rounds of one message per listed stream, a round every `intervalMs` (the order alternates). */
  | { readonly cmd: 'flow'; readonly streams: readonly number[]; readonly count: number; readonly intervalMs: number }
  /** Answered by a `report` event: every event printed before it happened before the command arrived. */
  | { readonly cmd: 'report'; readonly id: number }
  /** Graceful close of the connection (RFC 5043 Session Terminate, then SHUTDOWN), then exit. */
  | { readonly cmd: 'close' };

export type PeerEvent =
  | { readonly ev: 'listening'; readonly port: number }
  | { readonly ev: 'connected'; readonly streams: number }
  /** A send completion (`LlpStream.send`'s callback), with the error that ended the send if one did. */
  | { readonly ev: 'done'; readonly s: number; readonly q: number; readonly g: number; readonly error?: string }
  /**
   * A delivery: probe (s, q, g) was handed up as the `d`-th message over all streams; `latencyMs` from
   * posting to delivery (the two processes' clocks, one host); `inOrder`: on its stream, right after the
   * previous one delivered there; `intact`: every octet as sent.
   */
  | {
      readonly ev: 'rx';
      readonly s: number;
      readonly q: number;
      readonly g: number;
      readonly d: number;
      readonly latencyMs: number;
      readonly intact: boolean;
      readonly inOrder: boolean;
    }
  | { readonly ev: 'flowed'; readonly posted: number }
  | { readonly ev: 'report'; readonly id: number }
  | { readonly ev: 'closed'; readonly graceful: boolean; readonly error?: string }
  | { readonly ev: 'error'; readonly message: string };

// ---- the child ----------------------------------------------------------------------------------

function emit(e: PeerEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
}

function commands(handle: (c: PeerCommand) => void): void {
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim()) handle(JSON.parse(line) as PeerCommand);
  });
  // The parent has gone (or closed our stdin): so do we.
  lines.on('close', () => process.exit(0));
}

function exitSoon(code: number): void {
  setImmediate(() => process.exit(code));
}

async function main(spec: PeerSpec): Promise<void> {
  setTimeout(() => {
    emit({ ev: 'error', message: `peer ${spec.role}: lifetime of ${spec.lifetimeMs ?? 60_000} ms over` });
    process.exit(3);
  }, spec.lifetimeMs ?? 60_000).unref();
  const { sctp } = await import('@rddp/llp-sctp');
  const { firstValueFrom } = await import('rxjs');
  const transport = sctp(spec.transport ?? {});

  if (spec.role === 'listen') {
    const listener = await transport.listen({ host: '127.0.0.1', port: 0 });
    listener.errors$?.subscribe((e) => emit({ ev: 'error', message: `listener: ${e.message}` }));
    let conn: LlpConnection | undefined;
    commands((c) => {
      if (c.cmd === 'report') emit({ ev: 'report', id: c.id });
      else if (c.cmd === 'close') void conn?.close().catch(() => {});
    });
    emit({ ev: 'listening', port: listener.address.port as number });
    conn = await firstValueFrom(listener.connections$);
    let delivered = 0;
    for (const stream of conn.streams) sink(stream, () => delivered++);
    conn.closed$.subscribe((e) => {
      emit({ ev: 'closed', graceful: e.graceful, ...(e.error ? { error: e.error.message } : {}) });
      void listener.close();
      exitSoon(0);
    });
    return;
  }

  const conn = await transport.connect(
    { host: '127.0.0.1', port: spec.port as number },
    { streams: spec.streams ?? 3, timeoutMs: 10_000 },
  );
  emit({ ev: 'connected', streams: conn.streams.length });
  conn.closed$.subscribe((e) => {
    emit({ ev: 'closed', graceful: e.graceful, ...(e.error ? { error: e.error.message } : {}) });
    exitSoon(e.graceful ? 0 : 1);
  });
  const size = spec.size ?? 800;
  const nextQ: number[] = [];
  let nextG = 0;
  /** Posts one probe on stream `s`; false when the stream asks the caller to wait for drain. */
  const post = (s: number): boolean => {
    const stream = conn.streams[s] as LlpStream;
    const q = nextQ[s] ?? 0;
    nextQ[s] = q + 1;
    const id: ProbeId = { s, q, g: nextG++ };
    return stream.send([makeProbe(id, size, nowMs())], (error) =>
      emit({ ev: 'done', ...id, ...(error ? { error: error.message } : {}) }),
    );
  };
  const flow = async (streams: readonly number[], count: number, intervalMs: number): Promise<void> => {
    let posted = 0;
    for (let i = 0; i < count; i++) {
      for (const s of i % 2 === 0 ? streams : [...streams].reverse()) {
        posted++;
        if (!post(s)) await (conn.streams[s] as LlpStream).waitForDrain();
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    emit({ ev: 'flowed', posted });
  };
  commands((c) => {
    switch (c.cmd) {
      case 'post':
        for (const s of c.streams) post(s);
        break;
      case 'flow':
        flow(c.streams, c.count, c.intervalMs).catch((e) => emit({ ev: 'error', message: `flow: ${e}` }));
        break;
      case 'report':
        emit({ ev: 'report', id: c.id });
        break;
      case 'close':
        conn.close().catch((e) => emit({ ev: 'error', message: `close: ${e}` }));
        break;
    }
  });
}

/** Receives on `stream`: checks each probe and prints an `rx` line. */
function sink(stream: LlpStream, nextDelivery: () => number): void {
  let expected = 0;
  stream.setReceiver((u) => {
    const data = Buffer.concat(u.chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength)));
    const p = checkProbe(data);
    if (!p) {
      emit({ ev: 'error', message: `stream ${stream.id}: a ${data.length}-octet message that is no probe` });
      return;
    }
    const inOrder = p.id.s === stream.id && p.id.q === expected;
    expected++;
    emit({
      ev: 'rx',
      ...p.id,
      d: nextDelivery(),
      latencyMs: nowMs() - p.postedAtMs,
      intact: p.intact,
      inOrder,
    });
  });
}

const isMain = process.argv[1] !== undefined && pathToFileURL(process.argv[1]).href === import.meta.url;
if (isMain) {
  main(JSON.parse(process.argv[2] ?? '{}') as PeerSpec).catch((e) => {
    emit({ ev: 'error', message: String((e as Error)?.stack ?? e) });
    process.exit(1);
  });
}

// ---- the parent's side --------------------------------------------------------------------------

/** How to start a peer: node flags and the script. */
export interface PeerLaunch {
  readonly execArgv: readonly string[];
  readonly script: string;
}

/** The compiled peer (`tools/cli/dist/bench/sctp-hol-peer.js`, from src/bench and dist/bench alike), rddp's V8 flags. */
export function benchLaunch(): PeerLaunch {
  return {
    execArgv: NODE_FLAGS,
    script: fileURLToPath(new URL('../../dist/bench/sctp-hol-peer.js', import.meta.url)),
  };
}

/** The parent's handle on a peer child process: its events as they come, commands, and waiting. */
export class PeerProcess {
  readonly events: PeerEvent[] = [];
  /** The child's exit code once it has exited (null: killed by a signal). */
  exitCode: number | null | undefined;
  readonly exited: Promise<number | null>;
  private stderr = '';
  private reports = 0;

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as PeerEvent);
      } catch {
        this.stderr += `${line}\n`;
      }
    });
    child.stderr?.on('data', (d) => {
      this.stderr = (this.stderr + String(d)).slice(-4000);
    });
    child.stdin?.on('error', () => {});
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      });
    });
  }

  static start(name: string, spec: PeerSpec, launch: PeerLaunch = benchLaunch()): PeerProcess {
    const child = spawn(process.execPath, [...launch.execArgv, launch.script, JSON.stringify(spec)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new PeerProcess(name, child);
  }

  send(c: PeerCommand): void {
    this.child.stdin?.write(`${JSON.stringify(c)}\n`);
  }

  /** The events of one kind, in order. */
  all<K extends PeerEvent['ev']>(ev: K, upTo = this.events.length): Extract<PeerEvent, { ev: K }>[] {
    return this.events.slice(0, upTo).filter((e): e is Extract<PeerEvent, { ev: K }> => e.ev === ev);
  }

  /** The first event of a kind (waiting for it). */
  async first<K extends PeerEvent['ev']>(ev: K, what = ev): Promise<Extract<PeerEvent, { ev: K }>> {
    await waitFor(() => this.all(ev).length > 0, `${this.name}: ${what}`, [this]);
    return this.all(ev)[0] as Extract<PeerEvent, { ev: K }>;
  }

  /**
   * Asks the child for a `report` and waits for it: returns how many events came before it. Those are
   * all the child printed before it read the command (one pipe, one order).
   */
  async report(): Promise<number> {
    const id = ++this.reports;
    this.send({ cmd: 'report', id });
    await waitFor(() => this.events.some((e) => e.ev === 'report' && e.id === id), `${this.name}: report`, [this]);
    return this.events.findIndex((e) => e.ev === 'report' && e.id === id);
  }

  /** What the child said on stderr and as error events (for failure messages). */
  get diagnostics(): string {
    const errors = this.all('error').map((e) => e.message);
    return [...errors, this.stderr.trim()].filter(Boolean).join('\n').slice(-2000);
  }

  kill(): void {
    if (this.exitCode === undefined) this.child.kill('SIGKILL');
  }
}

/**
 * Resolves once `cond()` holds (checked every 5 ms). Rejects when one of `peers` exits first, or after
 * `ms`: a safety net so that a test ends, never a timed assertion.
 */
export async function waitFor(
  cond: () => boolean,
  what: string,
  peers: readonly PeerProcess[] = [],
  ms = 20_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    const gone = peers.find((p) => p.exitCode !== undefined);
    if (gone) throw new Error(`${gone.name} exited (${gone.exitCode}) before ${what}\n${gone.diagnostics}`);
    if (Date.now() > end) {
      const why = peers.map((p) => p.diagnostics).filter(Boolean);
      throw new Error(`no ${what} within ${ms} ms${why.length ? `\n${why.join('\n')}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
