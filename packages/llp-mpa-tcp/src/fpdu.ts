/**
 * FPDU framing (RFC 5044 §4.1): ULPDU_Length (16 bits) | ULPDU | pad to 4 | CRC (32 bits), with Markers
 * (§4.3) inserted every 512 octets of the stream when the receiver asked for them, and the CRC (§4.4)
 * computed over everything before it, Markers included — or zero when CRCs are off.
 *
 * Transmit: `FpduWriter` turns one ULPDU given as parts into wire chunks without copying the parts
 * (header, trailer and Markers come from a slab; the CRC runs incrementally over the parts).
 * Receive: `FpduReader` parses socket chunks incrementally, keeps references to the chunk slices that
 * make up the ULPDU (no copy) and hands them up only once the CRC has been checked.
 */
import {
  copyMarked,
  crc32cMarked,
  crc32cRange,
  crc32cU16,
  crc32cZeros,
  crcFrames,
  markersIn,
  readCrc,
  writeCrc,
} from './crc.js';
import { MpaCrcError, MpaErrorCode, MpaProtocolError } from './errors.js';
import {
  MARKER_INTERVAL,
  MARKER_LENGTH,
  MULPDU_MAX,
  markerChunk,
  padLength,
  readFpduPtr,
  writeMarker,
} from './markers.js';

const SLAB_SIZE = 16 * 1024;
/** Largest first part framed together with ULPDU_Length (a ULP header, never bulk payload). */
const HEADER_JOIN_MAX = 32;
const AFTER_MARKER = MARKER_INTERVAL - MARKER_LENGTH;

/** Where framed chunks go: an array, or a reusable list that never gives back its storage. */
export interface ChunkSink {
  push(chunk: Uint8Array): unknown;
  /** `bytes[start, start + length)` as a chunk, without a view made for it (the sink may merge ranges). */
  pushRange?(bytes: Uint8Array, start: number, length: number): unknown;
  /**
   * `part` with the Markers that fall in it, placed by the sink (RFC 5044 §4.3): the first once `room` octets
   * have passed, FPDUPTR counting from `ptr` at the part's first octet. Returns how many.
   */
  pushMarked?(part: Uint8Array, room: number, ptr: number): number;
}

/** Octets of the FPDU that carries a ULPDU of `length`, without Markers. */
export function fpduLength(length: number): number {
  return 2 + length + padLength(length) + 4;
}

export interface FpduWriterOptions {
  readonly crc: boolean;
  /** Insert Markers (the peer's M bit asked for them). */
  readonly markers: boolean;
  /**
   * ULPDUs of at most this many octets are framed inline: copied whole into one slab piece with their
   * MPA header and trailer, so a small FPDU is one socket chunk (as RDMA devices take small sends
   * inline). Larger ULPDUs are never copied. Default `INLINE_DEFAULT`; 0 turns it off.
   */
  readonly inline?: number;
  /**
   * Leave the CRC fields of inline FPDUs to `seal()`, which fills every one framed since the last seal in
   * one native call: the sender seals once per batch, before the batch goes to the socket. Default false:
   * every FPDU is complete when `frame` returns.
   */
  readonly deferCrc?: boolean;
  /**
   * How FPDUs with Markers reach the socket (`MarkerFraming`): `'gather'` (default) leaves the ULPDU's
   * parts in place and hands the socket two chunks per 512 octets (payload piece, Marker); `'copy'`
   * copies each ULPDU once into a buffer with its header, Markers, pad and CRC, one chunk per FPDU.
   */
  readonly markerFraming?: MarkerFraming;
}

/**
 * `'gather'`: zero-copy, a Marker every 512 octets splits the payload into socket chunks (RFC 5044 §4.3).
 * `'copy'`: one copy of the payload next to its Markers, one socket chunk per FPDU.
 */
export type MarkerFraming = 'gather' | 'copy';

/** Inline FPDUs whose CRC `seal()` fills at most at once (then `frame` seals early). */
const SPANS_MAX = 256;

/** Buffers FPDUs with Markers are copied into (`markerFraming: 'copy'`). */
const COPY_SLAB_SIZE = 256 * 1024;
/**
 * Written copy slabs kept for reuse, shared by every writer of the process (fresh memory costs a page fault
 * per page; a stream with a 4 MiB high-water mark cycles ≈17 slabs). More are left to the GC; an idle
 * stream keeps only the slab it is filling.
 */
