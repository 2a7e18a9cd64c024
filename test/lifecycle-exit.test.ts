/**
 * One lifecycle on every transport (issue 37): a process that pairs two ends, runs an RDMA Write
 * (RFC 5040 §5.1) and a Send (§5.3) through verbs queue pairs and closes both queue pairs gracefully
 * (§6.2) then simply returns, and must exit by itself with code 0: the LLP connection has reported
 * closed (closed$ fired, state `closed`) and no socket, association, endpoint or timer of the LLP keeps
 * the event loop alive. MPA/TCP is the control; SCTP (UDP and raw IPv4 encapsulation), the UDP datagram
 * LLP and loopback must end the same way. Each program runs in a child process as a user runs it, on the
 * built `dist` packages (built first); a child that is still alive at the deadline is killed and fails,
 * naming the handles it still held (process.getActiveResourcesInfo()).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = (pkg: string) => pathToFileURL(join(root, 'packages', pkg, 'dist', 'index.js')).href;
/** A child that has not exited by itself this long after it started has failed (it is killed). */
const DEADLINE_MS = 15_000;

/** The stack module of each transport, as its README composes it (an expression of the child program). */
const MODULES = {
  tcp: `(await import('${dist('llp-mpa-tcp')}')).mpaTcpModule()`,
  loopback: `(await import('${dist('llp-loopback')}')).loopbackModule()`,
  udp: `(await import('${dist('llp-udp')}')).udpModule()`,
  sctp: `(await import('${dist('llp-sctp')}')).sctpModule()`,
  'sctp-raw': `(await import('${dist('llp-sctp')}')).sctpModule({ encapsulation: 'raw' })`,
} as const;
type Transport = keyof typeof MODULES;

/**
 * The child program. `connections` pairs on one listener (`stack.pair` once, or `listen` + several
 * `connect`s when > 1, so an SCTP listener's socket and endpoints serve several associations); its
 * last line on stdout is a JSON report written from the `exit` event, which only a process ending by
 * itself (or by process.exit, which the program never calls) reaches.
 */
function program(transport: Transport, connections: number): string {
  // The UDP LLP is unreliable and unordered: RDMAP runs over it only with the reduced semantics opted
  // into (docs/UDP-LLP.md), through an RDMAP stream factory bound by a user module.
  const modules =
    transport === 'udp'
      ? `{ modules: [new (await import('inversify')).ContainerModule(({ bind }) => { bind(stackPkg.RDMAP_STREAM_FACTORY).toConstantValue((llp, o) => new RdmapStream(llp, { ...o, reducedSemantics: true })); })] }`
      : '{}';
  return `
const stackPkg = await import('${dist('stack')}');
const { RdmapStream } = await import('${dist('rdmap')}');
const { Access } = await import('${dist('verbs')}');
const { firstValueFrom } = await import('rxjs');
const stack = stackPkg.createStack(${MODULES[transport]}, ${modules});
const pairs = [];
if (${connections} === 1) pairs.push(await stack.pair());
else {
  const listener = await stack.listen({ host: '127.0.0.1', port: 0 });
  for (let i = 0; i < ${connections}; i++) {
    const accepted = firstValueFrom(listener.connections$);
    pairs.push([await stack.connect(listener.address), await accepted]);
  }
  await listener.close();
}
const links = pairs.flat();
const events = links.map(() => null);
links.forEach((c, i) => c.closed$.subscribe((e) => { events[i] = { graceful: e.graceful, initiator: e.initiator }; }));
const device = stack.device();
const qps = [];
for (const [clientLink, serverLink] of pairs) {
  const [client, server] = [device.allocPd(), device.allocPd()];
  const qp = stack.queuePair(client, clientLink);
  const peer = stack.queuePair(server, serverLink);
  const target = server.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteWrite);
  const inbox = server.registerMr(new Uint8Array(64), Access.LocalWrite);
  const delivered = peer.recv(inbox.sge());
  const data = client.registerMr(new TextEncoder().encode('lifecycle'), 0);
  await qp.write(data.sge(), target.remote()); // RDMA Write, RFC 5040 §5.1
  await qp.send(data.sge()); // Send, RFC 5040 §5.3
  const wc = await delivered;
  if (new TextDecoder().decode(inbox.buffer.subarray(0, wc.byteLen)) !== 'lifecycle') throw new Error('Send payload');
  if (new TextDecoder().decode(target.buffer.subarray(0, 9)) !== 'lifecycle') throw new Error('Write payload');
  qps.push(qp, peer);
}
await Promise.all(qps.map((qp) => qp.close()));
process.on('exit', () => {
  console.log(JSON.stringify({ states: links.map((c) => c.state), events }));
});
// Diagnosis only (unref: it never keeps the process alive): what still holds the event loop.
setTimeout(() => console.error('still alive, holding', JSON.stringify(process.getActiveResourcesInfo())), 3000).unref();
`;
}

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

