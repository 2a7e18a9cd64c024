/** RFC 5041 §7.2 "DDP Error Numbers": the one table the error codes and their Descriptions come from. */
import { describe, expect, it } from 'vitest';
import { DDP_ERRORS, DdpErrorType, ddpErrorDescription, TaggedErrorCode, UntaggedErrorCode } from '../src/index.js';

describe('RFC 5041 §7.2 DDP Error Numbers', () => {
  it('the table has the RFC rows: Error Type, Error Code, Description', () => {
    expect(DDP_ERRORS.map((e) => [e.type, e.code, e.description])).toEqual([
      [0x0, 0x00, 'Local Catastrophic'],
      [0x1, 0x00, 'Invalid STag'],
      [0x1, 0x01, 'Base or bounds violation'],
      [0x1, 0x02, 'STag not associated with DDP Stream'],
      [0x1, 0x03, 'TO wrap'],
      [0x1, 0x04, 'Invalid DDP version'],
      [0x2, 0x01, 'Invalid QN'],
      [0x2, 0x02, 'Invalid MSN - no buffer available'],
      [0x2, 0x03, 'Invalid MSN - MSN range is not valid'],
      [0x2, 0x04, 'Invalid MO'],
      [0x2, 0x05, 'DDP Message too long for available buffer'],
      [0x2, 0x06, 'Invalid DDP version'],
    ]);
  });

  it('the codes of each buffer model come from its rows; a Description is found by Error Type and Error Code', () => {
    expect(TaggedErrorCode).toEqual({
      InvalidStag: 0x00,
      BaseOrBoundsViolation: 0x01,
      StagNotAssociatedWithStream: 0x02,
      ToWrap: 0x03,
      InvalidDdpVersion: 0x04,
    });
    expect(UntaggedErrorCode).toEqual({
      InvalidQn: 0x01,
      InvalidMsnNoBufferAvailable: 0x02,
      InvalidMsnRangeNotValid: 0x03,
      InvalidMo: 0x04,
      MessageTooLong: 0x05,
      InvalidDdpVersion: 0x06,
    });
    expect(ddpErrorDescription(DdpErrorType.TaggedBuffer, 0x01)).toBe('Base or bounds violation');
    expect(ddpErrorDescription(DdpErrorType.UntaggedBuffer, 0x04)).toBe('Invalid MO');
    // Untagged 0x00 and Tagged 0x05 are not in the table.
    expect(ddpErrorDescription(DdpErrorType.UntaggedBuffer, 0x00)).toBeUndefined();
    expect(ddpErrorDescription(DdpErrorType.TaggedBuffer, 0x05)).toBeUndefined();
  });
});
