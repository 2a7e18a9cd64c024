import type { LlpTransport } from '@rddp/llp';
import { loopbackModule } from '@rddp/llp-loopback';
import { transportModule } from '@rddp/stack';
import { describe, expect, it } from 'vitest';
import { duplexModule, duplexTransport } from '../custom-llp/duplex-llp.js';
import { main } from './rdma-example.js';

describe('docs/rdma-example: a complete RDMA Write + Read + Send program', () => {
  it('RFC 5040 §5.1, §5.2, §5.3: the Write lands, the Read brings it back, the Send is received', async () => {
    expect(await main()).toEqual({ read: 'hello, remote memory', received: 'hello' });
  });

  it('the transport is swapped by binding another LLP plugin and nothing else (TCP sockets, docs/custom-llp)', async () => {
    expect(await main(duplexModule)).toEqual({ read: 'hello, remote memory', received: 'hello' });
    expect(await main(loopbackModule({ mulpdu: 128 }))).toEqual({ read: 'hello, remote memory', received: 'hello' });
    // The program really runs on the plugin it was given: its connect is the one called.
    let connects = 0;
    const counted: LlpTransport = {
      ...duplexTransport,
      connect: (address, options) => {
        connects++;
        return duplexTransport.connect(address, options);
      },
    };
    expect(await main(transportModule(counted))).toEqual({ read: 'hello, remote memory', received: 'hello' });
    expect(connects).toBe(1);
  });

  it('stays under 40 lines', async () => {
    const { readFileSync } = await import('node:fs');
    const lines = readFileSync(new URL('./rdma-example.ts', import.meta.url), 'utf8')
      .trimEnd()
      .split('\n');
    expect(lines.length).toBeLessThan(40);
  });
});
