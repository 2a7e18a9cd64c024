/**
 * `rddp perf` server on several cores: `--workers N` processes behind one port (node:cluster; the
 * primary accepts each TCP connection and hands it to a worker, round robin). Each worker runs MPA
 * startup and serves its connections; the primary counts them, prints the rows and ends the workers.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { LlpConnection } from '@rddp/llp';
import type { ToolTransport } from '../transports.js';
import { UsageError } from '../transports.js';
import type { PerfResult, PerfServeOptions } from './engine.js';
import type { PerfConnHeader } from './format.js';
import { MemoryBudget } from './hello.js';
import { PERF_MAX_WORKERS } from './limits.js';

/** One connection a worker served: its results and its header's words (what the primary prints). */
export interface Served {
  readonly results: PerfResult[];
  readonly conn: PerfConnHeader;
}

/** `--workers <n|auto>` as a count; a usage error outside 1..PERF_MAX_WORKERS. */
export function workerCount(v: string | undefined): number {
  if (v === undefined) return 1;
  if (v === 'auto') return Math.min(availableParallelism(), PERF_MAX_WORKERS);
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > PERF_MAX_WORKERS)
    throw new UsageError(`--workers must be 'auto' or an integer in 1..${PERF_MAX_WORKERS} (got ${v})`);
  return n;
}

/** Whether this process is a `--workers` worker (forked by a primary running the same command line). */
export function isPerfWorker(): boolean {
  return cluster.isWorker;
}

/** What a worker tells its primary. */
type WorkerMessage =
  | { type: 'accepted' }
  | { type: 'served'; pid: number; served: Served }
  | { type: 'failed'; pid: number; message: string };

/** What a primary tells its workers: stop accepting (a non-persistent server has its N connections). */
type PrimaryMessage = { type: 'stop-accepting' };

export interface WorkerServe {
  readonly tt: ToolTransport;
  readonly host: string;
  readonly port: number;
  readonly options: PerfServeOptions & { limits: { maxSize: number; maxMemory: number } };
  readonly serve: (conn: LlpConnection, options: PerfServeOptions) => Promise<Served>;
}

/**
 * Worker side: listens on the primary's shared port and serves every connection handed to it, each
 * on its own, within one `--max-memory` budget of this worker's. Reports each to the primary.
 */
export async function runPerfWorker(w: WorkerServe): Promise<void> {
  const send = (m: WorkerMessage) => process.send?.(m);
  const listener = await w.tt.transport.listen({ host: w.host, port: w.port }, { params: w.tt.listenParams });
  const budget = new MemoryBudget(w.options.limits.maxMemory);
  listener.connections$.subscribe((conn) => {
    send({ type: 'accepted' });
    w.serve(conn, { ...w.options, budget }).then(
      (served) => send({ type: 'served', pid: process.pid, served }),
      (e: Error) => send({ type: 'failed', pid: process.pid, message: e.message }),
    );
  });
  process.on('message', (m: PrimaryMessage) => {
    if (m?.type === 'stop-accepting') void listener.close();
  });
  // The terminal's Ctrl-C reaches every process of the group: the primary decides when to end.
  process.on('SIGINT', () => {});
  process.on('disconnect', () => process.exit(0));
}

export interface PrimaryServe {
  readonly workers: number;
  /** Connections to serve before ending; undefined: until SIGINT or SIGTERM (`--persistent`). */
  readonly connections: number | undefined;
  readonly log: (s: string) => void;
  /** Once every worker listens: the port they share. */
  readonly onListening: (port: number) => void;
  /** Each connection served, with the pid of the worker that served it. */
  readonly onServed: (served: Served, pid: number) => void;
  /** Resolves at SIGINT or SIGTERM (persistent servers). */
  readonly stopped?: Promise<string>;
}

/**
 * Primary side: forks the workers (each runs this command line again), waits until all listen, then
 * counts connections. Resolves with the number of connections that failed once `connections` have
 * ended (or at the stop signal); rejects if a worker cannot listen or every worker died.
 */
export async function runPerfPrimary(o: PrimaryServe): Promise<number> {
  const workers: Worker[] = [];
  let alive = 0;
  let accepted = 0;
  let ended = 0;
  let failed = 0;
  let finish: (failedCount: number) => void = () => {};
  let fail: (e: Error) => void = () => {};
  const done = new Promise<number>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  let listening = 0;
  let port = 0;
  const endOne = () => {
    ended++;
    if (o.connections !== undefined && ended >= o.connections) finish(failed);
  };
  for (let i = 0; i < o.workers; i++) {
    const w = cluster.fork();
    workers.push(w);
    alive++;
    w.on('listening', (address: { port: number }) => {
      port = address.port;
      if (++listening === o.workers) o.onListening(port);
    });
    w.on('message', (m: WorkerMessage) => {
      if (m.type === 'accepted') {
        accepted++;
        if (o.connections !== undefined && accepted === o.connections)
          for (const x of workers) if (x.isConnected()) x.send({ type: 'stop-accepting' } satisfies PrimaryMessage);
      } else if (m.type === 'served') {
        o.onServed(m.served, m.pid);
        endOne();
      } else if (m.type === 'failed') {
        o.log(`worker ${m.pid}: ${m.message}`);
        failed++;
        endOne();
      }
    });
    w.on('exit', (code) => {
      alive--;
      if (listening < o.workers) fail(new Error(`worker ${w.process.pid} exited (code ${code}) before listening`));
      else if (alive === 0) fail(new Error('every worker exited'));
      else o.log(`worker ${w.process.pid} exited (code ${code})`);
    });
  }
  o.stopped?.then(() => finish(failed));
  try {
    return await done;
  } finally {
    for (const w of workers) {
      w.removeAllListeners('exit');
      w.kill();
    }
  }
}
