/** Promise-shaped access to one RDMAP stream's completions, for tools that run a protocol step by step. */
import { Access, StagTable } from '@rddp/ddp';
import type { LlpConnection } from '@rddp/llp';
import {
  RdmaErrorType,
  type RdmapOperation,
  type RdmapStream,
  type ReceiveCompletion,
  type SendCompletion,
} from '@rddp/rdmap';
import { type RdmapStreamBuilder, rdmapStreamOn } from '@rddp/stack';
import { describeTerminateEvent, endWithin } from '../peer.js';

export { Access };

/** Page-aligned, address-like base TOs, so advertised addresses look like rping's (virtual addresses). */
let nextBase = 0x7f00_0000_0000n;

export class RdmaSession {
  readonly stags = new StagTable();
  readonly rdmap: RdmapStream;
  private readonly received: ReceiveCompletion[] = [];
  private waiters: { resolve(c: ReceiveCompletion): void; reject(e: Error): void }[] = [];
  private ended: Error | undefined;

  constructor(
    readonly connection: LlpConnection,
    options: {
      profile: 'ietf' | 'rdmac';
      ird?: number;
      ord?: number;
      debug?: (s: string) => void;
      stream?: number;
      /** RFC 7306 extensions both ends agreed on. */
      extensions?: { atomics?: boolean; immediate?: boolean };
      /** Builds the RDMAP Stream: a stack's `rdmapStream` (default: the stack's built-in factories). */
      rdmapFactory?: RdmapStreamBuilder;
    },
  ) {
    const debug = options.debug;
    // The stack adds the connection's role and capabilities, and IRD/ORD and the RTR MSNs as the LLP
    // negotiated them (RFC 6581: what was announced is what is enforced).
    this.rdmap = (options.rdmapFactory ?? rdmapStreamOn)(connection, {
      stream: options.stream ?? 0,
      profile: options.profile,
      pdId: 1,
      stags: this.stags,
      ...(options.ird !== undefined ? { ird: options.ird } : {}),
      ...(options.ord !== undefined ? { ord: options.ord } : {}),
      ...(options.extensions ? { extensions: options.extensions } : {}),
    });
    this.rdmap.completions$.subscribe((c) => {
      if (c.kind !== 'receive') return;
      const w = this.waiters.shift();
      if (w) w.resolve(c);
      else this.received.push(c);
    });
    if (debug) this.rdmap.terminate$.subscribe((t) => debug(describeTerminateEvent(t)));
    this.rdmap.closed$.subscribe((ev) => {
      this.ended = ev.error ?? new Error('the connection closed');
      for (const w of this.waiters.splice(0)) w.reject(this.ended);
    });
  }

  /** Registers `buffer` at an address-like TO with exactly `access`. */
  register(buffer: Uint8Array, access: number): { stag: number; addr: bigint } {
    const addr = nextBase;
    nextBase += BigInt(Math.ceil((buffer.length + 1) / 4096) * 4096);
    const r = this.stags.register({ pdId: 1, buffer, access, baseTo: addr });
    return { stag: r.stag, addr };
  }

  /** Posts one operation and resolves with its successful completion (rejects otherwise). */
  post(op: RdmapOperation, localStags?: readonly number[]): Promise<SendCompletion> {
    return new Promise((resolve, reject) => {
      this.rdmap.postSend({
        op,
        ...(localStags ? { localStags } : {}),
        onComplete: (c) =>
          c.status === 'success'
            ? resolve(c)
            : reject(c.error ?? new Error(`${op.type} completed with status ${c.status}`)),
      });
    });
  }

  postReceive(buffer: Uint8Array): void {
    this.rdmap.postReceive(buffer, buffer);
  }

  /** The next receive completion (a Send that arrived into a posted buffer). */
  recv(): Promise<ReceiveCompletion> {
    const c = this.received.shift();
    if (c)
      return c.status === 'success' ? Promise.resolve(c) : Promise.reject(c.error ?? new Error(`receive ${c.status}`));
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<ReceiveCompletion>((resolve, reject) => this.waiters.push({ resolve, reject })).then((x) =>
      x.status === 'success' ? x : Promise.reject(x.error ?? new Error(`receive ${x.status}`)),
    );
  }

  /** Whether the peer closed the connection gracefully (now or within `ms`): it left, nothing broke. */
  closedGracefully(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      this.connection.closed$.subscribe((ev) => {
        clearTimeout(t);
        resolve(ev.graceful && ev.initiator === 'remote');
      });
    });
  }

  close(): Promise<void> {
    return this.rdmap.close();
  }

  /** ULP Graceful Termination (RFC 5040 §6.2), bounded: past `ms` the LLP connection is aborted. */
  closeWithin(ms: number): Promise<void> {
    this.close().catch(() => {});
    return endWithin(this.connection, this.rdmap.closed$, ms);
  }

  /**
   * LLP Abortive Termination (RFC 5040 §6.2): the LLP connection reset, no Terminate. For a peer that has
   * sent nothing yet: an MPA Responder may send no FPDU before the Initiator's first (RFC 5044 §7.1.2), so
   * a Terminate would wait for a message that is not coming.
   */
  abort(reason: Error, ms: number): Promise<void> {
    this.rdmap.abort(reason);
    return endWithin(this.connection, this.rdmap.closed$, ms);
  }

  /**
   * RDMAP Abortive Termination asked for by the ULP (RFC 5040 §6.2.1): a Terminate, outstanding work
   * Completed in error, the LLP closed gracefully; aborted if that takes over `ms`.
   */
  terminate(ms: number): Promise<void> {
    // RFC 5040 §7.2: the peer's message was unacceptable to the ULP — Remote Operation Error, Unspecified.
    this.rdmap.terminate({ errorType: RdmaErrorType.RemoteOperation, errorCode: 0xff });
    return endWithin(this.connection, this.rdmap.closed$, ms);
  }
}
