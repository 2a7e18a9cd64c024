/**
 * `LlpConnectOptions.localAddress` (rping's `-I`): MPA/TCP binds the TCP connection's local end to it, so
 * the Responder sees the connection come from that address and port.
 */
import { firstValueFrom } from 'rxjs';
import { expect, it } from 'vitest';
import { mpaTcp } from '../src/index.js';

it('an Initiator bound to 127.0.0.3 reaches the Responder from 127.0.0.3; without it, from the route', async () => {
  const t = mpaTcp();
  const listener = await t.listen({ host: '127.0.0.1', port: 0 });
  try {
    for (const [localAddress, host] of [
      [{ host: '127.0.0.3' }, '127.0.0.3'],
      [undefined, '127.0.0.1'],
    ] as const) {
      const accepted = firstValueFrom(listener.connections$);
      const conn = await t.connect(listener.address, localAddress ? { localAddress } : {});
      const peer = await accepted;
      expect(conn.localAddress.host).toBe(host);
      expect(peer.remoteAddress).toMatchObject({ host, port: conn.localAddress.port });
      conn.abort();
      peer.abort();
    }
  } finally {
    await listener.close();
  }
});