/** Runs `source` as an ES module in a child (resolving bare names from the repository root). */
/** Runs `source`, which must exit 0 by itself within the deadline; returns the report it printed last. */
async function exitedByItself(source: string): Promise<{
  report: { states: string[]; events: ({ graceful: boolean } | null)[] };
  detail: string;
}> {
  const r = await runChild(source);
  const detail = `exit ${r.code} ${r.signal ?? ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  expect(r.timedOut, `still running after ${DEADLINE_MS} ms: ${detail}`).toBe(false);
  expect(r.code, detail).toBe(0);
  return { report: JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}'), detail };
}

function runChild(source: string, deadlineMs = DEADLINE_MS): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, deadlineMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, stdout, stderr });
    });
  });
}

/** Raw IPv4 encapsulation needs root and the optional raw-socket addon. */
function rawAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    createRequire(join(root, 'packages', 'llp-sctp', 'package.json'))('raw-socket');
    return true;
  } catch {
    return false;
  }
}

/** `tsc -b` of these project folders (relative to the repository). */
function build(...projects: string[]): void {
  const built = spawnSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', ...projects],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  if (built.status !== 0) throw new Error(`tsc -b failed:\n${built.stdout}${built.stderr}`);
}

beforeAll(
  () =>
    build(
      ...['stack', 'verbs', 'rdmap', 'llp-mpa-tcp', 'llp-loopback', 'llp-udp', 'llp-sctp'].map((p) => `packages/${p}`),
    ),
  180_000,
);

const cases: [Transport, number][] = [
  ['tcp', 1],
  ['loopback', 1],
  ['udp', 1],
  ['sctp', 1],
  // One listener socket and its per-peer endpoints under three associations: the socket closes when
  // the listener and the last association are gone.
  ['sctp', 3],
  ['sctp-raw', 1],
];

describe('closing the last queue pair ends the process on every transport (issue 37)', () => {
  for (const [transport, connections] of cases) {
    const title = `${transport}: ${connections} connection${connections > 1 ? 's' : ''}, Write + Send, both queue pairs closed → the process exits 0 by itself`;
    it.skipIf(transport === 'sctp-raw' && !rawAvailable())(
      title,
      async () => {
        const { report, detail } = await exitedByItself(program(transport, connections));
        expect(report.states).toEqual(Array(2 * connections).fill('closed'));
        expect(
          report.events.every((e) => e?.graceful === true),
          detail,
        ).toBe(true);
      },
      DEADLINE_MS + 10_000,
    );
  }
});

/** The transport itself (no stack), as each package's README makes it. */
const TRANSPORTS = {
  tcp: `(await import('${dist('llp-mpa-tcp')}')).mpaTcp()`,
  loopback: `(await import('${dist('llp-loopback')}')).loopback()`,
  udp: `(await import('${dist('llp-udp')}')).udp()`,
  sctp: `(await import('${dist('llp-sctp')}')).sctp()`,
} as const;

/**
 * The other endings of a connection, on the LLP alone: every stream of a two-stream connection closed
 * (RFC 5041 §6.2, the connection follows its last stream), the listener left open until the connection
 * has closed (it keeps its socket meanwhile, then gives it up), and an abort.
 */
const ENDINGS = {
  streams: 'await listener.close(); await Promise.all(conn.streams.map((s) => s.close()));',
  'listener last': 'await conn.close(); await firstValueFrom(peer.closed$); await listener.close();',
  abort: 'await listener.close(); conn.abort();',
} as const;

function llpProgram(transport: keyof typeof TRANSPORTS, ending: keyof typeof ENDINGS): string {
  return `
const { firstValueFrom } = await import('rxjs');
const t = ${TRANSPORTS[transport]};
const listener = await t.listen({ host: '127.0.0.1', port: 0 });
const accepted = firstValueFrom(listener.connections$);
const conn = await t.connect(listener.address, { streams: 2 });
const peer = await accepted;
const events = [null, null];
[conn, peer].forEach((c, i) => c.closed$.subscribe((e) => { events[i] = { graceful: e.graceful }; }));
${ENDINGS[ending]}
await Promise.all([firstValueFrom(conn.closed$), firstValueFrom(peer.closed$)]);
process.on('exit', () => console.log(JSON.stringify({ states: [conn.state, peer.state], events })));
setTimeout(() => console.error('still alive, holding', JSON.stringify(process.getActiveResourcesInfo())), 3000).unref();
`;
}

describe('every ending of an LLP connection ends the process (issue 37)', () => {
  for (const transport of Object.keys(TRANSPORTS) as (keyof typeof TRANSPORTS)[]) {
    for (const ending of Object.keys(ENDINGS) as (keyof typeof ENDINGS)[]) {
      it(
        `${transport}, ${ending}: both ends closed, the process exits 0 by itself`,
        async () => {
          const { report } = await exitedByItself(llpProgram(transport, ending));
          expect(report.states).toEqual(['closed', 'closed']);
          expect(report.events.map((e) => e?.graceful)).toEqual(ending === 'abort' ? [false, false] : [true, true]);
        },
        DEADLINE_MS + 10_000,
      );
    }
  }
});

describe('a listener still listening keeps its socket (and the process)', () => {
  for (const transport of ['tcp', 'udp', 'sctp'] as const) {
    it(`${transport}: after its connection closed, a listener not closed keeps the process running`, async () => {
      const source = llpProgram(transport, 'listener last').replace('await listener.close();', '');
      const r = await runChild(source, 2_000);
      expect(r.timedOut, `exited (${r.code}): ${r.stdout}${r.stderr}`).toBe(true);
    }, 10_000);
  }
});

/** `rddp perf` as users run it: a server process and a client process. */
function rddp(args: string[]) {
  return spawn(process.execPath, [join(root, 'tools', 'cli', 'dist', 'main.js'), ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function exited(child: ReturnType<typeof rddp>, ms: number): Promise<{ code: number | null; timedOut: boolean }> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ code: null, timedOut: true });
    }, ms);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, timedOut: false });
    });
  });
}

describe('the rddp perf server exits after its run (issue 37)', () => {
  beforeAll(() => build('tools/cli'), 180_000);
  for (const transport of ['tcp', 'sctp']) {
    it(
      `perf write_bw over ${transport}: the one-run server exits 0 by itself once the client is done`,
      async () => {
        const flags = ['--transport', transport, '-n', '50', '-s', '1024'];
        const server = rddp(['perf', 'write_bw', '-p', '0', ...flags]);
        let serverErr = '';
        const port = await new Promise<number>((resolve, reject) => {
          server.stderr.on('data', (d: Buffer) => {
            serverErr += d;
            const m = /listening on [^\s]*:(\d+)/.exec(serverErr);
            if (m) resolve(Number(m[1]));
          });
          server.on('close', () => reject(new Error(`server ended before listening: ${serverErr}`)));
        });
        const serverEnd = exited(server, DEADLINE_MS);
        const client = rddp(['perf', 'write_bw', '127.0.0.1', '-p', String(port), ...flags]);
        expect((await exited(client, DEADLINE_MS)).code).toBe(0);
        const s = await serverEnd;
        expect(s.timedOut, `the server still ran ${DEADLINE_MS} ms after the client: ${serverErr}`).toBe(false);
        expect(s.code, serverErr).toBe(0);
      },
      2 * DEADLINE_MS + 10_000,
    );
  }
});