const COPY_SPARE_MAX = 32;
const copySpares: Buffer[] = [];

/** Default inline threshold (octets of ULPDU): a DDP header plus a small message. */
export const INLINE_DEFAULT = 128;
/** Largest inline threshold accepted. */
export const INLINE_MAX = 4096;

/** The transmit side of one MPA connection: frames ULPDUs in stream order. */
export class FpduWriter {
  private readonly crcOn: boolean;
  private readonly markers: boolean;
  private readonly inline: number;
  private readonly deferCrc: boolean;
  private readonly markerCopy: boolean;
  private copySlab: Buffer | undefined;
  private copyOff = 0;
  /** Full copy slabs and the last batch framed into each, until that batch is written. */
  private readonly retired: { slab: Buffer; batch: number }[] = [];
  /**
   * With `markerFraming: 'copy'`: the number of the batch FPDUs are framed into now. The sender moves it
   * on as it hands each batch to the socket and calls `written(n)` once batch n is written; a copy slab
   * is framed into again only after every batch holding octets of it was written.
   */
  batch = 1;
  private slab: Buffer = Buffer.allocUnsafe(SLAB_SIZE);
  private slabOff = 0;
  /** [start, end) in `slab` of each inline FPDU framed since the last `seal()` (its CRC field at end). */
  private readonly spans = new Int32Array(2 * SPANS_MAX);
  private spanCount = 0;
  /** Octets left before the next Marker position (0: a Marker is due now). Starts at 0: §4.3 first Marker. */
  private room = 0;

  constructor(options: FpduWriterOptions) {
    this.crcOn = options.crc;
    this.markers = options.markers;
    this.inline = Math.min(options.inline ?? INLINE_DEFAULT, INLINE_MAX);
    this.deferCrc = options.deferCrc ?? false;
    this.markerCopy = options.markerFraming === 'copy';
  }

  /** Fills the CRC fields left by `deferCrc`: every FPDU framed so far is then complete (RFC 5044 §4.4). */
  seal(): void {
    if (this.spanCount === 0) return;
    crcFrames(this.slab, this.spans, this.spanCount);
    this.spanCount = 0;
  }

  /** Every batch up to `batch` has been written: the copy slabs only they used may be framed into again. */
  written(batch: number): void {
    const r = this.retired;
    while (r.length > 0 && (r[0] as { batch: number }).batch <= batch) {
      const { slab } = r.shift() as { slab: Buffer };
      if (copySpares.length < COPY_SPARE_MAX) copySpares.push(slab);
    }
  }

  /** Offset of `n` free octets in the slab. Slabs are never reused, so what was framed stays valid. */
  private reserve(n: number): number {
    if (this.slabOff + n > SLAB_SIZE) {
      this.seal(); // the spans name the slab being left
      this.slab = Buffer.allocUnsafe(SLAB_SIZE);
      this.slabOff = 0;
    }
    const o = this.slabOff;
    this.slabOff += n;
    return o;
  }

  /** A Marker framed in the slab, for an FPDUPTR the shared table does not hold. */
  private framedMarker(ptr: number): Buffer {
    const m = this.take(MARKER_LENGTH);
    writeMarker(m, 0, ptr);
    return m;
  }

  /** A piece of the slab for header, trailer or Marker octets. */
  private take(n: number): Buffer {
    const o = this.reserve(n);
    return this.slab.subarray(o, o + n);
  }

  /**
   * Appends the wire chunks of one FPDU carrying `parts` (which sum to `length`) to `out`, in order.
   * Returns the FPDU's octets on the wire (Markers included).
   */
  frame(parts: readonly Uint8Array[], length: number, out: ChunkSink): number {
    if (length > 0xffff) throw new RangeError(`ULPDU of ${length} octets does not fit ULPDU_Length`);
    if (!this.markers) return this.framePlain(parts, length, out);
    return this.markerCopy ? this.frameMarkedCopy(parts, length, out) : this.frameWithMarkers(parts, length, out);
  }

