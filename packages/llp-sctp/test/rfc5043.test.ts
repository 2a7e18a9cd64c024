/**
 * The RFC 5043 adaptation codec, the adaptation parameter shim on real package packets, CRC32c, and
 * the zero-concatenation send view.
 */
import { createRequire } from 'node:module';
import { LlpProtocolError } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { crc32c, verifySctpChecksum } from '../src/crc32c.js';
import { PartsView } from '../src/parts-view.js';
import { packagePpids, sctpPackage } from '../src/pkg.js';
import {
  ADAPTATION_CODE_POINT_DDP,
  adaptationRefusal,
  decodeSessionControl,
  encodeAdaptationLayerIndication,
  encodeSessionControl,
  PPID_DDP_SEGMENT,
  PPID_DDP_STREAM_SESSION_CONTROL,
  SessionFunction,
} from '../src/rfc5043.js';
import {
  abortPacket,
  adaptationCodePoint,
  ChunkType,
  chunks,
  commonHeader,
  errorCauses,
  hasUnorderedData,
  initChunk,
  missingMandatoryParameterCause,
  withAdaptationIndication,
} from '../src/wire.js';
import { link, until } from './harness.js';

const require = createRequire(import.meta.url);
const PkgChunk = require('@rddp/sctp/lib/chunk') as {
  fromBuffer(b: Buffer): Record<string, unknown> & { chunkType: string; errors?: unknown };
  new (type: string, o: Record<string, unknown>): { toBuffer(): Buffer };
};

describe('RFC 5043 wire format', () => {
  it('RFC 5043 §5.2: PPID 16 is a DDP Segment, 17 a DDP Stream Session Control (IANA, as the package lists them)', () => {
    expect(PPID_DDP_SEGMENT).toBe(16);
    expect(PPID_DDP_STREAM_SESSION_CONTROL).toBe(17);
    expect(packagePpids.DDP_CHUNK).toBe(16);
    expect(packagePpids.DDP_CONTROL).toBe(17);
  });

  it('RFC 5043 §5.1 / RFC 5061 §4.2.6: the Adaptation Layer Indication is C006 0008 and code point 1', () => {
    expect(encodeAdaptationLayerIndication().toString('hex')).toBe('c006000800000001');
    expect(ADAPTATION_CODE_POINT_DDP).toBe(1);
  });

  it('RFC 5043 §5.2.2: session control messages encode function, private data length and private data', () => {
    expect(encodeSessionControl(SessionFunction.Initiate, new Uint8Array([1, 2, 3])).toString('hex')).toBe(
      '00010003010203',
    );
    expect(encodeSessionControl(SessionFunction.Terminate).toString('hex')).toBe('00040000');
    for (const fn of Object.values(SessionFunction)) {
      const pd = new Uint8Array(fn * 7).fill(fn);
      const m = decodeSessionControl(encodeSessionControl(fn, pd));
      expect(m.fn).toBe(fn);
      expect(m.privateData).toEqual(pd);
    }
    const max = new Uint8Array(0xffff);
    expect(decodeSessionControl(encodeSessionControl(SessionFunction.Accept, max)).privateData.length).toBe(0xffff);
    expect(() => encodeSessionControl(SessionFunction.Accept, new Uint8Array(0x10000))).toThrow(RangeError);
  });

  it('RFC 5043 §5.2.2: short, inconsistent or unknown session control messages are protocol errors', () => {
    expect(() => decodeSessionControl(new Uint8Array([0, 1, 0]))).toThrow(LlpProtocolError);
    expect(() => decodeSessionControl(new Uint8Array([0, 1, 0, 2, 9]))).toThrow(/says 2 octets/);
    expect(() => decodeSessionControl(new Uint8Array([0, 9, 0, 0]))).toThrow(/unknown/);
    expect(() => decodeSessionControl(new Uint8Array([0, 0, 0, 0]))).toThrow(LlpProtocolError);
  });

  it('RFC 4960 §6.8: CRC32c matches the standard check value and the package signatures', async () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    const [init] = await bareHandshake();
    expect(verifySctpChecksum(init)).toBe(true);
    const bad = Buffer.from(init);
    bad[20] = (bad[20] as number) ^ 0x40;
    expect(verifySctpChecksum(bad)).toBe(false);
  });

  it('RFC 5043 §5.1: the shim appends the indication to INIT and INIT ACK, re-signed, and the package parses it', async () => {
    const [init, initAck, other] = await bareHandshake();
    for (const [pkt, type] of [
      [init, ChunkType.INIT],
      [initAck, ChunkType.INIT_ACK],
    ] as const) {
      const c = initChunk(pkt);
      expect(c?.type).toBe(type);
      expect(adaptationCodePoint(pkt, c as NonNullable<typeof c>)).toBeNull();
      const out = withAdaptationIndication(pkt);
      expect(verifySctpChecksum(out)).toBe(true);
      const oc = initChunk(out) as NonNullable<typeof c>;
      expect(oc.length).toBe((((c as NonNullable<typeof c>).length + 3) & ~3) + 8);
      expect(adaptationCodePoint(out, oc)).toBe(ADAPTATION_CODE_POINT_DDP);
      expect(out.subarray(oc.offset + oc.length - 8, oc.offset + oc.length).toString('hex')).toBe('c006000800000001');
      // The package itself decodes the parameter and keeps every other field.
      const parsed = PkgChunk.fromBuffer(out.subarray(oc.offset));
      const orig = PkgChunk.fromBuffer(pkt.subarray((c as NonNullable<typeof c>).offset));
      expect((parsed.adaptation_layer_indication as Buffer).toString('hex')).toBe('00000001');
      expect(parsed.errors).toBeUndefined();
      for (const k of ['initiate_tag', 'a_rwnd', 'outbound_streams', 'inbound_streams', 'initial_tsn'])
        expect(parsed[k]).toEqual(orig[k]);
      // Idempotent: a packet that has it already is left alone.
      expect(withAdaptationIndication(out)).toBe(out);
    }
    expect(withAdaptationIndication(other)).toBe(other);
  });

  it('RFC 4960 §3.3.1: the U bit is found on any DATA chunk of a packet, bundled or not', () => {
    const data = (unordered: boolean) =>
      new PkgChunk('data', {
        tsn: 1,
        stream_id: 0,
        ssn: 0,
        ppid: 16,
        flags: { B: 1, E: 1, U: unordered ? 1 : 0 },
        user_data: Buffer.from('abc'),
      }).toBuffer();
    const sack = new PkgChunk('sack', { c_tsn_ack: 1, a_rwnd: 1000 }).toBuffer();
    const packet = (...cs: Buffer[]) => Buffer.concat([Buffer.alloc(12), ...cs]);
    expect(hasUnorderedData(packet(sack, data(false)))).toBe(false);
    expect(hasUnorderedData(packet(sack, data(false), data(true)))).toBe(true);
    expect(hasUnorderedData(packet(data(true)))).toBe(true);
    expect(hasUnorderedData(packet(sack))).toBe(false);
  });

  it('RFC 5043 §5.1: only the DDP code point is accepted; absent is Missing Mandatory Parameter, another is Protocol Violation', () => {
    expect(adaptationRefusal(ADAPTATION_CODE_POINT_DDP, 'INIT')).toBeNull();
    expect(adaptationRefusal(null, 'INIT')?.cause).toBe('missing-mandatory-parameter');
    expect(adaptationRefusal(null, 'INIT ACK')?.text).toMatch(/^INIT ACK without/);
    expect(adaptationRefusal(7, 'INIT ACK')).toMatchObject({ cause: 'protocol-violation', text: /code point 7/ });
  });

  it('RFC 4960 §3.3.7, §3.3.10.2: the refusal ABORT names the missing parameter and carries the INIT tag', () => {
    const p = abortPacket({ srcPort: 5000, dstPort: 6000, vTag: 0xdeadbeef }, false, [
      missingMandatoryParameterCause([0xc006]),
    ]);
    expect(verifySctpChecksum(p)).toBe(true);
    expect(commonHeader(p)).toEqual({ srcPort: 5000, dstPort: 6000, vTag: 0xdeadbeef });
    const [c] = chunks(p);
    expect(c).toMatchObject({ type: ChunkType.ABORT, flags: 0 });
    const causes = errorCauses(p, c as NonNullable<typeof c>);
    expect(causes.map((x) => [x.code, Buffer.from(x.body).toString('hex')])).toEqual([[2, '00000001c006']]);
    expect(chunks(abortPacket({ srcPort: 1, dstPort: 2, vTag: 3 }, true))[0]?.flags).toBe(1);
  });
});

