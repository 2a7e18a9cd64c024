/**
 * The LLP compliance suite (RFC 5041 §3, §6) over real UDP sockets on 127.0.0.1. The UDP LLP declares
 * itself unreliable and unordered (DDPP core draft §3.4), so the suite runs the checks that class allows.
 */
import { tests, transportContext } from '@rddp/llp-compliance';
import { describe } from 'vitest';
import { type UdpOptions, udp } from '../src/index.js';

function suite(label: string, options: UdpOptions) {
  describe(label, () => {
    tests({
      setup: async () =>
        transportContext(udp({ lingerMs: 50, closeTimeoutMs: 1000, retransmitMs: 20, ...options }), {
          host: '127.0.0.1',
          port: 0,
        }),
      async teardown() {},
    });
  });
}

suite('udp', {});
suite('udp, no CRC32c, small datagrams', { crc: false, datagramSize: 256 });
suite('udp, lossy (20 % of DATA dropped, 10 % duplicated, 10 % reordered)', {
  faults: { seed: 11, drop: 0.2, duplicate: 0.1, reorder: 0.1 },
});
