import { describe, expect, it } from 'vitest';
import { runDemo } from '../src/index.js';

describe('rddp demo (the main job)', () => {
  it('runs rping with validation and a verified write_bw sweep over MPA/TCP on 127.0.0.1', async () => {
    const lines: string[] = [];
    const ok = await runDemo({ pings: 20, maxSize: 65_536, quick: true }, (s) => lines.push(s));
    const text = lines.join('\n');
    expect(ok).toBe(true);
    expect(text).toContain('rping: 20 pings OK');
    expect(text).toMatch(/#bytes\s+#iterations\s+BW peak\[MB\/sec\]/);
    expect(text).toMatch(/\n 65536\s+300\s/);
    expect(text).toContain('every size verified');
  }, 60_000);
});
