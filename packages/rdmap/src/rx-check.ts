/**
 * RDMAP receive checks (RFC 5040 §7.2), run by DDP on every incoming segment before it places a byte
 * (DdpStreamOptions.ulpCheck): RDMAP Version, the OpCode against the Tagged flag and Queue Number (the
 * opcode table), RDMA Write access rights, a Read Response against the outstanding Read, a Read
 * Request's length, a Send with Invalidate's STag, and RFC 7306 messages on a stream that enabled them.
 */
import {
  Access,
  type DdpHeader,
  type MemoryRegion,
  stagHex,
  type UlpCheckFailure,
  type UlpSegmentCheck,
} from '@rddp/ddp';
import { controlOf, decodeUntaggedRsvdUlp, READ_REQUEST_HEADER_LENGTH } from './header.js';
import { type ExtensionOpcodeInfo, RDMAP_OPCODES, RdmapOpcode } from './opcode.js';
import { rdmapFailure as fail } from './outstanding.js';
import type { StreamState } from './stream-state.js';
import { RdmaErrorCode, RdmaErrorType } from './terminate-codes.js';

/**
 * RFC 5040 §7.2 checks 4–5 of an incoming Send with Invalidate (and §5.3): the Invalidate STag must be
 * valid, and associated with this stream ("STag Cannot be Invalidated" otherwise, §5.3); and remote
 * invalidation must be allowed for it (RFC 5040 §8.1.1).
 */
export function checkInvalidate(st: StreamState, stag: number): UlpCheckFailure | undefined {
  const region = st.lookup(stag);
  if (region === undefined || !region.valid)
    return fail(
      RdmaErrorType.RemoteProtection,
      RdmaErrorCode.InvalidStag,
      `Send with Invalidate: STag ${stagHex(stag)} is not valid (RFC 5040 §7.2 4)`,
    );
  if (region.pdId !== st.pdId)
    return fail(
      RdmaErrorType.RemoteProtection,
      RdmaErrorCode.StagCannotBeInvalidated,
      `Send with Invalidate: STag ${stagHex(stag)} is not associated with this RDMAP Stream (RFC 5040 §5.3, §7.2 5)`,
    );
  if (!st.canRemoteInvalidate(region))
    return fail(
      RdmaErrorType.RemoteProtection,
      RdmaErrorCode.StagCannotBeInvalidated,
      `Send with Invalidate: STag ${stagHex(stag)} may not be invalidated by the peer (RFC 5040 §5.3)`,
    );
  return undefined;
}

/**
 * DdpStreamOptions.ulpCheck: RFC 5040 §7.2 checks 2–5 on each segment, before placement. DDP ran its
 * DV check first and runs its own STag/bounds or QN/MSN/MO checks after this one; where DDP has a
 * check of its own (an unknown STag, a foreign protection domain, a queue beyond RDMAP's three), this
 * one leaves the segment to it.
 */
