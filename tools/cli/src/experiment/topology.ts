/**
 * The experiment's topology: two network namespaces joined by a veth pair, named for this run alone
 * (`rddp-x<pid>-<nonce>-a|b`, veths `rx<pid36><nonce>a|b`, a 10.78.x.0/24 of its own), so two
 * experiments share a host. Kernel impairments: random loss by nftables (`numgen random`, on what each
 * side receives from the veth) and a bandwidth limit by a `tc` tbf on each veth. Every dropped packet
 * also goes to NFLOG group 7, which `dumpcap` records per namespace, beside a capture of the veth
 * itself: the wire evidence (./capture.ts) says which packet was lost and whose data it carried.
 * Delay, jitter and reordering need netem; when `tc … netem` is refused they come from the user-space
 * relay (./relay.ts).
 *
 * Clean-up: on every exit the command takes (return, throw, SIGINT, SIGTERM) the namespaces go; one
 * left by a killed command (SIGKILL) is removed by the next command, which finds its pid gone.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TopologyUnavailableError } from './errors.js';
import { nowUs } from './workload.js';

/** NFLOG group the dropping rules send each dropped packet to (per namespace). */
const NFLOG_GROUP = 7;

function sh(args: string[]): string {
  return execFileSync(args[0] as string, args.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Why the topology cannot be built here, or undefined. */
export function topologyUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, nftables, tc)';
  try {
    sh(['ip', '-V']);
    sh(['nft', '--version']);
    sh(['tc', '-V']);
  } catch (e) {
    return `needs ip netns, nft and tc: ${(e as Error).message.split('\n')[0]}`;
  }
  try {
    sh(['dumpcap', '-v']);
  } catch {
    return 'needs dumpcap to record the link and its drops (Debian: apt-get install tshark)';
  }
  const probe = `rddp-probe-${process.pid}`;
  try {
    sh(['ip', 'netns', 'add', probe]);
    sh(['ip', 'netns', 'del', probe]);
    return undefined;
  } catch (e) {
    return `needs ip netns, nft and tc: ${(e as Error).message.split('\n')[0]}`;
  }
}

/** This run's names and addresses. */
export interface TopologyNames {
  readonly nsA: string;
  readonly nsB: string;
  readonly devA: string;
  readonly devB: string;
  /** Initiator (namespace A) and responder (namespace B) addresses on the veth. */
  readonly addrA: string;
  readonly addrB: string;
  /** The TUN pair the packet relay joins (delay, jitter, reordering), and its addresses. */
  readonly tunA: string;
  readonly tunB: string;
  readonly tunAddrA: string;
  readonly tunAddrB: string;
}

const NAME = /^rddp-x(\d+)-([0-9a-f]{4})-[ab]$/;

