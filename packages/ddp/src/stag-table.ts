/**
 * The STag table of the Tagged Buffer Model (RFC 5041 §5.1.1, RFC 5040 §2.2, RFC 5042 §5): each STag is a
 * 24-bit index and an 8-bit consumer key. A region is caller-owned memory with a base Tagged Offset
 * (0 for zero-based regions, any 64-bit value for address-based ones), access rights, a protection
 * domain, and a valid/invalid state.
 *
 * STags are hard to predict (RFC 5040 §8 RNIC requirement 8, RFC 5042 §5.1.2): the index is drawn
 * uniformly from a CSPRNG among the free indexes, the key is random too. Index 0 (STags 0x00000000–
 * 0x000000ff: "no STag" in RFC 5040 fields, and the MPA RTR's STag 1) is never handed out. A freed
 * index sits in a quarantine of the last `STAG_QUARANTINE` freed indexes before it can be drawn again,
 * and a reused index never gets its previous key, so a stale STag stays invalid.
 */
import type { AccessFlags, MemoryRegion, StagTableApi } from './api.js';
import { DdpInvalidArgumentError, StagTableFullError, UnknownStagError } from './errors.js';
import { MAX_SAFE_TO, MAX_U64 } from './header.js';

const MAX_INDEX = 0xff_ffff;
/** Freed indexes held back before reuse: the last this many (RFC 5042 §5.1.2: no quick STag reuse). */
export const STAG_QUARANTINE = 1 << 16;
/** Random draws before falling back to a scan (only a nearly full index space gets there). */
const MAX_DRAWS = 64;

/** Pooled CSPRNG words (Web Crypto's getRandomValues: no Node import in the core): one fill per 1024 draws. */
const pool = new Uint32Array(1024);
let poolNext = pool.length;
function random32(): number {
  if (poolNext === pool.length) {
    globalThis.crypto.getRandomValues(pool);
    poolNext = 0;
  }
  return pool[poolNext++] as number;
}

/** Per-index history, 16 bits in pages of 256 indexes: USED | last key, and QUARANTINED while held back. */
const USED = 0x100;
const QUARANTINED = 0x200;
const PAGE_BITS = 8;

export interface RegisterOptions {
  readonly pdId: number;
  readonly buffer: Uint8Array;
  readonly access: AccessFlags;
  /** Tagged Offset of buffer[0] (address-based regions); 0n (zero-based) by default. */
  readonly baseTo?: bigint;
  /** Register only `length` octets of `buffer` from its start (default: all of it). */
  readonly length?: number;
  /** Consumer key (8 bits) to use; by default a random one. Either way it differs from the index's previous key. */
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
  /** Index history (see USED/QUARANTINED); pages made on first use, at most 2^16 of 512 octets. */
  private readonly history = new Map<number, Uint16Array>();
  /** FIFO ring of quarantined indexes, grown on demand up to STAG_QUARANTINE. */
  private quarantine = new Uint32Array(64);
  private qHead = 0;
  private qSize = 0;
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
    if (baseTo < 0n || baseTo + BigInt(length) - 1n > MAX_U64)
      throw new DdpInvalidArgumentError('the region would extend past TO 2^64-1 (RFC 5041 §7.1: TO must not wrap)');
    if (!Number.isInteger(o.pdId) || o.pdId < 0)
      throw new DdpInvalidArgumentError(`invalid protection domain ${o.pdId}`);
    if (o.key !== undefined && (!Number.isInteger(o.key) || o.key < 0 || o.key > 0xff))
      throw new DdpInvalidArgumentError(`consumer key ${o.key} is not 8 bits`);
    if (this.regions.size >= this.maxRegions)
      throw new StagTableFullError('regions', this.maxRegions, this.regions.size, 1);
    if (this.registeredBytes + length > this.maxRegisteredBytes)
      throw new StagTableFullError('registered octets', this.maxRegisteredBytes, this.registeredBytes, length);
    const index = this.freeIndex(o.key);
    const page = this.page(index);
    const slot = index & 0xff;
    const old = page[slot] as number;
    let key = o.key;
    if (key === undefined) {
      key = random32() & 0xff;
      // A reused index never gets its previous key (RFC 5040 §8: a stale STag must stay invalid).
      while ((old & USED) !== 0 && key === (old & 0xff)) key = random32() & 0xff;
    }
    page[slot] = USED | key;
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

