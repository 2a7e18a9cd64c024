/** Shared by the verbs integration tests: two hosts with a connected queue pair each, over the loopback LLP. */
import { createLoopbackPair } from '@rddp/llp-loopback';
import type { CompletionQueue, DdpProfile, Device, QueuePair, RdmapExtensions, WorkCompletion } from '@rddp/verbs';

import { host } from '../../../packages/verbs/test/support/hosts.js';

export { until } from '../rdmap/helpers.js';

export interface End {
  device: Device;
  pd: ReturnType<Device['allocPd']>;
  cq: CompletionQueue;
  qp: QueuePair;
  wcs: WorkCompletion[];
}

export interface EndOptions {
  readonly profile?: DdpProfile;
  readonly ord?: number;
  readonly ird?: number;
  readonly maxSendWr?: number;
  /** RFC 7306 extensions this end enables. */
  readonly extensions?: RdmapExtensions;
}

/** Two hosts (two devices), each with one CQ and a queue pair connected to the other's. */
export async function connectedPair(a: EndOptions = {}, b: EndOptions = a): Promise<{ a: End; b: End }> {
  const [ca, cb] = await createLoopbackPair();
  const make = ({ extensions: _, ...init }: EndOptions): End => host(init);
  const ea = make(a);
  const eb = make(b);
  ea.qp.connect(ca, a.extensions ? { extensions: a.extensions } : {});
  eb.qp.connect(cb, b.extensions ? { extensions: b.extensions } : {});
  return { a: ea, b: eb };
}

/** The `code` of what `fn` throws, or undefined. */
export function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
}