  private framePlain(parts: readonly Uint8Array[], length: number, out: ChunkSink): number {
    const pad = padLength(length);
    const crcOn = this.crcOn;
    if (length <= this.inline) return this.frameInline(parts, length, pad, out);
    // A short first part is the ULP's header (DDP: 14 or 18 octets): it joins ULPDU_Length in one slab
    // piece, one chunk fewer for the socket. Only header octets are copied; payload parts never are.
    const first = parts[0];
    const joined = parts.length > 1 && first !== undefined && first.byteLength <= HEADER_JOIN_MAX ? first : undefined;
    const head = this.take(2 + (joined ? joined.byteLength : 0));
    head[0] = length >>> 8;
    head[1] = length & 0xff;
    if (joined) head.set(joined, 2);
    out.push(head);
    let crc = crcOn ? crc32cRange(head, 0, head.byteLength, 0) : 0;
    for (let i = joined ? 1 : 0; i < parts.length; i++) {
      const p = parts[i] as Uint8Array;
      const n = p.byteLength;
      if (n === 0) continue;
      out.push(p);
      if (crcOn) crc = crc32cRange(p, 0, n, crc);
    }
    const tail = this.take(pad + 4);
    for (let i = 0; i < pad; i++) tail[i] = 0;
    if (crcOn) crc = crc32cZeros(pad, crc);
    writeCrc(tail, pad, crc);
    out.push(tail);
    return 2 + length + pad + 4;
  }

