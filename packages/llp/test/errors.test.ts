/**
 * One error family (issue 15 point 7): every error class any rddp package exports descends from
 * `RddpError` with a stable `ERR_*` code, and a condition raised at several layers is caught by one
 * shared family class. The codes are pinned: they are the contract callers match on.
 */
import * as ddp from '@rddp/ddp';
import * as llp from '@rddp/llp';
import {
  InvalidArgumentError,
  isLlpError,
  isRddpError,
  LlpAbortError,
  LlpError,
  RddpAbortError,
  RddpError,
  RddpInvalidArgumentError,
  RddpMessageTooLongError,
  StreamClosedError,
} from '@rddp/llp';
import * as compliance from '@rddp/llp-compliance';
import * as loopback from '@rddp/llp-loopback';
import * as rdmap from '@rddp/rdmap';
import * as stack from '@rddp/stack';
import * as verbs from '@rddp/verbs';
import { describe, expect, it } from 'vitest';
import * as perf from '../../../tools/cli/src/perf/errors.js';
import * as rping from '../../../tools/cli/src/rping/errors.js';
import * as mpaTcp from '../../llp-mpa-tcp/src/index.js';
import * as sctp from '../../llp-sctp/src/index.js';
import * as udp from '../../llp-udp/src/index.js';

type ErrorClass = new (...args: never[]) => Error;

const MODULES: Record<string, Record<string, unknown>> = {
  '@rddp/llp': llp,
  '@rddp/ddp': ddp,
  '@rddp/rdmap': rdmap,
  '@rddp/verbs': verbs,
  '@rddp/stack': stack,
  '@rddp/llp-loopback': loopback,
  '@rddp/llp-compliance': compliance,
  '@rddp/llp-mpa-tcp': mpaTcp,
  '@rddp/llp-sctp': sctp,
  '@rddp/llp-udp': udp,
  'tools/cli perf': perf,
  'tools/cli rping': rping,
};

/** Roots and families: abstract, never thrown themselves. */
const ABSTRACT = new Set([
  'RddpError',
  'RddpAbortError',
  'RddpInvalidArgumentError',
  'RddpMessageTooLongError',
  'LlpError',
  'DdpError',
  'RdmapError',
  'VerbsError',
  'StackError',
  'PerfError',
  'RpingError',
  // RDDP_CRC32C's two errors' base; @rddp/llp-sctp's deprecated name for it.
  'Crc32cBackendError',
  'SctpCrc32cBackendError',
]);

/** Constructor arguments of the classes that take more than a message. */
const ARGS: Record<string, unknown[]> = {
  UlpduTooLargeError: [70_000, 65_535],
  RdmapStateError: ['terminated', 'post a send'],
  OrdExceededError: [4],
  RdmapExtensionDisabledError: ['atomics'],
  RdmapMessageTooLongError: [2 ** 32, 2 ** 32 - 1],
  TerminatedError: ['received', { layer: 0, errorType: 1, errorCode: 0 }],
  QpStateError: ['error', 'post a send'],
  MessageTooLongError: [2 ** 32, 2 ** 32 - 1],
  ExtensionNotEnabledError: ['immediate'],
  WorkCompletionError: [{ wrId: 1n, status: 'flushed', opcode: 'send', byteLen: 0, qpNum: 1, solicited: false }],
  NoSuchLlpStreamError: [3],
  MpaProtocolError: ['bad-key', 4, 'bad MPA key'],
  MpaCrcError: [1, 2],
  MpaFpduNotSentError: [new StreamClosedError()],
  PerfHelloRefusedError: ['schema'],
  PerfServerRefusedError: ['schema'],
  PerfWriteBackError: [new Error('send queue full')],
  PerfStepTimeoutError: ["the -b client's START", 30000],
  RpingBogusDataError: [3],
  RpingAdvertisementTooLargeError: [2, 1],
  RpingServerBusyError: [3, 2, 1],
  RpingStepTimeoutError: ['the RDMA Read Response of 64 octets', 10000],
  AddressInUseError: ['127.0.0.1:7174'],
  LlpAddressResolutionError: ['no.such.host', 'ENOTFOUND'],
  ResourceLimitError: ['listener: 16 connections', 'connection from 127.0.0.1:40000'],
  UnknownStagError: [0x1234_5601],
  StagTableFullError: ['regions', 16, 16, 1],
  LlpFailedError: ['receive', new Error('MPA CRC mismatch')],
  InvalidTerminateError: ['refused by DDP'],
  TerminateFormatError: ['Terminated DDP Header', 18, 10],
  InvalidMrError: ['a gather element', 0x1234_5601, 'is deregistered'],
  SgeRangeError: ['a gather element', 8, 16, { stag: 0x1234_5601, regionLength: 16 }],
};