describe('send path without concatenation', () => {
  it('PartsView slices within a part as zero-copy views, across parts as views, and copies once', () => {
    const a = Buffer.from('hello ');
    const b = new Uint8Array(Buffer.from('DDP '));
    const c = Buffer.from('world');
    const v = PartsView.of([a, new Uint8Array(0), b, c]) as PartsView;
    expect(v).toBeInstanceOf(PartsView);
    expect(v.length).toBe(15);
    const inner = v.slice(0, 4) as Buffer;
    expect(Buffer.isBuffer(inner)).toBe(true);
    a[0] = 0x48; // 'H': a view, not a copy
    expect(inner.toString()).toBe('Hell');
    const across = v.slice(4, 12) as PartsView;
    expect(across).toBeInstanceOf(PartsView);
    const out = Buffer.alloc(across.length);
    across.copy(out);
    expect(out.toString()).toBe('o DDP wo');
    expect(PartsView.of([c])).toBe(c);
    // The package encodes a DATA chunk straight from the view.
    const chunk = new PkgChunk('data', { tsn: 1, stream_id: 3, ssn: 0, ppid: 16, flags: { B: 1, E: 1 }, user_data: v });
    const bytes = chunk.toBuffer();
    expect(bytes.subarray(16, 31).toString()).toBe('Hello DDP world');
  });
});

/** INIT, INIT ACK and one later packet of a bare package handshake, as sent. */
async function bareHandshake(): Promise<[Buffer, Buffer, Buffer]> {
  const seen: Buffer[] = [];
  const [ce, se] = link();
  ce.tap = (p) => seen.push(p);
  se.tap = (p) => seen.push(p);
  const server = sctpPackage.connect({
    passive: true,
    localPort: 31_001,
    port: 31_002,
    udpTransport: se,
    udpPeer: { address: 'l', port: 1 },
  });
  const client = sctpPackage.connect({
    localPort: 31_002,
    port: 31_001,
    udpTransport: ce,
    udpPeer: { address: 'l', port: 1 },
  });
  await new Promise<void>((r) => client.once('connect', () => r()));
  await until(() => seen.length >= 4, 'the handshake');
  client.destroy();
  server.destroy();
  const byType = (t: number) => seen.find((p) => chunks(p)[0]?.type === t) as Buffer;
  return [byType(ChunkType.INIT), byType(ChunkType.INIT_ACK), byType(ChunkType.COOKIE_ECHO)];
}