  /** The region `stag` names (exact key match), valid or not; `UnknownStagError` if none. */
  private registered(stag: number): Region {
    const r = this.regions.get(stag >>> 8);
    if (!r || r.stag !== stag >>> 0) throw new UnknownStagError(stag >>> 0);
    return r;
  }

  /** Invalidates `stag` (local invalidation, or remote by Send with Invalidate, RFC 5040 §5.3). */
  invalidate(stag: number): MemoryRegion {
    const r = this.registered(stag);
    r.valid = false;
    return r;
  }

  /** Makes an invalidated `stag` valid again (a re-registration keeping the STag). */
  revalidate(stag: number): MemoryRegion {
    const r = this.registered(stag);
    r.valid = true;
    return r;
  }

  /** Removes `stag`; its index is quarantined, and reused only later and with another key. */
  deregister(stag: number): void {
    const r = this.registered(stag);
    r.valid = false;
    this.regions.delete(stag >>> 8);
    this.registeredBytes -= r.length;
    this.enqueueQuarantine(stag >>> 8);
  }

  /** Indexes quarantined now (at most `STAG_QUARANTINE`). */
  get quarantined(): number {
    return this.qSize;
  }

  /**
   * A uniformly random index among those free, out of quarantine, and (for a caller-chosen `key`) whose
   * previous key was not `key`. Draws are O(1) expected while the index space is mostly free.
   */
  private freeIndex(key: number | undefined): number {
    // Live plus quarantined must leave a free index: release the oldest quarantined ones if not.
    while (this.qSize > 0 && this.regions.size + this.qSize >= MAX_INDEX) this.dequeueQuarantine();
    for (let draw = 0; draw < MAX_DRAWS; draw++) {
      const i = random32() >>> 8;
      if (this.usable(i, key)) return i;
    }
    // Nearly full: scan from a random start.
    const start = random32() >>> 8;
    for (let n = 0; n <= MAX_INDEX; n++) {
      const i = (start + n) & MAX_INDEX;
      if (this.usable(i, key)) return i;
    }
    throw new StagTableFullError('STag indices', MAX_INDEX + 1, this.regions.size + this.qSize, 1);
  }

  private usable(i: number, key: number | undefined): boolean {
    if (i === 0 || this.regions.has(i)) return false;
    const h = this.history.get(i >>> PAGE_BITS)?.[i & 0xff] ?? 0;
    if ((h & QUARANTINED) !== 0) return false;
    return key === undefined || (h & USED) === 0 || (h & 0xff) !== key;
  }

  private page(i: number): Uint16Array {
    let p = this.history.get(i >>> PAGE_BITS);
    if (!p) {
      p = new Uint16Array(1 << PAGE_BITS);
      this.history.set(i >>> PAGE_BITS, p);
    }
    return p;
  }

  private enqueueQuarantine(i: number): void {
    if (this.qSize === STAG_QUARANTINE) this.dequeueQuarantine();
    if (this.qSize === this.quarantine.length) {
      // Grow the ring (doubling, up to STAG_QUARANTINE), oldest first.
      const bigger = new Uint32Array(Math.min(this.quarantine.length * 2, STAG_QUARANTINE));
      for (let n = 0; n < this.qSize; n++)
        bigger[n] = this.quarantine[(this.qHead + n) % this.quarantine.length] as number;
      this.quarantine = bigger;
      this.qHead = 0;
    }
    this.quarantine[(this.qHead + this.qSize) % this.quarantine.length] = i;
    this.qSize++;
    const p = this.page(i);
    p[i & 0xff] = (p[i & 0xff] as number) | QUARANTINED;
  }

  private dequeueQuarantine(): void {
    const i = this.quarantine[this.qHead] as number;
    this.qHead = (this.qHead + 1) % this.quarantine.length;
    this.qSize--;
    const p = this.page(i);
    p[i & 0xff] = (p[i & 0xff] as number) & ~QUARANTINED;
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
  if (end > MAX_U64 + 1n) return 'wrap';
  if (to < r.baseTo || end > r.baseTo + BigInt(r.length)) return 'bounds';
  return Number(to - r.baseTo);
}
