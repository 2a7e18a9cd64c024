import { tests, transportContext } from '@rddp/llp-compliance';
import { describe } from 'vitest';
import { type MpaParams, type MpaTcpOptions, mpaTcp } from '../src/index.js';

interface Mode {
  readonly connect?: MpaParams;
  readonly listen?: MpaParams;
  readonly options?: MpaTcpOptions;
}

function suite(label: string, mode: Mode) {
  describe(label, () => {
    tests({
      setup: async () =>
        transportContext(
          mpaTcp({ highWaterMark: 256 * 1024, ...mode.options }),
          { host: '127.0.0.1', port: 0 },
          { connect: { params: { ...mode.connect } }, listen: { params: { ...mode.listen } } },
        ),
      async teardown() {},
    });
  });
}

suite('MPA Rev 1, CRC', { connect: { revision: 1, crc: true } });
suite('MPA Rev 1, no CRC', { connect: { revision: 1, crc: false }, listen: { crc: false } });
suite('MPA Rev 1, CRC, Markers towards the responder', { connect: { revision: 1 }, listen: { markers: true } });
suite('MPA Rev 1, CRC, Markers towards the initiator', { connect: { revision: 1, markers: true } });
suite('MPA Rev 1, no CRC, Markers both ways', {
  connect: { revision: 1, crc: false, markers: true },
  listen: { crc: false, markers: true },
});
suite('MPA Rev 1, CRC, Markers both ways, MULPDU 1024', {
  connect: { revision: 1, markers: true },
  listen: { markers: true },
  options: { mulpdu: 1024 },
});
suite("MPA Rev 1, CRC, Markers both ways, markerFraming 'copy'", {
  connect: { revision: 1, markers: true },
  listen: { markers: true },
  options: { markerFraming: 'copy' },
});
suite("MPA Rev 1, no CRC, Markers both ways, MULPDU 1024, markerFraming 'copy'", {
  connect: { revision: 1, crc: false, markers: true },
  listen: { crc: false, markers: true },
  options: { mulpdu: 1024, markerFraming: 'copy' },
});
// The send path without @rddp/writev (Windows, no compiler) or with directSend off: Node's socket.
suite("MPA Rev 1, CRC, through Node's socket (directSend false)", {
  connect: { revision: 1 },
  options: { directSend: false },
});
suite("MPA Rev 1, CRC, Markers both ways, MULPDU 1024, through Node's socket (directSend false)", {
  connect: { revision: 1, markers: true },
  listen: { markers: true },
  options: { mulpdu: 1024, directSend: false },
});
suite('MPA Rev 2 (RFC 6581), client-server', { connect: { revision: 2, ird: 4, ord: 4 } });
suite('MPA Rev 2 (RFC 6581), peer-to-peer, Write RTR', { connect: { revision: 2, rtr: 'write' } });
suite('MPA Rev 2 (RFC 6581), peer-to-peer, Read RTR', { connect: { revision: 2, rtr: 'read' } });
suite('MPA Rev 2 (RFC 6581), peer-to-peer, Send RTR, Markers', {
  connect: { revision: 2, rtr: 'send', markers: true },
  listen: { markers: true },
});
suite('MPA Rev 0 (RDMA Consortium profile), permissive responder', {
  connect: { revision: 0 },
  listen: { ietfMode: 'permissive' },
});
