/**
 * Lossy, real links (issue "reliability"): two network namespaces joined by a veth pair, packets dropped
 * at random by nftables (`numgen random`; this kernel has no netem), data moved between two processes
 * and verified, over MPA/TCP and over SCTP. Needs root, `ip` and `nft`; skipped with a message elsewhere
 * (CI installs nftables).
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const RDDP_JS = path.resolve(__dirname, '../dist/main.js');
// Per process: two runs of this file on one host (two checkouts, two CI jobs) never share a namespace.
const A = `rddp-lossy-${process.pid}-a`;
const B = `rddp-lossy-${process.pid}-b`;
const ADDR_B = '10.77.0.2';

function sh(args: string[]): string {
  return execFileSync(args[0] as string, args.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function available(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  try {
    sh(['ip', '-V']);
    sh(['nft', '--version']);
    sh(['ip', 'netns', 'add', `rddp-lossy-${process.pid}-p`]);
    sh(['ip', 'netns', 'del', `rddp-lossy-${process.pid}-p`]);
    return undefined;
  } catch (e) {
    return `needs ip netns and nft: ${(e as Error).message.split('\n')[0]}`;
  }
}

const why = available();
if (why) console.warn(`lossy-link tests skipped: ${why}`);

/** `nft …` inside namespace `ns`. */
function nft(ns: string, ...args: string[]): string {
  return sh(['ip', 'netns', 'exec', ns, 'nft', ...args]);
}

function setLoss(percent: number): void {
  for (const ns of [A, B]) {
    nft(ns, 'flush', 'ruleset');
    if (percent === 0) continue;
    nft(ns, 'add', 'table', 'inet', 'lossy');
    nft(ns, 'add', 'chain', 'inet', 'lossy', 'in', '{ type filter hook input priority 0 ; }');
    // Drop `percent` % of what arrives on the veth, at random.
    const rule = `add rule inet lossy in iifname v${ns.at(-1)} numgen random mod 1000 < ${percent * 10} counter drop`;
    nft(ns, ...rule.split(' '));
  }
}

async function run(ns: string, args: string[], ms: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, RDDP_JS, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, out, err };
}

async function transfer(transport: string, octets: number, loss: number, size = 1 << 20): Promise<string> {
  setLoss(loss);
  const port = String(20_000 + Math.floor(Math.random() * 20_000));
  const iters = String(Math.max(1, Math.floor(octets / size)));
  // SCTP: RTO.Min 50 ms, as a LAN would use (the default is RFC 9260's 1 s; docs/SCTP.md "Loss").
  const lan = transport === 'sctp' ? ['--sctp-rto-min', '50'] : [];
  const common = ['-p', port, '-s', String(size), '-n', iters, '-t', '8', '--transport', transport, ...lan];
  const server = run(B, ['perf', 'write_bw', ...common], 240_000);
  await new Promise((r) => setTimeout(r, 700));
  const client = await run(A, ['perf', 'write_bw', ADDR_B, ...common], 240_000);
  const s = await server;
  expect(client.err).not.toContain('verification failed');
  // stderr carries only the progress lines of a long run ("write_bw: 20% (… of …, 5.0 s)"), nothing else.
  const unexpected = client.err.split('\n').filter((l) => l !== '' && !/^\w+: \d+% \(/.test(l));
  expect({ code: client.code, err: unexpected }).toEqual({ code: 0, err: [] });
  expect(s.code).toBe(0);
  expect(client.out).toMatch(new RegExp(`\\n ${size}\\s+${iters}\\s`));
  expect(client.out).not.toContain('VERIFY FAILED');
  if (loss > 0) expect(dropped()).toBeGreaterThan(0); // the link really lost packets
  return client.out;
}

/** Packets the nftables rules dropped in both namespaces. */
function dropped(): number {
  let n = 0;
  for (const ns of [A, B]) {
    const text = nft(ns, 'list', 'ruleset');
    for (const m of text.matchAll(/counter packets (\d+)/g)) n += Number(m[1]);
  }
  return n;
}

describe.skipIf(why !== undefined)(
  `lossy links over veth between network namespaces${why ? ` (skipped: ${why})` : ''}`,
  () => {
    beforeAll(() => {
      for (const ns of [A, B])
        try {
          sh(['ip', 'netns', 'del', ns]);
        } catch {
          // not there yet
        }
      sh(['ip', 'netns', 'add', A]);
      sh(['ip', 'netns', 'add', B]);
      sh(['ip', 'link', 'add', 'va', 'netns', A, 'type', 'veth', 'peer', 'name', 'vb', 'netns', B]);
      sh(['ip', '-n', A, 'addr', 'add', '10.77.0.1/24', 'dev', 'va']);
      sh(['ip', '-n', B, 'addr', 'add', `${ADDR_B}/24`, 'dev', 'vb']);
      for (const [ns, dev] of [
        [A, 'va'],
        [B, 'vb'],
      ] as const) {
        sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
        sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
      }
    }, 30_000);
    afterAll(() => {
      for (const ns of [A, B])
        try {
          sh(['ip', 'netns', 'del', ns]);
        } catch {
          // already gone
        }
    });

    for (const loss of [1, 3])
      it(`MPA/TCP with CRC: 256 MiB of verified RDMA Writes at ${loss} % packet loss`, async () => {
        await transfer('tcp', 256 << 20, loss);
      }, 300_000);

    // SCTP (UDP encapsulation): @rddp/sctp (fast retransmit, T3-rtx at an RTO.Min of 50 ms, docs/SCTP.md
    // "Loss"); same messages and depth as MPA/TCP.
    for (const loss of [1, 3])
      it(`SCTP (UDP encapsulation): 256 MiB of verified RDMA Writes at ${loss} % packet loss`, async () => {
        await transfer('sctp', 256 << 20, loss);
      }, 300_000);
  },
);
