import type { LlpAddress, LlpConnectDecision, LlpConnection, LlpConnectOptions, LlpListener } from '@rddp/llp';

/** The responder ULP's decision on a connect request, and how to hand it the responder's end. */
export interface LoopbackConnectAnswer {
  readonly decision: LlpConnectDecision;
  deliver(c: LlpConnection): void;
}

/** A listener as its network sees it: connect requests reach it through `request`. */
export interface LoopbackListenerEntry extends LlpListener {
  request(from: LlpAddress, options: LlpConnectOptions): Promise<LoopbackConnectAnswer>;
}

/** Listeners of loopback transports, keyed by `host:port`. Transports given the same network see each other. */
export class LoopbackNetwork {
  readonly listeners = new Map<string, LoopbackListenerEntry>();
  private nextPort = 49152;

  key(host: string | undefined, port: number | undefined): string {
    return `${host ?? 'loopback'}:${port ?? 0}`;
  }

  /** A port not bound on `host`. */
  freePort(host: string | undefined): number {
    for (;;) {
      const p = this.nextPort++;
      if (this.nextPort > 65535) this.nextPort = 49152;
      if (!this.listeners.has(this.key(host, p))) return p;
    }
  }
}

/** The process-wide default network. */
export const defaultNetwork = new LoopbackNetwork();
