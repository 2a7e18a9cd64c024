import { mpaTcpModule } from '@rddp/llp-mpa-tcp';
import { type ContainerModule, createStack } from '@rddp/stack';
import { Access } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';

/** Two endpoints, each with its own stack (as two processes have), on the LLP plugin `llp()` makes. */
export async function example(llp: () => ContainerModule = () => mpaTcpModule({ params: { crc: true } })) {
  const server = createStack(llp());
  const client = createStack(llp());

  // The LLP connection: the server listens, the client connects (MPA negotiation on TCP, RFC 5044 §7).
  const listener = await server.listen({ host: '127.0.0.1', port: 0 });
  const accepted = firstValueFrom(listener.connections$);
  const clientLink = await client.connect(listener.address);
  const serverLink = await accepted;
  await listener.close();

  // Verbs on top: a device and a protection domain per host, a queue pair on each end of the connection.
  const serverPd = server.device().allocPd();
  const clientPd = client.device().allocPd();
  const peer = server.queuePair(serverPd, serverLink);
  const qp = client.queuePair(clientPd, clientLink);

  // The server exposes a buffer (its STag and TO go to the client, normally in a Send) and posts a receive.
  const exposed = serverPd.registerMr(new Uint8Array(64), Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite);
  const inbox = serverPd.registerMr(new Uint8Array(64), Access.LocalWrite);
  const delivered = peer.recv(inbox.sge());

  const data = clientPd.registerMr(new TextEncoder().encode('written by RDMA'), 0);
  await qp.write(data.sge(), exposed.remote()); // RDMA Write (RFC 5040 §5.1)
  const copy = clientPd.registerMr(new Uint8Array(data.length), Access.LocalWrite);
  await qp.read(copy.sge(), exposed.remote()); // RDMA Read (§5.2)
  await qp.send(copy.sge(0, 7), { solicited: true }); // Send with Solicited Event (§5.3)
  const wc = await delivered;

  await qp.close(); // graceful teardown (§6.2)
  const text = new TextDecoder();
  return { read: text.decode(copy.buffer), received: text.decode(inbox.buffer.subarray(0, wc.byteLen)) };
}