/** Every exported error class, once (a class re-exported by two packages counts once). */
function exportedErrorClasses(): Map<string, ErrorClass> {
  const out = new Map<string, ErrorClass>();
  for (const mod of Object.values(MODULES))
    for (const [name, v] of Object.entries(mod))
      if (typeof v === 'function' && v.prototype instanceof Error) out.set(name, v as ErrorClass);
  return out;
}

function instance(name: string, cls: ErrorClass): Error {
  return new (cls as new (...args: unknown[]) => Error)(...(ARGS[name] ?? [`a ${name}`]));
}

function concrete(): [string, Error][] {
  return [...exportedErrorClasses()].filter(([n]) => !ABSTRACT.has(n)).map(([n, c]) => [n, instance(n, c)]);
}

/** The codes callers match on, per class: they must never change. */
const CODES: Record<string, string> = {
  AccessError: 'ERR_VERBS_ACCESS',
  AddressInUseError: 'ERR_LLP_ADDRESS_IN_USE',
  CapabilityError: 'ERR_LLP_CAPABILITY',
  ConnectionAbortedError: 'ERR_LLP_CONNECTION_ABORTED',
  ConnectionRefusedError: 'ERR_LLP_CONNECTION_REFUSED',
  ConnectionRejectedError: 'ERR_LLP_CONNECTION_REJECTED',
  Crc32cBackendMissingError: 'ERR_LLP_CRC32C_BACKEND_MISSING',
  Crc32cBackendUnknownError: 'ERR_LLP_CRC32C_BACKEND_UNKNOWN',
  DdpAbortError: 'ERR_DDP_ABORTED',
  DdpInvalidArgumentError: 'ERR_DDP_INVALID_ARGUMENT',
  DdpLlpUnsuitableError: 'ERR_DDP_LLP_UNSUITABLE',
  DdpSendQueueFullError: 'ERR_DDP_SEND_QUEUE_FULL',
  DdpStreamClosedError: 'ERR_DDP_STREAM_CLOSED',
  DigestError: 'ERR_LLP_DIGEST',
  DirectSendUnavailableError: 'ERR_MPA_DIRECT_SEND_UNAVAILABLE',
  ExtensionNotEnabledError: 'ERR_VERBS_EXTENSION_DISABLED',
  FlushedError: 'ERR_RDMAP_FLUSHED',
  InvalidArgumentError: 'ERR_LLP_INVALID_ARGUMENT',
  InvalidMrError: 'ERR_VERBS_INVALID_MR',
  InvalidTerminateError: 'ERR_RDMAP_INVALID_TERMINATE',
  InvalidWorkRequestError: 'ERR_VERBS_INVALID_WR',
  LlpAbortError: 'ERR_LLP_ABORTED',
  LlpAddressResolutionError: 'ERR_LLP_ADDRESS_RESOLUTION',
  LlpFailedError: 'ERR_RDMAP_LLP_FAILED',
  LlpProtocolError: 'ERR_LLP_PROTOCOL',
  LlpTimeoutError: 'ERR_LLP_TIMEOUT',
  LocalProtectionError: 'ERR_RDMAP_LOCAL_PROTECTION',
  MessageTooLongError: 'ERR_VERBS_MESSAGE_TOO_LONG',
  MpaCrcError: 'ERR_LLP_DIGEST',
  MpaFpduNotSentError: 'ERR_LLP_STREAM_CLOSED',
  MpaProtocolError: 'ERR_LLP_PROTOCOL',
  NoSuchLlpStreamError: 'ERR_RDDP_STACK_NO_LLP_STREAM',
  OrdExceededError: 'ERR_RDMAP_ORD_EXCEEDED',
  PerfBadMessageError: 'ERR_PERF_BAD_MESSAGE',
  PerfHelloRefusedError: 'ERR_PERF_HELLO_REFUSED',
  PerfServerRefusedError: 'ERR_PERF_SERVER_REFUSED',
  PerfVersionError: 'ERR_PERF_VERSION',
  PerfWriteBackError: 'ERR_PERF_WRITE_BACK',
  PerfStepTimeoutError: 'ERR_PERF_STEP_TIMEOUT',
  QpStateError: 'ERR_VERBS_QP_STATE',
  QueueFullError: 'ERR_VERBS_QUEUE_FULL',
  RawSocketUnavailableError: 'ERR_LLP_CAPABILITY',
  RdmapAbortError: 'ERR_RDMAP_ABORTED',
  RdmapExtensionDisabledError: 'ERR_RDMAP_EXTENSION_DISABLED',
  RdmapInvalidArgumentError: 'ERR_RDMAP_INVALID_ARGUMENT',
  RdmapMessageTooLongError: 'ERR_RDMAP_MESSAGE_TOO_LONG',
  RdmapStateError: 'ERR_RDMAP_STATE',
  RdmapUnsuitableLlpError: 'ERR_RDMAP_UNSUITABLE_LLP',
  ResourceBusyError: 'ERR_VERBS_BUSY',
  ResourceLimitError: 'ERR_LLP_RESOURCE_LIMIT',
  RpingAdvertisementTooLargeError: 'ERR_RPING_ADVERTISEMENT_TOO_LARGE',
  RpingBogusDataError: 'ERR_RPING_BOGUS_DATA',
  RpingServerBusyError: 'ERR_RPING_SERVER_BUSY',
  RpingStepTimeoutError: 'ERR_RPING_STEP_TIMEOUT',
  SgeRangeError: 'ERR_VERBS_SGE_RANGE',
  StagTableFullError: 'ERR_DDP_STAG_TABLE_FULL',
  StreamClosedError: 'ERR_LLP_STREAM_CLOSED',
  TerminatedError: 'ERR_RDMAP_TERMINATED',
  TerminateFormatError: 'ERR_RDMAP_TERMINATE_FORMAT',
  UlpduTooLargeError: 'ERR_LLP_ULPDU_TOO_LARGE',
  UnknownStagError: 'ERR_DDP_UNKNOWN_STAG',
  WorkCompletionError: 'ERR_VERBS_WORK_COMPLETION',
};

