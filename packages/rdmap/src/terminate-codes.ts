/**
 * Terminate Control Field values (RFC 5040 §4.8 Figure 9; the DDP layer's values are RFC 5041 §7.2's)
 * and their names.
 */
import { DDP_ERROR_TYPE_NAMES, DdpErrorType, ddpErrorDescription } from '@rddp/ddp';
import { codesByKey } from '@rddp/llp';

/** Terminate Control "Layer" (Figure 9). */
export const TerminateLayer = { Rdma: 0b0000, Ddp: 0b0001, Llp: 0b0010 } as const;
export type TerminateLayer = (typeof TerminateLayer)[keyof typeof TerminateLayer];

/** RDMA-layer Error Types (Figure 9). */
export const RdmaErrorType = { LocalCatastrophic: 0b0000, RemoteProtection: 0b0001, RemoteOperation: 0b0010 } as const;
export type RdmaErrorType = (typeof RdmaErrorType)[keyof typeof RdmaErrorType];

/** The RDMA-layer Error Types' names (Figure 9). */
export const RDMA_ERROR_TYPE_NAMES: Readonly<Record<RdmaErrorType, string>> = {
  0: 'Local Catastrophic Error',
  1: 'Remote Protection Error',
  2: 'Remote Operation Error',
};

/**
 * One RDMA-layer Error Code of Figure 9: its value, its name in `RdmaErrorCode`, its Error Code Name and
 * the Error Types it is defined under.
 */
export interface RdmaErrorCodeInfo {
  readonly code: number;
  readonly key: string;
  readonly name: string;
  readonly types: readonly RdmaErrorType[];
}

const PROTECTION = [RdmaErrorType.RemoteProtection] as const;
const OPERATION = [RdmaErrorType.RemoteOperation] as const;
const BOTH = [RdmaErrorType.RemoteProtection, RdmaErrorType.RemoteOperation] as const;
const RDMA_ERROR_CODE_ROWS = [
  { code: 0x00, key: 'InvalidStag', name: 'Invalid STag', types: PROTECTION },
  { code: 0x01, key: 'BaseOrBoundsViolation', name: 'Base or bounds violation', types: PROTECTION },
  { code: 0x02, key: 'AccessRightsViolation', name: 'Access rights violation', types: PROTECTION },
  { code: 0x03, key: 'StagNotAssociatedWithStream', name: 'STag not associated with RDMAP Stream', types: PROTECTION },
  { code: 0x04, key: 'ToWrap', name: 'TO wrap', types: PROTECTION },
  { code: 0x05, key: 'InvalidRdmapVersion', name: 'Invalid RDMAP version', types: OPERATION },
  { code: 0x06, key: 'UnexpectedOpcode', name: 'Unexpected OpCode', types: OPERATION },
  { code: 0x07, key: 'CatastrophicLocalized', name: 'Catastrophic error, localized to RDMAP Stream', types: OPERATION },
  { code: 0x08, key: 'CatastrophicGlobal', name: 'Catastrophic error, global', types: OPERATION },
  { code: 0x09, key: 'StagCannotBeInvalidated', name: 'STag cannot be Invalidated', types: BOTH },
  { code: 0xff, key: 'Unspecified', name: 'Unspecified Error', types: BOTH },
] as const satisfies readonly RdmaErrorCodeInfo[];

/** Figure 9's RDMA-layer Error Codes (Local Catastrophic Error has none: any value is acceptable). */
export const RDMA_ERROR_CODES: readonly RdmaErrorCodeInfo[] = RDMA_ERROR_CODE_ROWS;

/** RDMA-layer Error Codes (Figure 9). 0x09 and 0xFF exist under both Remote Protection and Remote Operation. */
export const RdmaErrorCode = codesByKey(RDMA_ERROR_CODE_ROWS, 'code');
export type RdmaErrorCode = (typeof RdmaErrorCode)[keyof typeof RdmaErrorCode];

/** Figure 9's Error Code Name of a code under an RDMA-layer Error Type, or undefined where the figure defines none. */
export function rdmaErrorCodeName(errorType: number, errorCode: number): string | undefined {
  return RDMA_ERROR_CODES.find((c) => c.code === errorCode && c.types.includes(errorType as RdmaErrorType))?.name;
}

/** DDP-layer Error Types as they go on the wire (RFC 5041 §7.2; RFC 5040 Figure 9 defers to it). */
export const DdpWireErrorType = DdpErrorType;

/** The fields of a Terminate Control that name the error. */
export interface TerminateErrorName {
  readonly layer: number;
  readonly errorType: number;
  readonly errorCode: number;
}

/**
 * A human-readable name for a Terminate's Layer/EType/Error Code (Figure 9, RFC 5041 §7.2). A code the
 * figures do not define under its Error Type is shown as its number.
 */
export function describeTerminate(t: TerminateErrorName): string {
  const code = `0x${t.errorCode.toString(16).padStart(2, '0')}`;
  if (t.layer === TerminateLayer.Rdma) {
    const type = (RDMA_ERROR_TYPE_NAMES as Record<number, string | undefined>)[t.errorType] ?? `EType ${t.errorType}`;
    if (t.errorType === RdmaErrorType.LocalCatastrophic) return `RDMA: ${type}`;
    return `RDMA: ${type}: ${rdmaErrorCodeName(t.errorType, t.errorCode) ?? code}`;
  }
  if (t.layer === TerminateLayer.Ddp) {
    if (t.errorType === DdpErrorType.LocalCatastrophic) return `DDP: ${DDP_ERROR_TYPE_NAMES[t.errorType]}`;
    if (t.errorType === DdpErrorType.TaggedBuffer || t.errorType === DdpErrorType.UntaggedBuffer)
      return `DDP: ${DDP_ERROR_TYPE_NAMES[t.errorType]}: ${ddpErrorDescription(t.errorType, t.errorCode) ?? code}`;
    return `DDP: EType ${t.errorType}, code ${code}`;
  }
  if (t.layer === TerminateLayer.Llp) return `LLP: EType ${t.errorType}, code ${code}`;
  return `Layer ${t.layer}: EType ${t.errorType}, code ${code}`;
}