export function ulpCheckFor(st: StreamState): UlpSegmentCheck {
  return (header: DdpHeader, payloadLength: number, region: MemoryRegion | undefined): UlpCheckFailure | undefined => {
    if (st.rxBlocked)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.CatastrophicLocalized,
        'the RDMAP Stream is terminating: nothing more is placed (RFC 5040 §5.4)',
      );
    const control = controlOf(header); // per segment: plain bit operations, no allocation
    const rv = control >>> 6;
    const opcode = control & 0x0f;
    if (rv !== st.rv)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.InvalidRdmapVersion,
        `RDMAP Version ${rv}, this stream runs version ${st.rv} (RFC 5040 §4.1, §7.2 3)`,
      );
    const info = RDMAP_OPCODES[opcode];
    if (info === undefined)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `reserved RDMA OpCode ${opcode} (RFC 5040 §4.1 Figure 4, §7.2 2)`,
      );
    if (info.extension !== undefined) {
      if (st.extensions[info.extension]) return checkExtension(st, info as ExtensionOpcodeInfo, header, payloadLength);
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} (RFC 7306), but this stream did not enable ${info.extension} (RFC 5040 §7.2 2)`,
      );
    }
    if (info.tagged !== header.tagged)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} in a${header.tagged ? ' tagged' : 'n untagged'} DDP segment (RFC 5040 Figure 4, §7.2 2)`,
      );
    if (header.tagged) {
      // An unknown or foreign STag is DDP's error to report (RFC 5041 §7.2); leave it to DDP.
      if (region === undefined && payloadLength > 0) return undefined;
      if (opcode === RdmapOpcode.RdmaReadResponse)
        return st.reads.checkResponseSegment(header.stag, header.to, payloadLength, header.last);
      if (region !== undefined && payloadLength > 0 && (region.access & Access.RemoteWrite) === 0)
        return fail(
          RdmaErrorType.RemoteProtection,
          RdmaErrorCode.AccessRightsViolation,
          `RDMA Write to STag ${stagHex(header.stag)}, which does not allow remote writes (RFC 5040 §8.1.1)`,
        );
      return undefined;
    }
    // Untagged: a queue beyond the stream's is DDP's "Invalid QN" (RFC 5041 §7.2).
    if (header.qn < st.queueCount && header.qn !== info.qn)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.UnexpectedOpcode,
        `${info.name} on queue ${header.qn}; RFC 5040 Figure 4 puts it on queue ${info.qn} (§7.2 2)`,
      );
    if (opcode === RdmapOpcode.RdmaReadRequest && header.last && header.mo + payloadLength < READ_REQUEST_HEADER_LENGTH)
      return fail(
        RdmaErrorType.RemoteOperation,
        RdmaErrorCode.Unspecified,
        `RDMA Read Request of ${header.mo + payloadLength} octets; its header has ${READ_REQUEST_HEADER_LENGTH} (RFC 5040 §4.4)`,
      );
    if (info.invalidateStag) return checkInvalidate(st, decodeUntaggedRsvdUlp(header.rsvdUlp).invalidateStag);
    return undefined;
  };
}

/**
 * RFC 7306 messages on a stream that enabled them: untagged, on their queue (RFC 5040 §7.2 2 applied to
 * RFC 7306's table), and exactly as long as their header; an Atomic Response only while an Atomic
 * Request is outstanding. A longer Atomic Request overflows its 52-octet buffer: DDP's own error.
 */
function checkExtension(
  st: StreamState,
  ext: ExtensionOpcodeInfo,
  header: DdpHeader,
  payloadLength: number,
): UlpCheckFailure | undefined {
  if (header.tagged)
    return fail(
      RdmaErrorType.RemoteOperation,
      RdmaErrorCode.UnexpectedOpcode,
      `${ext.name} in a tagged DDP segment (RFC 7306: untagged, QN ${ext.qn})`,
    );
  if (header.qn < st.queueCount && header.qn !== ext.qn)
    return fail(
      RdmaErrorType.RemoteOperation,
      RdmaErrorCode.UnexpectedOpcode,
      `${ext.name} on queue ${header.qn}; RFC 7306 puts it on queue ${ext.qn} (RFC 5040 §7.2 2)`,
    );
  if (header.qn !== ext.qn) return undefined; // beyond the stream's queues: DDP's Invalid QN
  const end = header.mo + payloadLength;
  const short = header.last && end < ext.headerLength;
  if (short || (ext.rdmaHeader !== 'atomic-request' && end > ext.headerLength))
    return fail(
      RdmaErrorType.RemoteOperation,
      RdmaErrorCode.Unspecified,
      `${ext.name} of ${end}${header.last ? '' : '+'} octets; it is exactly ${ext.headerLength} (RFC 7306)`,
    );
  if (ext.rdmaHeader === 'atomic-response') return st.atomics.checkResponseSegment(header.last);
  return undefined;
}
