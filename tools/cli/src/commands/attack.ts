/**
 * `rddp attack` — a long-running server (in a process of its own) under one hostile peer at a time, with
 * an honest client on the same transport throughout. Reports the server's RSS and heap (after a full GC)
 * while under attack, its active handles before and after the attacker went, and the honest client's
 * progress; fails (exit 1) when RSS or heap grew past the budget during the attack, handles did not
 * return to their baseline, or the honest client failed or stalled.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { LlpConnection } from '@rddp/llp';
import { udp } from '@rddp/llp-udp';
import type { Attack } from '../attack/attacks.js';
import type { TargetPorts, TargetStats } from '../attack/target.js';
import { toolTransport } from '../transports.js';
import { rpingClient } from './rping.js';

export interface AttackResult {
  readonly attack: string;
  readonly seconds: number;
  readonly hostileUnits: number;
  readonly rssBeforeMiB: number;
  readonly rssPeakMiB: number;
  /** RSS in the first seconds of the attack against before it: the working set an attack rate needs. */
  readonly rssStepMiB: number;
  /**
   * What the budget bounds: RSS at the end of the attack (median of its last fifth) against its first
   * seconds (median of its first fifth after the step), and the heap after a full GC likewise.
   */
  readonly rssGrowthMiB: number;
  readonly heapGrowthMiB: number;
  /** Active handles in the server with nobody connected: before the honest client, and after all have gone. */
  readonly handlesBefore: number;
  readonly handlesAfter: number;
  readonly honestOps: number;
  /** The longest time the honest client went without completing an operation while the attack ran. */
  readonly honestLongestStallMs: number;
  readonly honestErrors: number;
  readonly ok: boolean;
  readonly reasons: readonly string[];
}

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));

