/** The device (ibv_context): an STag table and counters, and the protection domains made on it. */
import { StagTable } from '@rddp/ddp';
import { CompletionQueue } from './cq.js';
import { type PdDevice, ProtectionDomain } from './pd.js';

export interface DeviceOptions {
  /** Most memory regions registered at once (default 2^20). */
  readonly maxRegions?: number;
  /** Most octets registered at once (default: no limit beyond memory). */
  readonly maxRegisteredBytes?: number;
}

/**
 * One RDMA device: the STag table its memory regions live in (RFC 5041 §5.1.1) and the protection
 * domains, completion queues and queue pairs made on it. Two peers in one process use two devices.
 */
export class Device implements PdDevice {
  readonly stags: StagTable;
  private nextPd = 1;
  private nextQp = 1;

  constructor(options: DeviceOptions = {}) {
    this.stags = new StagTable(options.maxRegions, options.maxRegisteredBytes);
  }

  /** A new protection domain: its memory regions serve only its queue pairs (RFC 5040 §8.1.1). */
  allocPd(): ProtectionDomain {
    return new ProtectionDomain(this, this.nextPd++);
  }

  createCq(): CompletionQueue {
    return new CompletionQueue();
  }

  /** @internal */
  allocQpNum(): number {
    return this.nextQp++;
  }
}
