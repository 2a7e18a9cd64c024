/**
 * The two message paths of docs/ARCHITECTURE.md, measured by tools/message-path.mjs on the built packages
 * (every function reports its entry): an RDMA Write from `postSend` to the LLP's `send` and a received
 * Send from the LLP's delivery to its completion each cross at most six source files, enter none twice,
 * and decode the DDP/RDMAP header once (DDP's codec, entered once; RDMAP's header codec not at all).
 */
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';

const PATHS = ['RDMA Write: postSend → LLP send', 'received Send: LLP delivery → receive completion'] as const;
interface Row {
  files: string[];
  llp: string[];
  entries: string[];
  reentered: string[];
}

it('an RDMA Write and a received Send each cross ≤ 6 files, none entered twice, the header parsed once', () => {
  const script = new URL('../tools/message-path.mjs', import.meta.url);
  const out = execFileSync(process.execPath, [script.pathname, '--json'], { encoding: 'utf8', timeout: 60_000 });
  const rows = JSON.parse(out) as Record<(typeof PATHS)[number], Row>;
  for (const path of PATHS) {
    const { files, llp, entries, reentered } = rows[path];
    const walk = `${path}: ${entries.join(' → ')}`;
    expect(files.length, walk).toBeGreaterThan(3);
    expect(files.length, walk).toBeLessThanOrEqual(6);
    expect(reentered, walk).toEqual([]);
    // The core never reaches into a transport on these paths, only into the LLP contract.
    expect(
      llp.every((f) => f.startsWith('packages/llp/') || f.startsWith('packages/llp-loopback/')),
      walk,
    ).toBe(true);
  }
  const write = rows[PATHS[0]].entries;
  const recv = rows[PATHS[1]].entries;
  // Top down, each layer once: verbs, RDMAP's transmit file, DDP's.
  expect(write.slice(0, 3)).toEqual([
    'packages/verbs/src/qp.ts',
    'packages/verbs/src/work-requests.ts',
    'packages/rdmap/src/tx.ts',
  ]);
  // Bottom up: DDP's receive file first, its header codec once, RDMAP's receive file, the CQ last.
  expect(recv[0]).toBe('packages/ddp/src/rx.ts');
  expect(recv.filter((f) => f === 'packages/ddp/src/header.ts')).toHaveLength(1);
  expect(recv).toContain('packages/rdmap/src/rx.ts');
  expect(recv.at(-1)).toBe('packages/verbs/src/cq.ts');
  for (const walk of [write, recv]) expect(walk).not.toContain('packages/rdmap/src/header.ts');
}, 90_000);
