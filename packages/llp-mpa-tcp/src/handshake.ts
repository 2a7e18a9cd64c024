/**
 * Reading one MPA Request or Reply frame off a TCP byte stream (RFC 5044 §7.1.1), chunk by chunk.
 * The key is checked octet by octet as it arrives, so a peer that is not speaking MPA is refused at
 * its first wrong octet rather than at the handshake timer.
 */
import { MpaErrorCode, MpaProtocolError } from './errors.js';
import {
  decodeFrameHeader,
  type FrameHeader,
  frameFromHeader,
  MPA_FRAME_HEADER_LENGTH,
  MPA_KEY_LENGTH,
  MPA_KEY_REP,
  MPA_KEY_REQ,
  type MpaFrame,
  type MpaFrameKind,
} from './frames.js';

export type CollectResult =
  | { readonly done: false }
  | { readonly done: true; readonly frame: MpaFrame; readonly rest: Buffer }
  | { readonly done: true; readonly error: MpaProtocolError };

const MORE: CollectResult = { done: false };

export class FrameCollector {
  private readonly header = Buffer.alloc(MPA_FRAME_HEADER_LENGTH);
  private got = 0;
  private decoded: FrameHeader | null = null;
  private pd: Uint8Array | null = null;
  private pdGot = 0;
  private finished = false;

  constructor(readonly kind: MpaFrameKind) {}

  /** Feeds one chunk. Once `done`, later chunks are not looked at. */
  feed(chunk: Buffer): CollectResult {
    if (this.finished) throw new Error('frame already collected');
    let off = 0;
    if (this.decoded === null) {
      const key = this.kind === 'request' ? MPA_KEY_REQ : MPA_KEY_REP;
      const n = Math.min(MPA_FRAME_HEADER_LENGTH - this.got, chunk.byteLength);
      for (let i = 0; i < n; i++) {
        const at = this.got + i;
        const b = chunk[i] as number;
        if (at < MPA_KEY_LENGTH && b !== key[at]) {
          this.finished = true;
          const seen = Buffer.concat([
            this.header.subarray(0, at),
            chunk.subarray(i, Math.min(chunk.byteLength, i + MPA_KEY_LENGTH - at)),
          ]);
          return {
            done: true,
            error: new MpaProtocolError(
              'bad-key',
              MpaErrorCode.invalidRequestReply,
              `expected an MPA ${this.kind === 'request' ? 'Request ("MPA ID Req Frame")' : 'Reply ("MPA ID Rep Frame")'}, got ${JSON.stringify(seen.toString('latin1'))} (RFC 5044 §7.1.1 Key)`,
            ),
          };
        }
        this.header[at] = b;
      }
      this.got += n;
      off = n;
      if (this.got < MPA_FRAME_HEADER_LENGTH) return MORE;
      const h = decodeFrameHeader(this.header, this.kind);
      if ('problem' in h) {
        this.finished = true;
        return {
          done: true,
          error: new MpaProtocolError(
            h.problem === 'bad-key' ? 'bad-key' : 'pd-length',
            MpaErrorCode.invalidRequestReply,
            h.detail,
          ),
        };
      }
      this.decoded = h;
      // A plain Uint8Array: private data is handed to the ULP as such.
      this.pd = new Uint8Array(h.pdLength);
    }
    const h = this.decoded;
    const pd = this.pd as Uint8Array;
    const n = Math.min(h.pdLength - this.pdGot, chunk.byteLength - off);
    if (n > 0) {
      pd.set(chunk.subarray(off, off + n), this.pdGot);
      this.pdGot += n;
      off += n;
    }
    if (this.pdGot < h.pdLength) return MORE;
    this.finished = true;
    return { done: true, frame: frameFromHeader(h, pd), rest: chunk.subarray(off) };
  }
}
