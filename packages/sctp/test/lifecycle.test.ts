/**
 * The package's own raw IP mode (no udpTransport) ends with its last user: the raw SCTP and ICMP sockets
 * (and the discard service on port 9, RFC 4960 §3.1) close once no endpoint but the discard service is
 * left, and a closed server's endpoint goes with its last association (as net.Server.close), so a process
 * whose associations ended and whose server closed exits by itself; a server still listening keeps them.
 * Each program runs in its own process, client and server over 127.0.0.1 (root and raw-socket needed).
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

const lib = new URL('../lib/index.js', import.meta.url).pathname;

function rawAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    createRequire(import.meta.url)('raw-socket');
    return true;
  } catch {
    return false;
  }
}

/** A server on `port` and a client that sends one message and ends (SHUTDOWN, RFC 4960 §9.2). */
function program(port: number, afterEnd: string): string {
  return `
const sctp = require(${JSON.stringify(lib)});
const server = sctp.createServer((sock) => {
  sock.on('data', (d) => console.log('data', String(d)));
  sock.on('end', () => { console.log('end'); ${afterEnd} });
});
server.on('error', (e) => { console.error(e); process.exitCode = 3; });
server.listen({ port: ${port}, host: '127.0.0.1' }, () => {
  const client = sctp.connect({ host: '127.0.0.1', port: ${port}, localAddress: ['127.0.0.1'] });
  client.on('error', (e) => { console.error(e); process.exitCode = 3; });
  client.on('connect', () => { client.write(Buffer.from('over raw IP')); client.end(); });
});
`;
}

function run(source: string, ms: number): Promise<{ code: number | null; running: boolean; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
    });
    let running = false;
    const timer = setTimeout(() => {
      running = true;
      child.kill('SIGKILL');
    }, ms);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, running, stdout, stderr });
    });
  });
}

const port = () => 20_000 + Math.floor(Math.random() * 20_000);

describe.skipIf(!rawAvailable())('raw IP mode: the process exits once the last association and server are gone', () => {
  it('client ends, the server closes: the process exits 0 by itself', async () => {
    const r = await run(program(port(), 'server.close();'), 10_000);
    expect(r.running, `still running: ${r.stdout}${r.stderr}`).toBe(false);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('data over raw IP\nend\n');
  }, 15_000);

  it('the raw sockets open again for a later endpoint, and close again after it', async () => {
    const p = port();
    const again = `server.close(); setImmediate(() => {
      const s2 = sctp.createServer((sock) => sock.on('end', () => { console.log('second end'); s2.close(); }));
      s2.listen({ port: ${p + 1}, host: '127.0.0.1' }, () => {
        const c = sctp.connect({ host: '127.0.0.1', port: ${p + 1}, localAddress: ['127.0.0.1'] });
        c.on('connect', () => c.end());
      });
    });`;
    const r = await run(program(p, again), 10_000);
    expect(r.running, `still running: ${r.stdout}${r.stderr}`).toBe(false);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('data over raw IP\nend\nsecond end\n');
  }, 15_000);

  it('the server closes, then aborts its last association itself: the process exits 0 by itself', async () => {
    const p = port();
    // A local ABORT (RFC 4960 §9.1) sends no SHUTDOWN COMPLETE and loses no communication: the endpoint must
    // still go with it.
    const source = `
const sctp = require(${JSON.stringify(lib)});
const server = sctp.createServer((sock) => {
  sock.on('error', () => {});
  sock.on('data', (d) => { console.log('data', String(d)); server.close(); sock.destroy(); });
});
server.listen({ port: ${p}, host: '127.0.0.1' }, () => {
  const client = sctp.connect({ host: '127.0.0.1', port: ${p}, localAddress: ['127.0.0.1'] });
  client.on('error', () => {});
  client.on('close', () => console.log('client closed'));
  client.on('connect', () => client.write(Buffer.from('then abort')));
});
`;
    const r = await run(source, 10_000);
    expect(r.running, `still running: ${r.stdout}${r.stderr}`).toBe(false);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('data then abort\n');
  }, 15_000);

  it('a server still listening keeps the process (and its raw sockets)', async () => {
    const r = await run(program(port(), ''), 2_000);
    expect(r.stdout).toBe('data over raw IP\nend\n');
    expect(r.running).toBe(true);
  }, 10_000);
});
