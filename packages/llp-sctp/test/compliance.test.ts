/**
 * The LLP compliance suite over SCTP: UDP encapsulation (the default), and raw IPv4 (protocol 132) where
 * the machine allows it (root and the optional raw-socket addon).
 */
import type { LlpConnection, LlpListener } from '@rddp/llp';
import { tests } from '@rddp/llp-compliance';
import { describe, it } from 'vitest';
import { type SctpTransportOptions, sctp } from '../src/index.js';
import { loadRawSocket } from '../src/raw.js';

let listeners: LlpListener[] = [];

function rawAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    loadRawSocket();
    return true;
  } catch {
    return false;
  }
}

const modes: [string, SctpTransportOptions][] = [['UDP encapsulation', {}]];
if (rawAvailable()) modes.push(['raw IPv4 (protocol 132)', { encapsulation: 'raw' }]);
else describe('raw IPv4 (protocol 132)', () => it.skip('needs root and the raw-socket addon', () => {}));

for (const [name, options] of modes) describe(name, () => suite(options));

function suite(options: SctpTransportOptions): void {
  tests({
    async setup() {
      const transport = sctp(options);
      const listener = await transport.listen({ host: '127.0.0.1', port: 0 });
      const rejecting = await transport.listen(
        { host: '127.0.0.1', port: 0 },
        { onConnectRequest: (r) => ({ accept: false, privateData: r.privateData }) },
      );
      listeners = [listener, rejecting];
      const accepted: LlpConnection[] = [];
      const waiters: ((c: LlpConnection) => void)[] = [];
      listener.connections$.subscribe((c) => {
        const w = waiters.shift();
        if (w) w(c);
        else accepted.push(c);
      });
      const nextAccepted = () =>
        new Promise<LlpConnection>((resolve) => {
          const c = accepted.shift();
          if (c) resolve(c);
          else waiters.push(resolve);
        });
      return {
        async connect(options) {
          const b = nextAccepted();
          const a = await transport.connect({ host: '127.0.0.1', port: listener.address.port as number }, options);
          return [a, await b];
        },
        connectRejected(privateData) {
          return transport.connect({ host: '127.0.0.1', port: rejecting.address.port as number }, { privateData });
        },
      };
    },
    async teardown() {
      for (const l of listeners) await l.close();
      listeners = [];
    },
  });
}
