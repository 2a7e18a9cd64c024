/**
 * Two LLP streams joined in memory, for the verbs package's own tests: what DDP needs of an LLP (RFC 5041
 * §3: reliable, in order, message boundaries kept), built on the public contract of `@rddp/llp`
 * (`BaseLlpStream`) and nothing else, as the dependency rule asks of a core package's tests (transports
 * and their end-to-end tests live in test/integration/). Each ULPDU is copied when sent and delivered to
 * the peer on a later turn of the event loop; a graceful close travels behind what was sent; an abort
 * reaches the peer at once.
 */
import { BaseLlpStream, ConnectionAbortedError, type LlpError, type SendCallback } from '@rddp/llp';

type Item = { readonly bytes: Uint8Array } | { readonly fin: true };

export class MemoryLlpStream extends BaseLlpStream {
  peer!: MemoryLlpStream;
  private readonly inbound: Item[] = [];
  private paused = true;
  private scheduled = false;

  protected transmit(parts: readonly Uint8Array[], length: number, done?: SendCallback): boolean {
    const bytes = new Uint8Array(length);
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.byteLength;
    }
    this.peer.enqueue({ bytes });
    if (done) queueMicrotask(() => done()); // the sender's buffers are free once copied
    return true;
  }

  protected setReading(paused: boolean): void {
    this.paused = paused;
    if (!paused) this.schedule();
  }

  protected startClose(): void {
    this.peer.enqueue({ fin: true });
  }

  protected startAbort(reason?: LlpError): void {
    const error = new ConnectionAbortedError('the memory peer aborted the stream', { cause: reason });
    queueMicrotask(() => this.peer.endByPeer(error));
  }

  private endByPeer(error: LlpError): void {
    this.inbound.length = 0;
    this.finish({ graceful: false, initiator: 'remote', error });
  }

  private enqueue(item: Item): void {
    if (this.state === 'closed') return;
    this.inbound.push(item);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.inbound.length === 0 || this.state === 'closed') return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.drain();
    });
  }

  private drain(): void {
    while (this.inbound.length > 0 && this.state !== 'closed') {
      const head = this.inbound[0] as Item;
      if ('fin' in head) {
        this.inbound.shift();
        if (this.state === 'closing') this.finish({ graceful: true, initiator: 'local' });
        else {
          // The peer closed: everything it sent has been delivered; answer with our own FIN.
          this.finish({ graceful: true, initiator: 'remote' });
          this.peer.enqueue({ fin: true });
        }
        return;
      }
      if (!this.hasReceiver || this.paused) return;
      this.inbound.shift();
      this.deliver({ length: head.bytes.byteLength, chunks: [head.bytes] });
    }
  }
}

/** Two joined streams: the first for the initiator's queue pair, the second for the responder's. */
export function memoryLlpPair(mulpdu = 16_384): [initiator: MemoryLlpStream, responder: MemoryLlpStream] {
  const a = new MemoryLlpStream(0, mulpdu);
  const b = new MemoryLlpStream(0, mulpdu);
  a.peer = b;
  b.peer = a;
  return [a, b];
}
