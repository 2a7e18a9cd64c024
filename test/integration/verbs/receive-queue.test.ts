/** The receive queue's bound (QpInit.maxRecvWr) holds for receives posted together, as for one at a time. */
import { Access, Device, isVerbsError } from '@rddp/verbs';
import { describe, expect, it } from 'vitest';

describe('verbs: receive queue bound', () => {
  it('verbs: postRecv of more receives than maxRecvWr has room for throws ERR_VERBS_QUEUE_FULL and posts none', async () => {
    const pd = new Device().allocPd();
    const cq = pd.device.createCq();
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, maxRecvWr: 2 });
    const mr = pd.registerMr(new Uint8Array(12), Access.LocalWrite);
    const three = [0, 1, 2].map((i) => ({ wrId: i, sgList: [mr.sge(i * 4, 4)] as const }));
    let thrown: unknown;
    try {
      qp.postRecv(three);
    } catch (e) {
      thrown = e;
    }
    expect(isVerbsError(thrown, 'ERR_VERBS_QUEUE_FULL')).toBe(true);
    expect(qp.outstanding.recv).toBe(0);
    qp.postRecv(three.slice(0, 2));
    expect(qp.outstanding.recv).toBe(2);
    await qp.close();
  });
});
