import type { LlpConnectOptions, LlpListenOptions } from '@rddp/llp';
import { firstValueFrom } from 'rxjs';
import {
  type MpaTcpConnection,
  type MpaTcpListener,
  type MpaTcpOptions,
  type MpaTcpTransport,
  mpaTcp,
} from '../src/index.js';

/** A connected [initiator, responder] pair over 127.0.0.1, through a listener closed right after. */
export async function tcpPair(
  transport: MpaTcpTransport = mpaTcp(),
  connect: LlpConnectOptions = {},
  listen: LlpListenOptions = {},
): Promise<[MpaTcpConnection, MpaTcpConnection]> {
  const listener = (await transport.listen({ host: '127.0.0.1', port: 0 }, listen)) as MpaTcpListener;
  try {
    const accepted = firstValueFrom(listener.connections$);
    const a = await transport.connect(listener.address, connect);
    const b = (await accepted) as MpaTcpConnection;
    return [a, b];
  } finally {
    await listener.close();
  }
}

export function transportWith(options: MpaTcpOptions): MpaTcpTransport {
  return mpaTcp(options);
}

export function pattern(length: number, seed: number): Uint8Array {
  const b = new Uint8Array(length);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** The octets MPA puts on the wire for `data` when a Marker is due after `room` octets (RFC 5044 §4.3). */
export function marked(data: Uint8Array, room: number, ptr: number): Uint8Array {
  const wire: number[] = [];
  let r = room;
  let p = ptr;
  for (const x of data) {
    if (r === 0) {
      wire.push(0, 0, (p >>> 8) & 0xff, p & 0xff);
      p += 4;
      r = 508;
    }
    wire.push(x);
    r--;
    p++;
  }
  return Uint8Array.from(wire);
}
