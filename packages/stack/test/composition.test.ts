import { readFileSync } from 'node:fs';
import { Access, DdpStream, type DdpStreamApi, StagTable } from '@rddp/ddp';
import { loopbackModule } from '@rddp/llp-loopback';
import { mpaTcpModule } from '@rddp/llp-mpa-tcp';
import { OrdExceededError, RdmapStream } from '@rddp/rdmap';
import { Device } from '@rddp/verbs';
import { ContainerModule } from 'inversify';
import { describe, expect, it } from 'vitest';
import {
  createStack,
  DDP_STREAM_FACTORY,
  type DdpStreamFactory,
  DEVICE_FACTORY,
  type DeviceFactory,
  NoSuchLlpStreamError,
  RDMAP_STREAM_FACTORY,
  type RdmapStreamFactory,
  STACK_OPTIONS,
  type StackEvent,
} from '../src/index.js';
import { example } from './readme-example.js';

const EXPECTED = { read: 'written by RDMA', received: 'written' };

describe('@rddp/stack: the composition root', () => {
  it('RFC 5040 §5.1-5.3 over MPA/TCP: Write, Read and Send through verbs the stack composed (the README example)', async () => {
    expect(await example()).toEqual(EXPECTED);
  });

  it('swapping the transport is binding another plugin module and nothing else (loopback, MPA/TCP without CRC)', async () => {
    expect(await example(() => loopbackModule())).toEqual(EXPECTED);
    expect(await example(() => mpaTcpModule({ params: { crc: false, markers: true } }))).toEqual(EXPECTED);
  });

  it('the README shows the example as it runs', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const source = readFileSync(new URL('./readme-example.ts', import.meta.url), 'utf8');
    expect(readme).toContain(source.trim());
  });

  it('RFC 6581: an RDMAP Stream built on an MPA connection takes IRD/ORD as negotiated, over the stack defaults', async () => {
    const module = () => mpaTcpModule({ params: { revision: 2, crc: true, ird: 3, ord: 2, rtr: 'write' } });
    const stack = createStack(module(), { ird: 8, ord: 8, profile: 'ietf' });
    const [client, server] = await stack.pair();
    try {
      const limits = client.setup.readLimits;
      expect(limits).toBeDefined();
      const rdmap = stack.rdmapStream(client, { stags: new StagTable() });
      expect(rdmap).toBeInstanceOf(RdmapStream);
      expect([rdmap.ird, rdmap.ord]).toEqual([limits?.ird, limits?.ord]);
      expect([rdmap.ird, rdmap.ord]).not.toEqual([8, 8]);
      expect(rdmap.role).toBe('initiator');
      const peer = stack.rdmapStream(server, { stags: new StagTable() });
      expect(peer.role).toBe('responder');
      expect(() => stack.rdmapStream(client, { stags: new StagTable(), stream: 3 })).toThrow(NoSuchLlpStreamError);
    } finally {
      client.abort();
      server.abort();
    }
  });

  it('rebinding the RDMAP and DDP factories in a user module changes what the stack builds', async () => {
    const built: string[] = [];
    const user = new ContainerModule(({ bind }) => {
      bind<RdmapStreamFactory>(RDMAP_STREAM_FACTORY).toConstantValue((llp, options) => {
        built.push(`rdmap ord=${options.ord} policy=error`);
        return new RdmapStream(llp, { ...options, ordPolicy: 'error' });
      });
      bind<DdpStreamFactory>(DDP_STREAM_FACTORY).toConstantValue((llp, options): DdpStreamApi => {
        built.push(`ddp queues=${options.queues}`);
        return new DdpStream(llp, options);
      });
    });
    const stack = createStack(loopbackModule(), { modules: [user], ord: 1 });
    const [a, b] = await stack.pair({ host: 'stack-rebind', port: 0 });
    const stags = new StagTable();
    const rdmap = stack.rdmapStream(a, { stags });
    stack.ddpStream(b, { stags: new StagTable(), queues: 2 });
    expect(built).toEqual(['rdmap ord=1 policy=error', 'ddp queues=3', 'ddp queues=2']);
    // The user's ordPolicy 'error': a Read beyond ORD 1 is refused at once instead of queued (RFC 5040 §6.1).
    const sink = stags.register({ pdId: 1, buffer: new Uint8Array(4), access: Access.LocalWrite });
    const read = { type: 'read', sinkStag: sink.stag, sinkTo: 0n, size: 4, srcStag: 0x100, srcTo: 0n } as const;
    rdmap.postSend({ op: read });
    expect(() => rdmap.postSend({ op: read })).toThrow(OrdExceededError);
    a.abort();
    b.abort();
  });

  it('queue pairs too: stack.queuePair builds its RDMAP Stream with the bound factories, on the LLP stream it names', async () => {
    const built: string[] = [];
    const user = new ContainerModule(({ bind }) => {
      bind<RdmapStreamFactory>(RDMAP_STREAM_FACTORY).toConstantValue((llp, options) => {
        built.push(`rdmap on ${options.role}`);
        return new RdmapStream(llp, options);
      });
    });
    const stack = createStack(loopbackModule(), { modules: [user] });
    const [a, b] = await stack.pair({ host: 'stack-qp', port: 0 }, { streams: 2 });
    const pdA = stack.device().allocPd();
    const pdB = stack.device().allocPd();
    // RFC 5040 §5.3 on the second LLP stream of each end: a Send and its receive, through verbs.
    const qpA = stack.queuePair(pdA, a, {}, { stream: 1 });
    const qpB = stack.queuePair(pdB, b, {}, { stream: 1 });
    expect(built).toEqual(['rdmap on initiator', 'rdmap on responder']);
    expect(qpA.rdmap?.ddp.llp).toBe(a.streams[1]);
    const rx = pdB.registerMr(new Uint8Array(5), Access.LocalWrite);
    const tx = pdA.registerMr(new TextEncoder().encode('hello'), Access.LocalRead);
    const received = qpB.recv(rx.sge());
    await qpA.send(tx.sge());
    expect((await received).byteLen).toBe(5);
    expect(new TextDecoder().decode(rx.buffer)).toBe('hello');
    expect(() => stack.queuePair(pdA, a, {}, { stream: 2 })).toThrow(/no stream 2 \(it has 2\)/);
    a.abort();
    b.abort();
  });

  it('a rebinding after createStack takes effect at the next build (device factory, defaults)', () => {
    const stack = createStack(loopbackModule());
    expect(stack.device()).toBeInstanceOf(Device);
    stack.container.rebind<DeviceFactory>(DEVICE_FACTORY).toConstantValue(() => new Device({ maxRegions: 1 }));
    const pd = stack.device().allocPd();
    pd.registerMr(new Uint8Array(8), 0);
    expect(() => pd.registerMr(new Uint8Array(8), 0)).toThrow();
    stack.container.rebind(STACK_OPTIONS).toConstantValue({ profile: 'rdmac' });
    expect(stack.options.profile).toBe('rdmac');
  });

  it('the profile follows the connection when the defaults say how (MPA Rev 0 selects the RDMA Consortium profile)', async () => {
    const stack = createStack(loopbackModule(), {
      profile: (c) => (c.role === 'initiator' ? 'rdmac' : 'ietf'),
    });
    const [a, b] = await stack.pair({ host: 'stack-profile', port: 0 });
    expect(stack.rdmapStream(a, { stags: new StagTable() }).profile).toBe('rdmac');
    expect(stack.rdmapStream(b, { stags: new StagTable() }).profile).toBe('ietf');
    expect(stack.profileOf(a)).toBe('rdmac');
    a.abort();
    b.abort();
  });

  it('reports what it built on events$', async () => {
    const stack = createStack(loopbackModule());
    const seen: StackEvent['type'][] = [];
    stack.events$.subscribe((e) => seen.push(e.type));
    const [a, b] = await stack.pair({ host: 'stack-events', port: 0 });
    stack.rdmapStream(a, { stags: new StagTable() });
    stack.device();
    expect(seen.sort()).toEqual(['connection', 'connection', 'device', 'rdmap-stream']);
    a.abort();
    b.abort();
  });
});