class Target {
  private waiters: ((s: TargetStats) => void)[] = [];
  constructor(
    readonly child: ChildProcess,
    readonly ports: TargetPorts,
  ) {
    child.on('message', (m: { stats?: TargetStats }) => {
      if (m.stats) for (const w of this.waiters.splice(0)) w(m.stats);
    });
  }
  static async start(memoryBudgetMiB: number): Promise<Target> {
    const child = fork(MAIN, ['attack-target', '--memory-budget', `${memoryBudgetMiB}m`], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ports = await new Promise<TargetPorts>((resolve, reject) => {
      child.once('message', (m: { ready?: TargetPorts }) =>
        m.ready ? resolve(m.ready) : reject(new Error('bad hello')),
      );
      child.once('exit', (code) => reject(new Error(`the target exited with ${code} before it was ready`)));
    });
    return new Target(child, ports);
  }
  stats(): Promise<TargetStats> {
    return new Promise((resolve, reject) => {
      if (!this.child.connected) return reject(new Error('the target process is gone'));
      this.waiters.push(resolve);
      this.child.send('stats');
    });
  }
  stop(): void {
    if (this.child.connected) this.child.disconnect();
    setTimeout(() => this.child.kill('SIGKILL'), 2000).unref();
  }
}

/** An honest client on `transport` until `signal` aborts: rping sessions of 20 pings, or a UDP echo. */
function honestClient(
  transport: Attack['transport'],
  ports: TargetPorts,
  signal: AbortSignal,
): { ops(): number; lastOpAt(): number; errors(): number; done: Promise<void> } {
  let ops = 0;
  let errors = 0;
  let last = performance.now();
  const op = () => {
    ops++;
    last = performance.now();
  };
  const rping = async (name: 'tcp' | 'sctp', port: number) => {
    const tt = toolTransport({ transport: name, crc: true });
    while (!signal.aborted) {
      try {
        const conn = await tt.transport.connect(
          { host: '127.0.0.1', port },
          { params: tt.connectParams, signal: AbortSignal.timeout(15_000) },
        );
        await rpingClient(
          conn,
          tt,
          { count: 20, size: 1024, verbose: false, validate: true },
          { log: () => {}, debug: (m) => (m.includes('source read') ? op() : undefined) },
        );
      } catch {
        if (!signal.aborted) errors++;
        await sleep(100);
      }
    }
  };
  const echo = async () => {
    const conn: LlpConnection = await udp().connect({ host: '127.0.0.1', port: ports.udp }, {});
    const s = conn.streams[0];
    if (!s) throw new Error('no UDP LLP stream');
    let answered: (() => void) | undefined;
    s.setReceiver(() => answered?.());
    const msg = new Uint8Array(64).fill(0x61);
    while (!signal.aborted) {
      const got = new Promise<void>((resolve) => (answered = resolve));
      s.send([msg]);
      const ok = await Promise.race([got.then(() => true), sleep(1000).then(() => false)]);
      if (ok) op();
      else errors++;
      await sleep(5);
    }
    conn.abort();
  };
  const done =
    transport === 'udp'
      ? echo().catch(() => void errors++)
      : rping(transport, transport === 'tcp' ? ports.tcp : ports.sctp);
  return { ops: () => ops, lastOpAt: () => last, errors: () => errors, done };
}

export async function runAttack(
  attack: Attack,
  o: { seconds: number; budgetMiB: number; settleSeconds: number; targetMemoryMiB: number },
  log: (s: string) => void,
): Promise<AttackResult> {
  const target = await Target.start(o.targetMemoryMiB);
  const stopHonest = new AbortController();
  try {
    // Handles are counted with nobody connected, before the honest client and after it has gone, so its
    // own reconnections (every 20 pings) cannot blur the comparison.
    await sleep(500);
    const idle = await target.stats();
    const honest = honestClient(attack.transport, target.ports, stopHonest.signal);
    // Warm-up: the honest client has completed an operation, and a moment more for its working set.
    const warmUntil = performance.now() + 10_000;
    while (honest.ops() === 0 && performance.now() < warmUntil) await sleep(50);
    if (honest.ops() === 0) log(`${attack.name}: the honest client completed nothing in 10 s of warm-up`);
    await sleep(300);
    const before = await target.stats();
    const stopAttack = new AbortController();
    const running = attack.run(target.ports, stopAttack.signal);
    const t0 = performance.now();
    let peak = before.rss;
    const samples: TargetStats[] = [];
    let longestStall = 0;
    while (performance.now() - t0 < o.seconds * 1000) {
      await sleep(1000);
      const s = await target.stats();
      peak = Math.max(peak, s.rss);
      samples.push(s);
      longestStall = Math.max(longestStall, performance.now() - honest.lastOpAt());
      log(
        `${attack.name}: ${Math.round((performance.now() - t0) / 1000)} s  RSS ${(s.rss / 2 ** 20).toFixed(1)} MiB  heap ${(s.heapUsed / 2 ** 20).toFixed(1)} MiB  handles ${s.handles}  honest ops ${honest.ops()}`,
      );
    }
    stopAttack.abort();
    const units = await running;
    const honestOps = honest.ops();
    stopHonest.abort();
    await honest.done;
    // Attacker and honest client have gone: every handle either caused must go too (close timers run out
    // within ~10 s).
    let after = await target.stats();
    const t1 = performance.now();
    while (after.handles > idle.handles && performance.now() - t1 < o.settleSeconds * 1000) {
      await sleep(500);
      after = await target.stats();
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const fifth = Math.max(1, Math.floor(samples.length / 5));
    const early = samples.slice(0, fifth);
    const late = samples.slice(-fifth);
    const mib = (x: number) => x / 2 ** 20;
    const step = mib(med(early.map((x) => x.rss)) - before.rss);
    const growth = mib(med(late.map((x) => x.rss)) - med(early.map((x) => x.rss)));
    const heapGrowth = mib(med(late.map((x) => x.heapUsed)) - med(early.map((x) => x.heapUsed)));
    const reasons: string[] = [];
    // A leak grows past --budget; an attack that holds what it is given rises until the target's shares
    // and its one memory budget stop it.
    const allowed = attack.holds ? o.targetMemoryMiB : o.budgetMiB;
    const which = attack.holds ? "the target's --memory-budget" : 'budget';
    if (growth > allowed) reasons.push(`RSS grew ${growth.toFixed(1)} MiB (${which} ${allowed})`);
    if (heapGrowth > allowed) reasons.push(`the heap grew ${heapGrowth.toFixed(1)} MiB (${which} ${allowed})`);
    // The target's one memory budget bounds what the attack can make it hold: RSS never passes it.
    if (mib(peak - before.rss) > o.targetMemoryMiB)
      reasons.push(
        `RSS rose ${mib(peak - before.rss).toFixed(1)} MiB (the target's --memory-budget ${o.targetMemoryMiB}m)`,
      );
    reasons.push(...(attack.violations?.() ?? []));
    if (after.handles > idle.handles) reasons.push(`handles ${idle.handles} → ${after.handles}`);
    if (honestOps === 0) reasons.push('the honest client completed nothing');
    if (honest.errors() > 0) reasons.push(`the honest client failed ${honest.errors()} times`);
    if (longestStall > 10_000) reasons.push(`the honest client stalled ${Math.round(longestStall)} ms`);
    return {
      attack: attack.name,
      seconds: o.seconds,
      hostileUnits: units,
      rssBeforeMiB: before.rss / 2 ** 20,
      rssPeakMiB: peak / 2 ** 20,
      rssStepMiB: step,
      rssGrowthMiB: growth,
      heapGrowthMiB: heapGrowth,
      handlesBefore: idle.handles,
      handlesAfter: after.handles,
      honestOps,
      honestLongestStallMs: Math.round(longestStall),
      honestErrors: honest.errors(),
      ok: reasons.length === 0,
      reasons,
    };
  } finally {
    stopHonest.abort();
    target.stop();
  }
}

export { registerAttack } from './attack-command.js';
