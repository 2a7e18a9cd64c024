/** A protection domain (ibv_pd): the memory regions and queue pairs that may serve one another (RFC 5040 §8.1.1). */
import { type AccessFlags, Access as DdpAccess, type StagTable } from '@rddp/ddp';
import { ACCESS_REMOTE_ATOMIC } from '@rddp/rdmap';
import type { CompletionQueue } from './cq.js';
import type { ProtectionDomainRef } from './domain.js';
import { AccessError, InvalidWorkRequestError, ResourceBusyError } from './errors.js';
import { Mr } from './mr.js';
import { QueuePair } from './qp.js';
import type { QpInit } from './qp-options.js';

/** The device a protection domain is made on; `Device` implements it (device.ts imports this file, not back). */
export interface PdDevice {
  readonly stags: StagTable;
  allocPd(): ProtectionDomain;
  createCq(): CompletionQueue;
  /** @internal */
  allocQpNum(): number;
}

/**
 * The rule of ibv_reg_mr: a region the peer may write into (Remote Write) or run atomics on (Remote
 * Atomic, RFC 7306) must be writable locally too (Local Write); without it ibv_reg_mr fails with EINVAL.
 */
function checkRegistrationAccess(access: AccessFlags): void {
  if ((access & DdpAccess.LocalWrite) !== 0) return;
  const remote = [
    ...((access & DdpAccess.RemoteWrite) !== 0 ? ['Remote Write'] : []),
    ...((access & ACCESS_REMOTE_ATOMIC) !== 0 ? ['Remote Atomic'] : []),
  ];
  if (remote.length > 0)
    throw new AccessError(
      `a memory region with ${remote.join(' and ')} access needs Local Write as well (add Access.LocalWrite; ibv_reg_mr refuses it with EINVAL)`,
    );
}

/** A protection domain (ibv_pd). */
export class ProtectionDomain implements ProtectionDomainRef {
  private readonly mrs = new Set<Mr>();
  private readonly qps = new Set<QueuePair>();
  private deallocated = false;

  /** @internal Made by `Device.allocPd`. */
  constructor(
    readonly device: PdDevice,
    readonly id: number,
  ) {}

  /** Memory regions registered and not deregistered. */
  get regions(): number {
    return this.mrs.size;
  }

  /**
   * Registers `buffer` with `access` rights (`Access.LocalWrite | Access.RemoteRead | ...`, and
   * `Access.RemoteAtomic` for RFC 7306 atomics) and returns
   * the region with its new STag. `baseTo` makes it address-based (the TO of `buffer[0]`); default 0.
   */
  registerMr(buffer: Uint8Array, access: AccessFlags, options: { baseTo?: bigint } = {}): Mr {
    this.assertUsable();
    if (!(buffer instanceof Uint8Array)) throw new InvalidWorkRequestError('a memory region must be a Uint8Array');
    if (!Number.isInteger(access) || access < 0 || access > 0x1f)
      throw new InvalidWorkRequestError(`access ${access} is not a combination of Access flags`);
    checkRegistrationAccess(access);
    const region = this.device.stags.register({
      pdId: this.id,
      buffer,
      access,
      ...(options.baseTo !== undefined ? { baseTo: options.baseTo } : {}),
    });
    const mr = new Mr(this, region, this.device.stags, (m) => this.mrs.delete(m));
    this.mrs.add(mr);
    return mr;
  }

  /** A new queue pair in this protection domain, in state `init`; `connect` it to an LLP stream. */
  createQp(init: QpInit): QueuePair {
    this.assertUsable();
    const qp = new QueuePair(this, this.device.allocQpNum(), init, (q) => this.qps.delete(q));
    this.qps.add(qp);
    return qp;
  }

  /** Frees the protection domain; refused while memory regions or open queue pairs remain. */
  dealloc(): void {
    if (this.deallocated) return;
    if (this.mrs.size > 0)
      throw new ResourceBusyError(`protection domain ${this.id} still has ${this.mrs.size} memory region(s)`);
    if (this.qps.size > 0)
      throw new ResourceBusyError(`protection domain ${this.id} still has ${this.qps.size} queue pair(s)`);
    this.deallocated = true;
  }

  private assertUsable(): void {
    if (this.deallocated) throw new ResourceBusyError(`protection domain ${this.id} was deallocated`);
  }
}
