/**
 * Terminate Control Field values (RFC 5040 §4.8 Figure 9; the DDP layer's values are RFC 5041 §7.2's)
 * and their names.
 */
/** Terminate Control "Layer" (Figure 9). */
export const TerminateLayer = { Rdma: 0b0000, Ddp: 0b0001, Llp: 0b0010 } as const;
export type TerminateLayer = (typeof TerminateLayer)[keyof typeof TerminateLayer];

/** RDMA-layer Error Types (Figure 9). */
export const RdmaErrorType = { LocalCatastrophic: 0b0000, RemoteProtection: 0b0001, RemoteOperation: 0b0010 } as const;
export type RdmaErrorType = (typeof RdmaErrorType)[keyof typeof RdmaErrorType];

/** RDMA-layer Error Codes (Figure 9). 0x09 and 0xFF exist under both Remote Protection and Remote Operation. */
export const RdmaErrorCode = {
  InvalidStag: 0x00,
  BaseOrBoundsViolation: 0x01,
  AccessRightsViolation: 0x02,
  StagNotAssociatedWithStream: 0x03,
  ToWrap: 0x04,
  InvalidRdmapVersion: 0x05,
  UnexpectedOpcode: 0x06,
  CatastrophicLocalized: 0x07,
  CatastrophicGlobal: 0x08,
  StagCannotBeInvalidated: 0x09,
  Unspecified: 0xff,
} as const;
export type RdmaErrorCode = (typeof RdmaErrorCode)[keyof typeof RdmaErrorCode];

/** DDP-layer Error Types as they go on the wire (RFC 5041 §7.2; RFC 5040 Figure 9 defers to it). */
export const DdpWireErrorType = { LocalCatastrophic: 0x0, TaggedBuffer: 0x1, UntaggedBuffer: 0x2, Llp: 0x3 } as const;

/** The fields of a Terminate Control that name the error. */
export interface TerminateErrorName {
  readonly layer: number;
  readonly errorType: number;
  readonly errorCode: number;
}

/** A human-readable name for a Terminate's Layer/EType/Error Code (Figure 9, RFC 5041 §7.2). */
export function describeTerminate(t: TerminateErrorName): string {
  const code = `0x${t.errorCode.toString(16).padStart(2, '0')}`;
  if (t.layer === TerminateLayer.Rdma) {
    const types = ['Local Catastrophic Error', 'Remote Protection Error', 'Remote Operation Error'];
    const codes: Record<number, string> = {
      0: 'Invalid STag',
      1: 'Base or bounds violation',
      2: 'Access rights violation',
      3: 'STag not associated with RDMAP Stream',
      4: 'TO wrap',
      5: 'Invalid RDMAP version',
      6: 'Unexpected OpCode',
      7: 'Catastrophic error, localized to RDMAP Stream',
      8: 'Catastrophic error, global',
      9: 'STag cannot be Invalidated',
      255: 'Unspecified Error',
    };
    const type = types[t.errorType] ?? `EType ${t.errorType}`;
    if (t.errorType === RdmaErrorType.LocalCatastrophic) return `RDMA: ${type}`;
    return `RDMA: ${type}: ${codes[t.errorCode] ?? code}`;
  }
  if (t.layer === TerminateLayer.Ddp) {
    const tagged: Record<number, string> = {
      0: 'Invalid STag',
      1: 'Base or bounds violation',
      2: 'STag not associated with DDP Stream',
      3: 'TO wrap',
      4: 'Invalid DDP version',
    };
    const untagged: Record<number, string> = {
      1: 'Invalid QN',
      2: 'Invalid MSN - no buffer available',
      3: 'Invalid MSN - MSN range is not valid',
      4: 'Invalid MO',
      5: 'DDP Message too long for available buffer',
      6: 'Invalid DDP version',
    };
    if (t.errorType === DdpWireErrorType.TaggedBuffer)
      return `DDP: Tagged Buffer Error: ${tagged[t.errorCode] ?? code}`;
    if (t.errorType === DdpWireErrorType.UntaggedBuffer)
      return `DDP: Untagged Buffer Error: ${untagged[t.errorCode] ?? code}`;
    if (t.errorType === DdpWireErrorType.LocalCatastrophic) return 'DDP: Local Catastrophic';
    return `DDP: EType ${t.errorType}, code ${code}`;
  }
  if (t.layer === TerminateLayer.Llp) return `LLP: EType ${t.errorType}, code ${code}`;
  return `Layer ${t.layer}: EType ${t.errorType}, code ${code}`;
}
