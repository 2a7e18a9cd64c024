/** A registered memory region (ibv_mr): caller-owned bytes with access rights, named by an STag (RFC 5040 §2.2). */
import type { AccessFlags, MemoryRegion, StagTable } from '@rddp/ddp';
import type { ProtectionDomainRef } from './domain.js';

/** Where an RDMA Write lands or an RDMA Read reads from: the peer's STag and Tagged Offset (RFC 5040 §5.1, §5.2). */
export interface RemoteBuffer {
  readonly stag: number;
  readonly to: bigint;
}

/** A scatter/gather element: `length` octets of a registered region from `offset` (defaults: all of it). */
export interface Sge {
  readonly mr: Mr;
  readonly offset?: number;
  readonly length?: number;
}

export class Mr {
  private deregistered = false;
  /**
   * @internal The view `view` made last, and its offset: the same element is posted again and again
   * (a view per posted work request cost as much as the rest of its checks).
   */
  lastView: Uint8Array | undefined;
  /** @internal */
  lastOffset = -1;

  /** @internal Created by `ProtectionDomain.registerMr`. */
  constructor(
    readonly pd: ProtectionDomainRef,
    /**
     * @internal The STag table's entry: the send path reads its fields directly (STag, bytes, access, and
     * `valid`, which deregistration clears too).
     */
    readonly region: MemoryRegion,
    private readonly table: StagTable,
    private readonly onDeregister: (mr: Mr) => void,
  ) {}

  /** The STag: what the peer names this region by (iWARP's lkey and rkey are the same STag). */
  get stag(): number {
    return this.region.stag;
  }
  /** The registered bytes; RDMA Writes, Read Responses and Sends are placed straight into them. */
  get buffer(): Uint8Array {
    return this.region.buffer;
  }
  get length(): number {
    return this.region.length;
  }
  get access(): AccessFlags {
    return this.region.access;
  }
  /** Tagged Offset of `buffer[0]` (0 for zero-based regions). */
  get baseTo(): bigint {
    return this.region.baseTo;
  }
  /** False once invalidated (locally, or by the peer's Send with Invalidate) or deregistered. */
  get valid(): boolean {
    return !this.deregistered && this.region.valid;
  }
  get isDeregistered(): boolean {
    return this.deregistered;
  }

  /** The remote descriptor of this region from `offset`: what a peer needs for an RDMA Write or Read. */
  remote(offset = 0): RemoteBuffer {
    return { stag: this.region.stag, to: this.region.baseTo + BigInt(offset) };
  }

  /** A scatter/gather element over `length` octets from `offset` (default: the rest of the region). */
  sge(offset = 0, length?: number): Sge {
    return length === undefined ? { mr: this, offset } : { mr: this, offset, length };
  }

  /** Local invalidation: the STag stops working for the peer and for local work requests at once. */
  invalidate(): void {
    if (this.deregistered || !this.region.valid) return;
    this.table.invalidate(this.region.stag);
  }

  /** Makes an invalidated region valid again under the same STag. */
  revalidate(): void {
    if (this.deregistered) return;
    this.table.revalidate(this.region.stag);
  }

  /** Removes the registration; the STag is never valid again. Idempotent. */
  deregister(): void {
    if (this.deregistered) return;
    this.deregistered = true;
    this.table.deregister(this.region.stag);
    this.onDeregister(this);
  }
}
