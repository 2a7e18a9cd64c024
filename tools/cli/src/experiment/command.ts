/** `rddp experiment`'s main loop: the topology, every point of the grid, the table and the files. */
import { flowLine, type Meta, TABLE_HEADER, tableLine, writeOut, writeSweepReport } from './report.js';
import { type Common, type RunResult, runPoint } from './run.js';
import { buildTopology } from './topology.js';
import type { Mapping } from './workload.js';

export interface ExperimentOptions extends Common {
  readonly mappings: readonly Mapping[];
  readonly flows: readonly number[];
  readonly loss: readonly number[];
  readonly delay: readonly number[];
  readonly sweep: boolean;
  readonly json: boolean;
  readonly out?: string;
  readonly command: string;
}

export async function runExperimentCommand(o: ExperimentOptions): Promise<RunResult[]> {
  const topo = buildTopology({ rateMbit: o.rateMbit });
  const print = (s: string) => process.stdout.write(`${s}\n`);
  const results: RunResult[] = [];
  const cleanup = () => {
    topo.teardown();
    process.exit(130);
  };
  process.once('SIGINT', cleanup);
  process.once('SIGTERM', cleanup);
  try {
    if (!o.json) {
      print(
        `rddp experiment: seed ${o.seed} (repeat with --seed ${o.seed}); ${o.size}-octet Sends at ${o.rate}/s per flow for ${o.durationS} s${(o.warmUpS ?? 0) > 0 ? ` after ${o.warmUpS} s of warm-up` : ''}`,
      );
      print(
        `topology: namespaces ${topo.names.nsA} (initiator, ${topo.names.addrA}) and ${topo.names.nsB} (responder, ${topo.names.addrB}), one veth pair`,
      );
      print(
        `netem: ${topo.netemAvailable ? 'available (not used)' : 'not in this kernel'}; delay, jitter and reordering come from the user-space relay`,
      );
      print(TABLE_HEADER);
    }
    let lastImpairments = '';
    for (const flows of o.flows)
      for (const delayMs of o.delay)
        for (const loss of o.loss)
          for (const mapping of o.mappings) {
            const r = await runPoint(topo, { mapping, flows, loss, delayMs }, o);
            results.push(r);
            if (o.json) {
              const { samples: _s, losses: _l, ...rest } = r;
              print(JSON.stringify(rest));
              continue;
            }
            const imp = r.impairments.join('; ');
            if (imp !== lastImpairments) {
              print(`  impairments: ${imp}`);
              lastImpairments = imp;
            }
            print(tableLine(r));
            if (r.flows <= 8 && !o.sweep) for (const f of r.perFlow) print(flowLine(f));
            for (const p of r.problems) print(`   ! ${p}`);
          }
  } finally {
    process.off('SIGINT', cleanup);
    process.off('SIGTERM', cleanup);
    topo.teardown();
  }
  if (o.out) {
    const meta: Meta = {
      command: o.command,
      seed: o.seed,
      netem: topo.netemAvailable,
      options: {
        mappings: o.mappings,
        flows: o.flows,
        loss: o.loss,
        delay: o.delay,
        jitterMs: o.jitterMs,
        reorder: o.reorder,
        rateMbit: o.rateMbit,
        size: o.size,
        rate: o.rate,
        durationS: o.durationS,
        warmUpS: o.warmUpS,
        credits: o.credits,
        stallEpsilonUs: o.epsUs,
      },
    };
    const top = Math.max(...o.loss);
    const files = await writeOut(
      o.out,
      meta,
      results,
      o.sweep ? { gzip: true, timelinesAt: (r) => r.loss === top } : {},
    );
    if (o.sweep) files.push(await writeSweepReport(o.out, meta, results));
    if (!o.json) print(`wrote ${files.length} files to ${o.out}`);
  }
  if (results.some((r) => !r.verified)) process.exitCode = 1;
  return results;
}