  /**
   * A small ULPDU as one piece: ULPDU_Length | ULPDU | pad | CRC (RFC 5044 §4.1), one CRC pass (now, or in
   * `seal()` with `deferCrc`). Goes to the sink as a range of the slab where it takes one.
   */
  private frameInline(parts: readonly Uint8Array[], length: number, pad: number, out: ChunkSink): number {
    const total = 2 + length + pad + 4;
    const start = this.reserve(total);
    const f = this.slab;
    f[start] = length >>> 8;
    f[start + 1] = length & 0xff;
    let o = start + 2;
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as Uint8Array;
      f.set(p, o);
      o += p.byteLength;
    }
    for (let i = 0; i < pad; i++) f[o + i] = 0;
    o += pad;
    if (!this.crcOn) writeCrc(f, o, 0);
    else if (this.deferCrc) {
      const k = this.spanCount++;
      this.spans[2 * k] = start;
      this.spans[2 * k + 1] = o;
      if (k + 1 === SPANS_MAX) this.seal();
    } else writeCrc(f, o, crc32cRange(f, start, o, 0));
    if (out.pushRange !== undefined) out.pushRange(f, start, total);
    else out.push(f.subarray(start, start + total));
    return total;
  }

  /**
   * One FPDU with Markers copied whole into a copy slab (`markerFraming: 'copy'`): Marker where due,
   * ULPDU_Length, ULPDU, pad, a Marker if one falls before the CRC, CRC over all of it (RFC 5044 §4.1,
   * §4.3, §4.4) — the octets `frameWithMarkers` sends, as one chunk. A full slab is taken again only after
   * `written` says the batches holding its octets were written.
   */
  private frameMarkedCopy(parts: readonly Uint8Array[], length: number, out: ChunkSink): number {
    const pad = padLength(length);
    const crcOn = this.crcOn;
    // Markers fall every 508 octets of FPDU after `room`: at most this many octets in all.
    const body = 2 + length + pad + 4;
    const max = body + MARKER_LENGTH * (Math.ceil(body / AFTER_MARKER) + 1); // < COPY_SLAB_SIZE: 16-bit ULPDU_Length
    if (this.copySlab === undefined || this.copyOff + max > this.copySlab.byteLength) {
      if (this.copySlab !== undefined) this.retired.push({ slab: this.copySlab, batch: this.batch });
      this.copySlab = copySpares.pop() ?? Buffer.allocUnsafeSlow(COPY_SLAB_SIZE);
      this.copyOff = 0;
    }
    const f = this.copySlab;
    const start = this.copyOff;
    let o = start;
    let room = this.room;
    if (room === 0) {
      writeMarker(f, o, 0); // opens the FPDU, FPDUPTR 0 (§4.3)
      o += MARKER_LENGTH;
      room = AFTER_MARKER;
    }
    f[o] = length >>> 8;
    f[o + 1] = length & 0xff;
    o += 2;
    room -= 2;
    let since = 2;
    let crc = crcOn ? crc32cRange(f, start, o, 0) : 0;
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as Uint8Array;
      const e = p.byteLength;
      // The part and the Markers that split it, copied (and CRC'd) in one call.
      crc = copyMarked(f, o, p, 0, e, crc, room, since);
      const k = markersIn(e, room);
      o += e + MARKER_LENGTH * k;
      since += e + MARKER_LENGTH * k;
      room = room + AFTER_MARKER * k - e;
    }
    const tail = o;
    for (let i = 0; i < pad; i++) f[o + i] = 0;
    o += pad;
    room -= pad; // pad never straddles a Marker position (both 4-aligned)
    if (room === 0) {
      writeMarker(f, o, since + pad);
      o += MARKER_LENGTH;
      room = AFTER_MARKER;
    }
    writeCrc(f, o, crcOn ? crc32cRange(f, tail, o, crc) : 0);
    o += 4;
    this.room = room - 4;
    this.copyOff = o;
    const total = o - start;
    if (out.pushRange !== undefined) out.pushRange(f, start, total);
    else out.push(f.subarray(start, o));
    return total;
  }

  private frameWithMarkers(parts: readonly Uint8Array[], length: number, out: ChunkSink): number {
    const pad = padLength(length);
    const crcOn = this.crcOn;
    let total = 0;
    // A Marker due at the FPDU's first octet opens it, FPDUPTR 0 (§4.3).
    const lead = this.room === 0;
    const head = this.take(lead ? 6 : 2);
    let o = 0;
    if (lead) {
      writeMarker(head, 0, 0);
      o = MARKER_LENGTH;
      this.room = AFTER_MARKER;
    }
    head[o] = length >>> 8;
    head[o + 1] = length & 0xff;
    out.push(head);
    let crc = crcOn ? crc32cRange(head, 0, head.byteLength, 0) : 0;
    total += head.byteLength;
    this.room -= 2;
    /** Octets from the ULPDU_Length field to here: the FPDUPTR of a Marker placed here. */
    let since = 2;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] as Uint8Array;
      const e = part.byteLength;
      // One CRC pass over the part and the Markers that will split it (not one per piece).
      if (crcOn) crc = crc32cMarked(part, 0, e, crc, this.room, since);
      if (out.pushMarked !== undefined) {
        // A sink that places the Markers itself (the direct queue): one range per part.
        const k = out.pushMarked(part, this.room, since);
        since += e + MARKER_LENGTH * k;
        total += e + MARKER_LENGTH * k;
        this.room = this.room + AFTER_MARKER * k - e;
        continue;
      }
      // Pieces as Buffers: the socket takes them as they are (a Uint8Array it would wrap once more, per piece).
      const p = Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength);
      let s = 0;
      while (s < e) {
        if (this.room === 0) {
          // From the shared table (markerChunk): nothing framed or allocated per Marker.
          out.push(markerChunk(since) ?? this.framedMarker(since));
          this.room = AFTER_MARKER;
          since += MARKER_LENGTH;
          total += MARKER_LENGTH;
        }
        const n = Math.min(this.room, e - s);
        out.push(s === 0 && n === e ? p : p.subarray(s, s + n));
        s += n;
        this.room -= n;
        since += n;
        total += n;
      }
    }
    // Pad never straddles a Marker position (both are 4-aligned); a Marker may fall between pad and CRC.
    this.room -= pad;
    const markerBeforeCrc = this.room === 0;
    const tail = this.take(pad + (markerBeforeCrc ? MARKER_LENGTH : 0) + 4);
    for (let i = 0; i < pad; i++) tail[i] = 0;
    let c = pad;
    if (markerBeforeCrc) {
      writeMarker(tail, pad, since + pad);
      c += MARKER_LENGTH;
      this.room = AFTER_MARKER;
    }
    if (crcOn) crc = crc32cRange(tail, 0, c, crc);
    writeCrc(tail, c, crc);
    this.room -= 4;
    out.push(tail);
    return total + tail.byteLength;
  }
}

/** One validated ULPDU: its length and the slices of socket chunks holding it, in order. */
export type UlpduSink = (length: number, chunks: Uint8Array[]) => void;
export type FpduErrorSink = (error: MpaProtocolError | MpaCrcError) => void;

