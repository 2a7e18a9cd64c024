/**
 * `rddp attack` as a user runs it, every attack for a few seconds (the 60-second figures are in
 * docs/SECURITY.md): the server runs in its own process, the hostile peer and an honest client on the
 * same transport in this one. Each attack must leave the server's RSS within budget, its active handles
 * back at their baseline once the attacker has gone, and the honest client served throughout.
 */
import { describe, expect, it } from 'vitest';
import { run } from './procs.js';

interface Result {
  attack: string;
  ok: boolean;
  reasons: string[];
  hostileUnits: number;
  honestOps: number;
  handlesBefore: number;
  handlesAfter: number;
}

describe('rddp attack: a long-running server under each hostile peer', () => {
  it('every attack: RSS within budget, handles back to baseline, the honest client served', async () => {
    // A short run's RSS includes the young generation filling up: the tight memory checks are the heap
    // tests beside each fix; here the budget only catches a runaway.
    const { done } = run(['attack', '--seconds', '2', '--settle', '15', '--budget', '64', '--json']);
    const { code, out, err } = await done;
    const results = out
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Result);
    expect(results.map((r) => r.attack)).toEqual([
      'msn-hole',
      'no-read',
      'bad-crc',
      'short-advert',
      'slowloris',
      'sctp-garbage',
      'udp-request-flood',
      'slowloris-spread',
      'idle-fpdu',
      'rping-hold',
      'udp-hold',
      'sctp-peers',
    ]);
    for (const r of results) {
      expect(r.hostileUnits, r.attack).toBeGreaterThan(0);
      expect(r.honestOps, r.attack).toBeGreaterThan(0);
      expect({ attack: r.attack, reasons: r.reasons, handles: [r.handlesBefore, r.handlesAfter] }).toEqual({
        attack: r.attack,
        reasons: [],
        handles: [r.handlesBefore, r.handlesBefore],
      });
    }
    expect(code, err).toBe(0);
  }, 600_000);

  it('an unknown attack is a usage error (exit 2, one line)', async () => {
    const { code, err } = await run(['attack', 'no-such-attack']).done;
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/unknown attack no-such-attack/);
  });
});