/** Names for a run of process `pid` with `nonce` (4 hex digits): namespace, veth (≤ 15 octets), subnet. */
export function topologyNames(pid: number, nonce: string): TopologyNames {
  const n = Number.parseInt(nonce, 16);
  const net = `10.78.${n & 0xff}`;
  const dev = `rx${pid.toString(36)}${nonce.slice(0, 3)}`;
  const tunNet = `10.79.${n & 0xff}`;
  return {
    nsA: `rddp-x${pid}-${nonce}-a`,
    nsB: `rddp-x${pid}-${nonce}-b`,
    devA: `${dev}a`,
    devB: `${dev}b`,
    addrA: `${net}.1`,
    addrB: `${net}.2`,
    tunA: `${dev}ta`,
    tunB: `${dev}tb`,
    tunAddrA: `${tunNet}.1`,
    tunAddrB: `${tunNet}.2`,
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A namespace younger than this is never reaped: its command may be another PID namespace's, building it. */
const REAP_MIN_AGE_MS = 120_000;

/**
 * Whether namespace `name` is left over: its command's pid does not run here, no process is inside it,
 * and it is older than REAP_MIN_AGE_MS. A pid alone does not say it: a command in another PID namespace
 * (another container sharing /run/netns) has a pid that does not exist in this one.
 */
function leftOver(name: string, pid: number): boolean {
  if (alive(pid)) return false;
  try {
    if (Date.now() - statSync(`/run/netns/${name}`).mtimeMs < REAP_MIN_AGE_MS) return false;
    return sh(['ip', 'netns', 'pids', name]).trim() === '';
  } catch {
    return false;
  }
}

/** Deletes the namespaces of experiments whose command no longer runs (killed by SIGKILL); returns them. */
export function reapStaleNamespaces(): string[] {
  let listed = '';
  try {
    listed = sh(['ip', 'netns', 'list']);
  } catch {
    return [];
  }
  const gone: string[] = [];
  for (const line of listed.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const m = NAME.exec(name);
    if (!m || !leftOver(name, Number(m[1]))) continue;
    try {
      sh(['ip', 'netns', 'del', name]);
      gone.push(name);
    } catch {
      // deleted by another command meanwhile
    }
  }
  return gone;
}

/** The captures of one run: the veth in B (both directions, drops included) and each side's drops. */
export interface CapturedRun {
  readonly link: Uint8Array;
  readonly drops: Uint8Array[];
  /** Packets each capture says it lost (its buffer overflowed): evidence missing. */
  readonly lostByCapture: number;
}

export interface RunCapture {
  /** Stops the captures and returns their files' octets. */
  stop(): Promise<CapturedRun>;
}

export interface Topology {
  readonly names: TopologyNames;
  readonly netemAvailable: boolean;
  /** Capture timestamps (µs since the epoch) + this = the host's monotonic µs (nowUs). */
  readonly clockOffsetUs: number;
  setLoss(percent: number): void;
  /** Packets nftables dropped since the last setLoss. */
  dropped(): number;
  /** Starts this run's captures (the veth, or the TUN link with `tun`); resolves once each is recording. */
  capture(link: 'veth' | 'tun'): Promise<RunCapture>;
  /** Packets the TUN devices' own queues dropped (the relay fell behind): loss no rule made. */
  tunQueueDrops(): number;
  /** `ip netns exec <ns> <cmd…>` as a child process. */
  exec(side: 'a' | 'b', argv: readonly string[]): ChildProcess;
  teardown(): void;
}

export interface TopologyOptions {
  /** tbf rate on each veth, in Mbit/s (0: none). */
  readonly rateMbit: number;
}

/** Realtime µs (as capture timestamps are) minus monotonic µs, read now. */
function clockOffset(): number {
  const realUs = Math.round((performance.timeOrigin + performance.now()) * 1000);
  return nowUs() - realUs;
}

export function buildTopology(o: TopologyOptions): Topology {
  const why = topologyUnavailable();
  if (why) throw new TopologyUnavailableError(`rddp experiment ${why}`);
  reapStaleNamespaces();
  const names = topologyNames(process.pid, randomBytes(2).toString('hex'));
  const { nsA, nsB, devA, devB } = names;
  const dir = mkdtempSync(path.join(tmpdir(), 'rddp-exp-capture-'));
  const captures = new Set<ChildProcess>();
  const del = () => {
    for (const c of captures) c.kill('SIGKILL');
    for (const ns of [nsA, nsB])
      try {
        sh(['ip', 'netns', 'del', ns]);
      } catch {
        // not there
      }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    sh(['ip', 'netns', 'add', nsA]);
    sh(['ip', 'netns', 'add', nsB]);
    sh(['ip', 'link', 'add', devA, 'netns', nsA, 'type', 'veth', 'peer', 'name', devB, 'netns', nsB]);
    sh(['ip', '-n', nsA, 'addr', 'add', `${names.addrA}/24`, 'dev', devA]);
    sh(['ip', '-n', nsB, 'addr', 'add', `${names.addrB}/24`, 'dev', devB]);
    for (const [ns, dev] of [
      [nsA, devA],
      [nsB, devB],
    ] as const) {
      sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
      sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
    }
    // The TUN pair: persistent devices the packet relay (./relay.ts) attaches to; no IPv6 chatter on it;
    // a long queue, so the relay's pauses show as delay, not as loss no rule made (counted all the same).
    for (const [ns, tun, me, peer] of [
      [nsA, names.tunA, names.tunAddrA, names.tunAddrB],
      [nsB, names.tunB, names.tunAddrB, names.tunAddrA],
    ] as const) {
      sh(['ip', '-n', ns, 'tuntap', 'add', 'dev', tun, 'mode', 'tun']);
      sh(['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${tun}.disable_ipv6=1`]);
      sh(['ip', '-n', ns, 'addr', 'add', me, 'peer', peer, 'dev', tun]);
      sh(['ip', '-n', ns, 'link', 'set', tun, 'mtu', '1500', 'txqueuelen', '10000', 'up']);
    }
    for (const [ns, dev] of [
      [nsA, devA],
      [nsA, names.tunA],
      [nsB, devB],
      [nsB, names.tunB],
    ] as const) {
      if (o.rateMbit > 0) {
        // Burst: at least 64 KiB or 2 ms at the rate, so a rate above a few Mbit/s is reachable.
        const burst = Math.max(65_536, Math.ceil((o.rateMbit * 1e6) / 8 / 500));
        sh(['ip', 'netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', dev, 'root', 'tbf'].concat(
          ['rate', `${o.rateMbit}mbit`, 'burst', String(burst), 'latency', '100ms'],
        )); // biome-ignore format: one tc command
      }
    }
  } catch (e) {
    del();
    throw e;
  }
  let netemAvailable = false;
  try {
    sh(['ip', 'netns', 'exec', nsA, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms']);
    sh(['ip', 'netns', 'exec', nsA, 'tc', 'qdisc', 'del', 'dev', 'lo', 'root']);
    netemAvailable = true;
  } catch {
    netemAvailable = false;
  }
  const nft = (ns: string, ...args: string[]) => sh(['ip', 'netns', 'exec', ns, 'nft', ...args]);
  let runs = 0;
  /** dumpcap in `ns` on `iface` into `file`; resolves once it says it is capturing. */
  const dumpcap = (ns: string, iface: string, file: string) => {
    const c = spawn('ip', ['netns', 'exec', ns, 'dumpcap', '-q', '-i', iface, '-w', file], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    captures.add(c);
    let err = '';
    const started = new Promise<void>((resolve, reject) => {
      const t = setTimeout(
        () => reject(new TopologyUnavailableError(`dumpcap on ${iface} did not start: ${err}`)),
        10_000,
      );
      c.stderr?.on('data', (d: Buffer) => {
        if (err.length < 4096) err += d.toString();
        if (/Capturing on/.test(err)) {
          clearTimeout(t);
          resolve();
        }
      });
      c.once('exit', (code) => {
        clearTimeout(t);
        reject(new TopologyUnavailableError(`dumpcap on ${iface} exited ${code}: ${err.trim().split('\n').at(-1)}`));
      });
    });
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    // At exit dumpcap says "Packets received/dropped on interface 'x': R/D (pcap:P/dumpcap:D/…)".
    const lost = () => {
      const m = /received\/dropped on interface '[^']*': \d+\/(\d+)/.exec(err);
      return m ? Number(m[1]) : 0;
    };
    return { child: c, started, exited, lost };
  };
  return {
    names,
    netemAvailable,
    clockOffsetUs: clockOffset(),
    setLoss(percent: number) {
      for (const [ns, dev] of [
        [nsA, devA],
        [nsB, devB],
      ] as const) {
        nft(ns, 'flush', 'ruleset');
        if (percent <= 0) continue;
        nft(ns, 'add', 'table', 'inet', 'rddp_exp');
        nft(ns, 'add', 'chain', 'inet', 'rddp_exp', 'in', '{ type filter hook input priority 0 ; }');
        const perMillion = Math.round(percent * 10_000);
        nft(
          ns,
          ...`add rule inet rddp_exp in iifname { ${dev}, ${ns === nsA ? names.tunA : names.tunB} } numgen random mod 1000000 < ${perMillion} counter log group ${NFLOG_GROUP} snaplen 256 queue-threshold 1 drop`.split(
            ' ',
          ),
        );
      }
    },
    dropped() {
      let n = 0;
      for (const ns of [nsA, nsB])
        for (const m of nft(ns, 'list', 'ruleset').matchAll(/counter packets (\d+)/g)) n += Number(m[1]);
      return n;
    },
    tunQueueDrops() {
      let n = 0;
      for (const [ns, tun] of [
        [nsA, names.tunA],
        [nsB, names.tunB],
      ] as const) {
        const j = JSON.parse(sh(['ip', '-n', ns, '-j', '-s', 'link', 'show', tun])) as {
          stats64?: { tx?: { dropped?: number } };
        }[];
        n += j[0]?.stats64?.tx?.dropped ?? 0;
      }
      return n;
    },
    async capture(link) {
      const k = runs++;
      const files = [`link-${k}.pcapng`, `drops-a-${k}.pcapng`, `drops-b-${k}.pcapng`].map((f) => path.join(dir, f));
      const procs = [
        dumpcap(nsB, link === 'tun' ? names.tunB : devB, files[0] as string),
        dumpcap(nsA, `nflog:${NFLOG_GROUP}`, files[1] as string),
        dumpcap(nsB, `nflog:${NFLOG_GROUP}`, files[2] as string),
      ];
      try {
        await Promise.all(procs.map((p) => p.started));
      } catch (e) {
        for (const p of procs) p.child.kill('SIGKILL');
        throw e;
      }
      for (const p of procs) p.started.catch(() => {});
      let stopped: Promise<CapturedRun> | undefined;
      const stop = async (): Promise<CapturedRun> => {
        // dumpcap writes a block of packets when the kernel retires it (its read timeout, 250 ms) and
        // does not drain the last one at SIGTERM: let it retire first.
        await new Promise((r) => setTimeout(r, 600));
        for (const p of procs) p.child.kill('SIGTERM');
        await Promise.race([Promise.all(procs.map((p) => p.exited)), new Promise((r) => setTimeout(r, 10_000))]);
        const read = (f: string) => {
          const b = existsSync(f) ? readFileSync(f) : Buffer.alloc(0);
          rmSync(f, { force: true });
          return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
        };
        for (const p of procs) captures.delete(p.child);
        return {
          link: read(files[0] as string),
          drops: [read(files[1] as string), read(files[2] as string)],
          lostByCapture: procs.reduce((a, p) => a + p.lost(), 0),
        };
      };
      return {
        stop() {
          stopped ??= stop();
          return stopped;
        },
      };
    },
    exec(side, argv) {
      return spawn('ip', ['netns', 'exec', side === 'a' ? nsA : nsB, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
    },
    teardown() {
      del();
    },
  };
}
