/**
 * The STag table of the Tagged Buffer Model (RFC 5041 §5.1.1, RFC 5040 §2.2, RFC 5042 §5): each STag is a
 * 24-bit index and an 8-bit consumer key. A region is caller-owned memory with a base Tagged Offset
 * (0 for zero-based regions, any 64-bit value for address-based ones), access rights, a protection
 * domain, and a valid/invalid state. Re-registering an index bumps the key, so a stale STag stays invalid.
 */
import type { AccessFlags, MemoryRegion, StagTableApi } from './api.js';
import { DdpInvalidArgumentError, StagTableFullError, UnknownStagError } from './errors.js';
import { MAX_SAFE_TO } from './header.js';

const MAX_INDEX = 0xff_ffff;
const MAX_TO = (1n << 64n) - 1n;

export interface RegisterOptions {
  readonly pdId: number;
  readonly buffer: Uint8Array;
  readonly access: AccessFlags;
  /** Tagged Offset of buffer[0] (address-based regions); 0n (zero-based) by default. */
  readonly baseTo?: bigint;
  /** Register only `length` octets of `buffer` from its start (default: all of it). */
  readonly length?: number;
  /** Consumer key (8 bits) to use; by default the table picks the next one for the index. */
  readonly key?: number;
}

class Region implements MemoryRegion {
  valid = true;
  /** Last octet's TO + 1, for the bounds check without bigint on every segment. */
  readonly endTo: bigint;
  constructor(
    readonly stag: number,
    readonly pdId: number,
    readonly buffer: Uint8Array,
    readonly baseTo: bigint,
    readonly length: number,
    readonly access: AccessFlags,
  ) {
    this.endTo = baseTo + BigInt(length);
  }
}

export class StagTable implements StagTableApi {
  private readonly regions = new Map<number, Region>();
  private readonly keys = new Map<number, number>();
  private nextIndex = 1; // index 0 is left unused: STag 0 is RFC 5040's "no STag" in several fields
  private registeredBytes = 0;
  /**
   * Limits (RFC 5042 resource consumption): at most `maxRegions` regions and `maxRegisteredBytes` octets
   * registered at once; beyond them `register` throws `StagTableFullError`.
   */
  constructor(
    private readonly maxRegions = 1 << 20,
    private readonly maxRegisteredBytes = Number.MAX_SAFE_INTEGER,
  ) {}

  /** Octets registered now. */
  get bytes(): number {
    return this.registeredBytes;
  }

  get size(): number {
    return this.regions.size;
  }

  /** Registers a region and returns it with its new STag. */
  register(o: RegisterOptions): MemoryRegion {
    if (!(o.buffer instanceof Uint8Array)) throw new DdpInvalidArgumentError('buffer must be a Uint8Array');
    const length = o.length ?? o.buffer.length;
    if (!Number.isInteger(length) || length < 0 || length > o.buffer.length)
      throw new DdpInvalidArgumentError(`length ${length} is outside the buffer's ${o.buffer.length} octets`);
    const baseTo = o.baseTo ?? 0n;
    if (baseTo < 0n || baseTo + BigInt(length) - 1n > MAX_TO)
      throw new DdpInvalidArgumentError('the region would extend past TO 2^64-1 (RFC 5041 §7.1: TO must not wrap)');
    if (!Number.isInteger(o.pdId) || o.pdId < 0)
      throw new DdpInvalidArgumentError(`invalid protection domain ${o.pdId}`);
    if (o.key !== undefined && (!Number.isInteger(o.key) || o.key < 0 || o.key > 0xff))
      throw new DdpInvalidArgumentError(`consumer key ${o.key} is not 8 bits`);
    if (this.regions.size >= this.maxRegions)
      throw new StagTableFullError(`the STag table holds its limit of ${this.maxRegions} regions`);
    if (this.registeredBytes + length > this.maxRegisteredBytes)
      throw new StagTableFullError(
        `registering ${length} octets would pass the limit of ${this.maxRegisteredBytes} registered octets (${this.registeredBytes} in use)`,
      );
    const index = this.freeIndex();
    const key = o.key ?? ((this.keys.get(index) ?? -1) + 1) & 0xff;
    this.keys.set(index, key);
    const stag = ((index << 8) | key) >>> 0;
    const r = new Region(stag, o.pdId, o.buffer.subarray(0, length), baseTo, length, o.access);
    this.regions.set(index, r);
    this.registeredBytes += length;
    return r;
  }

  /** The region `stag` names — exact key match required — or undefined. Invalidated regions are returned with `valid: false`. */
  lookup(stag: number): MemoryRegion | undefined {
    const r = this.regions.get(stag >>> 8);
    return r && r.stag === stag >>> 0 ? r : undefined;
  }

  /** Invalidates `stag` (local invalidation, or remote by Send with Invalidate, RFC 5040 §5.3). */
  invalidate(stag: number): MemoryRegion {
    const r = this.regions.get(stag >>> 8);
    if (!r || r.stag !== stag >>> 0)
      throw new UnknownStagError(`STag 0x${(stag >>> 0).toString(16)} is not registered`);
    r.valid = false;
    return r;
  }

  /** Makes an invalidated `stag` valid again (a re-registration keeping the STag). */
  revalidate(stag: number): MemoryRegion {
    const r = this.regions.get(stag >>> 8);
    if (!r || r.stag !== stag >>> 0)
      throw new UnknownStagError(`STag 0x${(stag >>> 0).toString(16)} is not registered`);
    r.valid = true;
    return r;
  }

  /** Removes `stag`; its index may be reused later with another key. */
  deregister(stag: number): void {
    const r = this.regions.get(stag >>> 8);
    if (!r || r.stag !== stag >>> 0)
      throw new UnknownStagError(`STag 0x${(stag >>> 0).toString(16)} is not registered`);
    r.valid = false;
    this.regions.delete(stag >>> 8);
    this.registeredBytes -= r.length;
  }

  private freeIndex(): number {
    for (let tries = 0; tries <= MAX_INDEX; tries++) {
      const i = this.nextIndex;
      this.nextIndex = i >= MAX_INDEX ? 1 : i + 1;
      if (!this.regions.has(i)) return i;
    }
    throw new StagTableFullError('no free STag index');
  }
}

/** The exact placement check of RFC 5041 §7.1 (tagged, checks 3–5) for `length` octets at `to`. */
export function regionOffset(r: MemoryRegion, to: bigint, length: number): number | 'bounds' | 'wrap' {
  if (to <= MAX_SAFE_TO && r.baseTo <= MAX_SAFE_TO) {
    // Both below 2^53: exact in numbers, no bigint allocated; TO + length cannot reach 2^64.
    const off = Number(to) - Number(r.baseTo);
    return off < 0 || off + length > r.length ? 'bounds' : off;
  }
  const end = to + BigInt(length);
  if (end > MAX_TO + 1n) return 'wrap';
  if (to < r.baseTo || end > r.baseTo + BigInt(r.length)) return 'bounds';
  return Number(to - r.baseTo);
}
