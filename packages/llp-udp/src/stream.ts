/**
 * One LLP stream of a UDP connection: each ULPDU is one DATA datagram. No retransmission, no reordering
 * (the DDPP core draft §3.4 class: unreliable, unordered). What it adds to raw UDP, all best effort:
 * a per-stream receive window so a sender facing a reader that does not read gets `send() === false`
 * (ACK = highest sequence number consumed; PROBE when blocked, so lost DATA cannot stall the window),
 * a FIN handshake for graceful close, and ABORT for abortive close.
 */
import {
  BaseLlpStream,
  ConnectionAbortedError,
  type LlpCloseEvent,
  type LlpError,
  LlpTimeoutError,
  type SendCallback,
} from '@rddp/llp';
import { CRC_LENGTH, describeAbortCode, HEADER_LENGTH, seqAfter } from './wire.js';

/** What a stream needs from its connection. */
export interface StreamHost {
  readonly retransmitMs: number;
  readonly closeTimeoutMs: number;
  /** The peer's receive window: DATA datagrams it lets this stream have sent and not yet consumed. */
  readonly peerWindow: number;
  /** Most DATA datagrams held for a paused reader before further ones are dropped. */
  readonly holdLimit: number;
  /**
   * Counts `octets` more held for a paused reader against the process's memory budget (under the peer's
   * source); false when they do not fit — the datagram is then dropped, a loss the class allows.
   */
  hold(octets: number): boolean;
  /** Gives back octets counted by `hold`. */
  unhold(octets: number): void;
  sendData(streamId: number, seq: number, parts: readonly Uint8Array[], done: SendCallback | undefined): void;
  sendAck(streamId: number, seq: number): void;
  sendProbe(streamId: number, seq: number): void;
  sendFin(streamId: number, seq: number): void;
  sendFinAck(streamId: number): void;
  sendAbort(streamId: number): void;
  /** Socket send queue above the high-water mark? */
  readonly socketBlocked: boolean;
  readonly socketDrained: boolean;
  waitForSocketDrain(w: () => void): void;
  cancelSocketDrain(w: () => void): void;
  streamClosed(stream: UdpStream, event: LlpCloseEvent): void;
}

/** Counters of one stream. */
export interface UdpStreamStats {
  readonly ulpdusSent: number;
  readonly ulpdusReceived: number;
  /** DATA dropped because a paused reader's hold was full (the peer ignored the window). */
  readonly holdOverflows: number;
  /** DATA dropped because holding it for a paused reader did not fit the process's memory budget. */
  readonly budgetDrops: number;
  /**
   * DATA dropped because its ULPDU was longer than the MULPDU, i.e. the peer sent a datagram above the size
   * agreed at setup (a protocol violation: dropped and counted, docs/UDP-LLP.md "Data").
   */
  readonly oversizeDrops: number;
  readonly probesSent: number;
}

interface Held {
  readonly seq: number;
  readonly body: Uint8Array;
}

/** What holding a DATA datagram's body keeps: the whole datagram it came in (header, body, CRC32c). */
function heldSize(body: Uint8Array): number {
  return HEADER_LENGTH + body.byteLength + CRC_LENGTH;
}

export class UdpStream extends BaseLlpStream {
  // Sending side: sequence numbers and what the peer has not consumed yet.
  private nextSeq = 1;
  private peerConsumed = 0;
  private probeTimer: NodeJS.Timeout | undefined;
  private socketWaiter: (() => void) | undefined;
  // Receiving side.
  private readingPaused = false;
  private inbound: Held[] = [];
  /** Octets of the datagrams in `inbound`, as counted by `host.hold`. */
  private heldOctets = 0;
  private consumed = 0;
  private ackedConsumed = 0;
  private ackScheduled = false;
  // Close.
  private finTimer: NodeJS.Timeout | undefined;
  private closeTimer: NodeJS.Timeout | undefined;
  /** Set while the connection aborts every stream with one ABORT datagram. */
  quietAbort = false;
  private readonly counters = {
    ulpdusSent: 0,
    ulpdusReceived: 0,
    holdOverflows: 0,
    budgetDrops: 0,
    oversizeDrops: 0,
    probesSent: 0,
  };

