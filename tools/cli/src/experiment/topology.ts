/**
 * The experiment's topology: two network namespaces joined by a veth pair. Kernel impairments: random
 * loss by nftables (`numgen random`, on what each side receives from the veth; the dropping rule sets
 * `nftrace` so `nft monitor trace` reports each drop, which marks loss events on the plots) and a
 * bandwidth limit by a `tc` tbf on each veth. Delay, jitter and reordering need netem; when
 * `tc … netem` is refused they come from the user-space relay (./relay.ts).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { TopologyUnavailableError } from './errors.js';
import { nowUs } from './workload.js';

export const NS_A = 'rddp-exp-a';
export const NS_B = 'rddp-exp-b';
export const DEV_A = 'rxa';
export const DEV_B = 'rxb';
export const ADDR_A = '10.78.0.1';
export const ADDR_B = '10.78.0.2';

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
    sh(['ip', 'netns', 'add', 'rddp-exp-probe']);
    sh(['ip', 'netns', 'del', 'rddp-exp-probe']);
    return undefined;
  } catch (e) {
    return `needs ip netns, nft and tc: ${(e as Error).message.split('\n')[0]}`;
  }
}

/** A drop nftables reported: when (host monotonic µs), where, and the packet's transport ports. */
export interface LossEvent {
  readonly atUs: number;
  /** The namespace whose input dropped it: 'a' (initiator receives) or 'b' (responder receives). */
  readonly side: 'a' | 'b';
  readonly proto: string;
  readonly sport: number;
  readonly dport: number;
}

export interface Topology {
  readonly netemAvailable: boolean;
  setLoss(percent: number): void;
  /** Loss events since the last call (drained). */
  takeLosses(): LossEvent[];
  /** Packets nftables dropped since the last setLoss. */
  dropped(): number;
  /** `ip netns exec <ns> <cmd…>` as a child process. */
  exec(side: 'a' | 'b', argv: readonly string[]): ChildProcess;
  teardown(): void;
}

export interface TopologyOptions {
  /** tbf rate on each veth, in Mbit/s (0: none). */
  readonly rateMbit: number;
}

export function buildTopology(o: TopologyOptions): Topology {
  const why = topologyUnavailable();
  if (why) throw new TopologyUnavailableError(`rddp experiment ${why}`);
  const del = () => {
    for (const ns of [NS_A, NS_B])
      try {
        sh(['ip', 'netns', 'del', ns]);
      } catch {
        // not there
      }
  };
  del();
  sh(['ip', 'netns', 'add', NS_A]);
  sh(['ip', 'netns', 'add', NS_B]);
  sh(['ip', 'link', 'add', DEV_A, 'netns', NS_A, 'type', 'veth', 'peer', 'name', DEV_B, 'netns', NS_B]);
  sh(['ip', '-n', NS_A, 'addr', 'add', `${ADDR_A}/24`, 'dev', DEV_A]);
  sh(['ip', '-n', NS_B, 'addr', 'add', `${ADDR_B}/24`, 'dev', DEV_B]);
  for (const [ns, dev] of [
    [NS_A, DEV_A],
    [NS_B, DEV_B],
  ] as const) {
    sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
    sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
    if (o.rateMbit > 0) {
      // Burst: at least 64 KiB or 2 ms at the rate, so a rate above a few Mbit/s is reachable.
      const burst = Math.max(65_536, Math.ceil((o.rateMbit * 1e6) / 8 / 500));
      sh(
        [
          'ip',
          'netns',
          'exec',
          ns,
          'tc',
          'qdisc',
          'add',
          'dev',
          dev,
          'root',
          'tbf',
          'rate',
          `${o.rateMbit}mbit`,
        ].concat(['burst', String(burst), 'latency', '100ms']),
      );
    }
  }
  let netemAvailable = false;
  try {
    sh(['ip', 'netns', 'exec', NS_A, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms']);
    sh(['ip', 'netns', 'exec', NS_A, 'tc', 'qdisc', 'del', 'dev', 'lo', 'root']);
    netemAvailable = true;
  } catch {
    netemAvailable = false;
  }
  const nft = (ns: string, ...args: string[]) => sh(['ip', 'netns', 'exec', ns, 'nft', ...args]);
  // One `nft monitor trace` per namespace: only dropped packets carry nftrace, so each packet line is a drop.
  const losses: LossEvent[] = [];
  const monitors = (['a', 'b'] as const).map((side) => {
    const m = spawn('ip', ['netns', 'exec', side === 'a' ? NS_A : NS_B, 'nft', 'monitor', 'trace'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let rest = '';
    m.stdout.on('data', (d: Buffer) => {
      const at = nowUs();
      const lines = (rest + d.toString('latin1')).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) {
        if (!l.includes(' packet: ')) continue;
        const p = /ip protocol (\w+)/.exec(l)?.[1] ?? '?';
        const ports = /(?:udp|tcp) sport (\d+) (?:udp|tcp) dport (\d+)/.exec(l);
        if (losses.length < 1_000_000)
          losses.push({ atUs: at, side, proto: p, sport: Number(ports?.[1] ?? 0), dport: Number(ports?.[2] ?? 0) });
      }
    });
    return m;
  });
  return {
    netemAvailable,
    setLoss(percent: number) {
      for (const [ns, dev] of [
        [NS_A, DEV_A],
        [NS_B, DEV_B],
      ] as const) {
        nft(ns, 'flush', 'ruleset');
        if (percent <= 0) continue;
        nft(ns, 'add', 'table', 'inet', 'rddp_exp');
        nft(ns, 'add', 'chain', 'inet', 'rddp_exp', 'in', '{ type filter hook input priority 0 ; }');
        const perMillion = Math.round(percent * 10_000);
        nft(
          ns,
          ...`add rule inet rddp_exp in iifname ${dev} numgen random mod 1000000 < ${perMillion} meta nftrace set 1 counter drop`.split(
            ' ',
          ),
        );
      }
    },
    takeLosses() {
      return losses.splice(0);
    },
    dropped() {
      let n = 0;
      for (const ns of [NS_A, NS_B])
        for (const m of nft(ns, 'list', 'ruleset').matchAll(/counter packets (\d+)/g)) n += Number(m[1]);
      return n;
    },
    exec(side, argv) {
      return spawn('ip', ['netns', 'exec', side === 'a' ? NS_A : NS_B, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
    },
    teardown() {
      for (const m of monitors) m.kill('SIGTERM');
      del();
    },
  };
}
