/**
 * One perf queue pair through verbs, as perftest runs one through libibverbs: a device, a protection
 * domain, send and receive CQs and a queue pair on one LLP stream; registered memory regions; receives
 * taken from the receive CQ in order, and the promise conveniences for the few operations a run waits on.
 */
import type { LlpConnection } from '@rddp/llp';
import type { RdmapExtensions, RdmapStream } from '@rddp/rdmap';
import { type RdmapStreamBuilder, rdmapStreamOn } from '@rddp/stack';
import {
  type AccessFlags,
  Device,
  type Mr,
  type ProtectionDomain,
  type QueuePair,
  type Sge,
  type WorkCompletion,
} from '@rddp/verbs';
import { describeTerminateEvent, endWithin } from '../peer.js';

/** Page-aligned, address-like base TOs, so advertised addresses look like perftest's (virtual addresses). */
let nextBase = 0x7e00_0000_0000n;

export interface PerfSessionOptions {
  readonly profile: 'ietf' | 'rdmac';
  /** Which LLP stream of the connection (SCTP carries several). */
  readonly stream?: number;
  readonly extensions?: RdmapExtensions;
  readonly debug?: (s: string) => void;
  /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
  readonly rdmapFactory?: RdmapStreamBuilder;
  /** The device to open the queue pair on (default: a new one). */
  readonly device?: Device;
  /** Send work requests outstanding at most (perftest's tx-depth plus the control messages). */
  readonly maxSendWr: number;
  /** Receive work requests outstanding at most. */
  readonly maxRecvWr: number;
  /** RDMA Reads and atomics this end has outstanding at most (ORD) and serves at once (IRD), RFC 5040 §6.1. */
  readonly ord?: number;
  readonly ird?: number;
}

/** A receive that completed: its element (posted again with `repost`) and how many octets arrived. */
export interface Received {
  readonly sge: Sge;
  readonly byteLength: number;
}

export class PerfSession {
  readonly device: Device;
  readonly pd: ProtectionDomain;
  readonly qp: QueuePair;
  private readonly received: Received[] = [];
  private waiters: { resolve(r: Received): void; reject(e: Error): void }[] = [];
  private ended: Error | undefined;
  /** `each`'s handler: takes every receive completion as it comes, no promise per message. */
  private handler: { take(r: Received): boolean; reject(e: Error): void } | undefined;

  constructor(
    readonly connection: LlpConnection,
    options: PerfSessionOptions,
  ) {
    this.device = options.device ?? new Device();
    this.pd = this.device.allocPd();
    const build = options.rdmapFactory ?? rdmapStreamOn;
    this.qp = this.pd.createQp({
      sendCq: this.device.createCq(),
      recvCq: this.device.createCq(),
      maxSendWr: options.maxSendWr,
      maxRecvWr: options.maxRecvWr,
      ...(options.ord !== undefined ? { ord: options.ord } : {}),
      ...(options.ird !== undefined ? { ird: options.ird } : {}),
      sqSigAll: false,
      profile: options.profile,
    });
    // Verbs composes the options (receives, IRD/ORD and the RFC 6581 values the connection negotiated);
    // the stack's factories build the RDMAP and DDP Streams from them.
    this.qp.connect(this.connection, {
      stream: options.stream ?? 0,
      rdmapFactory: (s, o) => build(s, o),
      ...(options.extensions ? { extensions: options.extensions } : {}),
    });
    this.qp.recvCq.completions$.subscribe((wc) => this.onReceive(wc));
    const debug = options.debug;
    if (debug) this.qp.terminate$.subscribe((t) => debug(describeTerminateEvent(t)));
    this.qp.closed$.subscribe((ev) => {
      this.ended = ev.error ?? new Error('the connection closed');
      this.failWaiters(this.ended);
    });
  }

  /** The queue pair's RDMAP Stream (connected in the constructor). */
  get rdmap(): RdmapStream {
    return this.qp.rdmap as RdmapStream;
  }

  /** Registers `buffer` at an address-like TO with exactly `access`. */
  register(buffer: Uint8Array, access: AccessFlags): Mr {
    const baseTo = nextBase;
    nextBase += BigInt(Math.ceil((buffer.length + 1) / 4096) * 4096);
    return this.pd.registerMr(buffer, access, { baseTo });
  }

  /** Posts one receive for an incoming Send into `sge` (its completion comes from `recv`). */
  repost(sge: Sge): void {
    this.qp.postRecv({ wrId: sge, sgList: [sge] });
  }

  /**
   * Hands every receive completion, in Delivery order, to `take` as it completes (within the completion's
   * own call: nothing is queued and no promise is made per message, as perftest's latency loops poll the
   * CQ). Resolves once `take` returns true, rejects when the session ends first. Receives already
   * completed go first.
   */
  each(take: (r: Received) => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.ended) return reject(this.ended);
      const h = {
        take: (r: Received): boolean => {
          if (!take(r)) return false;
          if (this.handler === h) this.handler = undefined;
          resolve();
          return true;
        },
        reject,
      };
      while (this.received.length > 0) if (h.take(this.received.shift() as Received)) return;
      this.handler = h;
    });
  }

  /** The next receive completion, in Delivery order (RFC 5040 §5.5). */
  recv(): Promise<Received> {
    const r = this.received.shift();
    if (r) return Promise.resolve(r);
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<Received>((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  private onReceive(wc: WorkCompletion): void {
    if (wc.status !== 'success') {
      this.ended ??= wc.error ?? new Error(`a receive completed with status ${wc.status}`);
      this.failWaiters(this.ended);
      return;
    }
    const r: Received = { sge: wc.wrId as Sge, byteLength: wc.byteLen };
    const h = this.handler;
    if (h) {
      h.take(r);
      return;
    }
    const w = this.waiters.shift();
    if (w) w.resolve(r);
    else this.received.push(r);
  }

  private failWaiters(e: Error): void {
    for (const w of this.waiters.splice(0)) w.reject(e);
    const h = this.handler;
    this.handler = undefined;
    h?.reject(e);
  }

  /** ULP Graceful Termination (RFC 5040 §6.2): what is posted completes, then the LLP stream closes. */
  close(): Promise<void> {
    return this.qp.close();
  }

  /** Graceful termination, bounded: past `ms` the LLP connection is aborted. */
  closeWithin(ms: number): Promise<void> {
    this.close().catch(() => {});
    return endWithin(this.connection, this.qp.closed$, ms);
  }
}