  constructor(
    id: number,
    mulpdu: number,
    private readonly host: StreamHost,
  ) {
    super(id, mulpdu);
  }

  get stats(): UdpStreamStats {
    return { ...this.counters };
  }

  // ----- BaseLlpStream hooks -----

  /** DATA datagrams sent that the peer has not reported consumed (or given up on) yet. */
  private get outstanding(): number {
    return (this.nextSeq - 1 - this.peerConsumed) >>> 0;
  }

  protected transmit(parts: readonly Uint8Array[], _length: number, done?: SendCallback): boolean {
    const seq = this.nextSeq;
    this.nextSeq = (this.nextSeq + 1) >>> 0;
    this.host.sendData(this.id, seq, parts, done);
    this.counters.ulpdusSent++;
    const windowFull = this.outstanding >= this.host.peerWindow;
    const socketFull = this.host.socketBlocked;
    if (windowFull) this.startProbing();
    if (socketFull && !this.socketWaiter) {
      this.socketWaiter = () => {
        this.socketWaiter = undefined;
        this.checkDrained();
      };
      this.host.waitForSocketDrain(this.socketWaiter);
    }
    return !windowFull && !socketFull;
  }

  protected setReading(paused: boolean): void {
    this.readingPaused = paused;
    // Hand over what was held, in arrival order, until the reader stops again.
    while (!this.readingPaused && this.inbound.length > 0 && this.state !== 'closed') {
      const h = this.inbound.shift() as Held;
      const octets = heldSize(h.body);
      this.heldOctets -= octets;
      this.host.unhold(octets);
      this.consume(h.seq, h.body);
    }
  }

  protected startClose(): void {
    // RFC 5041 §6.2 graceful teardown, best effort: FIN (resent until the peer's FIN_ACK or FIN), and a timer.
    const fin = () => this.host.sendFin(this.id, (this.nextSeq - 1) >>> 0);
    fin();
    this.finTimer = setInterval(fin, this.host.retransmitMs);
    this.closeTimer = setTimeout(() => {
      this.finish({
        graceful: false,
        initiator: 'local',
        error: new LlpTimeoutError(`UDP stream ${this.id}: no answer to FIN within ${this.host.closeTimeoutMs} ms`),
      });
    }, this.host.closeTimeoutMs);
  }

  protected startAbort(_reason?: LlpError): void {
    if (!this.quietAbort) this.host.sendAbort(this.id);
  }

  protected override finish(event: LlpCloseEvent): void {
    if (this.state === 'closed') return;
    clearInterval(this.probeTimer);
    clearInterval(this.finTimer);
    clearTimeout(this.closeTimer);
    if (this.socketWaiter) this.host.cancelSocketDrain(this.socketWaiter);
    this.socketWaiter = undefined;
    this.inbound = [];
    if (this.heldOctets > 0) this.host.unhold(this.heldOctets);
    this.heldOctets = 0;
    super.finish(event);
    this.host.streamClosed(this, event);
  }

  // ----- from the connection: the peer's datagrams for this stream -----