export interface FpduReaderOptions {
  readonly crc: boolean;
  /** The peer inserts Markers (this side's M bit asked for them). */
  readonly markers: boolean;
  /** Largest ULPDU_Length accepted (RFC 5044 §3: 64768). */
  readonly maxUlpduLength?: number;
}

const S_HEADER = 0;
const S_BODY = 1;
const S_PAD = 2;
const S_CRC = 3;
const S_DEAD = 4;

/**
 * The receive side of one MPA connection. `push` each socket chunk in order; complete FPDUs whose CRC
 * checks are handed to `onUlpdu` as slices of those chunks. The first error stops the reader for good.
 */
export class FpduReader {
  private readonly crcOn: boolean;
  private readonly markers: boolean;
  private readonly maxLength: number;
  private state: number = S_HEADER;
  /** Octets before the next Marker position (markers only); 0 at the start: §4.3 first Marker. */
  private room = 0;
  private readonly marker = new Uint8Array(MARKER_LENGTH);
  private markerGot = 0;
  private hdrHi = 0;
  private hdrGot = 0;
  private length = 0;
  private remaining = 0;
  private pad = 0;
  private since = 0;
  private crc = 0;
  /**
   * Octets of the chunk being consumed that the CRC has still to cover, `[pendA, pendB)`: adjacent
   * pieces, Markers and pad are covered by one CRC call (with Markers every 508 octets: 2 calls per
   * chunk instead of 2 per 512 octets). Empty (`pendA < 0`) whenever the reader returns or calls out.
   */
  private pendChunk: Uint8Array | undefined;
  private pendA = -1;
  private pendB = -1;
  private readonly crcField = new Uint8Array(4);
  private crcGot = 0;
  private pieces: Uint8Array[] = [];
  private held: Buffer[] = [];
  private stopped = false;
  /** FPDUs delivered so far. */
  delivered = 0;

  constructor(
    options: FpduReaderOptions,
    private readonly onUlpdu: UlpduSink,
    private readonly onError: FpduErrorSink,
  ) {
    this.crcOn = options.crc;
    this.markers = options.markers;
    this.maxLength = options.maxUlpduLength ?? MULPDU_MAX;
  }

  /** True between FPDUs: the stream may end here without cutting one. */
  get atBoundary(): boolean {
    return this.state === S_HEADER && this.hdrGot === 0 && this.markerGot === 0;
  }
  get failed(): boolean {
    return this.state === S_DEAD;
  }
  /** Octets received and not yet processed because the reader is stopped. */
  get heldOctets(): number {
    let n = 0;
    for (const b of this.held) n += b.byteLength;
    return n;
  }

  /**
   * The oldest received octets the reader still holds a view of: the start of a partial FPDU, or the
   * first chunk held while stopped. Those views must stay valid (their buffer is not read into again).
   */
  get firstHeld(): Uint8Array | undefined {
    return this.pieces[0] ?? this.held[0];
  }

  /** Stops for good: nothing more is parsed or handed up. */
  kill(): void {
    this.state = S_DEAD;
    this.pendA = -1;
    this.pendChunk = undefined;
    this.pieces = [];
    this.held = [];
  }

  /** Stop (true) or restart (false) handing up ULPDUs; chunks pushed meanwhile are kept in order. */
  setStopped(stopped: boolean): void {
    this.stopped = stopped;
    while (!this.stopped && this.held.length > 0 && this.state !== S_DEAD) {
      const b = this.held.shift() as Buffer;
      this.consume(b, 0);
    }
  }

  push(chunk: Buffer): void {
    if (this.state === S_DEAD) return;
    if (this.stopped || this.held.length > 0) {
      this.held.push(chunk);
      if (!this.stopped) this.setStopped(false);
      return;
    }
    this.consume(chunk, 0);
  }

  /** Adds `chunk[a, b)` to the CRC still to compute (merged with the pending range when adjacent). */
  private acc(chunk: Uint8Array, a: number, b: number): void {
    if (this.pendA >= 0 && this.pendChunk === chunk && this.pendB === a) {
      this.pendB = b;
      return;
    }
    this.flushCrc();
    this.pendChunk = chunk;
    this.pendA = a;
    this.pendB = b;
  }

