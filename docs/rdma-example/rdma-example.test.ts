import { describe, expect, it } from 'vitest';
import { main } from './rdma-example.js';

describe('docs/rdma-example: a complete RDMA Write + Read + Send program', () => {
  it('RFC 5040 §5.1, §5.2, §5.3: the Write lands, the Read brings it back, the Send is received', async () => {
    expect(await main()).toEqual({ read: 'hello, remote memory', received: 'hello' });
  });

  it('stays under 40 lines', async () => {
    const { readFileSync } = await import('node:fs');
    const lines = readFileSync(new URL('./rdma-example.ts', import.meta.url), 'utf8')
      .trimEnd()
      .split('\n');
    expect(lines.length).toBeLessThan(40);
  });
});
