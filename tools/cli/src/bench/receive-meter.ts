/**
 * The receiving end of a bulk baseline (raw TCP, the SCTP anchors): counts what arrives and times the
 * measured part, from the octet after `warm` octets of warm-up until `total` more have arrived.
 */
export interface Received {
  /** 10^6 octets per second over the measured part. */
  readonly MBps: number;
  readonly octets: number;
  readonly ms: number;
  readonly messages: number;
}

export class ReceiveMeter {
  private got = 0;
  private messages = 0;
  private t0 = 0n;
  private base = 0; // octets received before the clock started (the warm-up's)
  private done = false;

  constructor(
    private readonly total: number,
    private readonly warm: number,
  ) {}

  /** One arrival of `octets`; the result once, when the measured octets are all in. */
  add(octets: number): Received | undefined {
    if (this.done) return undefined;
    if (this.got === 0 && this.warm === 0) this.t0 = process.hrtime.bigint();
    this.got += octets;
    this.messages++;
    if (this.t0 === 0n && this.got >= this.warm) {
      this.t0 = process.hrtime.bigint();
      this.base = this.got;
    }
    if (this.got < this.total + this.warm) return undefined;
    this.done = true;
    const ns = Number(process.hrtime.bigint() - this.t0);
    const measured = this.got - this.base;
    return { MBps: measured / 1e3 / (ns / 1e6), octets: measured, ms: ns / 1e6, messages: this.messages };
  }
}
