/**
 * @rddp/llp-mpa-tcp — MPA (RFC 5044; RFC 6581 enhanced connection establishment; the RDMA Consortium
 * profile, Rev 0) over `node:net` TCP, as an rddp LLP plugin. Rule sources: README.md.
 *
 * @example mpaTcpModule: a stack on MPA/TCP, both ends on 127.0.0.1, CRC required (RFC 5044 §7.1)
 * ```ts
 * import { mpaTcpModule } from '@rddp/llp-mpa-tcp';
 * import { createStack } from '@rddp/stack';
 *
 * const stack = createStack(mpaTcpModule({ params: { crc: true } }));
 * const [initiator, responder] = await stack.pair({ host: '127.0.0.1', port: 0 });
 * console.log(initiator.setup.negotiated); // revision, crc, markersRx, markersTx, ird, ord, ...
 * await initiator.close();
 * responder.abort();
 * ```
 * @packageDocumentation
 */
export { isCongestionControlName } from './congestion.js';
export { MpaTcpConnection, mpaCapabilities } from './connection.js';
export {
  CRC32C_BACKENDS,
  Crc32cBackendMissingError,
  Crc32cBackendUnknownError,
  chooseCrc32cBackend,
  crc32c,
  crc32cBackend,
  crc32cRange,
  readCrc,
  writeCrc,
} from './crc.js';
export { MpaCrcError, MpaErrorCode, MpaFpduNotSentError, MpaProtocolError, type MpaViolation } from './errors.js';
export {
  type ChunkSink,
  FpduReader,
  type FpduReaderOptions,
  FpduWriter,
  type FpduWriterOptions,
  fpduLength,
  INLINE_DEFAULT,
  INLINE_MAX,
  type MarkerFraming,
} from './fpdu.js';
export {
  decodeEnhancedData,
  decodeFrame,
  type EnhancedData,
  encodeEnhancedData,
  encodeFrame,
  type FrameFields,
  MPA_ENHANCED_DATA_LENGTH,
  MPA_FLAG_C,
  MPA_FLAG_ENHANCED,
  MPA_FLAG_M,
  MPA_FLAG_R,
  MPA_KEY_REP,
  MPA_KEY_REQ,
  MPA_MAX_PD_LENGTH,
  type MpaFrame,
  ulpPrivateData,
} from './frames.js';
export { FrameCollector } from './handshake.js';
export { MpaTcpListener } from './listener.js';
export { MARKER_INTERVAL, MULPDU_MAX, MULPDU_MIN, mulpduForEmss, padLength } from './markers.js';
export { mpaTcpModule } from './module.js';
export {
  buildReply,
  buildRequest,
  evaluateReply,
  evaluateRequest,
  type IetfMode,
  INITIATOR_DEFAULTS,
  type MpaNegotiated,
  type MpaParams,
  type MpaRevision,
  maxUlpPrivateData,
  RESPONDER_DEFAULTS,
  type ReplyOutcome,
  type RequestOutcome,
  type ResolvedMpaParams,
  type ResponderOffer,
  type RtrType,
  resolveParams,
} from './negotiation.js';
export {
  DirectSendUnavailableError,
  emssFor,
  LOOPBACK_EMSS,
  type MpaTcpOptions,
  ULPDU_LENGTH_FIELD_MAX,
} from './options.js';
export { checkReadResponse, checkRtr, encodeReadResponse, encodeRtr } from './rtr.js';
export { MpaTcpStream } from './stream.js';
export { MpaTcpTransport, mpaTcp } from './transport.js';
