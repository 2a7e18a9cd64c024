// RDMA Write, RDMA Read and Send between two queue pairs (RFC 5040), composed by @rddp/stack on an LLP plugin.
import { loopbackModule } from '@rddp/llp-loopback';
import { type ContainerModule, createStack } from '@rddp/stack';
import { Access } from '@rddp/verbs';

export async function main(llp: ContainerModule = loopbackModule()): Promise<{ read: string; received: string }> {
  const stack = createStack(llp); // any LLP plugin's module: mpaTcpModule(), sctpModule(), ...
  const [clientLink, serverLink] = await stack.pair(); // an initiator and a responder connection
  const [client, server] = [stack.device().allocPd(), stack.device().allocPd()]; // two hosts
  const qp = stack.queuePair(client, clientLink); // connected: IRD/ORD as the LLP negotiated them
  const peer = stack.queuePair(server, serverLink);

  // The server exposes a buffer to remote reads and writes, and posts a receive for a Send.
  const exposed = server.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite);
  const inbox = server.registerMr(new Uint8Array(64), Access.LocalWrite);
  const delivered = peer.recv(inbox.sge());
  const target = exposed.remote(); // { stag, to }: normally sent to the client in a Send or private data

  // The client writes into the exposed buffer, reads it back, then tells the server with a Send.
  const data = client.registerMr(new TextEncoder().encode('hello, remote memory'), 0);
  await qp.write(data.sge(), target);
  const copy = client.registerMr(new Uint8Array(data.length), Access.LocalWrite);
  await qp.read(copy.sge(), target);
  await qp.send(copy.sge(0, 5), { solicited: true });

  const wc = await delivered; // { opcode: 'recv', byteLen: 5, solicited: true, ... }
  await qp.close(); // graceful teardown (RFC 5040 §6.2)
  const text = new TextDecoder();
  return { read: text.decode(copy.buffer), received: text.decode(inbox.buffer.subarray(0, wc.byteLen)) };
}
