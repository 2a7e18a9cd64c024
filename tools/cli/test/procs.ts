/** Helpers for tests that run `tools/rddp` as separate processes. */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { afterEach } from 'vitest';

export const RDDP = path.resolve(__dirname, '../../rddp');

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  await once(s, 'close');
  return port;
}

/** How a process ended: its status and all it wrote. */
export type Ended = { code: number | null; out: string; err: string };

/** Runs `tools/rddp args…`, collecting its output. */
export function run(args: string[]): {
  child: ChildProcess;
  done: Promise<Ended>;
} {
  const child = spawn(RDDP, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  return { child, done: once(child, 'exit').then(([code]) => ({ code: code as number | null, out, err })) };
}

/** node --require fake: hides the packages RDDP_TEST_MISSING names, as on an install without them. */
const MISSING = path.resolve(__dirname, 'fixtures/missing-modules.cjs');

/**
 * `node args…` with `env` added and, where `missing` names packages, the missing-modules fake hiding them
 * (an install without them); collects its output.
 */
export function nodeWith(
  args: string[],
  o: { env?: Record<string, string>; missing?: string; cwd?: string } = {},
): { child: ChildProcess; done: Promise<Ended> } {
  const { env = {}, missing, cwd } = o;
  const child = spawn(process.execPath, [...(missing ? ['--require', MISSING] : []), ...args], {
    ...(cwd ? { cwd } : {}),
    env: { ...process.env, ...env, ...(missing ? { RDDP_TEST_MISSING: missing } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  return { child, done: once(child, 'exit').then(([code]) => ({ code: code as number | null, out, err })) };
}

/**
 * Every process a test starts; whatever still runs after the test is killed (a failed test leaks none).
 * Call it at a test file's top level (it adds an `afterEach`): `run` is procs' `run`, the process kept;
 * `track` keeps a child started otherwise.
 */
export function startedProcesses(): {
  run(args: string[]): ReturnType<typeof run>;
  track(child: ChildProcess): ChildProcess;
} {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  return {
    run(args) {
      const p = run(args);
      started.push(p.child);
      return p;
    },
    track(child) {
      started.push(child);
      return child;
    },
  };
}

/** Resolves with `stream`'s output so far once it matches `re`; rejects if the process exits first or after `ms`. */
export function outputMatches(
  child: ChildProcess,
  stream: 'stdout' | 'stderr',
  re: RegExp,
  ms = 30_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const t = setTimeout(() => reject(new Error(`no ${re} on ${stream} in ${ms} ms: ${seen}`)), ms);
    child[stream]?.on('data', (d) => {
      seen += d;
      if (re.test(seen)) {
        clearTimeout(t);
        resolve(seen);
      }
    });
    child.once('exit', (c) => {
      clearTimeout(t);
      reject(new Error(`exited ${c} before ${re}: ${seen}`));
    });
  });
}

/** Resolves when the child's stderr so far matches `re` (as outputMatches). */
export const stderrMatches = (child: ChildProcess, re: RegExp, ms = 30_000): Promise<string> =>
  outputMatches(child, 'stderr', re, ms);

/** Resolves once a server's stderr says it is listening. */
export const listening = (child: ChildProcess): Promise<void> =>
  stderrMatches(child, /listening/).then(() => undefined);

/**
 * The process's end, or a failure (and the process killed) if it is still running `ms` from now (by
 * default 5 s: how long an ended run may keep its process, issue 34).
 */
export async function endsWithin(p: { child: ChildProcess; done: Promise<Ended> }, ms = 5000): Promise<Ended> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      p.child.kill('SIGKILL');
      reject(new Error(`still running ${ms} ms later`));
    }, ms);
  });
  try {
    return await Promise.race([p.done, late]);
  } finally {
    clearTimeout(timer);
  }
}
