/**
 * A transparent wrapper of the LLP stream DDP runs on. It remembers, for the ULPDU being processed,
 * what a Terminate must copy (RFC 5040 §4.8): the DDP Segment Length handed up by the LLP and the
 * DDP header's octets as received (18 at most, copied once into a reusable buffer; payload is not
 * touched). It also holds DDP's receiver back until RDMAP has posted its Read Request and Terminate
 * buffers, and reports the first incoming ULPDU (RFC 5040 §6.1 stream initialization).
 */
import type { LlpCloseEvent, LlpError, LlpStream, LlpStreamState, SendCallback, Ulpdu, UlpduHandler } from '@rddp/llp';
import type { Observable } from 'rxjs';

const MAX_DDP_HEADER = 18;

export class LlpTap implements LlpStream {
  private handler: UlpduHandler | null = null;
  private started = false;
  private readonly header = new Uint8Array(MAX_DDP_HEADER);
  private headerLength = 0;
  private segmentLength = 0;
  private seenFirst = false;
  /** Called once, on the first ULPDU received. */
  onFirstReceive: (() => void) | undefined;

  constructor(readonly inner: LlpStream) {}

  get id(): number {
    return this.inner.id;
  }
  get mulpdu(): number {
    return this.inner.mulpdu;
  }
  get mulpdu$(): Observable<number> {
    return this.inner.mulpdu$;
  }
  get state(): LlpStreamState {
    return this.inner.state;
  }
  get needsDrain(): boolean {
    return this.inner.needsDrain;
  }
  get closed$(): Observable<LlpCloseEvent> {
    return this.inner.closed$;
  }
  send(ulpdu: readonly Uint8Array[], done?: SendCallback): boolean {
    return this.inner.send(ulpdu, done);
  }
  waitForDrain(signal?: AbortSignal): Promise<void> {
    return this.inner.waitForDrain(signal);
  }
  pause(): void {
    this.inner.pause();
  }
  resume(): void {
    this.inner.resume();
  }
  close(signal?: AbortSignal): Promise<void> {
    return this.inner.close(signal);
  }
  abort(reason?: LlpError): void {
    this.inner.abort(reason);
  }

  setReceiver(handler: UlpduHandler | null): void {
    this.handler = handler;
    if (this.started) this.inner.setReceiver(handler ? this.receive : null);
  }

  /** Lets ULPDUs through to DDP (ULPDUs that arrived earlier were held by the LLP, per its contract). */
  start(): void {
    if (this.started) return;
    this.started = true;
    if (this.handler) this.inner.setReceiver(this.receive);
  }

  /** The DDP Segment Length (header + payload) of the ULPDU being processed, as the LLP handed it up. */
  get lastSegmentLength(): number {
    return this.segmentLength;
  }
  /** The DDP header octets of the ULPDU being processed: 14 (tagged) or 18 (untagged), fewer if truncated. */
  lastDdpHeader(): Uint8Array {
    const n = this.headerLength === 0 ? 0 : (this.header[0] as number) & 0x80 ? 14 : MAX_DDP_HEADER;
    return this.header.slice(0, Math.min(n, this.headerLength));
  }

  private readonly receive = (ulpdu: Ulpdu): void => {
    this.segmentLength = ulpdu.length;
    this.captureHeader(ulpdu);
    if (!this.seenFirst) {
      this.seenFirst = true;
      this.onFirstReceive?.();
    }
    this.handler?.(ulpdu);
  };

  private captureHeader(ulpdu: Ulpdu): void {
    const want = Math.min(MAX_DDP_HEADER, ulpdu.length);
    const first = ulpdu.chunks[0];
    if (first !== undefined && first.byteLength >= want) {
      this.header.set(first.subarray(0, want));
    } else {
      let off = 0;
      for (const c of ulpdu.chunks) {
        if (off >= want) break;
        const n = Math.min(c.byteLength, want - off);
        this.header.set(c.subarray(0, n), off);
        off += n;
      }
    }
    this.headerLength = want;
  }
}
