/**
 * The experiment's outputs: the terminal table, `--out DIR` (results.json, every sample as CSV, the
 * SVG plots) and the sweep's report (report.md answering: at which loss do N SCTP streams on one
 * association beat one shared MPA/TCP connection, and by how much).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { PART_NAMES } from './analysis.js';
import { sweepChart, tailChart, timelineChart, waitsChart } from './charts.js';
import type { RunResult } from './run.js';
import { MAPPING_TITLES, type Mapping } from './workload.js';

const ms = (us: number) => (Number.isFinite(us) ? (us / 1000).toFixed(2) : 'n/a');

export const TABLE_HEADER =
  ' mapping        flows  loss%  delay  p50[ms]  p99[ms] p99.9[ms]  max[ms]  goodput[MB/s]  stall[ms] stalled sndwait[ms] pause[ms]  drops  verified';

export function tableLine(r: RunResult): string {
  const parts = r.overall.parts;
  return ` ${r.mapping.padEnd(13)} ${String(r.flows).padStart(6)} ${r.loss.toFixed(1).padStart(6)} ${String(r.delayMs).padStart(6)} ${ms(r.overall.p50Us).padStart(8)} ${ms(r.overall.p99Us).padStart(8)} ${ms(r.overall.p999Us).padStart(9)} ${ms(r.overall.maxUs).padStart(8)} ${r.goodputMBps.toFixed(3).padStart(14)} ${ms(r.stallTotalUs).padStart(10)} ${String(r.stalledMessages).padStart(7)} ${ms(parts.senderWaitUs).padStart(11)} ${ms(parts.pauseUs).padStart(9)} ${String(r.drops).padStart(6)}  ${r.verified ? 'yes' : 'NO'}`;
}

export function flowLine(f: RunResult['perFlow'][number]): string {
  return `     flow ${String(f.flow).padStart(3)}: p50 ${ms(f.p50Us)} p99 ${ms(f.p99Us)} p99.9 ${ms(f.p999Us)} max ${ms(f.maxUs)} ms, ${f.goodputMBps.toFixed(3)} MB/s, stall ${ms(f.stallTotalUs)} ms over ${f.stalledMessages} messages (max ${ms(f.stallMaxUs)} ms), sender wait ${ms(f.parts.senderWaitUs)} ms, own loss ${ms(f.parts.ownLossUs)} ms${f.verified ? '' : ' NOT VERIFIED'}`;
}

/** What a run was, for a plot's caption. */
export function runCaption(r: RunResult, o: Meta['options']): string {
  const imp = [`loss ${r.loss} %/direction`];
  if (r.delayMs > 0 || Number(o.jitterMs) > 0)
    imp.push(`delay ${r.delayMs} ms${Number(o.jitterMs) > 0 ? ` + U(0, ${o.jitterMs}) ms` : ''}`);
  if (Number(o.reorder) > 0) imp.push(`reorder ${o.reorder} %`);
  if (Number(o.rateMbit) > 0) imp.push(`${o.rateMbit} Mbit/s`);
  const warm = Number(o.warmUpS ?? 0) > 0 ? ` after ${o.warmUpS} s of warm-up` : '';
  return `${r.flows} flows × ${o.rate} Sends/s × ${o.size} octets, ${o.durationS} s${warm}; ${imp.join(', ')}; seed ${r.seed}`;
}

export interface Meta {
  readonly command: string;
  readonly seed: number;
  readonly netem: boolean;
  readonly options: Record<string, unknown>;
}

const pointKey = (r: { flows: number; loss: number; delayMs: number }) =>
  `flows${r.flows}-loss${r.loss}-delay${r.delayMs}`;

