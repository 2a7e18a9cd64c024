/**
 * How many source files one message crosses (issue 36), measured by tools/message-path.mjs from V8's
 * precise coverage on the built packages. A ratchet: the counts may fall (the per-queue-pair engine is
 * to bring each path to six or fewer) but never grow.
 */
import { execFileSync } from 'node:child_process';
import { expect, it } from 'vitest';

/** Files crossed today; lower these as the paths get shorter. */
const MAX = {
  'RDMA Write: postSend → LLP send': 13,
  'received Send: LLP delivery → receive completion': 9,
} as const;

it('an RDMA Write and a received Send cross no more files than they do today', () => {
  const script = new URL('../tools/message-path.mjs', import.meta.url);
  const out = execFileSync(process.execPath, [script.pathname, '--json'], { encoding: 'utf8', timeout: 60_000 });
  const rows = JSON.parse(out) as Record<keyof typeof MAX, { files: string[]; llp: string[] }>;
  for (const [path, max] of Object.entries(MAX) as [keyof typeof MAX, number][]) {
    const files = rows[path]?.files ?? [];
    expect(files.length, `${path}: ${files.join(', ')}`).toBeGreaterThan(3);
    expect(files.length, `${path}: ${files.join(', ')}`).toBeLessThanOrEqual(max);
    // The core never reaches into a transport on these paths, only into the LLP contract.
    expect(rows[path].llp.every((f) => f.startsWith('packages/llp/') || f.startsWith('packages/llp-loopback/'))).toBe(
      true,
    );
  }
}, 90_000);