  /** Folds the pending range into `crc`. */
  private flushCrc(): void {
    if (this.pendA < 0) return;
    this.crc = crc32cRange(this.pendChunk as Uint8Array, this.pendA, this.pendB, this.crc);
    this.pendA = -1;
    this.pendChunk = undefined;
  }

  private fail(error: MpaProtocolError | MpaCrcError): void {
    this.pendA = -1;
    this.pendChunk = undefined;
    this.state = S_DEAD;
    this.pieces = [];
    this.held = [];
    this.onError(error);
  }

  private consume(chunk: Buffer, start: number): void {
    const len = chunk.byteLength;
    const markers = this.markers;
    const crcOn = this.crcOn;
    let off = start;
    while (off < len) {
      if (this.stopped) {
        this.flushCrc();
        this.held.unshift(off === 0 ? chunk : chunk.subarray(off));
        return;
      }
      if (markers && this.state === S_BODY && this.markerGot === 0) {
        const to = this.markedBody(chunk, off);
        if (to !== off) {
          off = to;
          continue;
        }
      }
      if (markers && this.room === 0) {
        // A Marker occupies the next 4 octets (§4.3); they may arrive split across chunks.
        const n = Math.min(MARKER_LENGTH - this.markerGot, len - off);
        // A Marker wholly in this chunk joins the pending CRC range; one split across chunks is copied.
        const whole = this.markerGot === 0 && n === MARKER_LENGTH ? off : -1;
        for (let i = 0; i < n; i++) this.marker[this.markerGot + i] = chunk[off + i] as number;
        off += n;
        this.markerGot += n;
        if (this.markerGot < MARKER_LENGTH) {
          this.flushCrc();
          return;
        }
        this.markerGot = 0;
        this.room = AFTER_MARKER;
        if (!this.onMarker(chunk, whole)) return;
        continue;
      }
      const limit = markers ? Math.min(len, off + this.room) : len;
      const before = off;
      switch (this.state) {
        case S_HEADER: {
          // Fast path: a whole FPDU inside this chunk and before the next Marker.
          if (this.hdrGot === 0 && limit - off >= 8) {
            const length = ((chunk[off] as number) << 8) | (chunk[off + 1] as number);
            const pad = (4 - ((length + 2) & 3)) & 3;
            const end = off + 2 + length + pad;
            if (end + 4 <= limit && length <= this.maxLength) {
              if (crcOn) {
                this.flushCrc();
                const computed = crc32cRange(chunk, off, end, this.crc);
                const received = readCrc(chunk, end);
                if (computed !== received) {
                  this.fail(new MpaCrcError(received, computed));
                  return;
                }
              }
              off = end + 4;
              if (markers) this.room -= off - before;
              this.crc = 0;
              this.delivered++;
              this.onUlpdu(length, [chunk.subarray(before + 2, before + 2 + length)]);
              if (this.failed) return;
              continue;
            }
          }
          if (this.hdrGot === 0) {
            this.hdrHi = chunk[off] as number;
            this.hdrGot = 1;
            off++;
            if (off >= limit) break;
          }
          const length = (this.hdrHi << 8) | (chunk[off] as number);
          off++;
          this.hdrGot = 0;
          if (length > this.maxLength) {
            this.fail(
              new MpaProtocolError(
                'ulpdu-length',
                MpaErrorCode.fpduStart,
                `ULPDU_Length ${length} exceeds ${this.maxLength} (RFC 5044 §3)`,
              ),
            );
            return;
          }
          if (crcOn) {
            this.flushCrc();
            this.crc = crc32cU16(length, this.crc);
          }
          this.length = length;
          this.remaining = length;
          this.pad = (4 - ((length + 2) & 3)) & 3;
          this.since = 2;
          this.pieces = [];
          this.state = length > 0 ? S_BODY : this.pad > 0 ? S_PAD : S_CRC;
          break;
        }
        case S_BODY: {
          const n = Math.min(limit - off, this.remaining);
          // With Markers a piece is at most 508 octets: a plain view, which V8 makes faster than a Buffer.
          this.pieces.push(
            off === 0 && n === len
              ? chunk
              : markers
                ? new Uint8Array(chunk.buffer, chunk.byteOffset + off, n)
                : chunk.subarray(off, off + n),
          );
          if (crcOn) this.acc(chunk, off, off + n);
          off += n;
          this.since += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = this.pad > 0 ? S_PAD : S_CRC;
          break;
        }
        case S_PAD: {
          const n = Math.min(limit - off, this.pad);
          if (crcOn) this.acc(chunk, off, off + n);
          off += n;
          this.since += n;
          this.pad -= n;
          if (this.pad === 0) this.state = S_CRC;
          break;
        }
        case S_CRC: {
          const n = Math.min(limit - off, 4 - this.crcGot);
          for (let i = 0; i < n; i++) this.crcField[this.crcGot + i] = chunk[off + i] as number;
          off += n;
          this.crcGot += n;
          if (this.crcGot === 4) {
            this.crcGot = 0;
            if (markers) this.room -= off - before;
            if (!this.complete()) return;
            continue;
          }
          break;
        }
        default:
          return;
      }
      if (markers) this.room -= off - before;
    }
    this.flushCrc();
  }