/** Summary of a run for results.json (samples go to the CSV). */
function summary(r: RunResult) {
  const { samples: _s, losses, ...rest } = r;
  return {
    ...rest,
    lossEvents: losses.length,
    losses: losses.map((l) => ({
      atUs: l.atUs,
      dir: l.dir,
      kind: l.kind,
      repairedUs: Number.isFinite(l.repairedUs) ? l.repairedUs : null,
      messages: l.messages.map((m) => `${m.dir === 'request' ? '' : 'response '}${m.flow}/${m.seq}`),
    })),
  };
}

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const CSV_HEADER = `mapping,flows,loss,delay_ms,seed,flow,seq,scheduled_us,posted_us,wire_us,arrived_us,delivered_us,answered_us,lost_packets,latency_us,rtt_us,${PART_NAMES.map(snake).join(',')}`;

function csvRows(r: RunResult): string[] {
  const n = (v: number) => (Number.isFinite(v) ? String(Math.round(v)) : '');
  return r.samples.map(
    (s) =>
      `${r.mapping},${r.flows},${r.loss},${r.delayMs},${r.seed},${s.flow},${s.seq},${n(s.scheduledUs)},${n(s.postedUs)},${n(s.wireUs)},${n(s.arrivedUs)},${n(s.deliveredUs)},${n(s.answeredUs)},${s.lostPackets},${n(s.latencyUs)},${n(s.rttUs)},${PART_NAMES.map((p) => n(s[p])).join(',')}`,
  );
}

/** Points (flows, loss, delay) in the order first run. */
function points(results: readonly RunResult[]): RunResult[][] {
  const m = new Map<string, RunResult[]>();
  for (const r of results) {
    const k = pointKey(r);
    const l = m.get(k);
    if (l) l.push(r);
    else m.set(k, [r]);
  }
  return [...m.values()];
}

/**
 * results.json, samples.csv (samples.csv.gz with `gzip`), a latency CDF per point (one series per
 * mapping) and a timeline per run (or, with `timelinesAt`, only for the runs it picks).
 */
export async function writeOut(
  dir: string,
  meta: Meta,
  results: readonly RunResult[],
  o: { gzip?: boolean; timelinesAt?: (r: RunResult) => boolean } = {},
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  const put = async (name: string, data: string | Buffer) => {
    const f = path.join(dir, name);
    await writeFile(f, data);
    files.push(f);
  };
  await put('results.json', `${JSON.stringify({ ...meta, runs: results.map(summary) }, null, 1)}\n`);
  const csv = `${[CSV_HEADER, ...results.flatMap(csvRows)].join('\n')}\n`;
  if (o.gzip) await put('samples.csv.gz', gzipSync(csv));
  else await put('samples.csv', csv);
  for (const group of points(results)) {
    const g = group[0] as RunResult;
    const caption = runCaption(g, meta.options).replace(/; seed \d+$/, `; seed ${meta.seed}`);
    await put(
      `tail-${pointKey(g)}.svg`,
      tailChart(
        `Latency tail: ${g.flows} flows, ${g.loss} % loss, ${g.delayMs} ms delay`,
        caption,
        group.map((r) => ({
          label: `${r.mapping} (${MAPPING_TITLES[r.mapping]})`,
          latUs: r.samples.map((s) => s.latencyUs),
        })),
      ),
    );
    await put(
      `waits-${pointKey(g)}.svg`,
      waitsChart(
        `Where messages waited: ${g.flows} flows, ${g.loss} % loss, ${g.delayMs} ms delay`,
        caption,
        group.map((r) => ({ label: r.mapping, parts: r.overall.parts })),
      ),
    );
    for (const r of group)
      if (!o.timelinesAt || o.timelinesAt(r))
        await put(
          `timeline-${r.mapping}-${pointKey(r)}.svg`,
          timelineChart(
            `${r.mapping}: per-flow latency, ${r.flows} flows, ${r.loss} % loss, ${r.delayMs} ms delay`,
            runCaption(r, meta.options),
            r.samples,
            r.startUs,
            r.losses.filter((l) => l.kind === 'data' && l.dir === 'request').map((l) => l.atUs),
          ),
        );
  }
  return files;
}

