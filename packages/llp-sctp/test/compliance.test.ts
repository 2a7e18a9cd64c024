/**
 * The LLP compliance suite over SCTP, UDP encapsulation (the default).
 */
import type { LlpConnection, LlpListener } from '@rddp/llp';
import { tests } from '@rddp/llp-compliance';
import { sctp } from '../src/index.js';

let listeners: LlpListener[] = [];

tests({
  async setup() {
    const transport = sctp();
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