  /**
   * An FPDU's body with Markers (RFC 5044 §4.3), from `off` of `chunk`: payload pieces and the Markers between
   * them, as long as each Marker lies wholly in the chunk and points back to this FPDU's ULPDU_Length field —
   * one pass, one CRC range for all of it. Returns where it stopped; a split or wrong Marker is left to the
   * general path (which reports the latter, §8 code 3).
   */
  private markedBody(chunk: Buffer, off: number): number {
    const len = chunk.byteLength;
    const buf = chunk.buffer;
    const base = chunk.byteOffset;
    const pieces = this.pieces;
    const start = off;
    let room = this.room;
    let rem = this.remaining;
    let since = this.since;
    while (rem > 0 && off < len) {
      if (room === 0) {
        if (off + MARKER_LENGTH > len) break;
        if (readFpduPtr(chunk[off + 2] as number, chunk[off + 3] as number) !== since) break;
        off += MARKER_LENGTH;
        since += MARKER_LENGTH;
        room = AFTER_MARKER;
        if (off === len) break;
      }
      const n = Math.min(room, rem, len - off);
      // A plain view per piece (cheaper to make than a Buffer).
      pieces.push(new Uint8Array(buf, base + off, n));
      off += n;
      since += n;
      rem -= n;
      room -= n;
    }
    if (off === start) return off;
    if (this.crcOn) this.acc(chunk, start, off);
    this.room = room;
    this.remaining = rem;
    this.since = since;
    if (rem === 0) this.state = this.pad > 0 ? S_PAD : S_CRC;
    return off;
  }

  /** Checks a Marker against the FPDU it sits in (RFC 5044 §8 code 3). False when it failed the reader. */
  private onMarker(chunk: Uint8Array, at: number): boolean {
    const ptr = readFpduPtr(this.marker[2] as number, this.marker[3] as number);
    // Between FPDUs the Marker opens the next one (FPDUPTR 0); inside one it points back to its header.
    const opening = this.state === S_HEADER && this.hdrGot === 0;
    const expected = opening ? 0 : this.since;
    if (ptr !== expected) {
      this.fail(
        new MpaProtocolError(
          'marker',
          MpaErrorCode.fpduStart,
          `Marker FPDUPTR ${ptr} disagrees with the FPDU start found from ULPDU_Length (expected ${expected}) (RFC 5044 §8 code 3)`,
        ),
      );
      return false;
    }
    if (this.crcOn) {
      if (opening) {
        this.flushCrc(); // nothing is pending between FPDUs: the opening Marker starts the next CRC
        this.crc = 0;
      }
      if (at >= 0) this.acc(chunk, at, at + MARKER_LENGTH);
      else {
        this.flushCrc();
        this.crc = crc32cRange(this.marker, 0, MARKER_LENGTH, this.crc);
      }
    }
    if (!opening) this.since += MARKER_LENGTH;
    return true;
  }

  private complete(): boolean {
    this.flushCrc();
    if (this.crcOn) {
      const received = readCrc(this.crcField, 0);
      if (received !== this.crc) {
        this.fail(new MpaCrcError(received, this.crc));
        return false;
      }
    }
    const pieces = this.pieces;
    this.pieces = [];
    this.crc = 0;
    this.state = S_HEADER;
    this.delivered++;
    this.onUlpdu(this.length, pieces);
    return !this.failed;
  }
}
