/**
 * Issue 37 (seen in tools-end.test.ts under load): a perf client whose server is killed may fail posting
 * to a queue pair already in the error state (ERR_VERBS_QP_STATE) rather than on a flushed operation; the
 * tools still report why the run ended — the peer's reset or close — not the refused post.
 */
import type { LlpCloseEvent, LlpConnection } from '@rddp/llp';
import { QpStateError } from '@rddp/verbs';
import { Subject } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { PeerClosedError, PeerResetError, PeerWatch } from '../src/peer.js';

function watched(): { watch: PeerWatch; closed$: Subject<LlpCloseEvent> } {
  const closed$ = new Subject<LlpCloseEvent>();
  return { watch: new PeerWatch({ closed$ } as unknown as LlpConnection), closed$ };
}

describe('PeerWatch.explain', () => {
  it('a post refused because the QP is in the error state, after the peer reset: the reset', async () => {
    const { watch, closed$ } = watched();
    closed$.next({ graceful: false, initiator: 'remote' });
    const e = await watch.explain(
      new QpStateError("cannot post a send work request: the queue pair is in state 'error'"),
    );
    expect(e).toBeInstanceOf(PeerResetError);
    expect((e as Error).message).toBe('the peer reset the connection in mid-run');
  });

  it('the same after a graceful close by the peer: the close; after a local close: the error itself', async () => {
    const peer = watched();
    peer.closed$.next({ graceful: true, initiator: 'remote' });
    expect(await peer.watch.explain(new QpStateError('refused'))).toBeInstanceOf(PeerClosedError);
    const local = watched();
    local.closed$.next({ graceful: true, initiator: 'local' });
    const own = new QpStateError('refused');
    expect(await local.watch.explain(own)).toBe(own);
  });
});
