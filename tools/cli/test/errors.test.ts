/**
 * The tools' own errors sit under the one root of every rddp error (`RddpError`, @rddp/llp): matched by
 * `isRddpError` and their stable `code`, named by their class, and still ending a run as before (one
 * line on stderr with the code; a usage error with status 2).
 */
import { isRddpError, RddpError } from '@rddp/llp';
import { describe, expect, it } from 'vitest';
import { FuzzFailure } from '../src/fuzz/targets.js';
import { PeerClosedError, PeerEndedError, PeerResetError, PeerTerminatedError } from '../src/peer.js';
import { UsageError } from '../src/transports.js';

describe('tool errors are RddpErrors with stable codes', () => {
  const cases: [string, Error, string][] = [
    ['UsageError', new UsageError('--size must be positive'), 'ERR_RDDP_USAGE'],
    ['FuzzFailure', new FuzzFailure('mpa-fpdu, seed 7: ULPDU 0 delivered altered'), 'ERR_RDDP_FUZZ'],
    ['PeerTerminatedError', new PeerTerminatedError('RDMA: Remote Operation Error'), 'ERR_RDDP_PEER_TERMINATED'],
    ['PeerResetError', new PeerResetError(), 'ERR_RDDP_PEER_RESET'],
    ['PeerClosedError', new PeerClosedError(), 'ERR_RDDP_PEER_CLOSED'],
  ];

  it.each(cases)('%s is an RddpError with its code and its class name', (name, e, code) => {
    expect(e).toBeInstanceOf(RddpError);
    expect(isRddpError(e, code)).toBe(true);
    expect((e as RddpError).code).toBe(code);
    expect(e.name).toBe(name);
  });

  it('the peer errors stay one family, and keep their messages and cause', () => {
    const cause = new Error('flushed');
    const e = new PeerResetError({ cause });
    expect(e).toBeInstanceOf(PeerEndedError);
    expect(new PeerClosedError()).toBeInstanceOf(RddpError);
    expect(new PeerClosedError()).toBeInstanceOf(PeerEndedError);
    expect(e.cause).toBe(cause);
    expect(e.message).toBe('the peer reset the connection in mid-run');
    expect(new PeerTerminatedError('why').message).toBe('the peer terminated the connection: why');
    expect(new UsageError('x')).not.toBeInstanceOf(PeerEndedError);
  });

  it('a usage error, an RddpError now, still ends the process with status 2', () => {
    expect(isRddpError(new UsageError('bad flag'), 'ERR_RDDP_USAGE')).toBe(true);
    expect(new UsageError('bad flag').exitCode).toBe(2);
    expect(new UsageError('bad flag').message).toBe('bad flag');
  });
});