const FAMILIES = [
  { family: RddpAbortError, members: ['DdpAbortError', 'LlpAbortError', 'RdmapAbortError'] },
  {
    family: RddpInvalidArgumentError,
    members: [
      'DdpInvalidArgumentError',
      'InvalidArgumentError',
      'InvalidWorkRequestError',
      'RdmapInvalidArgumentError',
    ],
  },
  { family: RddpMessageTooLongError, members: ['MessageTooLongError', 'RdmapMessageTooLongError'] },
] as const;

describe('one error family rooted in @rddp/llp', () => {
  it('every exported error class of every package is an RddpError, named for its class, with a stable ERR_ code', () => {
    const all = concrete();
    expect(all.length).toBe(Object.keys(CODES).length);
    for (const [name, e] of all) {
      expect(e, name).toBeInstanceOf(RddpError);
      expect(isRddpError(e), name).toBe(true);
      expect(e.name).toBe(name);
      expect((e as RddpError).code, name).toMatch(/^ERR_[A-Z0-9_]+$/);
      expect(e.message.length, name).toBeGreaterThan(0);
    }
    for (const name of ABSTRACT) {
      const cls = exportedErrorClasses().get(name);
      expect(cls === RddpError || cls?.prototype instanceof RddpError, name).toBe(true);
    }
  });

  it('codes did not change', () => {
    expect(Object.fromEntries(concrete().map(([n, e]) => [n, (e as RddpError).code]))).toEqual(CODES);
  });

  it.each(
    FAMILIES.map((f) => [f.family.name, f] as const),
  )('%s catches exactly its members, one per layer, each keeping its layer code', (_, { family, members }) => {
    const caught = concrete()
      .filter(([, e]) => e instanceof family)
      .map(([n]) => n)
      .sort();
    expect(caught).toEqual([...members]);
    const codes = caught.map((n) => CODES[n]);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('a family member stays an error of its own layer: layer guards and instanceof are unchanged', () => {
    const byName = new Map(concrete());
    const llpAbort = byName.get('LlpAbortError');
    const ddpAbort = byName.get('DdpAbortError');
    const rdmapAbort = byName.get('RdmapAbortError');
    expect(isLlpError(llpAbort, 'ERR_LLP_ABORTED')).toBe(true);
    expect(ddp.isDdpError(ddpAbort, 'ERR_DDP_ABORTED')).toBe(true);
    expect(rdmap.isRdmapError(rdmapAbort, 'ERR_RDMAP_ABORTED')).toBe(true);
    expect(verbs.isVerbsError(byName.get('MessageTooLongError'), 'ERR_VERBS_MESSAGE_TOO_LONG')).toBe(true);
    expect(ddpAbort).not.toBeInstanceOf(LlpError);
    expect(isLlpError(ddpAbort)).toBe(false);
    expect(rdmapAbort).not.toBeInstanceOf(ddp.DdpError);
    expect(isRddpError(ddpAbort, 'ERR_DDP_ABORTED')).toBe(true);
    expect(isRddpError(ddpAbort, 'ERR_LLP_ABORTED')).toBe(false);
  });

  it('family membership is inherited by subclasses and not given to other classes', () => {
    class PluginAbortError extends LlpAbortError {}
    expect(new PluginAbortError()).toBeInstanceOf(RddpAbortError);
    class TransportAbortError extends RddpAbortError {
      readonly code = 'ERR_TRANSPORT_ABORTED';
    }
    expect(new TransportAbortError('aborted')).toBeInstanceOf(RddpAbortError);
    expect(new TransportAbortError('aborted')).toBeInstanceOf(RddpError);
    expect(new LlpAbortError()).not.toBeInstanceOf(TransportAbortError);
    expect(new StreamClosedError()).not.toBeInstanceOf(RddpAbortError);
    expect(new InvalidArgumentError('x')).not.toBeInstanceOf(RddpAbortError);
    expect(new Error('x')).not.toBeInstanceOf(RddpInvalidArgumentError);
    expect(null).not.toBeInstanceOf(RddpMessageTooLongError);
    expect({ code: 'ERR_LLP_ABORTED' }).not.toBeInstanceOf(RddpAbortError);
  });

  it('an error from another copy of @rddp/llp is recognised by its registered brand', () => {
    class ForeignAbortError extends Error {
      readonly code = 'ERR_LLP_ABORTED';
    }
    Object.defineProperty(ForeignAbortError.prototype, Symbol.for('rddp.error'), { value: true });
    Object.defineProperty(ForeignAbortError.prototype, Symbol.for('rddp.error.aborted'), { value: true });
    expect(isRddpError(new ForeignAbortError(), 'ERR_LLP_ABORTED')).toBe(true);
    expect(new ForeignAbortError()).toBeInstanceOf(RddpAbortError);
    expect(isRddpError(new Error('plain'))).toBe(false);
    expect(isRddpError(Object.assign(new Error('coded'), { code: 'ERR_LLP_ABORTED' }))).toBe(false);
    expect(isRddpError(undefined)).toBe(false);
  });

  it('cause is kept, and the brand is not an own property', () => {
    const cause = new Error('signal');
    const e = new ddp.DdpAbortError('aborted', { cause });
    expect(e.cause).toBe(cause);
    expect(Object.getOwnPropertySymbols(e)).toEqual([]);
    expect(Object.keys(e)).toEqual(['name', 'code']);
  });
});

describe('errors of a condition with data keep it as typed fields and build their message from it', () => {
  it('LLP: AddressInUseError, LlpAddressResolutionError, ResourceLimitError', () => {
    const cause = Object.assign(new Error('getaddrinfo ENOTFOUND no.such.host'), { code: 'ENOTFOUND' });
    expect(new llp.AddressInUseError('127.0.0.1:7174', { cause })).toMatchObject({
      address: '127.0.0.1:7174',
      message: '127.0.0.1:7174 is already in use',
      cause,
    });
    expect(new llp.LlpAddressResolutionError('no.such.host', 'ENOTFOUND', { cause })).toMatchObject({
      host: 'no.such.host',
      reason: 'ENOTFOUND',
      message: 'cannot resolve no.such.host: ENOTFOUND',
      cause,
    });
    expect(new llp.ResourceLimitError('listener: 16 connections', 'connection from 10.0.0.1:4000')).toMatchObject({
      limit: 'listener: 16 connections',
      refused: 'connection from 10.0.0.1:4000',
      message: 'limit reached (listener: 16 connections): connection from 10.0.0.1:4000 refused',
    });
  });

  it('RDMAP: LlpFailedError keeps where the LLP failed and its error; InvalidTerminateError the problem', () => {
    const crc = new Error('MPA CRC mismatch');
    expect(new rdmap.LlpFailedError('receive', crc)).toMatchObject({
      during: 'receive',
      cause: crc,
      message: 'LLP receive error: MPA CRC mismatch',
    });
    expect(new rdmap.InvalidTerminateError('refused by DDP')).toMatchObject({
      problem: 'refused by DDP',
      message: 'malformed Terminate: refused by DDP',
    });
  });

  it('verbs: InvalidMrError and SgeRangeError keep the element, the STag and the extent', () => {
    expect(new verbs.InvalidMrError('a gather element', 0x1234_5601, 'is invalidated')).toMatchObject({
      element: 'a gather element',
      stag: 0x1234_5601,
      problem: 'is invalidated',
      message: 'a gather element: memory region 0x12345601 is invalidated',
    });
    expect(new verbs.SgeRangeError('a gather element', 8, 16, { stag: 0x1234_5601, regionLength: 16 })).toMatchObject({
      offset: 8,
      length: 16,
      bound: { stag: 0x1234_5601, regionLength: 16 },
      message: 'a gather element: [8, +16) is outside memory region 0x12345601 of 16 octets',
    });
    expect(
      new verbs.SgeRangeError('the result element of an atomic (RFC 7306)', 0, 4, { exactLength: 8 }),
    ).toMatchObject({
      length: 4,
      bound: { exactLength: 8 },
      message: 'the result element of an atomic (RFC 7306) is 4 octets; it must be 8',
    });
  });
});