  onData(seq: number, body: Uint8Array): void {
    if (this.state === 'closed') return;
    if (body.byteLength > this.mulpdu) {
      // Longer than the MULPDU: the peer sent a datagram above the size agreed at setup. Neither held nor
      // handed up — the ULP is promised nothing above the MULPDU (RFC 5041 §3), and holding it would let a
      // peer pin up to 64 KiB per held datagram. A peer's protocol violation on an established connection is
      // answered as docs/UDP-LLP.md answers the others (a datagram for a stream not granted, without the
      // CRC32c in use, from another address; DATA past a paused reader's hold): dropped and counted, no ABORT, no
      // teardown — on this LLP a dropped datagram is a lost one, which the class allows (docs/UDP-LLP.md
      // "Data" and "Wire format"; ABORT code 3 answers only malformed setup datagrams).
      this.counters.oversizeDrops++;
      return;
    }
    if (this.readingPaused || this.inbound.length > 0) {
      if (this.inbound.length >= this.host.holdLimit) {
        this.counters.holdOverflows++; // the peer ignored our window: lost, as the class allows
        return;
      }
      // The datagram's Buffer is its own allocation (Node allocates one per message): kept by reference,
      // and counted against the process's memory budget while it is held.
      const octets = heldSize(body);
      if (!this.host.hold(octets)) {
        this.counters.budgetDrops++;
        return;
      }
      this.heldOctets += octets;
      this.inbound.push({ seq, body });
      return;
    }
    this.consume(seq, body);
  }

  onAck(seq: number): void {
    // Everything up to `seq` is consumed or lost: out of the window either way. Never past what was sent.
    if (this.state === 'closed' || !seqAfter(seq, this.peerConsumed) || seqAfter(seq, this.nextSeq - 1)) return;
    this.peerConsumed = seq;
    this.checkDrained();
  }

  onProbe(seq: number): void {
    if (this.state === 'closed') return;
    // A blocked sender asks. A reader that reads and holds nothing has consumed all it will get up to `seq`:
    // what has not arrived is lost (or late), so say so and free the window. A paused reader keeps it shut.
    if (!this.readingPaused && this.inbound.length === 0 && seqAfter(seq, this.consumed)) this.consumed = seq;
    this.ackedConsumed = this.consumed;
    this.host.sendAck(this.id, this.consumed);
  }

  onFin(): void {
    this.host.sendFinAck(this.id);
    if (this.state === 'open') this.finish({ graceful: true, initiator: 'remote' });
    else if (this.state === 'closing') this.finish({ graceful: true, initiator: 'local' }); // both closed at once
  }

  onFinAck(): void {
    if (this.state === 'closing') this.finish({ graceful: true, initiator: 'local' });
  }

  onAbort(code: number): void {
    this.finish({
      graceful: false,
      initiator: 'remote',
      error: new ConnectionAbortedError(`the UDP peer aborted stream ${this.id} (${describeAbortCode(code)})`),
    });
  }

  /** Ends the stream abortively because of something below it (socket error, connection lost, idle). */
  fail(error: LlpError, initiator: 'local' | 'remote' = 'remote'): void {
    this.finish({ graceful: false, initiator, error });
  }

  // ----- internals -----

  private consume(seq: number, body: Uint8Array): void {
    this.counters.ulpdusReceived++;
    this.deliver({ length: body.byteLength, chunks: [body] });
    if (seqAfter(seq, this.consumed)) this.consumed = seq;
    if (!this.ackScheduled) {
      // One window update per turn of the event loop, covering everything consumed in it.
      this.ackScheduled = true;
      setImmediate(() => {
        this.ackScheduled = false;
        if (this.state === 'closed' || this.consumed === this.ackedConsumed) return;
        this.ackedConsumed = this.consumed;
        this.host.sendAck(this.id, this.consumed);
      });
    }
  }

  private startProbing(): void {
    if (this.probeTimer) return;
    this.probeTimer = setInterval(() => {
      this.counters.probesSent++;
      this.host.sendProbe(this.id, (this.nextSeq - 1) >>> 0);
    }, this.host.retransmitMs);
  }

  private checkDrained(): void {
    const windowOpen = this.outstanding <= this.host.peerWindow / 2;
    if (windowOpen && this.probeTimer) {
      clearInterval(this.probeTimer);
      this.probeTimer = undefined;
    }
    if (!this.needsDrain || !windowOpen || this.socketWaiter) return;
    if (!this.host.socketDrained) {
      this.socketWaiter = () => {
        this.socketWaiter = undefined;
        this.checkDrained();
      };
      this.host.waitForSocketDrain(this.socketWaiter);
      return;
    }
    this.drained();
  }
}
