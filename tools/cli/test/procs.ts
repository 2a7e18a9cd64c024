/** Helpers for tests that run `tools/rddp` as separate processes. */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';

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

/** Runs `tools/rddp args…`, collecting its output. */
export function run(args: string[]): {
  child: ChildProcess;
  done: Promise<{ code: number | null; out: string; err: string }>;
} {
  const child = spawn(RDDP, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  return { child, done: once(child, 'exit').then(([code]) => ({ code: code as number | null, out, err })) };
}
