/** Two hosts for the verbs tests: a device each, one protection domain, one CQ and a queue pair connected over memory. */
import {
  type CompletionQueue,
  Device,
  type ProtectionDomain,
  type QpInit,
  type QueuePair,
  type WorkCompletion,
} from '../../src/index.js';
import { memoryLlpPair } from './memory-llp.js';

export interface Host {
  readonly device: Device;
  readonly pd: ProtectionDomain;
  readonly cq: CompletionQueue;
  readonly qp: QueuePair;
  /** Every completion on `cq`, in order. */
  readonly wcs: WorkCompletion[];
}

export type HostInit = Omit<QpInit, 'sendCq' | 'recvCq'>;

/** A host whose queue pair is still in `init`. */
export function host(init: HostInit = {}): Host {
  const device = new Device();
  const pd = device.allocPd();
  const cq = device.createCq();
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, ...init });
  const wcs: WorkCompletion[] = [];
  cq.completions$.subscribe((wc) => wcs.push(wc));
  return { device, pd, cq, qp, wcs };
}

/** Two hosts, `a` the initiator and `b` the responder (RFC 5040 §6.1), their queue pairs connected. */
export function connectedHosts(a: HostInit = {}, b: HostInit = a): { a: Host; b: Host } {
  const [la, lb] = memoryLlpPair();
  const ha = host(a);
  const hb = host(b);
  ha.qp.connect(la, { role: 'initiator' });
  hb.qp.connect(lb, { role: 'responder' });
  return { a: ha, b: hb };
}

/** Resolves once `condition` holds (polled), or fails naming `what`. */
export async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** The `code` of what `fn` throws (undefined when it does not throw). */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
}

export const text = (s: string): Uint8Array => new TextEncoder().encode(s);
export const str = (b: Uint8Array): string => new TextDecoder().decode(b);