interface Cell {
  readonly p99: number;
  readonly stall: number;
  readonly stalled: number;
  readonly senderWait: number;
}

/** The sweep's report: tables per (flows, delay), the answer, the charts. */
export async function writeSweepReport(dir: string, meta: Meta, results: readonly RunResult[]): Promise<string> {
  const groups = new Map<string, RunResult[]>();
  for (const r of results) {
    const k = `${r.flows}/${r.delayMs}`;
    const l = groups.get(k);
    if (l) l.push(r);
    else groups.set(k, [r]);
  }
  const mappings = [...new Set(results.map((r) => r.mapping))] as Mapping[];
  const md: string[] = [
    '# Multi-stream SCTP against MPA/TCP: sweep report',
    '',
    `Command: \`${meta.command}\``,
    '',
    `Seed ${meta.seed}. Every run verified: ${results.every((r) => r.verified) ? 'yes' : 'NO'} (${results.length} runs).`,
    '',
    'Impairments and where they came from:',
    '',
    ...[...new Set(results.flatMap((r) => r.impairments.map((i) => i.replace(/^(loss|delay) [\d.]+/, '$1 …'))))].map(
      (i) => `- ${i}`,
    ),
    '',
    'Latency is one way (scheduled send → delivered to the responder), all flows of a run together.',
    'Stall is receive-side head-of-line stall: time a message, whole at the responder host and next in its flow, waited',
    'while another flow\'s lost data was repaired (from the link\'s capture; docs/EXPERIMENTS.md "Measures"), summed over all',
    'messages. Sender wait is the time from posting a message to its first octet on the wire, summed likewise.',
    '`sctp-assocs` and `tcp-conns` are the controls: their flows cannot hold each other, so their stall must read ≈ 0.',
    '',
    '## Answer',
    '',
  ];
  const answers: string[] = [];
  const sections: string[] = [];
  for (const [key, rs] of groups) {
    const [flows, delay] = key.split('/').map(Number) as [number, number];
    const losses = [...new Set(rs.map((r) => r.loss))].sort((a, b) => a - b);
    const cell = (m: Mapping, loss: number): Cell | undefined => {
      const r = rs.find((x) => x.mapping === m && x.loss === loss);
      return r
        ? {
            p99: r.overall.p99Us,
            stall: r.stallTotalUs,
            stalled: r.stalledMessages,
            senderWait: r.overall.parts.senderWaitUs,
          }
        : undefined;
    };
    // Where N streams on one association beat the one shared TCP connection at p99, from there on up.
    if (mappings.includes('sctp-streams') && mappings.includes('tcp-shared')) {
      let from: number | undefined;
      for (let i = losses.length - 1; i >= 0; i--) {
        const a = cell('sctp-streams', losses[i] as number);
        const b = cell('tcp-shared', losses[i] as number);
        if (a && b && a.p99 < b.p99) from = losses[i];
        else break;
      }
      const top = losses.at(-1) as number;
      const a = cell('sctp-streams', top);
      const b = cell('tcp-shared', top);
      const at = from === undefined ? undefined : { a: cell('sctp-streams', from), b: cell('tcp-shared', from) };
      answers.push(
        from === undefined
          ? `- ${flows} flows, ${delay} ms delay: N SCTP streams did not beat one TCP connection at p99 at the top of the sweep (${top} %: ${ms(a?.p99 ?? Number.NaN)} vs ${ms(b?.p99 ?? Number.NaN)} ms).`
          : `- ${flows} flows, ${delay} ms delay: N SCTP streams beat one TCP connection at p99 from ${from} % loss on (${ms(at?.a?.p99 ?? Number.NaN)} vs ${ms(at?.b?.p99 ?? Number.NaN)} ms, ×${((at?.b?.p99 ?? 0) / (at?.a?.p99 ?? 1)).toFixed(2)}); at ${top} %: ${ms(a?.p99 ?? Number.NaN)} vs ${ms(b?.p99 ?? Number.NaN)} ms (×${((b?.p99 ?? 0) / (a?.p99 ?? 1)).toFixed(2)}).`,
      );
    }
    const top = losses.at(-1) as number;
    const at = (m: Mapping, f: (c: Cell) => string) => {
      const c = cell(m, top);
      return `${m} ${c ? f(c) : 'n/a'}`;
    };
    answers.push(
      `  - at ${top} % loss, head-of-line stall (ms, messages): ${mappings.map((m) => at(m, (c) => `${ms(c.stall)} (${c.stalled})`)).join('; ')}; sender wait (ms): ${mappings.map((m) => at(m, (c) => ms(c.senderWait))).join('; ')}.`,
    );
    sections.push(
      `## ${flows} flows, ${delay} ms delay`,
      '',
      `| measure | loss % | ${mappings.join(' | ')} |`,
      `|---|---:|${mappings.map(() => '---:').join('|')}|`,
      ...(
        [
          ['p99 [ms]', (c: Cell) => ms(c.p99)],
          ['stall [ms] (messages)', (c: Cell) => `${ms(c.stall)} (${c.stalled})`],
          ['sender wait [ms]', (c: Cell) => ms(c.senderWait)],
        ] as const
      ).flatMap(([name, f]) =>
        losses.map(
          (l) =>
            `| ${name} | ${l} | ${mappings
              .map((m) => {
                const c = cell(m, l);
                return c ? f(c) : 'n/a';
              })
              .join(' | ')} |`,
        ),
      ),
      '',
      `![p99 latency against loss](p99-flows${flows}-delay${delay}.svg)`,
      `![stall against loss](stall-flows${flows}-delay${delay}.svg)`,
      `![sender wait against loss](sender-wait-flows${flows}-delay${delay}.svg)`,
      '',
    );
    const series = (f: (c: Cell) => number) =>
      mappings.map((m) => ({
        label: m,
        points: losses.flatMap((l) => {
          const c = cell(m, l);
          return c ? [{ x: l, y: f(c) }] : [];
        }),
      }));
    await writeFile(
      path.join(dir, `p99-flows${flows}-delay${delay}.svg`),
      sweepChart(
        `p99 one-way latency, ${flows} flows, ${delay} ms delay`,
        'p99 latency (ms)',
        series((c) => c.p99 / 1000),
      ),
    );
    await writeFile(
      path.join(dir, `stall-flows${flows}-delay${delay}.svg`),
      sweepChart(
        `Head-of-line stall (receive side), ${flows} flows, ${delay} ms delay`,
        'stall, all flows (ms)',
        series((c) => c.stall / 1000),
      ),
    );
    await writeFile(
      path.join(dir, `sender-wait-flows${flows}-delay${delay}.svg`),
      sweepChart(
        `Sender wait (posted → first octet on the wire), ${flows} flows, ${delay} ms delay`,
        'sender wait, all flows (ms)',
        series((c) => c.senderWait / 1000),
      ),
    );
  }
  md.push(...answers, '', ...sections);
  md.push(
    '## Files',
    '',
    '- `results.json`: every run (options, seeds, impairments, what the capture found, pauses, per-flow measures and their parts, every dropped packet with whose data it carried).',
    '- `samples.csv.gz`: every message of every run, with the parts of its latency.',
    '- `tail-*.svg`: latency tail (1 − CDF, log) per point, one line per mapping; `waits-*.svg`: where messages waited (stall, sender wait, own loss, order, credit, receiver pause) per mapping; `timeline-*.svg`: per-flow latency over time with every dropped packet of measured data, at the highest loss of each (flows, delay).',
    '',
  );
  const f = path.join(dir, 'report.md');
  await writeFile(f, `${md.join('\n')}\n`);
  return f;
}
